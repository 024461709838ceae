/**
 * Embedding wires: OpenAI-compatible `/embeddings` (also Voyage, which speaks the same wire
 * format) and Gemini `batchEmbedContents`, as data and pure functions that the engine
 * (Engine/ProviderCalls.ts) runs with the same transport, fallback and usage handling as chat. The
 * registry (Registry.ts) says which provider uses which.
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
