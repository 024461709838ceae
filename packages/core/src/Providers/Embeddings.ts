/**
 * Embedding wires: OpenAI-compatible `/embeddings` (also Voyage, Jina and Mixedbread, which speak
 * the same wire format), Cohere v2 `/embed`, Nomic `/embedding/text` and Gemini
 * `batchEmbedContents`, as data and pure functions that the engine (Engine/ProviderCalls.ts) runs
 * with the same transport, fallback and usage handling as chat. The registry (Registry.ts) says
 * which provider uses which.
 */
import type { Target, WireRequest } from "./Chat.ts"
import { authHeaders } from "./internal/http.ts"
import { protocolError, type UpstreamError } from "./UpstreamError.ts"

export interface EmbeddingResult {
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  /** Input tokens as the upstream reported them; undefined when it reports none. */
  readonly promptTokens: number | undefined
}

export interface EmbeddingWire {
  readonly request: (target: Target, texts: ReadonlyArray<string>) => WireRequest
  /** A 2xx JSON answer for `count` texts -> the vectors, or a protocol error. */
  readonly result: (provider: string, body: any, count: number) => EmbeddingResult | UpstreamError
}

/** More dimensions than any embedding model has (OpenAI's largest 3,072): a longer vector is no embedding. */
const MAX_DIMENSIONS = 16_384

const isVector = (v: unknown): v is Array<number> =>
  Array.isArray(v) && v.length > 0 && v.length <= MAX_DIMENSIONS && v.every((x) => typeof x === "number" && Number.isFinite(x))

/**
 * Vectors and a token count as read from any vendor's answer, checked: one vector per text, each of
 * finite numbers (JSON's `1e400` parses as Infinity, which a client got as `null`), all of one
 * length from 1 to MAX_DIMENSIONS; anything else is the vendor's protocol error.
 */
export const checked = (provider: string, vectors: unknown, count: number, tokens: unknown): EmbeddingResult | UpstreamError => {
  if (!Array.isArray(vectors) || vectors.length !== count) return protocolError(provider, `expected ${count} embeddings`)
  const index = vectors.findIndex((v) => !isVector(v))
  if (index !== -1) return protocolError(provider, `embedding ${index} is not a vector of 1 to ${MAX_DIMENSIONS} finite numbers`)
  const dimensions = (vectors[0] as Array<number> | undefined)?.length
  const other = vectors.findIndex((v: Array<number>) => v.length !== dimensions)
  if (other !== -1) return protocolError(provider, `embedding ${other} has ${vectors[other].length} dimensions where embedding 0 has ${dimensions}`)
  return { vectors, promptTokens: typeof tokens === "number" ? tokens : undefined }
}

export const openAiEmbeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: `${target.provider.endpoint}/embeddings`,
    headers: authHeaders(target.provider),
    body: { model: target.model.id, input: texts }
  }),
  result: (provider, body, count) => {
    const tokens = body?.usage?.prompt_tokens ?? body?.usage?.total_tokens
    if (!Array.isArray(body?.data)) return checked(provider, undefined, count, tokens)
    const data: Array<any> = body.data
    // In the order of their `index` (their own order when they give none), each index once.
    const vectors: Array<unknown> = new Array(data.length)
    for (const [position, d] of data.entries()) {
      const i = d?.index ?? position
      if (!Number.isInteger(i) || i < 0 || i >= data.length || i in vectors) {
        return protocolError(provider, `an embedding's index ${JSON.stringify(i)} is not one of 0 to ${data.length - 1}, each once`)
      }
      vectors[i] = d?.embedding
    }
    return checked(provider, vectors, count, tokens)
  }
}

/** Cohere v2 `/embed` (https://docs.cohere.com/reference/embed): float vectors for documents to search. */
export const cohereEmbeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: `${target.provider.endpoint}/embed`,
    headers: authHeaders(target.provider),
    body: { model: target.model.id, texts, input_type: "search_document", embedding_types: ["float"] }
  }),
  result: (provider, body, count) => checked(provider, body?.embeddings?.float, count, body?.meta?.billed_units?.input_tokens)
}

/** Nomic Atlas `/embedding/text` (https://docs.nomic.ai/reference/endpoints/nomic-embed-text): vectors for documents to search. */
export const nomicEmbeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: `${target.provider.endpoint}/embedding/text`,
    headers: authHeaders(target.provider),
    body: { model: target.model.id, texts, task_type: "search_document" }
  }),
  result: (provider, body, count) => checked(provider, body?.embeddings, count, body?.usage?.total_tokens)
}

export const geminiEmbeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: `${target.provider.endpoint}/models/${encodeURIComponent(target.model.id)}:batchEmbedContents`,
    headers: authHeaders(target.provider),
    body: { requests: texts.map((text) => ({ model: `models/${target.model.id}`, content: { parts: [{ text }] } })) }
  }),
  result: (provider, body, count) => checked(provider, Array.isArray(body?.embeddings) ? body.embeddings.map((e: any) => e?.values) : undefined, count, undefined)
}
