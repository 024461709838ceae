/** Local BM25: the same scores as the textbook form, which counts every word of every document. */
import { describe, expect, it } from "vitest"
import { bm25 } from "../../src/Capabilities/Rerank.ts"

const tokens = (s: string) => s.toLowerCase().normalize("NFKD").match(/[\p{L}\p{N}]+/gu) ?? []

/** Okapi BM25 as it is usually written: term frequencies and document frequencies of every word. */
const reference = (query: string, documents: ReadonlyArray<string>, k1 = 1.2, b = 0.75) => {
  const docs = documents.map(tokens)
  const avg = docs.reduce((n, d) => n + d.length, 0) / Math.max(1, docs.length)
  const df = new Map<string, number>()
  for (const d of docs) for (const t of new Set(d)) df.set(t, (df.get(t) ?? 0) + 1)
  const terms = [...new Set(tokens(query))]
  return docs.map((d) => {
    const tf = new Map<string, number>()
    for (const t of d) tf.set(t, (tf.get(t) ?? 0) + 1)
    let score = 0
    for (const t of terms) {
      const f = tf.get(t) ?? 0
      if (f === 0) continue
      const n = df.get(t) ?? 0
      score += Math.log(1 + (docs.length - n + 0.5) / (n + 0.5)) * (f * (k1 + 1)) / (f + k1 * (1 - b + b * (d.length / (avg || 1))))
    }
    return Math.round(score * 1e6) / 1e6
  })
}

describe("bm25", () => {
  it("scores as the textbook form does, on random texts over a small vocabulary", async () => {
    const vocabulary = ["alpha", "Beta", "gamma", "délta", "ε", "42", "zeta", "eta", "theta", "iota"]
    let seed = 11
    const pick = () => vocabulary[(seed = (seed * 48271) % 2147483647) % vocabulary.length]!
    const text = (n: number) => Array.from({ length: n }, pick).join(seed % 3 === 0 ? ", " : " ")
    for (let round = 0; round < 50; round++) {
      const documents = Array.from({ length: 1 + (round % 7) }, (_, i) => text((i * 13 + round) % 40))
      const query = text(1 + (round % 5))
      expect(await bm25(query, documents), `round ${round}`).toEqual(reference(query, documents))
    }
    expect(await bm25("nothing", ["", "x y"])).toEqual([0, 0])
  })

  it("lets the event loop in between long documents (a request's 10 MB of them held it for the whole scoring)", async () => {
    const documents = Array.from({ length: 4 }, (_, i) => `alpha ${"beta ".repeat(80_000)} ${i}`)
    const order: Array<string> = []
    setImmediate(() => order.push("another turn"))
    const scored = bm25("alpha beta", documents).then((s) => {
      order.push("scored")
      return s
    })
    expect(await scored).toEqual(reference("alpha beta", documents))
    expect(order).toEqual(["another turn", "scored"])
  })
})
