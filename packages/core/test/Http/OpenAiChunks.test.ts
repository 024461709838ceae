/**
 * The OpenAI surface's stream chunks (`toChunks`): each is the JSON text of the whole chunk object, the
 * text-only chunk (written out directly) included, byte for byte as JSON.stringify writes it.
 */
import { describe, expect, it } from "vitest"
import type { StreamChunk } from "../../src/Engine/ProviderCalls.ts"
import { toChunks } from "../../src/Http/OpenAiRoutes.ts"

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
