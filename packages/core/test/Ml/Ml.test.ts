/** The in-process analysers: real models from npm packages, checked on text they never saw. */
import { Effect } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import { readable } from "../../src/Ml/Nlp.ts"
import * as Sentiment from "../../src/Ml/Sentiment.ts"
import * as TaskClassifier from "../../src/Ml/TaskClassifier.ts"
import { taskExamples, TaskTypes } from "../../src/Ml/taskExamples.data.ts"

const analyze = (text: string) => Effect.runPromise(Effect.flatMap(Sentiment.Sentiment, (s) => s.analyze(text)).pipe(Effect.provide(Sentiment.layer)))

describe("sentiment (wink-nlp)", () => {
  it("scores positive, negative and neutral text, with negation and emoji", async () => {
    expect(await analyze("I absolutely love this, the support team was wonderful!")).toMatchObject({ label: "positive" })
    expect(await analyze("This was a terrible, frustrating experience.")).toMatchObject({ label: "negative" })
    expect(await analyze("The invoice is attached to this message.")).toMatchObject({ label: "neutral", score: 0 })
    expect((await analyze("The food was not good.")).label).toBe("negative")
    expect((await analyze("Shipping was fast 😀")).score).toBeGreaterThan(0)
  })
  it("scores each sentence within -1..1", async () => {
    const r = await analyze("The screen is gorgeous. The battery is awful. It ships in a box.")
    expect(r.sentences.map((s) => s.label)).toEqual(["positive", "negative", "neutral"])
    for (const s of [r, ...r.sentences]) {
      expect(s.score).toBeGreaterThanOrEqual(-1)
      expect(s.score).toBeLessThanOrEqual(1)
    }
  })
})

describe("sentiment of many sentences", () => {
  it("lists the first 100 sentences and counts them all", async () => {
    const r = await analyze("Good. Bad. ".repeat(150))
    expect(r.sentenceCount).toBe(300)
    expect(r.sentences).toHaveLength(Sentiment.MAX_SENTENCES)
    expect(r.sentences.slice(0, 2).map((s) => s.label)).toEqual(["positive", "negative"])
  })
})

describe("task classifier (naive Bayes)", () => {
  let classify: (text: string) => TaskClassifier.TaskClassification
  beforeAll(async () => {
    classify = await Effect.runPromise(TaskClassifier.train())
  })
  // Held out: none of these is in taskExamples.data.ts.
  const heldOut: ReadonlyArray<readonly [string, (typeof TaskTypes)[number]]> = [
    ["Write a Kotlin function that parses a CSV file", "code"],
    ["My Python script throws KeyError on line 12, how do I fix it?", "code"],
    ["How do I center a div with CSS flexbox?", "code"],
    ["What is 15 squared minus 40?", "math"],
    ["Solve for x: 2x^2 - 8 = 0", "math"],
    ["Calculate the area of a circle with radius 4", "math"],
    ["Who wrote the Declaration of Independence?", "research"],
    ["What are the known health effects of caffeine according to studies?", "research"],
    ["Write a poem about the ocean at night", "creative"],
    ["Tell me a story about a dragon who is afraid of fire", "creative"],
    ["Compare the risks and benefits of these two investment options", "analysis"],
    ["Evaluate our quarterly numbers and explain the drop in revenue", "analysis"],
    ["Summarize the following article in two sentences", "summarization"],
    ["Give me the key points of this report", "summarization"],
    ["Translate 'see you tomorrow' into German", "translation"],
    ["How do you say 'where is the hospital' in Spanish?", "translation"],
    ["Any ideas for a fun weekend with friends?", "general"],
    ["What should I wear to a summer wedding?", "general"]
  ]

  it("classifies held-out requests with at least 80% accuracy", () => {
    const wrong = heldOut.filter(([text, label]) => classify(text).taskType !== label)
    expect(wrong.length / heldOut.length, JSON.stringify(wrong.map(([t, l]) => [t, l, classify(t).taskType]))).toBeLessThanOrEqual(0.2)
  })
  it("answers probabilities over every task type that sum to 1, best first", () => {
    const r = classify("Implement quicksort in C++")
    expect(r).toMatchObject({ taskType: "code", recognised: true })
    expect(r.scores.map((s) => s.taskType).sort()).toEqual([...TaskTypes].sort())
    expect(r.scores.reduce((n, s) => n + s.probability, 0)).toBeCloseTo(1, 3)
    expect(r.confidence).toBe(r.scores[0]!.probability)
    for (let i = 1; i < r.scores.length; i++) expect(r.scores[i - 1]!.probability).toBeGreaterThanOrEqual(r.scores[i]!.probability)
  })
  it("says when it knows none of the words (default general, confidence 0)", () => {
    expect(classify("zxqv blorf")).toMatchObject({ taskType: "general", confidence: 0, recognised: false })
  })
  it("learns from its examples: a classifier trained without translation never answers it", async () => {
    const without = await Effect.runPromise(TaskClassifier.train({ ...taskExamples, translation: ["placeholder words only"] }))
    expect(without("Translate this sentence into French").taskType).not.toBe("translation")
  })
})

describe("text the NLP pipeline is slow on", () => {
  it("cuts runs without spaces longer than 40 characters, and leaves words alone", () => {
    expect(readable("a short sentence, with words.")).toBe("a short sentence, with words.")
    expect(readable("x".repeat(40))).toBe("x".repeat(40))
    expect(readable(`see ${"y".repeat(85)} end`)).toBe(`see ${"y".repeat(40)} ${"y".repeat(40)} yyyyy end`)
    // Characters outside the BMP are not split in half.
    expect(readable("😀".repeat(41))).toBe(`${"😀".repeat(40)} 😀`)
  })

  it("classifies a long prompt by its beginning and its end, and reads hostile runs", async () => {
    const classify = await Effect.runPromise(TaskClassifier.train())
    const code = "Write a Kotlin function that parses a CSV file. "
    const middle = "Translate 'see you tomorrow' into German. ".repeat(25_000)
    expect(classify(middle).taskType).toBe("translation")
    // Only the first 10,000 and the last 2,000 characters are read: the million in between are not.
    expect(classify(`${code.repeat(220)}${middle}${code.repeat(50)}`).taskType).toBe("code")
    for (const run of ["a".repeat(100_000), "a.".repeat(50_000), "a-".repeat(50_000)]) expect(classify(run).taskType).toBeDefined()
  })

  it("scores hostile runs (a.a.a…, a-a-a…) of the longest accepted text", async () => {
    for (const run of ["a.".repeat(50_000), "a-".repeat(50_000), "b".repeat(100_000)]) {
      const result = await analyze(run)
      expect(result.label).toBe("neutral")
    }
  })
})
