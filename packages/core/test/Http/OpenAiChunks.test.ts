/**
 * The OpenAI surface's stream chunks (`toChunks`): each is the JSON text of the whole chunk object, the
 * text-only chunk (written out directly) included, byte for byte as JSON.stringify writes it.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import type { CompletionResult, StreamChunk } from "../../src/Engine/ProviderCalls.ts"
import { ChatCompletionBody, chatInputOf, toChatCompletion, toChunks } from "../../src/Http/OpenAiRoutes.ts"
import { decoderNow } from "../../src/Http/Route.ts"

const chunkOf = (text: string) => {
  const parsed = JSON.parse(text)
  // the text is exactly what JSON.stringify makes of what it parses to (key order, escapes, no spaces)
  expect(text).toBe(JSON.stringify(parsed))
  return parsed
}

describe("toChunks", () => {
  const { convert, opening } = toChunks("chatcmpl-1", "gpt-4o-mini", true)
  const head = chunkOf(opening)

  it("writes text chunks as the whole chunk object, with every character escaped as JSON", () => {
    for (const content of ["Hello", "", 'quote " backslash \\ newline \n tab \t', "unicode é 漢字 🙂", "\u0000\u001f\u2028\u2029", "</script>"]) {
      const [text, ...rest] = convert({ content, done: false })
      expect(rest).toEqual([])
      expect(chunkOf(text!)).toEqual({
        id: "chatcmpl-1",
        object: "chat.completion.chunk",
        created: head.created,
        model: "gpt-4o-mini",
        choices: [{ logprobs: null, index: 0, delta: { content }, finish_reason: null }]
      })
    }
  })

  it("an error that ends the stream is an error event labelled with its code: an upstream's failure, a timeout, a stop of the gateway's own", () => {
    const errorOf = (c: StreamChunk) => JSON.parse(convert(c)[0]!).error
    expect(errorOf({ content: "", done: true, error: "boom" })).toEqual({ message: "boom", type: "api_error", param: null, code: "UpstreamFailed" })
    expect(errorOf({ content: "", done: true, error: "quiet", errorCode: "UpstreamTimeout" })).toEqual({ message: "quiet", type: "api_error", param: null, code: "UpstreamTimeout" })
    expect(errorOf({ content: "", done: true, error: "stopping", errorCode: "Busy" })).toEqual({ message: "stopping", type: "server_error", param: null, code: "Busy" })
  })

  it("the text chunk's text is the general form's: a chunk with an empty delta extra takes the general path", () => {
    const direct = convert({ content: "same", done: false })[0]!
    // Only delta or choice fields (or tool calls) send a text chunk down the general path since chunk-level fields exist.
    const general = convert({ content: "same", done: false, extra: { delta: {} } } as StreamChunk)[0]!
    expect(direct).toBe(general)
    expect(convert({ content: "same", done: false, extra: {} } as StreamChunk)[0]!).toBe(direct)
    // With the upstream chunk's own fields, which both forms put after the head.
    const body = { system_fingerprint: "fp_1", obfuscation: "a\"b" }
    const withOwn = convert({ content: "same", done: false, extra: { body } })[0]!
    expect(withOwn).toBe(convert({ content: "same", done: false, extra: { body, delta: {} } })[0]!)
    expect(convert({ content: "same", done: false, extra: { body: {} } })[0]!).toBe(direct)
    expect(Object.keys(chunkOf(withOwn))).toEqual(["id", "object", "created", "model", "system_fingerprint", "obfuscation", "choices"])
  })

  it("the final chunks carry the upstream's trailing chunk fields", () => {
    const [finish, usage] = convert({ content: "", done: true, finishReason: "stop", promptTokens: 1, completionTokens: 1, extra: { body: { system_fingerprint: "fp_2" } } }).map(chunkOf)
    expect([finish.system_fingerprint, usage.system_fingerprint]).toEqual(["fp_2", "fp_2"])
  })

  it("tool calls, extras and the final chunks keep their fields", () => {
    const tool = chunkOf(convert({ content: "", done: false, toolCalls: [{ index: 0, id: "c1", name: "f", arguments: "{}" }] })[0]!)
    expect(tool.choices[0].delta).toEqual({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] })
    const extra = chunkOf(convert({ content: "", done: false, extra: { delta: { reasoning_content: "r" }, choice: { logprobs: { content: [] } } } })[0]!)
    expect(extra.choices[0]).toEqual({ logprobs: { content: [] }, index: 0, delta: { reasoning_content: "r" }, finish_reason: null })
    const [finish, usage] = convert({ content: "", done: true, finishReason: "length", promptTokens: 3, completionTokens: 2, model: "gpt-4o-mini-2024-07-18" }).map(chunkOf)
    expect(finish).toMatchObject({ model: "gpt-4o-mini-2024-07-18", choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "length" }] })
    expect(usage).toMatchObject({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })
  })
})

describe("the OpenAI surface's usage and signatures", () => {
  const result: CompletionResult = {
    provider: "google",
    model: "gemini-3.1-pro-preview",
    content: "",
    message: { role: "assistant", content: "", toolCalls: [] },
    toolCalls: [{ id: "c1", name: "now", arguments: "{}", signature: "sig" }],
    finishReason: "tool_calls",
    usage: { promptTokens: 20, completionTokens: 10, totalTokens: 150, estimated: false, cacheCreationTokens: 100, cacheReadTokens: 20, reasoningTokens: 4 },
    costUSD: 0,
    costKnown: true,
    latencyMs: 1,
    fallbacks: []
  }

  it("prompt_tokens counts the cached prompt, named in prompt_tokens_details; reasoning tokens in completion_tokens_details", () => {
    const expected = { prompt_tokens: 140, completion_tokens: 10, total_tokens: 150, prompt_tokens_details: { cached_tokens: 20 }, completion_tokens_details: { reasoning_tokens: 4 } }
    expect(toChatCompletion("chatcmpl-1", result).usage).toEqual(expected)
    const { convert } = toChunks("chatcmpl-1", "m", true)
    const [, usageChunk] = convert({ content: "", done: true, finishReason: "stop", promptTokens: 20, completionTokens: 10, cacheCreationTokens: 100, cacheReadTokens: 20, reasoningTokens: 4 })
    expect(JSON.parse(usageChunk!).usage).toEqual(expected)
  })

  it("a tool call's signature goes out as Gemini's OpenAI-compatible API puts it, and comes back from there", () => {
    const answer = toChatCompletion("chatcmpl-1", result)
    const call = answer.choices[0]!.message.tool_calls![0]!
    expect(call).toEqual({ id: "c1", type: "function", function: { name: "now", arguments: "{}" }, extra_content: { google: { thought_signature: "sig" } } })
    const body = Schema.decodeUnknownSync(ChatCompletionBody)({
      model: "gemini-3.1-pro-preview",
      messages: [{ role: "user", content: "time?" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: "c1", content: "12:00" }]
    })
    const input = chatInputOf(body)
    if (!("messages" in input)) throw input
    expect(input.messages[1]!.toolCalls).toEqual([{ id: "c1", name: "now", arguments: "{}", signature: "sig" }])
    const { convert } = toChunks("chatcmpl-1", "m", false)
    const [streamed] = convert({ content: "", done: false, toolCalls: [{ index: 0, id: "c1", name: "now", arguments: "", signature: "sig" }] })
    expect(JSON.parse(streamed!).choices[0].delta.tool_calls[0].extra_content).toEqual({ google: { thought_signature: "sig" } })
  })

  const decodeBody = decoderNow(ChatCompletionBody, "request body")
  const inputOf = (body: Record<string, unknown>) => {
    const decoded = decodeBody({ model: "claude-haiku-4-5", ...body })
    return "_tag" in decoded && decoded._tag === "BadRequest" ? decoded : chatInputOf(decoded as typeof ChatCompletionBody.Type)
  }

  it("a part's cache_control is a cache breakpoint; a field a part, stream_options or response_format does not carry is refused by name", () => {
    const input = inputOf({ messages: [{ role: "system", content: [{ type: "text", text: "long rules", cache_control: { type: "ephemeral" } }, { type: "text", text: " more" }] }, { role: "user", content: "hi" }] })
    if (!("messages" in input)) throw input
    expect(input.messages[0]!.parts).toEqual([{ type: "text", text: "long rules", cache: {} }, { type: "text", text: " more" }])
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ messages: [{ role: "user", content: [{ type: "text", text: "a", extra: 1 }] }] }, "messages.0.content.0.extra: is unexpected"],
      [{ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png", size: 2 } }] }] }, "messages.0.content.0.image_url.size: is unexpected"],
      [{ messages: [{ role: "user", content: "a" }], stream: true, stream_options: { include_usage: true, chunk_size: 2 } }, "stream_options.chunk_size: is unexpected"],
      [{ messages: [{ role: "user", content: "a" }], response_format: { type: "json_schema", json_schema: { name: "x", schema: {}, extra: true } } }, "response_format.json_schema.extra: is unexpected"],
      [{ messages: [{ role: "user", content: "a" }, { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" }, index: 0, extra: 1 }] }] }, "messages.1.tool_calls.0.extra: is unexpected"],
      [{ messages: [{ role: "user", content: "a" }], stream_options: { include_usage: true } }, "stream_options is only allowed when stream is true"],
      [{ messages: [{ role: "user", content: "a" }], max_tokens: 11, max_completion_tokens: 22 }, "max_tokens and max_completion_tokens differ: send one of them"]
    ]
    for (const [body, message] of refusals) expect(inputOf(body), message).toMatchObject({ _tag: "BadRequest", message: expect.stringContaining(message) })
    // One problem per field: not every alternative of the field's schema.
    expect(inputOf({ messages: [{ role: "user", content: "a" }], n: 2 })).toMatchObject({
      message: "Invalid request body: n: n must be 1: the gateway returns one choice per call (send n calls)"
    })
  })

  it("include_obfuscation: false drops the upstream's obfuscation field from the chunks, and only that", () => {
    const extra = { body: { system_fingerprint: "fp", obfuscation: "xyz" } }
    const chunkWith = (without: boolean) => {
      const { convert } = toChunks("chatcmpl-1", "m", false, without)
      return JSON.parse(convert({ content: "hi", done: false, extra })[0]!)
    }
    expect(chunkWith(false)).toMatchObject({ system_fingerprint: "fp", obfuscation: "xyz" })
    const without = chunkWith(true)
    expect(without.system_fingerprint).toBe("fp")
    expect("obfuscation" in without).toBe(false)
  })
})
