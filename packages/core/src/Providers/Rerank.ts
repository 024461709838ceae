/**
 * Rerank wires: each vendor's rerank API as data and pure functions that the engine
 * (Engine/ProviderCalls.ts `rerank`) runs with the same transport, fallback and usage handling as
 * chat and embeddings. The four vendors differ only in names (the documents field, the result
 * count field, where results, scores and usage live), so one wire is built per vendor from that.
 *
 * References: Cohere https://docs.cohere.com/reference/rerank (v2: results[{index, relevance_score}],
 * meta.billed_units.search_units), Voyage https://docs.voyageai.com/reference/reranker-api
 * (data[{index, relevance_score}], usage.total_tokens), Jina https://jina.ai/reranker
 * (results[{index, relevance_score}], usage.total_tokens), Mixedbread
 * https://www.mixedbread.com/api-reference/endpoints/reranking (POST /v1/reranking, input, top_k,
 * data[{index, score}], usage.total_tokens).
 */
import type { Target, WireRequest } from "./Chat.ts"
import { authHeaders } from "./internal/http.ts"
import { protocolError, type UpstreamError } from "./UpstreamError.ts"

export interface RerankAnswer {
  /** Best first: the index of each document in the request, and its relevance score. */
  readonly ranked: ReadonlyArray<{ readonly index: number; readonly score: number }>
  /** Tokens as the upstream reported them; undefined when it reports none. */
  readonly tokens: number | undefined
  /** Search units billed, for vendors that bill per search (Cohere); undefined otherwise. */
  readonly searchUnits: number | undefined
}

export interface RerankWire {
  /**
   * What the vendor bills by, which the catalogued model's `inputPer1kUSD` prices: tokens, or
   * searches (Cohere: one search is a query with up to 100 documents; the price is per 1K searches).
   */
  readonly billing: "tokens" | "searches"
  readonly request: (target: Target, query: string, documents: ReadonlyArray<string>, topN: number) => WireRequest
  /** A 2xx JSON answer for `count` documents -> the ranking, or a protocol error. */
  readonly result: (provider: string, body: any, count: number) => RerankAnswer | UpstreamError
}

/** A vendor's names for the same exchange. */
export interface RerankDialect {
  readonly path: string
  /** How one document is sent, when not as the plain string (Pinecone: `{text}`). */
  readonly document?: (text: string) => unknown
  /** Headers the vendor needs beside its credential (Pinecone's API version). */
  readonly headers?: Readonly<Record<string, string>>
  /** Fixed body fields the vendor needs (Pinecone: `return_documents: false`). */
  readonly fixed?: Readonly<Record<string, unknown>>
  readonly documents: "documents" | "input"
  readonly topN: "top_n" | "top_k"
  readonly results: "results" | "data"
  readonly score: "relevance_score" | "score"
  readonly billing: RerankWire["billing"]
  readonly usage: (body: any) => Pick<RerankAnswer, "tokens" | "searchUnits">
}

export const count = (n: unknown) => (typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined)

/** A rerank wire from a vendor's dialect. */
export const wireOf = (d: RerankDialect): RerankWire => ({
  billing: d.billing,
  request: (target, query, documents, topN) => ({
    url: `${target.provider.endpoint}${d.path}`,
    headers: { ...authHeaders(target.provider), ...d.headers },
    body: {
      model: target.model.id,
      query,
      [d.documents]: d.document ? documents.map(d.document) : documents,
      [d.topN]: Math.min(topN, documents.length),
      ...d.fixed
    }
  }),
  result: (provider, body, documentCount) => {
    const items: unknown = body?.[d.results]
    if (!Array.isArray(items)) return protocolError(provider, `no ${d.results} array in the rerank answer`)
    const ranked: Array<{ index: number; score: number }> = []
    const seen = new Set<number>()
    for (const item of items) {
      const index = item?.index
      const score = item?.[d.score]
      if (!Number.isInteger(index) || index < 0 || index >= documentCount || typeof score !== "number" || !Number.isFinite(score)) {
        return protocolError(provider, `a rerank result needs an index below ${documentCount} and a numeric ${d.score}`)
      }
      // One result per document: the same document three times was answered as three.
      if (seen.has(index)) return protocolError(provider, `the rerank answer ranks document ${index} more than once`)
      seen.add(index)
      ranked.push({ index, score })
    }
    ranked.sort((a, b) => b.score - a.score || a.index - b.index)
    return { ranked, ...d.usage(body) }
  }
})

const totalTokens = (body: any) => ({ tokens: count(body?.usage?.total_tokens), searchUnits: undefined })

export const cohereRerank = wireOf({
  path: "/rerank",
  documents: "documents",
  topN: "top_n",
  results: "results",
  score: "relevance_score",
  billing: "searches",
  usage: (body) => ({ tokens: count(body?.meta?.tokens?.input_tokens), searchUnits: count(body?.meta?.billed_units?.search_units) })
})

export const voyageRerank = wireOf({
  path: "/rerank",
  documents: "documents",
  topN: "top_k",
  results: "data",
  score: "relevance_score",
  billing: "tokens",
  usage: totalTokens
})

export const jinaRerank = wireOf({
  path: "/rerank",
  documents: "documents",
  topN: "top_n",
  results: "results",
  score: "relevance_score",
  billing: "tokens",
  usage: totalTokens
})

export const mixedbreadRerank = wireOf({
  path: "/reranking",
  documents: "input",
  topN: "top_k",
  results: "data",
  score: "score",
  billing: "tokens",
  usage: totalTokens
})
