/** Work in turns of the event loop (Turns.ts): in order, every item once, the network let in between. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { lexical } from "../src/Ml/TextEmbedder.ts"
import { inTurns, inTurnsPromise } from "../src/Turns.ts"

describe("work in turns", () => {
  const drivers = {
    Effect: (...args: Parameters<typeof inTurnsPromise<number, number>>) => Effect.runPromise(inTurns(...args)),
    promise: (...args: Parameters<typeof inTurnsPromise<number, number>>) => inTurnsPromise(...args)
  }
  for (const [name, run] of Object.entries(drivers)) {
    it(`does every item once, in order, a turn for each run of items up to its size (${name})`, async () => {
      const turns: Array<number> = []
      let turn = 0
      let ticking = true
      const tick = () => {
        turn++
        if (ticking) setImmediate(tick)
      }
      setImmediate(tick)
      const out = await run([3, 3, 3, 10, 1], (n) => n, 6, (n) => {
        turns.push(turn)
        return n * 2
      })
      ticking = false
      expect(out).toEqual([6, 6, 6, 20, 2])
      // 3+3 in the first run (at once), then 3, then 10 (alone, larger than a run), then 1: four runs.
      expect(turns[0]).toBe(0)
      expect(turns[1]).toBe(turns[0])
      expect(new Set(turns).size).toBe(4)
    })
  }

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
