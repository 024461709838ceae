/**
 * AWS Bedrock (Converse / ConverseStream) against a local mock that speaks its wire format
 * (test/support/mockBedrock.ts: SigV4 verified per request, Bedrock API keys, Converse JSON, binary
 * event stream frames): request shapes, both auth modes, answers, streams, refusals and hostile replies.
 */
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import { regionOfHost, served, wire } from "../../src/Providers/Bedrock.ts"
import type { ChatRequest, Target } from "../../src/Providers/Chat.ts"
import { servedBy } from "../../src/Providers/Registry.ts"
import { ACCESS_KEY, API_KEY, type BedrockMock, codec, event, exception, type Reply, SECRET, startBedrockMock, str } from "../support/mockBedrock.ts"
import { collect, complete } from "../support/wires.ts"

const MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"

const entry = data.providers.find((p) => p.id === "bedrock")!
const targetOf = (endpoint: string, settings: Record<string, string>, apiKey?: string): Target => ({
  provider: {
    ...entry,
    endpoint,
    apiKey: apiKey === undefined ? Option.none() : Option.some(Redacted.make(apiKey)),
    settings,
    configured: true,
    missing: undefined
  },
  model: uncataloguedModel("bedrock", MODEL, "chat")
})

const weather = {
  name: "get_weather",
  description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
}

const converseText = (text: string, stopReason = "end_turn") => ({
  output: { message: { role: "assistant", content: [{ text }] } },
  stopReason,
  usage: { inputTokens: 21, outputTokens: 3, totalTokens: 24 },
  metrics: { latencyMs: 120 }
})

describe("bedrock (Converse wire format)", () => {
  let mock: BedrockMock
  let signed: Target
  beforeAll(async () => {
    mock = await startBedrockMock("us-east-1")
    signed = targetOf(mock.url, { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET })
  })
  afterAll(() => mock.close())

  it("is registered: chat served, credentials say what to set", () => {
    expect(servedBy(entry).chat).toBe(wire)
    expect(served.credentials!({ hasApiKey: false, settings: {} }, "BEDROCK")).toBe(
      "set BEDROCK_API_KEY (a Bedrock API key), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary credentials)"
    )
    expect(served.credentials!({ hasApiKey: false, settings: { AWS_ACCESS_KEY_ID: ACCESS_KEY } }, "BEDROCK")).toContain("AWS_SECRET_ACCESS_KEY")
    expect(served.credentials!({ hasApiKey: false, settings: { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET } }, "BEDROCK")).toBeUndefined()
    expect(served.credentials!({ hasApiKey: true, settings: {} }, "BEDROCK")).toBeUndefined()
  })

  it("plain Converse call signed with SigV4: path, body shape, answer and usage", async () => {
    mock.answer({ kind: "json", body: converseText("Hi there") })
    const result = await complete(signed, {
      model: MODEL,
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
      temperature: 0.5,
      maxTokens: 50,
      topP: 0.9,
      stop: ["END"]
    })
    expect(result._tag).toBe("Right")
    if (result._tag !== "Right") return
    expect(result.right).toEqual({ content: "Hi there", toolCalls: [], finishReason: "stop", usage: { promptTokens: 21, completionTokens: 3 } })
    const sent = mock.received.at(-1)!
    expect(sent.path).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse")
    expect(sent.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=/)
    expect(sent.body).toEqual({
      messages: [{ role: "user", content: [{ text: "Hello" }] }],
      system: [{ text: "Be brief." }],
      inferenceConfig: { maxTokens: 50, temperature: 0.5, topP: 0.9, stopSequences: ["END"] }
    })
  })

  it("a wrong secret is Bedrock's 403 (signature mismatch), not a success", async () => {
    mock.answer({ kind: "json", body: converseText("never") })
    const before = mock.received.length
    const result = await complete(targetOf(mock.url, { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: "wrong-secret" }), {
      model: MODEL,
      messages: [{ role: "user", content: "Hello" }]
    })
    expect(result._tag).toBe("Left")
    if (result._tag !== "Left") return
    expect(result.left.status).toBe(403)
    expect(result.left.message).toContain("signature we calculated does not match")
    expect(mock.received.length).toBe(before)
  })

  it("session token and AWS_REGION are signed (scope and x-amz-security-token)", async () => {
    const eu = await startBedrockMock("eu-west-1")
    try {
      eu.answer({ kind: "json", body: converseText("Hallo") })
      const target = targetOf(eu.url, { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET, AWS_SESSION_TOKEN: "session-token-1", AWS_REGION: "eu-west-1" })
      const result = await complete(target, { model: MODEL, messages: [{ role: "user", content: "Hello" }] })
      expect(result._tag).toBe("Right")
      const sent = eu.received.at(-1)!
      expect(sent.headers["x-amz-security-token"]).toBe("session-token-1")
      expect(String(sent.headers.authorization)).toMatch(/SignedHeaders=[^,]*x-amz-security-token/)
      expect(String(sent.headers.authorization)).toContain("/eu-west-1/bedrock/aws4_request")
    } finally {
      await eu.close()
    }
  })

  it("the catalogue endpoint follows AWS_REGION; a configured base URL is kept", () => {
    const request: ChatRequest = { model: MODEL, messages: [{ role: "user", content: "x" }] }
    const catalogued = targetOf(entry.baseUrl, { AWS_REGION: "eu-central-1" })
    expect(wire.request(catalogued, request, true).url).toBe(
      "https://bedrock-runtime.eu-central-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
    )
    expect(wire.request(targetOf(entry.baseUrl, {}), request, false).url).toBe(`${entry.baseUrl}/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse`)
    expect(wire.request(targetOf("http://proxy.local", { AWS_REGION: "eu-central-1" }), request, false).url).toMatch(/^http:\/\/proxy\.local\//)
  })

  it("a Bedrock API key is sent as a bearer token, with no signature", async () => {
    mock.answer({ kind: "json", body: converseText("Keyed") })
    const keyed = targetOf(mock.url, {}, API_KEY)
    const result = await complete(keyed, { model: MODEL, messages: [{ role: "user", content: "Hello" }] })
    expect(result._tag).toBe("Right")
    const sent = mock.received.at(-1)!
    expect(sent.headers.authorization).toBe(`Bearer ${API_KEY}`)
    expect(sent.headers["x-amz-date"]).toBeUndefined()
    const wrong = await complete(targetOf(mock.url, {}, "ABSKwrong"), { model: MODEL, messages: [{ role: "user", content: "Hello" }] })
    expect(wrong._tag === "Left" && wrong.left.status).toBe(403)
  })

  it("tools, tool choice, images and a tool-result round trip", async () => {
    mock.answer({
      kind: "json",
      body: {
        output: { message: { role: "assistant", content: [{ text: "Checking." }, { toolUse: { toolUseId: "tu_1", name: "get_weather", input: { city: "Paris" } } }] } },
        stopReason: "tool_use",
        usage: { inputTokens: 40, outputTokens: 12, totalTokens: 52 }
      }
    })
    const first = await complete(signed, {
      model: MODEL,
      messages: [{
        role: "user",
        content: "Weather where this photo was taken?",
        parts: [{ type: "text", text: "Weather where this photo was taken?" }, { type: "image", url: "data:image/jpg;base64,AAEC" }]
      }],
      tools: [weather],
      toolChoice: { name: "get_weather" }
    })
    expect(first._tag).toBe("Right")
    if (first._tag !== "Right") return
    expect(first.right).toMatchObject({ content: "Checking.", finishReason: "tool_calls", toolCalls: [{ id: "tu_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }] })
    expect(mock.received.at(-1)!.body).toEqual({
      messages: [{ role: "user", content: [{ text: "Weather where this photo was taken?" }, { image: { format: "jpeg", source: { bytes: "AAEC" } } }] }],
      toolConfig: {
        tools: [{ toolSpec: { name: "get_weather", description: "Weather for a city", inputSchema: { json: weather.parameters } } }],
        toolChoice: { tool: { name: "get_weather" } }
      }
    })

    mock.answer({ kind: "json", body: converseText("Sunny in both.") })
    const second = await complete(signed, {
      model: MODEL,
      messages: [
        { role: "user", content: "Paris and Rome?" },
        { role: "assistant", content: "", toolCalls: [{ id: "tu_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }, { id: "tu_2", name: "get_weather", arguments: "{\"city\":\"Rome\"}" }] },
        { role: "tool", content: "sunny", toolCallId: "tu_1", name: "get_weather" },
        { role: "tool", content: "sunny too", toolCallId: "tu_2", name: "get_weather" }
      ],
      tools: [weather],
      toolChoice: "required"
    })
    expect(second._tag).toBe("Right")
    const body = mock.received.at(-1)!.body
    expect(body.messages).toEqual([
      { role: "user", content: [{ text: "Paris and Rome?" }] },
      {
        role: "assistant",
        content: [
          { toolUse: { toolUseId: "tu_1", name: "get_weather", input: { city: "Paris" } } },
          { toolUse: { toolUseId: "tu_2", name: "get_weather", input: { city: "Rome" } } }
        ]
      },
      { role: "user", content: [{ toolResult: { toolUseId: "tu_1", content: [{ text: "sunny" }] } }, { toolResult: { toolUseId: "tu_2", content: [{ text: "sunny too" }] } }] }
    ])
    expect(body.toolConfig.toolChoice).toEqual({ any: {} })
  })

  it("reasoning content comes back as reasoning_content, plain and streamed; an unknown event fails the stream", async () => {
    mock.answer({
      kind: "json",
      body: {
        output: { message: { role: "assistant", content: [{ reasoningContent: { reasoningText: { text: "Think first.", signature: "sig" } } }, { text: "42" }] } },
        stopReason: "end_turn",
        usage: { inputTokens: 5, outputTokens: 6, totalTokens: 11 }
      }
    })
    const plain = await complete(signed, { model: MODEL, messages: [{ role: "user", content: "Answer?" }] })
    expect(plain._tag === "Right" && plain.right).toMatchObject({ content: "42", extra: { message: { reasoning_content: "Think first." } } })
    mock.answer({
      kind: "frames",
      frames: [
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { reasoningContent: { text: "Hmm." } } }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { reasoningContent: { signature: "sig" } } }),
        event("contentBlockDelta", { contentBlockIndex: 1, delta: { text: "42" } }),
        event("messageStop", { stopReason: "end_turn" })
      ]
    })
    const streamed = await collect(signed, { model: MODEL, messages: [{ role: "user", content: "Answer?" }] })
    expect(streamed._tag === "Right" && streamed.right).toEqual([
      { _tag: "Extra", extra: { delta: { reasoning_content: "Hmm." } } },
      { _tag: "Text", text: "42" },
      { _tag: "Finish", reason: "stop" }
    ])
    mock.answer({ kind: "frames", frames: [event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "a" } }), event("surpriseEvent", {})] })
    const unknown = await collect(signed, { model: MODEL, messages: [{ role: "user", content: "Answer?" }] })
    expect(unknown._tag === "Left" && unknown.left.message).toContain("surpriseEvent")
  })

  it("reads the region to sign for from every runtime host shape AWS documents", () => {
    expect(regionOfHost("bedrock-runtime.eu-west-1.amazonaws.com")).toBe("eu-west-1")
    expect(regionOfHost("bedrock-runtime-fips.us-gov-west-1.amazonaws.com")).toBe("us-gov-west-1")
    expect(regionOfHost("vpce-0abc123-xyz.bedrock-runtime.eu-central-2.vpce.amazonaws.com")).toBe("eu-central-2")
    expect(regionOfHost("bedrock-runtime.ap-southeast-1.api.aws")).toBe("ap-southeast-1")
    expect(regionOfHost("bedrock-runtime.cn-north-1.amazonaws.com.cn")).toBe("cn-north-1")
    expect(regionOfHost("BEDROCK-RUNTIME.EU-WEST-3.AMAZONAWS.COM")).toBe("eu-west-3")
    // A proxy or a look-alike host names no region: AWS_REGION (else us-east-1) is signed for.
    expect(regionOfHost("bedrock.internal.example.com")).toBeUndefined()
    expect(regionOfHost("bedrock-runtime.eu-west-1.amazonaws.com.evil.example")).toBeUndefined()
    expect(regionOfHost("127.0.0.1")).toBeUndefined()
  })

  it("stop reasons map to the neutral finish reasons", async () => {
    const cases = [
      ["max_tokens", "length"],
      ["model_context_window_exceeded", "length"],
      ["stop_sequence", "stop"],
      ["content_filtered", "content_filter"],
      ["guardrail_intervened", "content_filter"],
      // A malformed answer is a failed call (the engine answers 502), never a plain stop.
      ["malformed_tool_use", "error"],
      ["malformed_model_output", "error"]
    ] as const
    for (const [stopReason, finish] of cases) {
      mock.answer({ kind: "json", body: converseText("x", stopReason) })
      const result = await complete(signed, { model: MODEL, messages: [{ role: "user", content: "Hello" }] })
      expect(result._tag === "Right" && result.right.finishReason).toBe(finish)
    }
  })

  it("refuses, naming the field, what Converse cannot carry", () => {
    const base: ChatRequest = { model: MODEL, messages: [{ role: "user", content: "Hi" }] }
    const refused = (r: Partial<ChatRequest>) => wire.unsupported!({ ...base, ...r })
    const image = (url: string, detail?: string): ChatRequest["messages"] => [{ role: "user", content: "", parts: [{ type: "image", url, detail }] }]
    expect(refused({})).toBeUndefined()
    expect(refused({ extra: { logprobs: true } })).toBe("logprobs is not supported by the Bedrock Converse wire format")
    expect(refused({ messages: [{ role: "user", content: "Hi", extra: { cache_control: {} } }] })).toContain("messages[].cache_control")
    expect(refused({ messages: [{ role: "user", content: "", parts: [{ type: "raw", part: { type: "input_audio" } }] }] })).toContain("input_audio")
    expect(refused({ seed: 1 })).toContain("seed")
    expect(refused({ frequencyPenalty: 0.1 })).toContain("frequency_penalty")
    expect(refused({ presencePenalty: 0.1 })).toContain("presence_penalty")
    expect(refused({ parallelToolCalls: false, tools: [weather] })).toContain("parallel_tool_calls false")
    expect(refused({ parallelToolCalls: true, tools: [weather] })).toBeUndefined()
    expect(refused({ responseFormat: { type: "text" } })).toBeUndefined()
    expect(refused({ responseFormat: { type: "json_object" } })).toBeUndefined()
    expect(refused({ messages: [{ role: "system", content: " " }, { role: "user", content: "Hi" }] })).toContain("an empty user or system message")
    expect(refused({ messages: [{ role: "user", content: "" }] })).toContain("an empty user or system message")
    // Converse forces a tool (the JSON answer's, a required or named choice) only for Claude and Nova models.
    const mistral = "mistral.mistral-large-2407-v1:0"
    expect(refused({ model: mistral, responseFormat: { type: "json_object" } })).toContain(`response_format with model ${mistral}`)
    expect(refused({ model: mistral, tools: [weather], toolChoice: "required" })).toContain("tool_choice required or a named tool")
    expect(refused({ model: mistral, tools: [weather], toolChoice: { name: "get_weather" } })).toContain("only for Anthropic Claude and Amazon Nova")
    expect(refused({ model: mistral, tools: [weather], toolChoice: "auto" })).toBeUndefined()
    expect(refused({ model: "us.amazon.nova-pro-v1:0", responseFormat: { type: "json_object" } })).toBeUndefined()
    expect(refused({ model: "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-sonnet-20240620-v1:0", tools: [weather], toolChoice: "required" })).toBeUndefined()
    expect(refused({ responseFormat: { type: "json_object" }, tools: [weather] })).toContain("response_format together with tools")
    expect(refused({ responseFormat: { type: "json_schema", name: "list", schema: { type: "array" } } })).toContain("json_schema of type array")
    expect(refused({ tools: [{ ...weather, name: "aigw_json_answer" }] })).toContain("reserved")
    expect(refused({ messages: image("https://example.com/cat.png") })).toContain("image_url https://example.com/cat.png")
    expect(refused({ messages: image("data:image/tiff;base64,AAAA") })).toContain("image_url data:image/tiff")
    expect(refused({ messages: image("data:image/png;base64,AAAA", "low") })).toContain("detail")
    expect(refused({ messages: image("data:image/png;base64,AAAA") })).toBeUndefined()
    expect(refused({ messages: [{ role: "system", content: "", parts: [{ type: "image", url: "data:image/png;base64,AAAA" }] }, ...base.messages] })).toContain("system")
    expect(refused({ toolChoice: "required" })).toContain("tool_choice without tools")
    const history: ChatRequest["messages"] = [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "", toolCalls: [{ id: "a", name: "get_weather", arguments: "{}" }] },
      { role: "tool", content: "ok", toolCallId: "a" }
    ]
    expect(refused({ tools: [weather], toolChoice: "none", messages: history })).toContain("tool_choice none")
    // Without tool blocks in the history, "none" is honoured by leaving the tools out.
    expect(refused({ tools: [weather], toolChoice: "none" })).toBeUndefined()
    expect((wire.request(signed, { ...base, tools: [weather], toolChoice: "none" }, false).body as any).toolConfig).toBeUndefined()
  })

  it("response_format is a forced answer tool whose input comes back as the JSON text", async () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
    mock.answer({
      kind: "json",
      body: {
        output: { message: { role: "assistant", content: [{ toolUse: { toolUseId: "tu_a", name: "aigw_json_answer", input: { city: "Paris" } } }] } },
        stopReason: "tool_use",
        usage: { inputTokens: 30, outputTokens: 8, totalTokens: 38 }
      }
    })
    const result = await complete(signed, {
      model: MODEL,
      messages: [{ role: "user", content: "Capital of France as JSON" }],
      responseFormat: { type: "json_schema", name: "capital", schema, description: "The capital" }
    })
    expect(result._tag === "Right" && result.right).toEqual({ content: "{\"city\":\"Paris\"}", toolCalls: [], finishReason: "stop", usage: { promptTokens: 30, completionTokens: 8 } })
    expect(mock.received.at(-1)!.body.toolConfig).toEqual({
      tools: [{ toolSpec: { name: "aigw_json_answer", description: "The capital", inputSchema: { json: schema } } }],
      toolChoice: { tool: { name: "aigw_json_answer" } }
    })

    mock.answer({
      kind: "frames",
      frames: [
        event("messageStart", { role: "assistant" }),
        event("contentBlockStart", { contentBlockIndex: 0, start: { toolUse: { toolUseId: "tu_b", name: "aigw_json_answer" } } }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { toolUse: { input: "{\"ok\":" } } }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { toolUse: { input: "true}" } } }),
        event("contentBlockStop", { contentBlockIndex: 0 }),
        event("messageStop", { stopReason: "tool_use" }),
        event("metadata", { usage: { inputTokens: 12, outputTokens: 4, totalTokens: 16 } })
      ]
    })
    const streamed = await collect(signed, { model: MODEL, messages: [{ role: "user", content: "ok?" }], responseFormat: { type: "json_object" } })
    expect(streamed._tag === "Right" && streamed.right).toEqual([
      { _tag: "Text", text: "{\"ok\":" },
      { _tag: "Text", text: "true}" },
      { _tag: "Finish", reason: "stop" },
      { _tag: "Usage", usage: { promptTokens: 12, completionTokens: 4 } }
    ])
    expect(mock.received.at(-1)!.body.toolConfig.tools[0].toolSpec.inputSchema).toEqual({ json: { type: "object" } })
  })

  it("streams text, a tool call split across deltas, the stop reason and usage from the binary event stream", async () => {
    mock.answer({
      kind: "frames",
      frames: [
        event("messageStart", { role: "assistant", p: "abcd" }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Let me " }, p: "ab" }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "check." } }),
        event("contentBlockStop", { contentBlockIndex: 0 }),
        event("contentBlockStart", { contentBlockIndex: 1, start: { toolUse: { toolUseId: "tu_9", name: "get_weather" } } }),
        event("contentBlockDelta", { contentBlockIndex: 1, delta: { toolUse: { input: "{\"city\":" } } }),
        event("contentBlockDelta", { contentBlockIndex: 1, delta: { toolUse: { input: "\"Oslo\"}" } } }),
        event("contentBlockStop", { contentBlockIndex: 1 }),
        event("messageStop", { stopReason: "tool_use" }),
        event("metadata", { usage: { inputTokens: 30, outputTokens: 9, totalTokens: 39 }, metrics: { latencyMs: 200 } })
      ]
    })
    const result = await collect(signed, { model: MODEL, messages: [{ role: "user", content: "Oslo?" }], tools: [weather] })
    expect(result._tag).toBe("Right")
    if (result._tag !== "Right") return
    expect(mock.received.at(-1)!.path).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream")
    expect(mock.received.at(-1)!.headers.accept).toBe("application/vnd.amazon.eventstream")
    expect(result.right).toEqual([
      { _tag: "Text", text: "Let me " },
      { _tag: "Text", text: "check." },
      { _tag: "ToolCallDelta", index: 0, id: "tu_9", name: "get_weather", arguments: "" },
      { _tag: "ToolCallDelta", index: 0, arguments: "{\"city\":" },
      { _tag: "ToolCallDelta", index: 0, arguments: "\"Oslo\"}" },
      { _tag: "Finish", reason: "tool_calls" },
      { _tag: "Usage", usage: { promptTokens: 30, completionTokens: 9 } }
    ])
  })

  it("reassembles a frame of a megabyte that arrives over many reads, with small frames around it", async () => {
    const big = "x".repeat(1_000_000)
    mock.answer({
      kind: "frames",
      frames: [
        event("messageStart", { role: "assistant" }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "a" } }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: big } }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "b" } }),
        event("messageStop", { stopReason: "end_turn" })
      ],
      pieceBytes: 1_000
    })
    const result = await collect(signed, { model: MODEL, messages: [{ role: "user", content: "long?" }] })
    expect(result._tag).toBe("Right")
    if (result._tag !== "Right") return
    expect(result.right).toEqual([{ _tag: "Text", text: "a" }, { _tag: "Text", text: big }, { _tag: "Text", text: "b" }, { _tag: "Finish", reason: "stop" }])
  })

  it("an exception event mid-stream is an UpstreamError naming it", async () => {
    mock.answer({
      kind: "frames",
      frames: [
        event("messageStart", { role: "assistant" }),
        event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Partial" } }),
        exception("throttlingException", "Too many tokens, please wait before trying again.")
      ]
    })
    const result = await collect(signed, { model: MODEL, messages: [{ role: "user", content: "Hi" }] })
    expect(result._tag).toBe("Left")
    if (result._tag !== "Left") return
    expect(result.left.message).toContain("throttlingException: Too many tokens")
  })

  it("hostile replies are clean UpstreamErrors: bad JSON, wrong shape, truncated or corrupt frames, JSON instead of a stream", async () => {
    const hello: ChatRequest = { model: MODEL, messages: [{ role: "user", content: "Hi" }] }
    const failure = async (reply: Reply, stream: boolean) => {
      mock.answer(reply)
      const result = stream ? await collect(signed, hello) : await complete(signed, hello)
      expect(result._tag).toBe("Left")
      return result._tag === "Left" ? result.left.message : ""
    }
    expect(await failure({ kind: "raw", status: 200, contentType: "application/json", body: "{not json" }, false)).toContain("not JSON")
    expect(await failure({ kind: "json", body: { output: {} } }, false)).toContain("no output.message.content")
    const whole = event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "cut" } })
    expect(await failure({ kind: "frames", frames: [event("messageStart", { role: "assistant" }), whole.subarray(0, whole.length - 5)] }, true)).toContain(
      "ended inside a frame"
    )
    const corrupt = Uint8Array.from(whole)
    corrupt[corrupt.length - 8] ^= 0xff
    expect(await failure({ kind: "frames", frames: [corrupt] }, true)).toContain("checksum")
    expect(await failure({ kind: "frames", frames: [new TextEncoder().encode(JSON.stringify({ message: "not a stream" }))] }, true)).toContain("bad event stream")
    // An event payload that is not JSON.
    const badPayload = codec.encode({ headers: { ":message-type": str("event"), ":event-type": str("contentBlockDelta") }, body: new TextEncoder().encode("{oops") })
    expect(await failure({ kind: "frames", frames: [badPayload] }, true)).toContain("bad JSON in stream")
    // An HTTP error before the stream starts keeps Bedrock's message and status.
    mock.answer({ kind: "raw", status: 400, contentType: "application/json", body: JSON.stringify({ message: "The provided model identifier is invalid." }) })
    const invalid = await collect(signed, hello)
    expect(invalid._tag === "Left" && invalid.left.status).toBe(400)
    expect(invalid._tag === "Left" && invalid.left.message).toContain("model identifier is invalid")
  })
})
