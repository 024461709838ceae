import { Effect } from "effect"
import { expect, it } from "vitest"
import { countMessages, countText, roughPromptTokens } from "../src/Tokens.ts"

it("counts tokens with the o200k tokenizer, loaded on first use", async () => {
  expect(await Effect.runPromise(countText(""))).toBe(0)
  expect(await Effect.runPromise(countText("hello world, how are you?"))).toBe(7)
  const messages = [{ role: "user" as const, content: "hello world, how are you?" }, { role: "assistant" as const, content: "", toolCalls: [{ id: "1", name: "f", arguments: "{\"a\":1}" }] }]
  const n = await Effect.runPromise(countMessages(messages))
  expect(n).toBeGreaterThan(7 + 8)
  expect(roughPromptTokens(messages)).toBeGreaterThanOrEqual(7)
})
