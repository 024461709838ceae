/**
 * Pinecone Inference (a bespoke provider): embeddings and rerank, on the engine's embedding and
 * rerank wires.
 *
 * References: https://docs.pinecone.io/reference/api/2025-04/inference/generate-embeddings
 * (`POST /embed` {model, parameters {input_type, truncate}, inputs [{text}]} -> {data [{values}],
 * usage {total_tokens}}) and https://docs.pinecone.io/reference/api/2025-04/inference/rerank
 * (`POST /rerank` {model, query, documents [{text}], top_n, return_documents} -> {data [{index,
 * score}], usage {rerank_units}}). Both take the key in `Api-Key` (the catalogue's auth style
 * `api-key`) and the API version in `X-Pinecone-API-Version`.
 */
import { checked, type EmbeddingWire } from "./Embeddings.ts"
import { authHeaders } from "./internal/http.ts"
import { count, wireOf } from "./Rerank.ts"
import type { Served } from "./Served.ts"

/** The API version the wire follows; Pinecone answers in the version a request names. */
export const API_VERSION = "2025-04"

const versioned = { "X-Pinecone-API-Version": API_VERSION }

const text = (t: string) => ({ text: t })

/** Embeds documents to index ("passage"); inputs longer than the model takes are cut at the end rather than refused. */
export const embeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: `${target.provider.endpoint}/embed`,
    headers: { ...authHeaders(target.provider), ...versioned },
    body: { model: target.model.id, parameters: { input_type: "passage", truncate: "END" }, inputs: texts.map(text) }
  }),
  // A sparse model answers `sparse_values` instead of `values`: not vectors the gateway returns, so a protocol error.
  result: (provider, body, n) =>
    checked(provider, Array.isArray(body?.data) ? body.data.map((d: any) => d?.values) : undefined, n, body?.usage?.total_tokens)
}

/** Pinecone bills rerank by request ("rerank units": one per query over up to 100 documents), like Cohere's searches. */
export const rerank = wireOf({
  path: "/rerank",
  document: text,
  headers: versioned,
  fixed: { return_documents: false },
  documents: "documents",
  topN: "top_n",
  results: "data",
  score: "score",
  billing: "searches",
  usage: (body) => ({ tokens: undefined, searchUnits: count(body?.usage?.rerank_units) })
})

export const served: Served = { embeddings, rerank }
