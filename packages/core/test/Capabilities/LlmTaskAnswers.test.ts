/** Reading a task's answer from an upstream: the labels' scores of a classification, and a JSON answer in or out of a code fence. */
import { expect, it } from "vitest"
import type { CompletionResult } from "../../src/Capabilities/Completions.ts"
import { answers, parseJsonAnswer } from "../../src/Capabilities/LlmTasks.ts"

const answered = (content: unknown) => ({ content: JSON.stringify(content), provider: "p", model: "m", usage: {}, costUSD: 0 }) as unknown as CompletionResult

it("reads each label's first score whatever its case, and ignores the rest of a huge score object", () => {
  const scores: Record<string, unknown> = { SPAM: 3, spam: 99, Ham: 1 }
  for (let i = 0; i < 100_000; i++) scores[`other${i}`] = 1
  const result = answers.classify({ text: "t", labels: ["spam", "ham"], provider: "auto" } as any, answered({ label: "Spam", scores }))
  expect(result).toMatchObject({ label: "spam", scores: [{ label: "spam", score: 0.75 }, { label: "ham", score: 0.25 }] })
})

it("answers the best-scored label: a model whose label and scores disagree is answered by its scores", () => {
  const input = { text: "t", labels: ["a", "b"], provider: "auto" } as any
  expect(answers.classify(input, answered({ label: "a", scores: { a: -1, b: 2 } }))).toMatchObject({ label: "b", scores: [{ label: "b", score: 1 }, { label: "a", score: 0 }] })
  expect(answers.classify(input, answered({ label: "b", scores: { a: 0.9, b: 0.1 } }))).toMatchObject({ label: "a" })
  // Equal scores: the model's label first.
  expect(answers.classify(input, answered({ label: "b", scores: { a: 0.5, b: 0.5 } }))).toMatchObject({ label: "b", scores: [{ label: "b" }, { label: "a" }] })
  // No scores: the model's label, scored 1.
  expect(answers.classify(input, answered({ label: "b" }))).toMatchObject({ label: "b", scores: [{ label: "b", score: 1 }, { label: "a", score: 0 }] })
})

/** The JSON of an answer as the earlier pattern read it (the first fence, an optional json tag). */
const byPattern = (content: string): unknown => {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(content)
  const text = (fenced ? fenced[1]! : content).trim()
  const start = text.indexOf("{")
  const end = text.lastIndexOf("}")
  if (start === -1 || end <= start) throw new Error("no JSON object in the answer")
  return JSON.parse(text.slice(start, end + 1))
}
const outcome = (read: (s: string) => unknown, content: string) => {
  try {
    return { value: read(content) }
  } catch {
    return { refused: true }
  }
}

it("reads a JSON answer as the earlier pattern did, on answers made of fences, tags, spaces and objects", () => {
  const pieces = ["```", "json", " ", "\n", "{\"a\":1}", "{\"b\":[2]}", "x", "`"]
  let seed = 5
  const pick = () => pieces[(seed = (seed * 48271) % 2147483647) % pieces.length]!
  for (let round = 0; round < 3_000; round++) {
    const content = Array.from({ length: 1 + (round % 9) }, pick).join("")
    expect(outcome(parseJsonAnswer, content), JSON.stringify(content)).toEqual(outcome(byPattern, content))
  }
})

it("reads an unclosed fence followed by a million spaces in linear time", () => {
  // The pattern backtracked over the spaces from every position: quadratic (200,000 spaces took 3 s).
  const started = performance.now()
  expect(parseJsonAnswer("```" + " ".repeat(1_000_000) + "{\"a\":1}")).toEqual({ a: 1 })
  expect(performance.now() - started).toBeLessThan(1_000)
})
