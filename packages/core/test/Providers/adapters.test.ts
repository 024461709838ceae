/**
 * Adapter conformance: each wire family against a mock server that speaks the provider's
 * documented format; asserts what the adapter sent and what it made of the answers.
 */
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ChatRequest, Target } from "../../src/Providers/Chat.ts"
import { reasoningRefusal } from "../../src/Providers/Chat.ts"
import * as Gemini from "../../src/Providers/Gemini.ts"
import { servedBy } from "../../src/Providers/Registry.ts"
import { DEFAULT_SCENARIO, type MockUpstream, startAnthropicMock, startGeminiMock, startOpenAiMock } from "../support/mockUpstreams.ts"
import { collect, complete } from "../support/wires.ts"

const families = [
  { provider: "openai", model: "gpt-4o-mini", start: startOpenAiMock, path: "/v1/chat/completions" },
  { provider: "groq", model: "llama-3.3-70b-versatile", start: startOpenAiMock, path: "/v1/chat/completions" },
  { provider: "anthropic", model: "claude-haiku-4-5", start: startAnthropicMock, path: "/v1/messages" },
  { provider: "google", model: "gemini-2.5-flash", start: startGeminiMock, path: "/v1beta/models/gemini-2.5-flash:generateContent" }
] as const

const weather = {
  name: "get_weather",
  description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
}

for (const f of families) {
  describe(`${f.provider} adapter (${data.providers.find((p) => p.id === f.provider)!.adapter} wire format)`, () => {
    let mock: MockUpstream
    let target: Target
    beforeAll(async () => {
      mock = await f.start({ apiKey: "sk-test-123", chunkDelayMs: 1 })
      const entry = data.providers.find((p) => p.id === f.provider)!
      target = {
        provider: { ...entry, endpoint: mock.url, apiKey: Option.some(Redacted.make("sk-test-123")), configured: true, settings: {}, missing: undefined },
        model: data.models.find((m) => m.id === f.model)!
      }
    })
    afterAll(() => mock.close())

    it("plain completion: request shape, auth, answer and usage", async () => {
      mock.setScenario({ kind: "text", text: "Hi there", usage: { prompt: 21, completion: 3 } })
      const result = await complete(target, {
        model: f.model,
        messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
        temperature: 0.5,
        maxTokens: 50
      })
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      expect(result.right).toMatchObject({ content: "Hi there", finishReason: "stop", usage: { promptTokens: 21, completionTokens: 3 } })
      const sent = mock.requests.at(-1)!
      expect(sent.path).toBe(f.path)
      const body = sent.body as any
      if (target.provider.adapter === "openai") {
        expect(sent.headers.authorization).toBe("Bearer sk-test-123")
        expect(body.messages[0]).toEqual({ role: "system", content: "Be brief." })
        expect(body[f.provider === "openai" ? "max_completion_tokens" : "max_tokens"]).toBe(50)
        expect(body.model).toBe(f.model)
      } else if (target.provider.adapter === "anthropic") {
        expect(sent.headers["x-api-key"]).toBe("sk-test-123")
        expect(sent.headers["anthropic-version"]).toBe("2023-06-01")
        expect(body.system).toBe("Be brief.")
        expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Hello" }] }])
        expect(body.max_tokens).toBe(50)
      } else {
        expect(sent.headers["x-goog-api-key"]).toBe("sk-test-123")
        expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }] })
        expect(body.contents).toEqual([{ role: "user", parts: [{ text: "Hello" }] }])
        expect(body.generationConfig).toEqual({ temperature: 0.5, maxOutputTokens: 50 })
      }
    })

    it("tool call and tool-result round trip", async () => {
      mock.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Paris" }, id: "call_abc" })
      const first = await complete(target, { model: f.model, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weather] })
      expect(first._tag).toBe("Right")
      if (first._tag !== "Right") return
      expect(first.right.finishReason).toBe("tool_calls")
      expect(first.right.toolCalls).toHaveLength(1)
      const call = first.right.toolCalls[0]!
      expect(call.name).toBe("get_weather")
      expect(JSON.parse(call.arguments)).toEqual({ city: "Paris" })
      const toolsSent = (mock.requests.at(-1)!.body as any)
      if (target.provider.adapter === "openai") expect(toolsSent.tools[0].function.name).toBe("get_weather")
      if (target.provider.adapter === "anthropic") expect(toolsSent.tools[0].input_schema.required).toEqual(["city"])
      if (target.provider.adapter === "gemini") {
        expect(toolsSent.tools[0].functionDeclarations[0].name).toBe("get_weather")
        expect(toolsSent.tools[0].functionDeclarations[0].parameters.additionalProperties).toBeUndefined()
      }

      mock.setScenario({ kind: "text", text: "It is sunny." })
      const second = await complete(target, {
        model: f.model,
        tools: [weather],
        messages: [
          { role: "user", content: "Weather in Paris?" },
          { role: "assistant", content: "", toolCalls: [call] },
          { role: "tool", content: "{\"temp\":21}", toolCallId: call.id, name: "get_weather" }
        ]
      })
      expect(second._tag === "Right" && second.right.content).toBe("It is sunny.")
      const body = mock.requests.at(-1)!.body as any
      if (target.provider.adapter === "openai") {
        expect(body.messages[1].tool_calls[0]).toMatchObject({ id: call.id, type: "function", function: { name: "get_weather" } })
        // The tool message's name goes on as it came (a never-drop-silently audit found it dropped); the other wires answer by id.
        expect(body.messages[2]).toEqual({ role: "tool", tool_call_id: call.id, name: "get_weather", content: "{\"temp\":21}" })
      } else if (target.provider.adapter === "anthropic") {
        expect(body.messages[1].content[0]).toMatchObject({ type: "tool_use", id: call.id, name: "get_weather", input: { city: "Paris" } })
        expect(body.messages[2]).toEqual({ role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "{\"temp\":21}" }] })
      } else {
        expect(body.contents[1]).toEqual({ role: "model", parts: [{ functionCall: { name: "get_weather", args: { city: "Paris" } } }] })
        expect(body.contents[2]).toEqual({ role: "user", parts: [{ functionResponse: { name: "get_weather", response: { content: { temp: 21 } } } }] })
      }
    })

    it("streams text deltas, finish reason and usage", async () => {
      mock.setScenario({ kind: "text", text: "Streaming works fine today", usage: { prompt: 9, completion: 6 } })
      const result = await collect(target, { model: f.model, messages: [{ role: "user", content: "Hi" }] })
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      const text = result.right.filter((e) => e._tag === "Text").map((e) => (e as any).text).join("")
      expect(text).toBe("Streaming works fine today")
      expect(result.right.filter((e) => e._tag === "Text").length).toBeGreaterThan(1)
      expect(result.right.find((e) => e._tag === "Finish")).toEqual({ _tag: "Finish", reason: "stop" })
      const usage = Object.assign({}, ...result.right.filter((e) => e._tag === "Usage").map((e) => (e as any).usage))
      expect(usage).toMatchObject({ promptTokens: 9, completionTokens: 6 })
      const body = mock.requests.at(-1)!.body as any
      if (target.provider.adapter === "openai") expect(body.stream_options).toEqual({ include_usage: true })
      if (target.provider.adapter === "gemini") expect(mock.requests.at(-1)!.path).toContain(":streamGenerateContent")
    })

    it("streams tool calls", async () => {
      mock.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Oslo" }, id: "call_s1" })
      const result = await collect(target, { model: f.model, messages: [{ role: "user", content: "Oslo?" }], tools: [weather] })
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      const deltas = result.right.filter((e) => e._tag === "ToolCallDelta") as Array<any>
      expect(deltas[0].name).toBe("get_weather")
      expect(JSON.parse(deltas.map((d) => d.arguments).join(""))).toEqual({ city: "Oslo" })
      expect(result.right.find((e) => e._tag === "Finish")).toEqual({ _tag: "Finish", reason: "tool_calls" })
    })

    it("maps upstream errors: 429/5xx retryable, 400 not, with the provider's message", async () => {
      for (const [status, retryable] of [[429, true], [500, true], [503, true], [400, false]] as const) {
        mock.setScenario({ kind: "error", status, message: `boom ${status}` })
        const result = await complete(target, { model: f.model, messages: [{ role: "user", content: "x" }] })
        expect(result._tag).toBe("Left")
        if (result._tag !== "Left") continue
        expect(result.left).toMatchObject({ status, retryable, kind: "http" })
        expect(result.left.message).toContain(`boom ${status}`)
      }
    })

    it("rejects a wrong key with the provider's auth error (not retryable)", async () => {
      const wrong = { ...target, provider: { ...target.provider, apiKey: Option.some(Redacted.make("wrong")) } }
      const result = await complete(wrong, { model: f.model, messages: [{ role: "user", content: "x" }] })
      expect(result._tag === "Left" && result.left.retryable).toBe(false)
      expect(result._tag === "Left" && [400, 401, 403].includes(result.left.status ?? 0)).toBe(true)
    })

    it("a mid-stream error ends the stream with a failure", async () => {
      mock.setScenario({ kind: "error", status: 500, message: "exploded", midStream: true })
      const result = await collect(target, { model: f.model, messages: [{ role: "user", content: "x" }] })
      expect(result._tag).toBe("Left")
    })

    it("connection refused is a retryable connect error", async () => {
      const dead = { ...target, provider: { ...target.provider, endpoint: "http://127.0.0.1:9" } }
      const result = await complete(dead, { model: f.model, messages: [{ role: "user", content: "x" }] })
      expect(result._tag === "Left" && result.left).toMatchObject({ kind: "connect", retryable: true })
    })
  })
}

/**
 * Translation of the neutral request's options, image parts and answer format to the Anthropic and
 * Gemini wire formats: the exact upstream request (the mocks also reject what the real APIs reject),
 * and the refusals, each naming the field.
 */
describe("translation across wire formats", () => {
  const png = "data:image/png;base64,iVBORw0KGgo="
  const remote = "https://example.com/cat.jpg"
  const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
  const user = (content = "Hi") => ({ role: "user" as const, content })
  let anthropic: MockUpstream
  let gemini: MockUpstream
  const targetOf = (provider: string, model: string, mock: MockUpstream): Target => ({
    provider: { ...data.providers.find((p) => p.id === provider)!, endpoint: mock.url, apiKey: Option.some(Redacted.make("k")), configured: true, settings: {}, missing: undefined },
    model: data.models.find((m) => m.id === model)!
  })
  const claude = () => targetOf("anthropic", "claude-haiku-4-5", anthropic)
  const flash = () => targetOf("google", "gemini-2.5-flash", gemini)
  const refusalOf = (target: Target, request: Partial<ChatRequest>) =>
    servedBy(target.provider).chat!.unsupported!({ model: target.model.id, messages: [user()], ...request })
  /** Completes through the target's mock and returns the body it received. */
  const sent = async (target: Target, mock: MockUpstream, request: Partial<ChatRequest>) => {
    const result = await complete(target, { model: target.model.id, messages: [user()], ...request })
    expect(result._tag === "Left" ? result.left.message : "ok").toBe("ok")
    return mock.requests.at(-1)!.body as any
  }
  beforeAll(async () => {
    ;[anthropic, gemini] = await Promise.all([startAnthropicMock({ apiKey: "k", chunkDelayMs: 1 }), startGeminiMock({ apiKey: "k", chunkDelayMs: 1 })])
  })
  afterAll(() => Promise.all([anthropic.close(), gemini.close()]))

  describe("Anthropic Messages", () => {
    it("sends top_p, stop_sequences and the end user's id", async () => {
      const body = await sent(claude(), anthropic, { topP: 0.9, stop: ["END", "STOP"], frequencyPenalty: 0, presencePenalty: 0, extra: { user: "u-42" } })
      expect(body).toMatchObject({ top_p: 0.9, stop_sequences: ["END", "STOP"], metadata: { user_id: "u-42" } })
      expect(body.tool_choice).toBeUndefined()
    })

    it("maps each tool_choice, with parallel_tool_calls=false as disable_parallel_tool_use", async () => {
      const cases: ReadonlyArray<[Partial<ChatRequest>, unknown]> = [
        [{ toolChoice: "auto" }, { type: "auto" }],
        [{ toolChoice: "required" }, { type: "any" }],
        [{ toolChoice: "none" }, { type: "none" }],
        [{ toolChoice: { name: "get_weather" } }, { type: "tool", name: "get_weather" }],
        [{ toolChoice: "required", parallelToolCalls: false }, { type: "any", disable_parallel_tool_use: true }],
        [{ parallelToolCalls: false }, { type: "auto", disable_parallel_tool_use: true }],
        [{ toolChoice: "none", parallelToolCalls: false }, { type: "none" }]
      ]
      for (const [options, wire] of cases) {
        const body = await sent(claude(), anthropic, { tools: [weather], ...options })
        expect(body.tool_choice, JSON.stringify(options)).toEqual(wire)
      }
      // Without tools, "auto", "none" and parallel_tool_calls are honoured by sending nothing.
      expect((await sent(claude(), anthropic, { toolChoice: "none", parallelToolCalls: false })).tool_choice).toBeUndefined()
    })

    it("sends image parts as base64 and url image blocks, in user turns and tool results", async () => {
      const call = { id: "toolu_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }
      const body = await sent(claude(), anthropic, {
        tools: [weather],
        messages: [
          {
            role: "user",
            content: "What is this?",
            parts: [{ type: "text", text: "What is this?" }, { type: "image", url: png, detail: "auto" }, { type: "image", url: remote }]
          },
          { role: "assistant", content: "", toolCalls: [call] },
          { role: "tool", content: "map:", toolCallId: "toolu_1", parts: [{ type: "text", text: "map:" }, { type: "image", url: png }] }
        ]
      })
      expect(body.messages[0]).toEqual({
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "image", source: { type: "url", url: remote } }
        ]
      })
      expect(body.messages[2]).toEqual({
        role: "user",
        content: [{
          type: "tool_result",
          tool_use_id: "toolu_1",
          content: [{ type: "text", text: "map:" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }]
        }]
      })
    })

    it("sends response_format json_schema as output_config.format and returns the JSON text", async () => {
      anthropic.setScenario({ kind: "text", text: "{\"city\":\"Paris\"}" })
      const request = { responseFormat: { type: "json_schema" as const, name: "place", schema, description: "A city" } }
      const result = await complete(claude(), { model: "claude-haiku-4-5", messages: [user()], ...request })
      expect(result._tag === "Right" && JSON.parse(result.right.content)).toEqual({ city: "Paris" })
      expect((anthropic.requests.at(-1)!.body as any).output_config).toEqual({
        format: { type: "json_schema", schema: { ...schema, description: "A city" } }
      })
      // A plain-text format needs nothing.
      expect((await sent(claude(), anthropic, { responseFormat: { type: "text" } })).output_config).toBeUndefined()
    })

    it("refuses what it cannot carry, naming the field", () => {
      const cases: ReadonlyArray<[Partial<ChatRequest>, string]> = [
        [{ seed: 7 }, "seed"],
        [{ frequencyPenalty: 0.5 }, "frequency_penalty"],
        [{ presencePenalty: -1 }, "presence_penalty"],
        [{ responseFormat: { type: "json_object" } }, "response_format json_object"],
        [{ extra: { logprobs: true } }, "logprobs"],
        [{ extra: { user: "u-1", logprobs: true } }, "logprobs"],
        [{ extra: { user: 42 } }, "user that is not a string"],
        [{ messages: [{ ...user(), extra: { name: "alice" } }] }, "messages[].name"],
        [{ messages: [{ ...user(), parts: [{ type: "raw", part: { type: "input_audio" } }] }] }, "content part type input_audio"],
        [{ messages: [{ role: "assistant", content: "", parts: [{ type: "image", url: png }] }] }, "image_url parts in assistant messages"],
        [{ messages: [{ ...user(), parts: [{ type: "image", url: png, detail: "high" }] }] }, "image_url.detail \"high\""],
        [{ messages: [{ ...user(), parts: [{ type: "image", url: "data:image/png,raw" }] }] }, "data: URL that is not base64"],
        // Sent as {} before (a never-drop-silently audit): the conversation the model saw was not the client's.
        [{ messages: [user(), { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "f", arguments: "not json" }] }] }, "a tool call (c1) whose arguments are not a JSON object"]
      ]
      for (const [request, field] of cases) {
        const message = refusalOf(claude(), request)
        expect(message, field).toContain(field)
        expect(message).toContain("Anthropic Messages")
      }
      expect(refusalOf(claude(), { topP: 0.5, stop: ["x"], toolChoice: "auto", frequencyPenalty: 0, extra: { user: "u-1" }, responseFormat: { type: "json_schema", name: "n", schema } })).toBeUndefined()
    })

    it("streams with tool_choice on the stream request", async () => {
      anthropic.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Oslo" }, id: "toolu_s" })
      const result = await collect(claude(), { model: "claude-haiku-4-5", messages: [user("Oslo?")], tools: [weather], toolChoice: { name: "get_weather" }, parallelToolCalls: false })
      expect(result._tag).toBe("Right")
      const body = anthropic.requests.at(-1)!.body as any
      expect(body).toMatchObject({ stream: true, tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true } })
      const deltas = (result._tag === "Right" ? result.right : []).filter((e) => e._tag === "ToolCallDelta") as Array<any>
      expect(JSON.parse(deltas.map((d) => d.arguments).join(""))).toEqual({ city: "Oslo" })
    })

    it("sends thinking, top_k, cache_control breakpoints and anthropic-beta, and returns thinking blocks and cache usage", async () => {
      anthropic.setScenario(DEFAULT_SCENARIO)
      const request: Partial<ChatRequest> = {
        maxTokens: 4096,
        topK: 20,
        reasoning: { mode: "enabled", budgetTokens: 1024 },
        anthropicBeta: "interleaved-thinking-2025-05-14",
        tools: [{ ...weather, cache: {} }],
        messages: [
          { role: "system", content: "Rules.", parts: [{ type: "text", text: "Rules.", cache: { ttl: "1h" } }] },
          { role: "user", content: "Hi", parts: [{ type: "text", text: "Hi", cache: {} }] }
        ]
      }
      const first = await complete(claude(), { model: "claude-haiku-4-5", messages: [], ...request })
      if (first._tag !== "Right") throw first.left
      const sentFirst = anthropic.requests.at(-1)!
      expect(sentFirst.headers["anthropic-beta"]).toBe("interleaved-thinking-2025-05-14")
      expect(sentFirst.body).toMatchObject({
        top_k: 20,
        thinking: { type: "enabled", budget_tokens: 1024 },
        system: [{ type: "text", text: "Rules.", cache_control: { type: "ephemeral", ttl: "1h" } }],
        tools: [{ name: "get_weather", cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user", content: [{ type: "text", text: "Hi", cache_control: { type: "ephemeral" } }] }]
      })
      const reasoning = first.right.reasoning!
      expect(reasoning).toEqual([{ type: "thinking", text: expect.any(String), signature: expect.stringMatching(/^sig_/) }])
      expect(first.right.usage).toMatchObject({ cacheCreationTokens: 9, cacheReadTokens: 0 })
      // The next turn sends the thinking block back first, unchanged (the mock checks the signature it issued).
      const second = await complete(claude(), {
        model: "claude-haiku-4-5",
        ...request,
        messages: [...request.messages!, { role: "assistant", content: first.right.content, reasoning, cache: {} }, user("And then?")]
      })
      if (second._tag !== "Right") throw second.left
      expect(second.right.usage).toMatchObject({ cacheReadTokens: 9 })
      const turn = (anthropic.requests.at(-1)!.body as any).messages[1]
      expect(turn.content[0]).toEqual({ type: "thinking", thinking: reasoning[0]!.type === "thinking" ? reasoning[0]!.text : "", signature: (reasoning[0] as any).signature })
      expect(turn.content.at(-1).cache_control).toEqual({ type: "ephemeral" })
      // A signature the upstream never issued is its 400, not the gateway's guess.
      const forged = await complete(claude(), { model: "claude-haiku-4-5", messages: [user(), { role: "assistant", content: "x", reasoning: [{ type: "thinking", text: "t", signature: "forged" }] }, user()] })
      expect(forged._tag === "Left" ? forged.left.message : "").toContain("signature")
      expect((await sent(claude(), anthropic, { reasoning: { mode: "adaptive" } })).thinking).toEqual({ type: "adaptive" })
      expect((await sent(claude(), anthropic, { reasoning: { mode: "disabled" } })).thinking).toEqual({ type: "disabled" })
    })

    // A never-drop-silently audit: a breakpoint an OpenAI-format client put on an assistant turn's text part was lost.
    it("sends an assistant turn's text parts as blocks with their breakpoints, before its tool calls", async () => {
      const body = await sent(claude(), anthropic, {
        messages: [
          user(),
          {
            role: "assistant",
            content: "Earlier answer. More.",
            parts: [{ type: "text", text: "Earlier answer." }, { type: "text", text: " More.", cache: { ttl: "1h" } }],
            toolCalls: [{ id: "c1", name: "get_weather", arguments: "{}" }]
          },
          { role: "tool", content: "sunny", toolCallId: "c1" },
          user("And then?")
        ],
        tools: [weather]
      })
      expect(body.messages[1].content).toEqual([
        { type: "text", text: "Earlier answer." },
        { type: "text", text: " More.", cache_control: { type: "ephemeral", ttl: "1h" } },
        { type: "tool_use", id: "c1", name: "get_weather", input: {} }
      ])
    })

    it("streams thinking deltas and the signature as reasoning events", async () => {
      anthropic.setScenario(DEFAULT_SCENARIO)
      const result = await collect(claude(), { model: "claude-haiku-4-5", maxTokens: 2048, messages: [user()], reasoning: { mode: "enabled", budgetTokens: 1024 } })
      if (result._tag !== "Right") throw result.left
      const reasoning = result.right.filter((e) => e._tag === "Reasoning") as Array<any>
      expect(reasoning.map((e) => e.text ?? "").join("")).toMatch(/^Considering 1 message/)
      expect(reasoning.at(-1)).toMatchObject({ index: 0, signature: expect.stringMatching(/^sig_/) })
      expect(result.right.filter((e) => e._tag === "Text").map((e: any) => e.text).join("")).toBe("Hello from mock")
    })

    it("streams a json_schema answer as text", async () => {
      anthropic.setScenario({ kind: "text", text: "{\"city\": \"Rome\", \"country\": \"Italy\"}" })
      const result = await collect(claude(), { model: "claude-haiku-4-5", messages: [user()], responseFormat: { type: "json_schema", name: "place", schema } })
      const text = (result._tag === "Right" ? result.right : []).filter((e) => e._tag === "Text").map((e) => (e as any).text).join("")
      expect(JSON.parse(text)).toEqual({ city: "Rome", country: "Italy" })
      expect((anthropic.requests.at(-1)!.body as any).output_config.format.type).toBe("json_schema")
      anthropic.setScenario(DEFAULT_SCENARIO)
    })
  })

  describe("Gemini generateContent", () => {
    it("sends sampling, stop, seed and penalties in generationConfig", async () => {
      const body = await sent(flash(), gemini, { temperature: 0.3, topP: 0.8, stop: ["END"], seed: 42, frequencyPenalty: 0.5, presencePenalty: -0.5 })
      expect(body.generationConfig).toEqual({ temperature: 0.3, topP: 0.8, stopSequences: ["END"], seed: 42, frequencyPenalty: 0.5, presencePenalty: -0.5 })
    })

    it("maps each tool_choice to toolConfig.functionCallingConfig", async () => {
      const cases: ReadonlyArray<[Partial<ChatRequest>, unknown]> = [
        [{ toolChoice: "auto" }, { mode: "AUTO" }],
        [{ toolChoice: "required" }, { mode: "ANY" }],
        [{ toolChoice: "none" }, { mode: "NONE" }],
        [{ toolChoice: { name: "get_weather" } }, { mode: "ANY", allowedFunctionNames: ["get_weather"] }],
        [{ toolChoice: "none", parallelToolCalls: false }, { mode: "NONE" }]
      ]
      for (const [options, wire] of cases) {
        const body = await sent(flash(), gemini, { tools: [weather], ...options })
        expect(body.toolConfig, JSON.stringify(options)).toEqual({ functionCallingConfig: wire })
      }
      expect((await sent(flash(), gemini, { tools: [weather] })).toolConfig).toBeUndefined()
    })

    it("sends data: images as inlineData and https images as fileData, detail as mediaResolution", async () => {
      const body = await sent(flash(), gemini, {
        messages: [{
          role: "user",
          content: "Compare",
          parts: [{ type: "text", text: "Compare" }, { type: "image", url: png, detail: "low" }, { type: "image", url: remote, detail: "auto" }]
        }]
      })
      expect(body.contents).toEqual([{
        role: "user",
        parts: [
          { text: "Compare" },
          { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } },
          { fileData: { mimeType: "image/jpeg", fileUri: remote } }
        ]
      }])
      expect(body.generationConfig).toEqual({ mediaResolution: "MEDIA_RESOLUTION_LOW" })
    })

    it("sends response_format as responseMimeType and responseJsonSchema (the schema unchanged)", async () => {
      gemini.setScenario({ kind: "text", text: "{\"city\":\"Paris\"}" })
      const body = await sent(flash(), gemini, { responseFormat: { type: "json_schema", name: "place", schema, strict: true } })
      expect(body.generationConfig).toEqual({ responseMimeType: "application/json", responseJsonSchema: schema })
      expect((await sent(flash(), gemini, { responseFormat: { type: "json_object" } })).generationConfig).toEqual({ responseMimeType: "application/json" })
      expect((await sent(flash(), gemini, { responseFormat: { type: "text" } })).generationConfig).toBeUndefined()
      gemini.setScenario(DEFAULT_SCENARIO)
    })

    it("refuses what it cannot carry, naming the field", () => {
      const cases: ReadonlyArray<[Partial<ChatRequest>, string]> = [
        [{ tools: [weather], parallelToolCalls: false }, "parallel_tool_calls=false"],
        [{ extra: { logit_bias: { "1": 2 } } }, "logit_bias"],
        [{ extra: { user: "u-1" } }, "user"],
        [{ messages: [{ ...user(), extra: { name: "alice" } }] }, "messages[].name"],
        [{ messages: [{ ...user(), parts: [{ type: "raw", part: { type: "file" } }] }] }, "content part type file"],
        [{ messages: [{ ...user(), parts: [{ type: "image", url: "https://example.com/render?id=3" }] }] }, "send a data: URL"],
        [{ messages: [{ role: "tool", content: "", toolCallId: "c", parts: [{ type: "image", url: png }] }] }, "image_url parts in tool messages"],
        [{ messages: [{ ...user(), parts: [{ type: "image", url: png, detail: "low" }, { type: "image", url: png, detail: "high" }] }] }, "image_url.detail with different values"],
        [{ messages: [{ ...user(), parts: [{ type: "image", url: png, detail: "ultra" }] }] }, "image_url.detail \"ultra\""],
        [{ messages: [user(), { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "f", arguments: "[1, 2]" }] }] }, "a tool call (c1) whose arguments are not a JSON object"]
      ]
      for (const [request, field] of cases) {
        const message = refusalOf(flash(), request)
        expect(message, field).toContain(field)
        expect(message).toContain("Gemini generateContent")
      }
      expect(refusalOf(flash(), { seed: 1, frequencyPenalty: 1, parallelToolCalls: true, responseFormat: { type: "json_object" } })).toBeUndefined()
      // Without tools there is nothing to call in parallel.
      expect(refusalOf(flash(), { parallelToolCalls: false })).toBeUndefined()
    })

    it("sends top_k and thinking as generationConfig.topK and thinkingConfig.thinkingBudget; ignores cache hints", async () => {
      const body = await sent(flash(), gemini, { topK: 40, reasoning: { mode: "enabled", budgetTokens: 2048 }, tools: [{ ...weather, cache: {} }] })
      expect(body.generationConfig).toEqual({ topK: 40, thinkingConfig: { thinkingBudget: 2048 } })
      expect(JSON.stringify(body)).not.toContain("cache")
      expect((await sent(flash(), gemini, { reasoning: { mode: "disabled" } })).generationConfig).toEqual({ thinkingConfig: { thinkingBudget: 0 } })
      expect((await sent(flash(), gemini, { reasoning: { mode: "adaptive" } })).generationConfig).toEqual({ thinkingConfig: { thinkingBudget: -1 } })
    })

    // A never-drop-silently audit: the Anthropic surface has no field for a call's thought signature, so a Claude-style
    // client's tool loop on Gemini 3 sent its history back unsigned, and Google answers that with a 400.
    it("sends a history's call signatures back; a Gemini 3 turn whose calls have none gets the value Google documents for such histories", async () => {
      const pro = () => targetOf("google", "gemini-3.1-pro-preview", gemini)
      gemini.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Oslo" } })
      const asked = await complete(pro(), { model: "gemini-3.1-pro-preview", messages: [user("Oslo?")], tools: [weather] })
      const call = asked._tag === "Right" ? asked.right.toolCalls[0]! : undefined
      expect(call?.signature).toMatch(/^sig_/)
      gemini.setScenario(DEFAULT_SCENARIO)
      const turn = (calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string; readonly signature?: string }>) => [
        user("Oslo?"),
        { role: "assistant" as const, content: "", toolCalls: calls },
        ...calls.map((c) => ({ role: "tool" as const, content: "{\"c\":4}", toolCallId: c.id })),
        user("And now?")
      ]
      const signed = await sent(pro(), gemini, { messages: turn([call!]), tools: [weather] })
      expect(signed.contents[1].parts[0].thoughtSignature).toBe(call!.signature)
      // Parallel calls without signatures (another model's, or a client that keeps none): the first carries the documented value.
      const unsigned = [{ id: "a", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }, { id: "b", name: "get_weather", arguments: "{\"city\":\"Bergen\"}" }]
      const foreign = await sent(pro(), gemini, { messages: turn(unsigned), tools: [weather] })
      expect(foreign.contents[1].parts.map((p: any) => p.thoughtSignature)).toEqual(["skip_thought_signature_validator", undefined])
      // Gemini 2.5 checks no signatures: none is made up for it.
      const older = await sent(flash(), gemini, { messages: turn(unsigned), tools: [weather] })
      expect(JSON.stringify(older.contents)).not.toContain("thoughtSignature")
      // The aliases that name Gemini 3 models check them too (only 1.x and 2.x are known not to); an empty signature is none.
      const first = (model: string, signature?: string) =>
        Gemini.toWireContents(turn([{ ...unsigned[0]!, ...(signature !== undefined ? { signature } : {}) }]), model)[1]!.parts[0].thoughtSignature
      expect(["gemini-pro-latest", "models/gemini-3-flash-preview", "gemini-2.5-pro", "gemini-1.5-flash", "gemma-3-27b-it"].map((m) => first(m)))
        .toEqual(["skip_thought_signature_validator", "skip_thought_signature_validator", undefined, undefined, undefined])
      expect(first("gemini-3.1-pro-preview", "")).toBe("skip_thought_signature_validator")
    })

    it("streams with toolConfig on the stream request", async () => {
      gemini.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Oslo" } })
      const result = await collect(flash(), { model: "gemini-2.5-flash", messages: [user("Oslo?")], tools: [weather], toolChoice: "required", topP: 0.5 })
      expect(result._tag).toBe("Right")
      const last = gemini.requests.at(-1)!
      expect(last.path).toContain(":streamGenerateContent")
      expect(last.body).toMatchObject({ toolConfig: { functionCallingConfig: { mode: "ANY" } }, generationConfig: { topP: 0.5 } })
      expect((result._tag === "Right" ? result.right : []).find((e) => e._tag === "ToolCallDelta")).toMatchObject({ name: "get_weather" })
      gemini.setScenario(DEFAULT_SCENARIO)
    })
  })
})

describe("neutral options only some wires carry", () => {
  const base: ChatRequest = { model: "m", messages: [{ role: "user", content: "Hi" }] }
  const history: ChatRequest = { ...base, messages: [{ role: "assistant", content: "x", reasoning: [{ type: "redacted_thinking", data: "d" }] }] }
  const carriesOf = (provider: string) => servedBy(data.providers.find((p) => p.id === provider)!).chat!.carries ?? {}

  it("Anthropic carries top_k, thinking and thinking history; Gemini top_k and thinking; OpenAI-compatible wires none", () => {
    const cases: ReadonlyArray<[ChatRequest, string]> = [
      [{ ...base, topK: 5 }, "top_k"],
      [{ ...base, reasoning: { mode: "enabled", budgetTokens: 1024 } }, "thinking"],
      [history, "thinking blocks in assistant messages"]
    ]
    for (const [request, field] of cases) {
      expect(reasoningRefusal(request, carriesOf("anthropic"))).toBeUndefined()
      for (const provider of ["openai", "groq", "mistral"]) expect(reasoningRefusal(request, carriesOf(provider)), provider).toBe(field)
    }
    expect(reasoningRefusal({ ...base, topK: 5, reasoning: { mode: "adaptive" } }, carriesOf("google"))).toBeUndefined()
    expect(reasoningRefusal(history, carriesOf("google"))).toBe("thinking blocks in assistant messages")
    expect(reasoningRefusal(base, {})).toBeUndefined()
  })
})
