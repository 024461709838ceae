/** Work in turns of the event loop (Turns.ts): in order, every item once, the network let in between. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { lexical } from "../src/Ml/TextEmbedder.ts"
import { inTurns } from "../src/Turns.ts"

describe("work in turns", () => {
  it("does every item once, in order, a turn for each run of items up to its size", async () => {
    const turns: Array<number> = []
    let turn = 0
    const ticking = setInterval(() => turn++, 0)
    const out = await Effect.runPromise(inTurns([3, 3, 3, 10, 1], (n) => n, 6, (n) => {
      turns.push(turn)
      return n * 2
    }))
    clearInterval(ticking)
    expect(out).toEqual([6, 6, 6, 20, 2])
    // 3+3 in the first run, then 3, then 10 (alone, larger than a run), then 1: four runs.
    expect(new Set(turns).size).toBeGreaterThanOrEqual(2)
  })

  it("lets a timer in while 2,048 texts of 5,000 characters are hashed (the local embedder of /v1/embeddings)", async () => {
    const texts = Array.from({ length: 2048 }, (_, i) => `word${i} `.repeat(700))
    let ticks = 0
    const timer = setInterval(() => ticks++, 1)
    const vectors = await Effect.runPromise(lexical.embed(texts))
    clearInterval(timer)
    expect(vectors).toHaveLength(2048)
    // About 10 MB hashed 100,000 characters a turn: the timer ran between the turns, not only after the last.
    expect(ticks).toBeGreaterThan(20)
  })
})
