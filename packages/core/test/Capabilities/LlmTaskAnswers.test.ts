/** Reading a task's answer from an upstream: the labels' scores of a classification. */
import { expect, it } from "vitest"
import type { CompletionResult } from "../../src/Capabilities/Completions.ts"
import { answers } from "../../src/Capabilities/LlmTasks.ts"

const answered = (content: unknown) => ({ content: JSON.stringify(content), provider: "p", model: "m", usage: {}, costUSD: 0 }) as unknown as CompletionResult

it("reads each label's first score whatever its case, and ignores the rest of a huge score object", () => {
  const scores: Record<string, unknown> = { SPAM: 3, spam: 99, Ham: 1 }
  for (let i = 0; i < 100_000; i++) scores[`other${i}`] = 1
  const result = answers.classify({ text: "t", labels: ["spam", "ham"], provider: "auto" } as any, answered({ label: "Spam", scores }))
  expect(result).toMatchObject({ label: "spam", scores: [{ label: "spam", score: 0.75 }, { label: "ham", score: 0.25 }] })
})
