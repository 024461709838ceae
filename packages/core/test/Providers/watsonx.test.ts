/**
 * IBM watsonx.ai against a local mock that checks what IBM checks (support/mockWatsonx.ts: IAM
 * API-key grant, `version`, a live bearer token and a project id on every call, watsonx's error
 * shape): chat, tools, streams, errors mid-stream, token reuse and expiry, spaces, embeddings and
 * the refusals.
 */
import { Option, Redacted } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { clearTokens } from "../../src/Providers/internal/accessTokens.ts"
import { postJsonNow } from "../../src/Providers/internal/http.ts"
import { servedBy } from "../../src/Providers/Registry.ts"
import { API_KEY, chatAnswer, chunk, PROJECT, startWatsonxMock } from "../support/mockWatsonx.ts"
import { collect, complete, embed } from "../support/wires.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

const HOUR = 3_600_000

describe("IBM watsonx.ai", () => {
  let mock: Awaited<ReturnType<typeof startWatsonxMock>>
  const watsonx = data.providers.find((p) => p.id === "watsonx")!
  const targetWith = (apiKey: string, settings: Record<string, string> = {}): Target => ({
    provider: {
      ...watsonx,
      endpoint: `${mock.url}/ml/v1`,
      apiKey: Option.some(Redacted.make(apiKey)),
      configured: true,
      settings: { WATSONX_PROJECT_ID: PROJECT, WATSONX_IAM_URL: mock.url, ...settings },
      missing: undefined
    },
    model: uncataloguedModel("watsonx", "ibm/granite-3-8b-instruct", "chat")
  })
  let target: Target
  beforeAll(async () => {
    mock = await startWatsonxMock()
    target = targetWith(API_KEY)
  })
  afterAll(() => mock.close())
  afterEach(() => {
    vi.restoreAllMocks()
    clearTokens()
  })

  it("plain chat: /text/chat with version, model_id, project_id and the IAM bearer token", async () => {
    mock.answer(() => chatAnswer({ content: "Hi there" }, "stop"))
    const result = await complete(target, {
      model: "ibm/granite-3-8b-instruct",
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
      temperature: 0.2,
      maxTokens: 50,
      topP: 0.9,
      stop: ["\n\n"],
      seed: 7,
      frequencyPenalty: 0.1,
      presencePenalty: 0.2,
      responseFormat: { type: "json_object" }
    })
    expect(result).toMatchObject({ _tag: "Right", right: { content: "Hi there", finishReason: "stop", usage: { promptTokens: 12, completionTokens: 3 } } })
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/ml/v1/text/chat")
    expect(sent.query.get("version")).toBe("2024-10-08")
    expect(sent.headers.authorization).toBe("Bearer iam-1")
    expect(sent.body).toEqual({
      model_id: "ibm/granite-3-8b-instruct",
      project_id: PROJECT,
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
      temperature: 0.2,
      max_tokens: 50,
      top_p: 0.9,
      stop: ["\n\n"],
      seed: 7,
      frequency_penalty: 0.1,
      presence_penalty: 0.2,
      response_format: { type: "json_object" }
    })
  })

  it("the mock refuses a call without a valid bearer token (watsonx's error shape)", async () => {
    const refused = await postJsonNow("watsonx", `${mock.url}/ml/v1/text/chat?version=2024-10-08`, { authorization: "Bearer forged" }, { model_id: "m", project_id: PROJECT }, new Cancel()).catch((e) => e)
    expect(refused).toMatchObject({ provider: "watsonx", status: 401 })
    expect(refused.message).toContain("invalid token")
  })

  it("tools: tool_choice_option for a string choice, tool_choice for a named one; calls come back", async () => {
    const weather = { name: "get_weather", description: "Weather for a city", parameters: { type: "object", properties: { city: { type: "string" } } } }
    mock.answer(() => chatAnswer({ tool_calls: [{ id: "H6KoCbaZV", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] }, "tool_calls"))
    const first = await complete(target, { model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weather], toolChoice: "auto" })
    expect(first._tag).toBe("Right")
    if (first._tag !== "Right") return
    expect(first.right.finishReason).toBe("tool_calls")
    expect(first.right.toolCalls).toEqual([{ id: "H6KoCbaZV", name: "get_weather", arguments: "{\"city\": \"Paris\"}" }])
    const sent = mock.requests.at(-1)!.body
    expect(sent.tools).toEqual([{ type: "function", function: weather }])
    expect(sent.tool_choice_option).toBe("auto")
    expect(sent.tool_choice).toBeUndefined()

    mock.answer(() => chatAnswer({ content: "Sunny." }, "stop"))
    const second = await complete(target, {
      model: "m",
      tools: [weather],
      toolChoice: { name: "get_weather" },
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: "", toolCalls: first.right.toolCalls },
        { role: "tool", content: "{\"temp\":21}", toolCallId: "H6KoCbaZV" }
      ]
    })
    expect(second._tag === "Right" && second.right.content).toBe("Sunny.")
    const body = mock.requests.at(-1)!.body
    expect(body.tool_choice).toEqual({ type: "function", function: { name: "get_weather" } })
    expect(body.tool_choice_option).toBeUndefined()
    expect(body.messages[1].tool_calls[0]).toMatchObject({ id: "H6KoCbaZV", type: "function", function: { name: "get_weather" } })
    expect(body.messages[2]).toEqual({ role: "tool", tool_call_id: "H6KoCbaZV", content: "{\"temp\":21}" })
  })

  it("streams /text/chat_stream: text, tool call deltas, finish and usage", async () => {
    mock.answer(() => [
      chunk({ role: "assistant", content: "" }, null),
      chunk({ content: "Stream" }, null),
      chunk({ content: "ing works" }, null),
      chunk({}, "stop"),
      { ...chunk({}, null), choices: [], usage: { prompt_tokens: 9, completion_tokens: 6, total_tokens: 15 } }
    ])
    const result = await collect(target, { model: "m", messages: [{ role: "user", content: "Hi" }] })
    expect(result._tag).toBe("Right")
    if (result._tag !== "Right") return
    expect(result.right.filter((e) => e._tag === "Text").map((e) => (e as any).text).join("")).toBe("Streaming works")
    expect(result.right).toContainEqual({ _tag: "Finish", reason: "stop" })
    expect(result.right).toContainEqual({ _tag: "Usage", usage: { promptTokens: 9, completionTokens: 6 } })
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/ml/v1/text/chat_stream")
    expect(sent.body.stream).toBeUndefined()

    mock.answer(() => [
      chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "get_weather", arguments: "" } }] }, null),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\":\"Paris\"}" } }] }, "tool_calls")
    ])
    const tools = await collect(target, { model: "m", messages: [{ role: "user", content: "Weather?" }] })
    expect(tools._tag === "Right" && tools.right.filter((e) => e._tag === "ToolCallDelta").map((e) => (e as any).arguments).join("")).toBe("{\"city\":\"Paris\"}")
  })

  it("an error event mid-stream fails the stream with its message", async () => {
    mock.answer(() => [
      chunk({ content: "partial" }, null),
      { errors: [{ code: "downstream_request_failed", message: "Model inference failed" }], trace: "t", status_code: 500 }
    ])
    const result = await collect(target, { model: "m", messages: [{ role: "user", content: "Hi" }] })
    expect(result._tag).toBe("Left")
    if (result._tag !== "Left") return
    expect(result.left.message).toContain("Model inference failed")
  })

  it("reuses the IAM token across calls and fetches a new one after it expired", async () => {
    mock.answer(() => chatAnswer({ content: "ok" }, "stop"))
    const before = mock.tokenCount()
    await Promise.all([0, 1, 2].map(() => complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] })))
    expect((await complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] }))._tag).toBe("Right")
    expect(mock.tokenCount()).toBe(before + 1)
    const now = Date.now()
    vi.spyOn(Date, "now").mockReturnValue(now + 2 * HOUR)
    expect((await complete(target, { model: "m", messages: [{ role: "user", content: "hi" }] }))._tag).toBe("Right")
    expect(mock.tokenCount()).toBe(before + 2)
  })

  it("an API key IAM does not know is a clear error naming the provider", async () => {
    const result = await complete(targetWith("wrong-key"), { model: "m", messages: [{ role: "user", content: "hi" }] })
    expect(result._tag).toBe("Left")
    if (result._tag !== "Left") return
    expect(result.left).toMatchObject({ provider: "watsonx", status: 400, retryable: false })
    expect(result.left.message).toBe("watsonx refused the access token request (HTTP 400): Provided API key could not be found.")
  })

  it("a deployment space instead of a project; the version setting", async () => {
    mock.answer(() => chatAnswer({ content: "ok" }, "stop"))
    const spaced = targetWith(API_KEY, { WATSONX_SPACE_ID: "space-1", WATSONX_VERSION: "2025-02-06" })
    const { WATSONX_PROJECT_ID: _, ...settings } = spaced.provider.settings
    const result = await complete({ ...spaced, provider: { ...spaced.provider, settings } }, { model: "m", messages: [{ role: "user", content: "hi" }] })
    expect(result._tag).toBe("Right")
    const sent = mock.requests.at(-1)!
    expect(sent.body.space_id).toBe("space-1")
    expect(sent.body.project_id).toBeUndefined()
    expect(sent.query.get("version")).toBe("2025-02-06")
  })

  it("embeddings through /text/embeddings", async () => {
    mock.answer((_path, body) => ({
      model_id: body.model_id,
      results: body.inputs.map((t: string) => ({ embedding: [t.length, 0.25] })),
      created_at: "2025-02-11T22:12:07.243Z",
      input_token_count: 5
    }))
    const result = await embed({ ...target, model: uncataloguedModel("watsonx", "ibm/slate-125m-english-rtrvr", "embeddings") }, ["abc", "hello"])
    expect(result).toMatchObject({ _tag: "Right", right: { vectors: [[3, 0.25], [5, 0.25]], promptTokens: 5 } })
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/ml/v1/text/embeddings")
    expect(sent.body).toEqual({ inputs: ["abc", "hello"], model_id: "ibm/slate-125m-english-rtrvr", project_id: PROJECT })
  })

  it("refuses what watsonx cannot carry, naming the field; forwards the fields it takes", () => {
    const wire = servedBy(watsonx).chat!
    const base = { model: "m", messages: [{ role: "user" as const, content: "hi" }] }
    expect(wire.unsupported!({ ...base, parallelToolCalls: false })).toContain("parallel_tool_calls")
    expect(wire.unsupported!({ ...base, extra: { modalities: ["text"] } })).toContain("modalities")
    expect(wire.unsupported!({ ...base, messages: [{ role: "user", content: "", parts: [{ type: "raw", part: { type: "input_audio" } }] }] })).toContain("input_audio")
    expect(wire.unsupported!({ ...base, extra: { logprobs: true, time_limit: 1000 } })).toBeUndefined()
    expect(wire.request(target, { ...base, extra: { logprobs: true } }, false).body).toMatchObject({ logprobs: true })
  })

  it("says what to set when credentials are missing", () => {
    const check = servedBy(watsonx).credentials!
    expect(check({ hasApiKey: true, settings: {} }, "WATSONX")).toBe("set WATSONX_API_KEY and WATSONX_PROJECT_ID (or WATSONX_SPACE_ID)")
    expect(check({ hasApiKey: false, settings: { WATSONX_PROJECT_ID: PROJECT } }, "WATSONX")).toContain("WATSONX_API_KEY")
    expect(check({ hasApiKey: true, settings: { WATSONX_SPACE_ID: "s" } }, "WATSONX")).toBeUndefined()
  })
})
