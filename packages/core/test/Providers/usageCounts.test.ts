/**
 * Token counts as adapters read them: only counts that are counts take part in an adapter's own
 * arithmetic, and a count the upstream leaves out stays out (the engine counts it, marked estimated),
 * never 0. A negative Gemini cache count once raised the prompt to a billion tokens.
 */
import { describe, expect, it } from "vitest"
import * as Anthropic from "../../src/Providers/Anthropic.ts"
import type { ChatResult } from "../../src/Providers/Chat.ts"
import * as Cohere from "../../src/Providers/Cohere.ts"
import * as Gemini from "../../src/Providers/Gemini.ts"
import { imagesOf } from "../../src/Providers/OpenAiMedia.ts"
import { Effect } from "effect"

const usageOf = (result: unknown) => (result as ChatResult).usage

describe("usage counts read by adapters", () => {
  const gemini = (usageMetadata: unknown) =>
    usageOf(Gemini.wire.result("google", { candidates: [{ content: { parts: [{ text: "hi" }] }, finishReason: "STOP" }], usageMetadata }))

  it("Gemini: a cache or thinking count that is no count takes no part; a missing candidates count stays out", () => {
    expect(gemini({ promptTokenCount: 10, candidatesTokenCount: 200, cachedContentTokenCount: -999_999_990 })).toEqual({ promptTokens: 10, completionTokens: 200 })
    expect(gemini({ promptTokenCount: 10, candidatesTokenCount: 200, thoughtsTokenCount: -200 })).toEqual({ promptTokens: 10, completionTokens: 200 })
    expect(gemini({ promptTokenCount: 10, candidatesTokenCount: 200, thoughtsTokenCount: 1.5 })).toEqual({ promptTokens: 10, completionTokens: 200 })
    expect(gemini({ promptTokenCount: 7 })).toEqual({ promptTokens: 7 })
    expect(gemini({ promptTokenCount: -7, candidatesTokenCount: 3 })).toBeUndefined()
    // Believable counts still do their arithmetic.
    expect(gemini({ promptTokenCount: 100, candidatesTokenCount: 20, cachedContentTokenCount: 60, thoughtsTokenCount: 5 }))
      .toEqual({ promptTokens: 40, completionTokens: 25, cacheReadTokens: 60, reasoningTokens: 5 })
  })

  it("Anthropic and Cohere: a missing output count stays out, not 0", () => {
    const anthropic = Anthropic.wire.result("anthropic", { content: [{ type: "text", text: "hi" }], stop_reason: "end_turn", usage: { input_tokens: 7 } })
    expect(usageOf(anthropic)).toEqual({ promptTokens: 7 })
    const cohere = Cohere.wire.result("cohere", { message: { content: [{ type: "text", text: "hi" }] }, finish_reason: "COMPLETE", usage: { billed_units: { input_tokens: 7 } } })
    expect(usageOf(cohere)).toEqual({ promptTokens: 7 })
  })

  it("OpenAI images: a token-billed answer's counts are kept only when both are counts", () => {
    const tokens = (usage: unknown) => Effect.runSync(imagesOf("openai", { data: [{ b64_json: "iVBORw0KGgo=" }], usage })).tokens
    expect(tokens({ input_tokens: 20, output_tokens: 272, total_tokens: 292 })).toEqual({ input: 20, output: 272, inputImages: 0 })
    expect(tokens({ input_tokens: 120, output_tokens: 272, input_tokens_details: { text_tokens: 20, image_tokens: 100 } })).toEqual({ input: 120, output: 272, inputImages: 100 })
    // Image tokens that are no count, or more than the input, take no part.
    expect(tokens({ input_tokens: 20, output_tokens: 272, input_tokens_details: { image_tokens: -5 } })).toEqual({ input: 20, output: 272, inputImages: 0 })
    expect(tokens({ input_tokens: 20, output_tokens: 272, input_tokens_details: { image_tokens: 999 } })).toEqual({ input: 20, output: 272, inputImages: 20 })
    for (const usage of [undefined, null, "x", { input_tokens: 20 }, { input_tokens: -1, output_tokens: 272 }, { input_tokens: 20, output_tokens: 1e300 }, { input_tokens: "20", output_tokens: 272 }]) {
      expect(tokens(usage), JSON.stringify(usage)).toBeUndefined()
    }
  })
})
