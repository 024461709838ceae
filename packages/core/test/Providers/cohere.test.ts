/** The Cohere v2 wire family (chat, streamed chat with tool calls, errors, embed) against a mock speaking Cohere v2. */
import { Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ChatRequest, Target } from "../../src/Providers/Chat.ts"
import { servedBy } from "../../src/Providers/Registry.ts"
import { startVendorMock, type VendorMock } from "../support/mockVendors.ts"
import { collect, complete, embed } from "../support/wires.ts"

const weather = { name: "get_weather", description: "Weather for a city", parameters: { type: "object", properties: { city: { type: "string" } } } }

describe("Cohere v2 wire family", () => {
  let mock: VendorMock
  let chat: Target
  let embeddings: Target
  beforeAll(async () => {
    mock = await startVendorMock("cohere", "co-key")
    const entry = data.providers.find((p) => p.id === "cohere")!
    const provider = { ...entry, endpoint: mock.url, apiKey: Option.some(Redacted.make("co-key")), configured: true, settings: {}, missing: undefined }
    chat = { provider, model: data.models.find((m) => m.id === "command-r7b-12-2024")! }
    embeddings = { provider, model: data.models.find((m) => m.id === "embed-v4.0")! }
  })
  afterAll(() => mock.close())

  it("serves chat, embeddings and rerank through the registry", () => {
    const p = data.providers.find((x) => x.id === "cohere")!
    expect(p.capabilities).toEqual(expect.arrayContaining(["chat", "embeddings", "rerank", "batch"]))
  })

  it("plain chat: messages, sampling options in Cohere's names, answer and billed usage", async () => {
    const request: ChatRequest = {
      model: chat.model.id,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Look", parts: [{ type: "text", text: "Look" }, { type: "image", url: "https://example.com/cat.png", detail: "low" }] }
      ],
      temperature: 0.3,
      maxTokens: 40,
      topP: 0.9,
      stop: ["END"],
      seed: 7,
      frequencyPenalty: 0.1,
      presencePenalty: 0.2,
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" } }
    }
    const result = Either.getOrThrow(await complete(chat, request))
    expect(result).toMatchObject({ content: "Hello from Cohere", finishReason: "stop", toolCalls: [], usage: { completionTokens: 3 } })
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v2/chat")
    expect(sent.headers.authorization).toBe("Bearer co-key")
    expect(sent.body).toEqual({
      model: "command-r7b-12-2024",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Look" }, { type: "image_url", image_url: { url: "https://example.com/cat.png", detail: "low" } }] }
      ],
      temperature: 0.3,
      max_tokens: 40,
      p: 0.9,
      stop_sequences: ["END"],
      seed: 7,
      frequency_penalty: 0.1,
      presence_penalty: 0.2,
      response_format: { type: "json_object", json_schema: { type: "object" } }
    })
  })

  it("tool call and tool result round trip, with tool_choice REQUIRED", async () => {
    const first = Either.getOrThrow(await complete(chat, { model: chat.model.id, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weather], toolChoice: "required" }))
    expect(first).toMatchObject({ finishReason: "tool_calls", content: "I will look it up.", toolCalls: [{ id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }] })
    expect(mock.requests.at(-1)!.body).toMatchObject({
      tool_choice: "REQUIRED",
      tools: [{ type: "function", function: { name: "get_weather", description: "Weather for a city", parameters: weather.parameters } }]
    })
    const second = Either.getOrThrow(await complete(chat, {
      model: chat.model.id,
      tools: [weather],
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: first.content, toolCalls: first.toolCalls },
        { role: "tool", content: "18C and sunny", toolCallId: "call_1" }
      ]
    }))
    expect(second).toMatchObject({ content: "The tool said: 18C and sunny", finishReason: "stop" })
    expect(mock.requests.at(-1)!.body.messages.slice(1)).toEqual([
      { role: "assistant", tool_plan: "I will look it up.", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "18C and sunny" }
    ])
  })

  it("streams text, and tool calls with their arguments in pieces, then finish reason and usage", async () => {
    const text = Either.getOrThrow(await collect(chat, { model: chat.model.id, messages: [{ role: "user", content: "Hi" }] }))
    expect(text.filter((e) => e._tag === "Text").map((e) => (e as { text: string }).text).join("")).toBe("Hello from Cohere")
    expect(text.at(-2)).toEqual({ _tag: "Finish", reason: "stop" })
    expect(text.at(-1)).toMatchObject({ _tag: "Usage", usage: { promptTokens: 1, completionTokens: 3 } })
    expect(mock.requests.at(-1)!.body.stream).toBe(true)

    const tools = Either.getOrThrow(await collect(chat, { model: chat.model.id, messages: [{ role: "user", content: "Weather?" }], tools: [weather] }))
    const deltas = tools.filter((e) => e._tag === "ToolCallDelta") as Array<{ index: number; id?: string; name?: string; arguments: string }>
    expect(deltas[0]).toMatchObject({ index: 0, id: "call_1", name: "get_weather" })
    expect(deltas.map((d) => d.arguments).join("")).toBe("{\"city\":\"Paris\"}")
    expect(tools).toContainEqual({ _tag: "Finish", reason: "tool_calls" })
  })

  // A never-drop-silently audit: a reasoning model's thinking items were skipped, and a json_schema's description.
  it("gives a reasoning model's thinking as reasoning_content, plain and streamed; a json_schema's description rides in its schema", async () => {
    const hi = { model: chat.model.id, messages: [{ role: "user" as const, content: "Hi" }] }
    mock.rawNext("application/json", JSON.stringify({
      id: "r1",
      finish_reason: "COMPLETE",
      message: { role: "assistant", content: [{ type: "thinking", thinking: "Let me think." }, { type: "text", text: "Answer" }] },
      usage: { billed_units: { input_tokens: 3, output_tokens: 2 } }
    }))
    expect(Either.getOrThrow(await complete(chat, hi))).toMatchObject({ content: "Answer", extra: { message: { reasoning_content: "Let me think." } } })
    const event = (type: string, body: unknown) => `event: ${type}\ndata: ${JSON.stringify({ type, ...(body as object) })}\n\n`
    mock.rawNext(
      "text/event-stream",
      event("content-delta", { index: 0, delta: { message: { content: { thinking: "hmm" } } } }) +
        event("content-delta", { index: 1, delta: { message: { content: { text: "ok" } } } }) +
        event("message-end", { delta: { finish_reason: "COMPLETE", usage: { billed_units: { input_tokens: 3, output_tokens: 2 } } } })
    )
    const streamed = Either.getOrThrow(await collect(chat, hi))
    expect(streamed.slice(0, 2)).toEqual([{ _tag: "Extra", extra: { delta: { reasoning_content: "hmm" } } }, { _tag: "Text", text: "ok" }])
    await complete(chat, { ...hi, responseFormat: { type: "json_schema", name: "place", description: "A city", schema: { type: "object" } } })
    expect(mock.requests.at(-1)!.body.response_format).toEqual({ type: "json_object", json_schema: { type: "object", description: "A city" } })
  })

  it("maps Cohere errors ({\"message\"}) and hostile answers to upstream errors", async () => {
    mock.failNext(429, "You are using a Trial key, which is limited to 10 API calls / minute")
    const limited = await complete(chat, { model: chat.model.id, messages: [{ role: "user", content: "x" }] })
    expect(Either.isLeft(limited) && limited.left).toMatchObject({ status: 429, retryable: true, message: expect.stringContaining("Trial key") })
    mock.failNext(400, "invalid request: model 'nope' not found")
    const bad = await complete(chat, { model: "nope", messages: [{ role: "user", content: "x" }] })
    expect(Either.isLeft(bad) && bad.left).toMatchObject({ status: 400, retryable: false, message: expect.stringContaining("model 'nope' not found") })
    mock.rawNext("application/json", "{\"id\": \"x\"}")
    const shapeless = await complete(chat, { model: chat.model.id, messages: [{ role: "user", content: "x" }] })
    expect(Either.isLeft(shapeless) && shapeless.left).toMatchObject({ kind: "protocol" })
    mock.rawNext("text/event-stream", "event: content-delta\ndata: {not json\n\n")
    const broken = await collect(chat, { model: chat.model.id, messages: [{ role: "user", content: "x" }] })
    expect(Either.isLeft(broken) && broken.left).toMatchObject({ kind: "protocol", message: expect.stringContaining("bad JSON") })
    mock.rawNext("text/event-stream", "event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"ERROR\",\"error\":\"overloaded\"}}\n\n")
    const failed = await collect(chat, { model: chat.model.id, messages: [{ role: "user", content: "x" }] })
    expect(Either.isLeft(failed) && failed.left).toMatchObject({ kind: "protocol", message: expect.stringContaining("overloaded") })
  })

  it("refuses, by name, what the Cohere wire cannot carry", () => {
    const unsupported = servedBy(chat.provider).chat!.unsupported!
    const base = { model: chat.model.id, messages: [{ role: "user" as const, content: "x" }] }
    expect(unsupported(base)).toBeUndefined()
    expect(unsupported({ ...base, extra: { logprobs: true } })).toMatch(/^logprobs is not supported by the Cohere wire format/)
    expect(unsupported({ ...base, toolChoice: { name: "get_weather" } })).toMatch(/tool_choice naming a function \(get_weather\)/)
    expect(unsupported({ ...base, parallelToolCalls: false })).toMatch(/parallel_tool_calls/)
    expect(unsupported({ ...base, messages: [{ role: "user", content: "", parts: [{ type: "raw", part: { type: "input_audio" } }] }] })).toMatch(/input_audio/)
    expect(unsupported({ ...base, messages: [{ role: "assistant", content: "", parts: [{ type: "image", url: "https://x/y.png" }] }] })).toMatch(/image parts in assistant messages/)
  })

  it("embeds documents with /embed (float vectors, billed input tokens)", async () => {
    const result = Either.getOrThrow(await embed(embeddings, ["alpha beta", "gamma", "alpha beta"]))
    expect(result.vectors).toHaveLength(3)
    expect(result.vectors[0]).toEqual(result.vectors[2])
    expect(result.vectors[0]).not.toEqual(result.vectors[1])
    expect(result.promptTokens).toBe(5)
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v2/embed")
    expect(sent.body).toEqual({ model: "embed-v4.0", texts: ["alpha beta", "gamma", "alpha beta"], input_type: "search_document", embedding_types: ["float"] })
    mock.rawNext("application/json", JSON.stringify({ embeddings: { float: [[1, 2]] } }))
    expect(Either.isLeft(await embed(embeddings, ["a", "b"]))).toBe(true)
  })
})
