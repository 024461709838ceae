/**
 * Upstream answers of the wrong shape, in every chat wire format. Every field of a valid answer and
 * of valid stream events is replaced in turn by a value of another type (an object, an array, a
 * number, null, ...): the adapter must neither throw (a throw in a stream's reader would take the
 * server down) nor relay what it cannot read as text (`"[object Object]"`, a dropped part) as a
 * success. It answers with what it could read, or a protocol error.
 */
import { describe, expect, it } from "vitest"
import * as Anthropic from "../../src/Providers/Anthropic.ts"
import * as Bedrock from "../../src/Providers/Bedrock.ts"
import type { ChatResult, ChatWire, StreamEvent } from "../../src/Providers/Chat.ts"
import * as Cohere from "../../src/Providers/Cohere.ts"
import * as Gemini from "../../src/Providers/Gemini.ts"
import * as OpenAiCompatible from "../../src/Providers/OpenAiCompatible.ts"
import { UpstreamError } from "../../src/Providers/UpstreamError.ts"

const HOSTILE: ReadonlyArray<unknown> = [null, {}, { a: 1 }, [], [1], 7, -1, true, "", "s"]

/** Every path to a value in `value`, the root's own fields first. */
const pathsOf = (value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> => {
  if (typeof value !== "object" || value === null) return []
  const keys: Array<string | number> = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value)
  return keys.flatMap((k) => [[...prefix, k], ...pathsOf((value as any)[k], [...prefix, k])])
}

/** A copy of `value` with the value at `path` replaced. */
const replaced = (value: unknown, path: ReadonlyArray<string | number>, by: unknown): unknown => {
  const copy = structuredClone(value)
  let at: any = copy
  for (const k of path.slice(0, -1)) at = at[k]
  at[path.at(-1)!] = by
  return copy
}

/** Each answer `sample` could be, with one field of another type. */
const variantsOf = (sample: unknown): Array<{ readonly what: string; readonly value: unknown }> =>
  pathsOf(sample).flatMap((path) => HOSTILE.map((by) => ({ what: `${path.join(".")} = ${JSON.stringify(by)}`, value: replaced(sample, path, by) })))

const OBJECT_TEXT = /\[object \w+\]/

/** What a result relays as text: its content and tool calls' ids, names and arguments. */
const resultTexts = (r: ChatResult): Array<unknown> => [r.content, ...r.toolCalls.flatMap((c) => [c.id, c.name, c.arguments])]

const eventTexts = (e: StreamEvent): Array<unknown> => {
  switch (e._tag) {
    case "Text":
      return [e.text]
    case "ToolCallDelta":
      return [e.arguments, ...(e.id !== undefined ? [e.id] : []), ...(e.name !== undefined ? [e.name] : [])]
    case "Reasoning":
      return [e.text, e.signature, e.redacted].filter((t) => t !== undefined)
    default:
      return []
  }
}

const expectReadable = (texts: ReadonlyArray<unknown>, what: string) => {
  for (const t of texts) {
    expect(typeof t, what).toBe("string")
    expect(t as string, what).not.toMatch(OBJECT_TEXT)
  }
}

interface Sample {
  readonly wire: ChatWire
  readonly answer: unknown
  /** A stream's events, each an object sent as one event's JSON data (with its event name). */
  readonly events: ReadonlyArray<{ readonly event: string; readonly data: unknown }>
}

const samples: Record<string, Sample> = {
  openai: {
    wire: OpenAiCompatible.wire,
    answer: {
      id: "c1",
      choices: [{ index: 0, finish_reason: "tool_calls", message: { role: "assistant", content: "hi", tool_calls: [{ id: "t1", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }] } }],
      usage: { prompt_tokens: 3, completion_tokens: 2 }
    },
    events: [
      { event: "", data: { id: "c1", choices: [{ index: 0, delta: { role: "assistant", content: "hi" } }] } },
      { event: "", data: { id: "c1", choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "t1", function: { name: "f", arguments: "{\"a\"" } }] } }] } },
      { event: "", data: { id: "c1", choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }], usage: { prompt_tokens: 3, completion_tokens: 2 } } }
    ]
  },
  anthropic: {
    wire: Anthropic.wire,
    answer: {
      content: [
        { type: "thinking", thinking: "hm", signature: "sig" },
        { type: "text", text: "hi" },
        { type: "tool_use", id: "t1", name: "f", input: { a: 1 } }
      ],
      stop_reason: "tool_use",
      usage: { input_tokens: 3, output_tokens: 2 }
    },
    events: [
      { event: "message_start", data: { type: "message_start", message: { usage: { input_tokens: 3 } } } },
      { event: "content_block_start", data: { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "" } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "hm" } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "sig" } } },
      { event: "content_block_start", data: { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "hi" } } },
      { event: "content_block_start", data: { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: "t1", name: "f", input: {} } } },
      { event: "content_block_delta", data: { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: "{\"a\"" } } },
      { event: "message_delta", data: { type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 2 } } }
    ]
  },
  gemini: {
    wire: Gemini.wire,
    answer: {
      candidates: [{ content: { parts: [{ text: "hi" }, { functionCall: { name: "f", args: { a: 1 } } }] }, finishReason: "STOP" }],
      usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2 }
    },
    events: [
      { event: "", data: { candidates: [{ content: { parts: [{ text: "hi" }] } }] } },
      { event: "", data: { candidates: [{ content: { parts: [{ functionCall: { name: "f", args: { a: 1 } } }] }, finishReason: "STOP" }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2 } } }
    ]
  },
  cohere: {
    wire: Cohere.wire,
    answer: {
      message: { role: "assistant", content: [{ type: "text", text: "hi" }], tool_calls: [{ id: "t1", type: "function", function: { name: "f", arguments: "{}" } }] },
      finish_reason: "TOOL_CALL",
      usage: { billed_units: { input_tokens: 3, output_tokens: 2 } }
    },
    events: [
      { event: "content-delta", data: { type: "content-delta", index: 0, delta: { message: { content: { text: "hi" } } } } },
      { event: "tool-call-start", data: { type: "tool-call-start", index: 0, delta: { message: { tool_calls: { id: "t1", type: "function", function: { name: "f", arguments: "" } } } } } },
      { event: "tool-call-delta", data: { type: "tool-call-delta", index: 0, delta: { message: { tool_calls: { function: { arguments: "{}" } } } } } },
      { event: "message-end", data: { type: "message-end", delta: { finish_reason: "TOOL_CALL", usage: { billed_units: { input_tokens: 3, output_tokens: 2 } } } } }
    ]
  },
  bedrock: {
    wire: Bedrock.wire,
    answer: {
      output: { message: { role: "assistant", content: [{ text: "hi" }, { toolUse: { toolUseId: "t1", name: "f", input: { a: 1 } } }] } },
      stopReason: "tool_use",
      usage: { inputTokens: 3, outputTokens: 2 }
    },
    events: [
      { event: "messageStart", data: { role: "assistant" } },
      { event: "contentBlockDelta", data: { contentBlockIndex: 0, delta: { text: "hi" } } },
      { event: "contentBlockStart", data: { contentBlockIndex: 1, start: { toolUse: { toolUseId: "t1", name: "f" } } } },
      { event: "contentBlockDelta", data: { contentBlockIndex: 1, delta: { toolUse: { input: "{\"a\":1}" } } } },
      { event: "messageStop", data: { stopReason: "tool_use" } },
      { event: "metadata", data: { usage: { inputTokens: 3, outputTokens: 2 } } }
    ]
  }
}

describe.each(Object.entries(samples))("a hostile %s answer", (provider, { answer, events, wire }) => {
  it("the valid samples read whole (the mutations below start from a real answer)", () => {
    const result = wire.result(provider, answer) as ChatResult
    expect(result).not.toBeInstanceOf(UpstreamError)
    expect(result.content).toBe("hi")
    expect(result.toolCalls.map((c) => c.name)).toEqual(["f"])
    const decode = wire.events(provider)
    const out = events.flatMap(({ data, event }) => decode({ event, data: JSON.stringify(data) }) as ReadonlyArray<StreamEvent>)
    expect(out.filter((e) => e._tag === "Text").map((e) => (e as { text: string }).text).join("")).toBe("hi")
    expect(out.some((e) => e._tag === "ToolCallDelta" && e.name === "f")).toBe(true)
  })

  it("a field of another type in the answer: read as text, or a protocol error, never a throw", () => {
    for (const { value, what } of variantsOf(answer)) {
      let result: ChatResult | UpstreamError
      expect(() => (result = wire.result(provider, value)), what).not.toThrow()
      if (result! instanceof UpstreamError) expect(result.kind, what).toBe("protocol")
      else expectReadable(resultTexts(result!), what)
    }
  })

  it("a field of another type in a stream event: read as text, or a protocol error, never a throw", () => {
    for (const [n, { data, event }] of events.entries()) {
      for (const { value, what } of [{ what: "data = null", value: null }, ...variantsOf(data)]) {
        // A fresh reader with the events before this one, as a stream would have them.
        const decode = wire.events(provider)
        for (const before of events.slice(0, n)) decode({ event: before.event, data: JSON.stringify(before.data) })
        let out: ReturnType<typeof decode>
        expect(() => (out = decode({ event, data: JSON.stringify(value) })), `event ${n}: ${what}`).not.toThrow()
        if (out! instanceof UpstreamError) expect(out.kind, what).toBe("protocol")
        else if (out! !== null) for (const e of out!) expectReadable(eventTexts(e), `event ${n}: ${what}`)
      }
    }
  })
})

describe("a field that cannot be read is a protocol error, not a success", () => {
  const protocol = (r: unknown) => (r instanceof UpstreamError ? r.kind : r)

  it("answers", () => {
    expect(protocol(OpenAiCompatible.wire.result("openai", { choices: [{ message: { content: { text: "hi" } } }] }))).toBe("protocol")
    expect(protocol(OpenAiCompatible.wire.result("openai", { choices: [{ message: { content: "", tool_calls: [{ id: 5, function: { name: "f" } }] } }] }))).toBe("protocol")
    expect(protocol(Anthropic.wire.result("anthropic", { content: [{ type: "text", text: {} }] }))).toBe("protocol")
    expect(protocol(Anthropic.wire.result("anthropic", { content: [{ type: "tool_use", id: "t", name: null, input: {} }] }))).toBe("protocol")
    expect(protocol(Gemini.wire.result("google", { candidates: [{ content: { parts: [{ text: 5 }] } }] }))).toBe("protocol")
    expect(protocol(Gemini.wire.result("google", { candidates: [{ content: { parts: { text: "hi" } } }] }))).toBe("protocol")
    expect(protocol(Cohere.wire.result("cohere", { message: { content: [{ type: "text", text: ["hi"] }] } }))).toBe("protocol")
    expect(protocol(Cohere.wire.result("cohere", { message: { content: "hi" } }))).toBe("protocol")
    expect(protocol(Bedrock.wire.result("bedrock", { output: { message: { content: [{ text: { t: 1 } }] } } }))).toBe("protocol")
  })

  it("stream events", () => {
    const event = (wire: ChatWire, provider: string, name: string, data: unknown) => protocol(wire.events(provider)({ event: name, data: JSON.stringify(data) }))
    expect(event(OpenAiCompatible.wire, "openai", "", { choices: [{ delta: { tool_calls: [{ index: 0, function: { name: "f", arguments: [1] } }] } }] })).toBe("protocol")
    expect(event(OpenAiCompatible.wire, "openai", "", { choices: [{ delta: { content: 7 } }] })).toBe("protocol")
    expect(event(Anthropic.wire, "anthropic", "content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: {} } })).toBe("protocol")
    expect(event(Gemini.wire, "google", "", { candidates: [{ content: { parts: [{ functionCall: { name: null } }] } }] })).toBe("protocol")
    expect(event(Cohere.wire, "cohere", "content-delta", { type: "content-delta", delta: { message: { content: { text: 1 } } } })).toBe("protocol")
    expect(event(Bedrock.wire, "bedrock", "contentBlockDelta", { contentBlockIndex: 0, delta: { toolUse: { input: { a: 1 } } } })).toBe("protocol")
  })

  it("an Anthropic stream's documented error event is the failure its type stands for, named; an undocumented one a protocol error", () => {
    const decode = Anthropic.wire.events("anthropic")
    const overloaded = decode({ event: "error", data: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }) })
    expect(overloaded).toBeInstanceOf(UpstreamError)
    expect(overloaded).toMatchObject({ kind: "http", status: 529, retryable: true, message: "anthropic ended the stream with overloaded_error: Overloaded" })
    const limited = Anthropic.wire.events("anthropic")({ event: "error", data: JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: "slow down" } }) })
    expect(limited).toMatchObject({ kind: "http", status: 429, retryable: true })
    const odd = Anthropic.wire.events("anthropic")({ event: "error", data: JSON.stringify({ type: "error", error: { type: "surprise", message: "?" } }) })
    expect(odd).toMatchObject({ kind: "protocol" })
  })

  it("shapes the first hardening let through (a re-attack): a message or delta that is no object, tool calls that are no list, a streamed call that begins without a name or at an index no call has, empty candidates, text where an object goes", () => {
    const answer = (body: unknown) => protocol(OpenAiCompatible.wire.result("openai", body))
    expect(answer({ choices: [{ message: "hello" }] })).toBe("protocol")
    expect(answer({ choices: [{ message: { content: "hi", tool_calls: { id: "x" } } }] })).toBe("protocol")
    expect(answer({ choices: [{ message: { content: null, function_call: { name: "f", arguments: 5 } } }] })).toBe("protocol")
    // The legacy function_call is the one call it names.
    expect((OpenAiCompatible.wire.result("openai", { choices: [{ message: { content: null, function_call: { name: "f", arguments: "{}" } } }] }) as ChatResult).toolCalls)
      .toEqual([{ id: "call_0", name: "f", arguments: "{}" }])
    const streamed = (...chunks: Array<unknown>) => {
      const decode = OpenAiCompatible.wire.events("openai")
      return chunks.map((c) => protocol(decode({ event: "", data: JSON.stringify(c) }))).at(-1)
    }
    expect(streamed({ choices: [{ delta: { tool_calls: [null] } }] })).toBe("protocol")
    expect(streamed({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: "{\"x\":1}" } }] } }] })).toBe("protocol")
    for (const index of [1e300, -5, 0.5]) expect(streamed({ choices: [{ delta: { tool_calls: [{ index, id: "c", function: { name: "f" } }] } }] }), String(index)).toBe("protocol")
    expect(streamed({ choices: [{ delta: "hello" }] })).toBe("protocol")
    expect(streamed({ choices: [null] })).toBe("protocol")
    expect(streamed({ choices: "x" })).toBe("protocol")
    // A call's later pieces carry no name.
    expect(streamed({ choices: [{ delta: { tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: "" } }] } }] }, { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: "{}" } }] } }] })).not.toBe("protocol")
    const gemini = (body: unknown) => protocol(Gemini.wire.result("google", body))
    for (const body of [{ candidates: [] }, { candidates: [null] }, { candidates: [{ content: "hello" }] }]) expect(gemini(body), JSON.stringify(body)).toBe("protocol")
    // Anthropic's, Gemini's and Bedrock's arguments are objects: text there is no call (it was relayed on the OpenAI surface).
    expect(protocol(Anthropic.wire.result("anthropic", { content: [{ type: "tool_use", id: "t", name: "f", input: "not json{" }] }))).toBe("protocol")
    expect(gemini({ candidates: [{ content: { parts: [{ functionCall: { name: "f", args: "x" } }] } }] })).toBe("protocol")
  })

  // A never-drop-silently audit: a whole answer's call without an id got `call_<i>`, a streamed one none (the Anthropic
  // surface then opened a tool_use block with id "", which the client cannot answer on its next turn).
  it("a streamed call whose first piece has no id gets one by its index, as a whole answer's call by its position", () => {
    const decode = OpenAiCompatible.wire.events("openai")
    const first = decode({ event: "", data: JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 1, function: { name: "f", arguments: "" } }] } }] }) })
    expect(first).toEqual([{ _tag: "ToolCallDelta", index: 1, id: "call_1", name: "f", arguments: "" }])
    const later = decode({ event: "", data: JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 1, function: { arguments: "{}" } }] } }] }) })
    expect(later).toEqual([{ _tag: "ToolCallDelta", index: 1, arguments: "{}" }])
    expect((OpenAiCompatible.wire.result("openai", { choices: [{ message: { content: null, tool_calls: [{ type: "function", function: { name: "f", arguments: "{}" } }] } }] }) as ChatResult).toolCalls)
      .toEqual([{ id: "call_0", name: "f", arguments: "{}" }])
  })

  // A never-drop-silently audit: an image model's answer (inlineData) was an empty success, billed.
  it("a Gemini answer part no chat answer carries (an image, a file, code it ran) is a protocol error naming it, not dropped", () => {
    for (const part of [{ inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }, { executableCode: { language: "PYTHON", code: "print(1)" } }]) {
      const answer = Gemini.wire.result("google", { candidates: [{ content: { parts: [{ text: "Here:" }, part] }, finishReason: "STOP" }] })
      expect(answer).toBeInstanceOf(UpstreamError)
      expect((answer as UpstreamError).message).toContain(`parts[1] is ${Object.keys(part)[0]}`)
      const streamed = Gemini.wire.events("google")({ event: "", data: JSON.stringify({ candidates: [{ content: { parts: [part] } }] }) })
      expect(protocol(streamed)).toBe("protocol")
    }
    // The counts it reported stay with the failure: Google billed them (the engine records a failure's usage).
    const billed = Gemini.wire.result("google", {
      candidates: [{ content: { parts: [{ inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }] }, finishReason: "STOP" }],
      usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 1290 }
    })
    expect((billed as UpstreamError).usage).toMatchObject({ promptTokens: 12, completionTokens: 1290 })
    // A part holding only a signature (Gemini streams one) is no content.
    expect(Gemini.wire.events("google")({ event: "", data: JSON.stringify({ candidates: [{ content: { parts: [{ thoughtSignature: "s" }] } }] }) })).toEqual([])
  })

  it("arguments given as an object are taken as their JSON text (some compatible servers send them so)", () => {
    const decoded = OpenAiCompatible.wire.events("openai")({ event: "", data: JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 0, id: "t", function: { name: "f", arguments: { a: 1 } } }] } }] }) })
    expect(decoded).toEqual([{ _tag: "ToolCallDelta", index: 0, id: "t", name: "f", arguments: "{\"a\":1}" }])
  })
})
