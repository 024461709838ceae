/**
 * Embedding adapters: OpenAI-compatible `/embeddings` (also Voyage, which speaks the same wire
 * format) and Gemini `batchEmbedContents`. Same HTTP, errors and usage handling as chat.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import type { Target } from "./Chat.ts"
import { authHeaders, postJson } from "./internal/http.ts"
import { protocolError, type UpstreamError } from "./UpstreamError.ts"

export interface EmbeddingResult {
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  /** Input tokens as the upstream reported them; undefined when it reports none. */
  readonly promptTokens: number | undefined
}

export interface EmbeddingAdapter {
  readonly embed: (target: Target, texts: ReadonlyArray<string>) => Effect.Effect<EmbeddingResult, UpstreamError>
}

const isVector = (v: unknown): v is Array<number> => Array.isArray(v) && v.every((x) => typeof x === "number")

export const openAiEmbeddings: EmbeddingAdapter = {
  embed: (target, texts) =>
    postJson(target.provider.id, `${target.provider.endpoint}/embeddings`, authHeaders(target.provider), {
      model: target.model.id,
      input: texts
    }).pipe(
      Effect.flatMap((body) => {
        const data: Array<any> = Array.isArray(body?.data) ? [...body.data] : []
        data.sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0))
        const vectors = data.map((d) => d?.embedding)
        if (vectors.length !== texts.length || !vectors.every(isVector)) {
          return Effect.fail(protocolError(target.provider.id, `expected ${texts.length} embeddings`))
        }
        const tokens = body?.usage?.prompt_tokens ?? body?.usage?.total_tokens
        return Effect.succeed({ vectors, promptTokens: typeof tokens === "number" ? tokens : undefined })
      })
    )
}

export const geminiEmbeddings: EmbeddingAdapter = {
  embed: (target, texts) =>
    postJson(
      target.provider.id,
      `${target.provider.endpoint}/models/${encodeURIComponent(target.model.id)}:batchEmbedContents`,
      authHeaders(target.provider),
      { requests: texts.map((text) => ({ model: `models/${target.model.id}`, content: { parts: [{ text }] } })) }
    ).pipe(
      Effect.flatMap((body) => {
        const vectors = Array.isArray(body?.embeddings) ? body.embeddings.map((e: any) => e?.values) : []
        return vectors.length === texts.length && vectors.every(isVector)
          ? Effect.succeed({ vectors, promptTokens: undefined })
          : Effect.fail(protocolError(target.provider.id, `expected ${texts.length} embeddings`))
      })
    )
}

/** Provider ids whose own API has the OpenAI embeddings wire format. */
const openAiShaped = new Set(["voyage"])

/** The embedding adapter for a provider, if one exists. */
export const embeddingAdapterOf = (p: ConfiguredProvider): EmbeddingAdapter | undefined =>
  p.adapter === "openai" || openAiShaped.has(p.id) ? openAiEmbeddings : p.adapter === "gemini" ? geminiEmbeddings : undefined
