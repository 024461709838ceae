/** The Anthropic surface's pure parts: request -> neutral input, answer and stream events, and the error envelope. */
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import type { CompletionResult, StreamChunk } from "../../src/Capabilities/Completions.ts"
import type { InputCounts } from "../../src/Engine/ProviderCalls.ts"
import { BadRequest, Busy, NotAvailable, NotFound, PayloadTooLarge, QuotaExceeded, Unauthorized, UpstreamFailed } from "../../src/Errors.ts"
import { CountTokensBody, countTokensOf, MessagesBody, messagesInputOf, toAnthropicMessage, toEvents } from "../../src/Http/AnthropicRoutes.ts"
import { defectParts, envelopeOfPath, errorParts } from "../../src/Http/Edge.ts"

const decode = Schema.decodeUnknownSync(MessagesBody)

const result = (over: Partial<CompletionResult>): CompletionResult => ({
  provider: "openai",
  model: "gpt-4o-mini",
  content: "",
  message: { role: "assistant", content: "", toolCalls: [] },
  toolCalls: [],
  finishReason: "stop",
  usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5, estimated: false },
  costUSD: 0,
  latencyMs: 1,
  ...over
} as CompletionResult)

describe("Anthropic surface", () => {
  it("says which stop sequence ended the answer when the upstream did, plain and streamed", () => {
    const answer = toAnthropicMessage("msg_1", result({ content: "1, 2", stopSequence: "END" }))
    expect(answer).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: "END" })
    expect(toAnthropicMessage("msg_1", result({ content: "1, 2" }))).toMatchObject({ stop_reason: "end_turn", stop_sequence: null })
    const { convert } = toEvents("msg_1", "m")
    const delta = convert({ content: "", done: true, finishReason: "stop", stopSequence: "END", promptTokens: 1, completionTokens: 2 }).find((e) => e.type === "message_delta")
    expect(delta).toMatchObject({ delta: { stop_reason: "stop_sequence", stop_sequence: "END" } })
  })

  it("takes null citations and cache_control as none, as the SDK's types allow; an empty turn is refused, not dropped", () => {
    const input = messagesInputOf(decode({
      model: "claude-haiku-4-5",
      max_tokens: 10,
      system: [{ type: "text", text: "rules", citations: null, cache_control: null }],
      messages: [{ role: "user", content: [{ type: "text", text: "hi", citations: null, cache_control: null }] }],
      tools: [{ name: "f", input_schema: { type: "object" }, cache_control: null }]
    }))
    if (input instanceof BadRequest) throw input
    expect(input.messages.map((m) => [m.role, m.content, m.parts])).toEqual([["system", "rules", undefined], ["user", "hi", undefined]])
    for (const [messages, at] of [[[{ role: "user", content: [] }], 0], [[{ role: "user", content: "a" }, { role: "assistant", content: "" }, { role: "user", content: "b" }], 1]] as const) {
      const refused = messagesInputOf(decode({ model: "claude-haiku-4-5", max_tokens: 10, messages }))
      expect(refused).toMatchObject({ _tag: "BadRequest", message: `Invalid request: messages.${at}: content must not be empty` })
    }
    // A final assistant turn may be empty (a prefill of nothing).
    expect(messagesInputOf(decode({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "a" }, { role: "assistant", content: [] }] }))).not.toBeInstanceOf(BadRequest)
    expect(() => decode({ model: "m", max_tokens: 10, messages: [{ role: "user", content: [{ type: "text", text: "a", citations: [{ type: "x" }] }] }] })).toThrow()
  })

  it("keeps a user turn's order: text before a tool result stays a user message before the tool message", () => {
    const input = messagesInputOf(decode({
      model: "gpt-4o-mini",
      max_tokens: 10,
      messages: [
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] },
        { role: "user", content: [{ type: "text", text: "first" }, { type: "tool_result", tool_use_id: "t1" }, { type: "image", source: { type: "url", url: "https://x/y.png" } }] }
      ]
    }))
    if (input instanceof BadRequest) throw input
    expect(input.messages.map((m) => [m.role, m.content])).toEqual([["assistant", ""], ["user", "first"], ["tool", ""], ["user", ""]])
    expect(input.messages[0]!.toolCalls).toEqual([{ id: "t1", name: "f", arguments: "{}" }])
    expect(input.messages[3]!.parts).toEqual([{ type: "image", url: "https://x/y.png" }])
    expect(input.maxTokens).toBe(10)
  })

  it("joins a message's text blocks back to back, as Anthropic defines adjacent text blocks", () => {
    const input = messagesInputOf(decode({
      model: "gpt-4o-mini",
      max_tokens: 10,
      system: [{ type: "text", text: "You are terse." }, { type: "text", text: " Answer in French." }],
      messages: [{ role: "user", content: [{ type: "text", text: "Context: the sky is blue.\n" }, { type: "text", text: "Question: what colour is it?" }] }]
    }))
    if (input instanceof BadRequest) throw input
    expect(input.messages.map((m) => m.content)).toEqual([
      "You are terse. Answer in French.",
      "Context: the sky is blue.\nQuestion: what colour is it?"
    ])
  })

  it("maps tool_choice none and auto, and leaves options empty when none are sent", () => {
    const base = { model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }] }
    const of = (extra: object) => {
      const input = messagesInputOf(decode({ ...base, ...extra }))
      if (input instanceof BadRequest) throw input
      return input.options
    }
    expect(of({})).toEqual({})
    expect(of({ tool_choice: { type: "none" } })).toEqual({ toolChoice: "none" })
    expect(of({ tool_choice: { type: "auto", disable_parallel_tool_use: true } })).toEqual({ toolChoice: "auto", parallelToolCalls: false })
  })

  it("answers tool calls with their parsed input, and refuses arguments that are not a JSON object", () => {
    const message = toAnthropicMessage("msg_1", result({ content: "Checking.", toolCalls: [{ id: "c", name: "f", arguments: "{\"a\":1}" }], finishReason: "tool_calls" }))
    expect(message).toMatchObject({
      content: [{ type: "text", text: "Checking." }, { type: "tool_use", id: "c", name: "f", input: { a: 1 } }],
      stop_reason: "tool_use",
      usage: { input_tokens: 3, output_tokens: 2 }
    })
    expect(toAnthropicMessage("msg_1", result({ finishReason: "length" }))).toMatchObject({ content: [{ type: "text", text: "" }], stop_reason: "max_tokens" })
    expect(toAnthropicMessage("msg_1", result({ toolCalls: [{ id: "c", name: "f", arguments: "[1" }] }))).toBeInstanceOf(UpstreamFailed)
    expect(toAnthropicMessage("msg_1", result({ toolCalls: [{ id: "c", name: "f", arguments: "[1]" }] }))).toBeInstanceOf(UpstreamFailed)
  })

  // A never-drop-silently audit: OpenAI answers finish_reason "stop" for a named tool_choice (as some compatible servers
  // do for any call), which became end_turn, and Anthropic's clients run tools only while the stop reason is tool_use.
  it("answers tool_use for an answer with tool calls whose upstream said only that it stopped, plain and streamed", () => {
    const call = { id: "c", name: "f", arguments: "{}" }
    expect(toAnthropicMessage("msg_1", result({ toolCalls: [call], finishReason: "stop" }))).toMatchObject({ stop_reason: "tool_use" })
    expect(toAnthropicMessage("msg_1", result({ toolCalls: [call], finishReason: "length" }))).toMatchObject({ stop_reason: "max_tokens" })
    const streamed = (finishReason: "stop" | "length", toolCalls: boolean) => {
      const { convert } = toEvents("msg_1", "m")
      if (toolCalls) convert({ content: "", done: false, toolCalls: [{ index: 0, id: "c", name: "f", arguments: "{}" }] })
      else convert({ content: "text", done: false })
      return convert({ content: "", done: true, finishReason }).find((e) => e.type === "message_delta")
    }
    expect(streamed("stop", true)).toMatchObject({ delta: { stop_reason: "tool_use" } })
    expect(streamed("length", true)).toMatchObject({ delta: { stop_reason: "max_tokens" } })
    expect(streamed("stop", false)).toMatchObject({ delta: { stop_reason: "end_turn" } })
  })

  // The same audit: an OpenAI-format upstream's refusal reached Anthropic's clients as an empty text block ending end_turn.
  it("answers an OpenAI-format upstream's refusal as its text with stop reason refusal, plain and streamed", () => {
    const refused = toAnthropicMessage("msg_1", result({ extra: { message: { refusal: "I can't help with that." } } }))
    expect(refused).toMatchObject({ content: [{ type: "text", text: "I can't help with that." }], stop_reason: "refusal" })
    const { convert } = toEvents("msg_1", "m")
    const events = [
      { content: "", done: false, extra: { delta: { refusal: "I can't" } } },
      { content: "", done: false, extra: { delta: { refusal: " help." } } },
      { content: "", done: true, finishReason: "stop" as const }
    ].flatMap(convert)
    expect(events.filter((e) => e.type === "content_block_delta")).toEqual([
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "I can't" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " help." } }
    ])
    expect(events.find((e) => e.type === "message_delta")).toMatchObject({ delta: { stop_reason: "refusal" } })
  })

  it("streams blocks in order: a new block when the kind of content changes, each closed once", () => {
    const { convert } = toEvents("msg_1", "m")
    const [opening, ...events] = [
      { content: "Hi", done: false },
      { content: " there", done: false },
      { content: "", done: false, toolCalls: [{ index: 0, id: "a", name: "f", arguments: "" }] },
      { content: "", done: false, toolCalls: [{ index: 0, arguments: "{\"x\":" }] },
      { content: "", done: false, toolCalls: [{ index: 0, arguments: "1}" }, { index: 1, id: "b", name: "g", arguments: "{}" }] },
      { content: "", done: false, extra: { delta: { reasoning_content: "hm" } } },
      { content: "", done: true, finishReason: "tool_calls" as const, promptTokens: 7, completionTokens: 9 }
    ].flatMap(convert)
    // message_start comes first, once; an upstream that reports its input only at the end leaves its usage 0.
    expect(opening).toEqual({
      type: "message_start",
      message: { id: "msg_1", type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } }
    })
    expect(events).toEqual([
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " there" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "a", name: "f", input: {} } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "{\"x\":" } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "1}" } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: "b", name: "g", input: {} } },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: "{}" } },
      { type: "content_block_stop", index: 2 },
      { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { input_tokens: 7, output_tokens: 9 } },
      { type: "message_stop" }
    ])
    const failure = (chunk: StreamChunk) => toEvents("msg_2", "m").convert(chunk).slice(1)
    expect(failure({ content: "", done: true, error: "boom" })).toEqual([{ type: "error", error: { type: "api_error", message: "boom" } }])
    // A stop of the gateway's own is Anthropic's overloaded_error (a 503 before the stream began); a timeout an api_error.
    expect(failure({ content: "", done: true, error: "stopping", errorCode: "Busy" })).toEqual([{ type: "error", error: { type: "overloaded_error", message: "stopping" } }])
    expect(failure({ content: "", done: true, error: "quiet", errorCode: "UpstreamTimeout" })).toEqual([{ type: "error", error: { type: "api_error", message: "quiet" } }])
  })

  it("starts with the input counts the upstream reported before the first chunk, believable ones only", () => {
    let reported: InputCounts = { promptTokens: 1200, cacheReadTokens: 800 }
    const { convert } = toEvents("msg_3", "m", () => reported)
    const first = convert({ content: "Hi", done: false })
    reported = { promptTokens: 5 }
    expect(first[0]).toMatchObject({ type: "message_start", message: { usage: { input_tokens: 1200, output_tokens: 0, cache_read_input_tokens: 800 } } })
    // Read once, for the first chunk: message_start is not sent again.
    expect(convert({ content: "!", done: false }).map((e) => e.type)).toEqual(["content_block_delta"])
  })

  it("answers failures in Anthropic's error shape with the error type of each status", () => {
    const cases: Array<[Parameters<typeof errorParts>[1], number, string]> = [
      [new BadRequest({ message: "m" }), 400, "invalid_request_error"],
      [new Unauthorized({ message: "m" }), 401, "authentication_error"],
      [new NotFound({ message: "m" }), 404, "not_found_error"],
      [new PayloadTooLarge({ message: "m" }), 413, "request_too_large"],
      [new QuotaExceeded({ message: "m", retryAfterSeconds: 60 }), 429, "rate_limit_error"],
      [new Busy({ message: "m", retryAfterSeconds: 1 }), 503, "overloaded_error"],
      [new UpstreamFailed({ message: "m", provider: "p" }), 502, "api_error"]
    ]
    for (const [error, status, type] of cases) {
      const parts = errorParts("anthropic", error)
      expect([parts.status, parts.body]).toEqual([status, { type: "error", error: { type, message: "m" } }])
    }
    expect(errorParts("anthropic", new QuotaExceeded({ message: "m", retryAfterSeconds: 60 })).headers).toEqual({ "retry-after": "60", "x-should-retry": "false" })
    // The SDKs are told not to retry what cannot succeed again: an upstream's refusal of the request itself.
    const shouldRetry = (status?: number) => errorParts("openai", new UpstreamFailed({ message: "m", provider: "p", status })).headers["x-should-retry"]
    expect([400, 401, 404, 422, 408, 429, 500, 503, undefined].map(shouldRetry)).toEqual(["false", "false", "false", "false", undefined, undefined, undefined, undefined, undefined])
    expect(errorParts("openai", new Busy({ message: "m", retryAfterSeconds: 1 })).headers["x-should-retry"]).toBeUndefined()
    expect(envelopeOfPath("/anthropic/v1/other")).toBe("anthropic")
  })

  // A twins review: the Anthropic table called the gateway's own failures server errors, the OpenAI one the request's.
  it("answers the gateway's own failures (500, 501) as server errors on both vendor surfaces", () => {
    const internal = defectParts("openai", new Error("boom"))
    expect([internal.status, internal.body]).toEqual([500, { error: { message: "Internal server error.", type: "server_error", param: null, code: "Internal" } }])
    expect(errorParts("openai", new NotAvailable({ message: "m" })).body).toMatchObject({ error: { type: "server_error", code: "NotAvailable" } })
    expect(defectParts("anthropic", new Error("boom")).body).toEqual({ type: "error", error: { type: "api_error", message: "Internal server error." } })
    expect(errorParts("anthropic", new NotAvailable({ message: "m" })).body).toMatchObject({ error: { type: "api_error" } })
  })

  it("carries cache_control, thinking, top_k and anthropic-beta into the neutral input", () => {
    const body = decode({
      model: "claude-sonnet-4-5",
      max_tokens: 4096,
      thinking: { type: "enabled", budget_tokens: 2048 },
      top_k: 40,
      system: [{ type: "text", text: "You are terse." }, { type: "text", text: "Project rules.", cache_control: { type: "ephemeral", ttl: "1h" } }],
      tools: [{ name: "f", input_schema: { type: "object" }, cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: [{ type: "text", text: "go", cache_control: { type: "ephemeral" } }] },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "plan", signature: "sig" },
            { type: "redacted_thinking", data: "opaque" },
            { type: "tool_use", id: "t1", name: "f", input: {}, cache_control: { type: "ephemeral" } }
          ]
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "done", cache_control: { type: "ephemeral", ttl: "5m" } }] }
      ]
    })
    const input = messagesInputOf(body, { "anthropic-beta": ["interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14"] })
    if (input instanceof BadRequest) throw input
    expect(input.options).toEqual({
      topK: 40,
      reasoning: { mode: "enabled", budgetTokens: 2048 },
      anthropicBeta: "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
    })
    const [system, user, assistant, tool] = input.messages
    expect(system).toMatchObject({ role: "system", content: "You are terse.Project rules." })
    expect(system!.parts).toEqual([{ type: "text", text: "You are terse." }, { type: "text", text: "Project rules.", cache: { ttl: "1h" } }])
    expect(user!.parts).toEqual([{ type: "text", text: "go", cache: {} }])
    expect(assistant!.reasoning).toEqual([{ type: "thinking", text: "plan", signature: "sig" }, { type: "redacted_thinking", data: "opaque" }])
    expect(assistant!.cache).toEqual({})
    expect(tool).toMatchObject({ role: "tool", toolCallId: "t1", cache: { ttl: "5m" } })
    expect(input.tools).toEqual([{ name: "f", description: undefined, parameters: { type: "object" }, cache: {} }])
    const adaptive = messagesInputOf(decode({ model: "m", max_tokens: 5, thinking: { type: "adaptive" }, messages: [{ role: "user", content: "x" }] }))
    if (adaptive instanceof BadRequest) throw adaptive
    expect(adaptive.options).toEqual({ reasoning: { mode: "adaptive" } })
    expect(adaptive.messages[0]!.parts).toBeUndefined()
  })

  it("refuses a thinking budget under 1024 and a cache_control type other than ephemeral, naming them", () => {
    const base = { model: "m", max_tokens: 5000, messages: [{ role: "user", content: "x" }] }
    expect(() => decode({ ...base, thinking: { type: "enabled", budget_tokens: 100 } })).toThrow(/budget_tokens must be an integer of at least 1024/)
    expect(() => decode({ ...base, system: [{ type: "text", text: "s", cache_control: { type: "forever" } }] })).toThrow(/ephemeral/)
  })

  it("answers the cache writes' split by lifetime as Anthropic does, when the upstream reported one", () => {
    const usage = { promptTokens: 3, completionTokens: 2, totalTokens: 105, estimated: false, cacheCreationTokens: 100, cacheCreation1hTokens: 60 }
    expect(toAnthropicMessage("msg_1", result({ content: "x", usage }))).toMatchObject({
      usage: { cache_creation_input_tokens: 100, cache_creation: { ephemeral_5m_input_tokens: 40, ephemeral_1h_input_tokens: 60 } }
    })
  })

  it("answers thinking blocks first and the upstream's cache counts in usage", () => {
    const message = toAnthropicMessage("msg_1", result({
      content: "Yes.",
      reasoning: [{ type: "thinking", text: "hm", signature: "s1" }, { type: "redacted_thinking", data: "d" }],
      usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5, estimated: false, cacheCreationTokens: 7, cacheReadTokens: 0 }
    }))
    expect(message).toMatchObject({
      content: [{ type: "thinking", thinking: "hm", signature: "s1" }, { type: "redacted_thinking", data: "d" }, { type: "text", text: "Yes." }],
      usage: { input_tokens: 3, output_tokens: 2, cache_creation_input_tokens: 7, cache_read_input_tokens: 0 }
    })
    expect((toAnthropicMessage("msg_1", result({ content: "x" })) as { usage: object }).usage).toEqual({ input_tokens: 3, output_tokens: 2 })
  })

  it("streams thinking as its own blocks: thinking_delta, then signature_delta, before the text", () => {
    const { convert } = toEvents("msg_1", "m")
    const events = [
      { content: "", done: false, reasoning: { index: 0, text: "Let me" } },
      { content: "", done: false, reasoning: { index: 0, text: " think." } },
      { content: "", done: false, reasoning: { index: 0, signature: "sig" } },
      { content: "", done: false, reasoning: { index: 1, redacted: "opaque" } },
      { content: "Answer", done: false },
      { content: "", done: true, finishReason: "stop" as const, promptTokens: 4, completionTokens: 6, cacheReadTokens: 12 }
    ].flatMap(convert).slice(1)
    expect(events).toEqual([
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Let me" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: " think." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "sig" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "redacted_thinking", data: "opaque" } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "Answer" } },
      { type: "content_block_stop", index: 2 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { input_tokens: 4, output_tokens: 6, cache_read_input_tokens: 12 } },
      { type: "message_stop" }
    ])
  })

  it("counts tokens of messages, thinking and tools with the gateway tokenizer", async () => {
    const count = (body: object) => Effect.runPromise(countTokensOf(Schema.decodeUnknownSync(CountTokensBody)(body)))
    const small = await count({ model: "m", messages: [{ role: "user", content: "hello" }] })
    const larger = await count({
      model: "m",
      system: "You are a careful assistant.",
      tools: [{ name: "lookup", description: "Looks a word up", input_schema: { type: "object", properties: { word: { type: "string" } } } }],
      messages: [{ role: "user", content: "hello" }]
    })
    expect(small.input_tokens).toBeGreaterThan(0)
    expect(larger.input_tokens).toBeGreaterThan(small.input_tokens + 10)
    expect(() => Schema.decodeUnknownSync(CountTokensBody)({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] })).toThrow(/max_tokens/)
  })
})
