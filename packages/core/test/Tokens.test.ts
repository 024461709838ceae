import { Effect } from "effect"
import { countTokens } from "gpt-tokenizer"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { countAll, COUNTED_CHARS, countMessages, countText, countTexts, exactCount, messageTokensNow, promptCharacters } from "../src/Tokens.ts"

it("counts tokens with the o200k tokenizer, loaded on first use", async () => {
  expect(await Effect.runPromise(countText(""))).toBe(0)
  expect(await Effect.runPromise(countText("hello world, how are you?"))).toBe(7)
  const messages = [{ role: "user" as const, content: "hello world, how are you?" }, { role: "assistant" as const, content: "", toolCalls: [{ id: "1", name: "f", arguments: "{\"a\":1}" }] }]
  const n = await Effect.runPromise(countMessages(messages))
  expect(n).toBe(7 + 4 + (await Effect.runPromise(countTexts(["", "f", "{\"a\":1}"]))) + 4)
  expect(await Effect.runPromise(countMessages(messages, ["more text"]))).toBe(n + countTokens("more text"))
  // Loaded now: the same count at once, no Effect.
  expect(messageTokensNow(messages)).toBe(n)
  // The bound without the tokenizer: every character counted (tool calls too) and each message's framing.
  expect(promptCharacters(messages)).toBe("hello world, how are you?".length + "f".length + "{\"a\":1}".length + 8)
  expect(promptCharacters(messages)).toBeGreaterThanOrEqual(n)
})

describe("text that is slow to tokenize", () => {
  /** A counter that records what it was given. */
  const recording = () => {
    const seen: Array<string> = []
    return { seen, count: (text: string) => (seen.push(text), text.length) }
  }

  it("gives the tokenizer no run without spaces longer than 64 characters", () => {
    const { count, seen } = recording()
    const text = `start ${"a".repeat(1_000)} middle ${"b".repeat(65)} end`
    expect(exactCount(count)(text)).toBe(text.length)
    expect(Math.max(...seen.map((s) => Math.max(...s.split(/\s/).map((w) => w.length))))).toBeLessThanOrEqual(64)
    // Ordinary text is one call, as before.
    expect(exactCount(countTokens)("hello world, how are you?")).toBe(7)
  })

  it("counts at most COUNTED_CHARS characters (and a word's length per sample) of a call, however long its texts", () => {
    const { count, seen } = recording()
    const texts = Array.from({ length: 50 }, (_, i) => `${i} `.repeat(100_000))
    const total = countAll(count)(texts)
    const given = seen.reduce((n, s) => n + s.length, 0)
    expect(given).toBeLessThanOrEqual(COUNTED_CHARS + 64 * 50)
    // The rate of the samples (1 here: the recording counter counts characters) times every character.
    expect(total).toBe(texts.reduce((n, t) => n + t.length, 0))
  })

  it("counts short calls exactly and estimates long ones within a few percent", async () => {
    const docs = path.join(__dirname, "../../../docs")
    const text = fs.readdirSync(docs).map((f) => fs.readFileSync(path.join(docs, f), "utf8")).join("\n")
    expect(text.length).toBeGreaterThan(3 * COUNTED_CHARS)
    const short = text.slice(0, COUNTED_CHARS)
    expect(await Effect.runPromise(countText(short))).toBe(exactCount(countTokens)(short))
    const exact = exactCount(countTokens)(text)
    const estimated = await Effect.runPromise(countText(text))
    expect(Math.abs(estimated - exact) / exact).toBeLessThan(0.05)
  })
})
