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

const isVector = (v: unknown): v is Array<number> => Array.isArray(v) && v.every((x) => typeof x === "number")

const wrongCount = (provider: string, count: number) => protocolError(provider, `expected ${count} embeddings`)

export const openAiEmbeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: `${target.provider.endpoint}/embeddings`,
    headers: authHeaders(target.provider),
    body: { model: target.model.id, input: texts }
  }),
  result: (provider, body, count) => {
    const data: Array<any> = Array.isArray(body?.data) ? [...body.data] : []
    data.sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0))
    const vectors = data.map((d) => d?.embedding)
    if (vectors.length !== count || !vectors.every(isVector)) return wrongCount(provider, count)
    const tokens = body?.usage?.prompt_tokens ?? body?.usage?.total_tokens
    return { vectors, promptTokens: typeof tokens === "number" ? tokens : undefined }
  }
}

/** Vectors and a token count as read from a vendor's answer, checked: one numeric vector per text. */
export const checked = (provider: string, vectors: unknown, count: number, tokens: unknown): EmbeddingResult | UpstreamError =>
  Array.isArray(vectors) && vectors.length === count && vectors.every(isVector)
    ? { vectors, promptTokens: typeof tokens === "number" ? tokens : undefined }
    : wrongCount(provider, count)

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
  result: (provider, body, count) => {
    const vectors = Array.isArray(body?.embeddings) ? body.embeddings.map((e: any) => e?.values) : []
    return vectors.length === count && vectors.every(isVector) ? { vectors, promptTokens: undefined } : wrongCount(provider, count)
  }
}
