/**
 * Reranking with Okapi BM25, computed in-process (provider `local`): lexical relevance of each
 * document to the query (k1 = 1.2, b = 0.75), over lower-cased word tokens.
 */
import { Effect } from "effect"
import { Unprocessable } from "../Errors.ts"

const tokens = (s: string) => s.toLowerCase().normalize("NFKD").match(/[\p{L}\p{N}]+/gu) ?? []

export const bm25 = (query: string, documents: ReadonlyArray<string>, k1 = 1.2, b = 0.75): Array<number> => {
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
      const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5))
      score += idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * (d.length / (avg || 1))))
    }
    return Math.round(score * 1e6) / 1e6
  })
}

/** The refusal of a rerank that depends only on the request (answered before admission). */
export const checkProvider = (provider: string) =>
  provider === "auto" || provider === "local"
    ? Effect.void
    : Effect.fail(new Unprocessable({ message: `Reranking runs in-process with BM25 (provider local); provider ${provider} is not supported for rerank yet.` }))

export const rerank = (input: { readonly query: string; readonly documents: ReadonlyArray<string>; readonly topN: number; readonly provider: string }) =>
  Effect.zipRight(
    checkProvider(input.provider),
    Effect.sync(() => {
      const scores = bm25(input.query, input.documents)
      const results = scores
        .map((score, index) => ({ index, document: input.documents[index]!, score }))
        .sort((a, b) => b.score - a.score || a.index - b.index)
        .slice(0, input.topN)
      return { results, provider: "local", model: "bm25" }
    })
  )
