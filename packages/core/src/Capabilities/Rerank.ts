/**
 * Reranking: through an upstream rerank model (Cohere, Voyage, Jina, Mixedbread; routed like
 * embeddings, kind "rerank", called through the engine), or with Okapi BM25 computed in-process
 * (provider `local`): lexical relevance of each document to the query (k1 = 1.2, b = 0.75), over
 * lower-cased word tokens. `auto` (provider and model) takes a catalogued rerank model of a
 * configured provider the plan allows, else BM25; a named provider or model is used or refused.
 */
import { Effect, Schema } from "effect"
import { type Call, lift, ProviderCalls, type RerankResult as UpstreamRerank } from "../Engine/ProviderCalls.ts"
import type { Lane } from "../Http/Lane.ts"
import { Unprocessable } from "../Errors.ts"
import type { Plan } from "../Plans.ts"
import type { Target } from "../Providers/Chat.ts"
import { BoundedArray, Provider } from "../RequestFields.ts"
import * as RequestId from "../RequestId.ts"
import { routed, Routing, type RoutingError } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { inTurnsPromise } from "../Turns.ts"

const tokens = (s: string) => s.toLowerCase().normalize("NFKD").match(/[\p{L}\p{N}]+/gu) ?? []

/** Characters of documents tokenized per turn of the event loop: 1,000 long documents held it for the whole scoring. */
const TOKENIZED_PER_TURN = 500_000

/**
 * BM25 scores of `documents` for `query`. Only the query's terms are counted in each document (its
 * length is all the rest needs): a map of every word of every document grew with every distinct word
 * the caller sent, on the event loop. Documents are tokenized in turns of the event loop of their own.
 */
export const bm25 = async (query: string, documents: ReadonlyArray<string>, k1 = 1.2, b = 0.75): Promise<Array<number>> => {
  const terms = new Set(tokens(query))
  const counted = (document: string) => {
    const words = tokens(document)
    const tf = new Map<string, number>()
    for (const w of words) if (terms.has(w)) tf.set(w, (tf.get(w) ?? 0) + 1)
    return { length: words.length, tf }
  }
  const docs = await inTurnsPromise(documents, (d) => d.length, TOKENIZED_PER_TURN, counted)
  const avg = docs.reduce((n, d) => n + d.length, 0) / Math.max(1, docs.length)
  const df = new Map<string, number>()
  for (const d of docs) for (const t of d.tf.keys()) df.set(t, (df.get(t) ?? 0) + 1)
  return docs.map((d) => {
    let score = 0
    for (const t of terms) {
      const f = d.tf.get(t) ?? 0
      if (f === 0) continue
      const n = df.get(t) ?? 0
      const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5))
      score += idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * (d.length / (avg || 1))))
    }
    return Math.round(score * 1e6) / 1e6
  })
}

/** The request of POST /v1/rerank. */
export const RerankBody = Schema.Struct({
  query: Schema.String.pipe(
    Schema.minLength(1, { message: () => "query must not be empty" }),
    Schema.maxLength(10_000, { message: () => "query is limited to 10000 characters" })
  ),
  documents: BoundedArray(Schema.String.pipe(Schema.maxLength(100_000)), {
    min: 1,
    max: 1000,
    minMessage: "documents must hold at least one document",
    maxMessage: "documents holds at most 1000 documents"
  }),
  topN: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 1000, { message: () => "topN must be an integer from 1 to 1000" })), { default: () => 5 }),
  provider: Provider,
  /** A rerank model id, or `auto`; with provider `local` only `bm25`. */
  model: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "auto" })
})

export type RerankInput = typeof RerankBody.Type

/** A rerank's answer: upstream (with usage) or `local` BM25 (no usage, cost 0). */
export type RerankResult = Omit<UpstreamRerank, "usage"> & { readonly usage?: UpstreamRerank["usage"] }

const LOCAL = "local"
const isAuto = (s: string) => s === "" || s === "auto"

const local = async (input: RerankInput): Promise<RerankResult> => {
  const started = performance.now()
  const results = (await bm25(input.query, input.documents))
    .map((score, index) => ({ index, document: input.documents[index]!, score }))
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .slice(0, input.topN)
  return { results, provider: LOCAL, model: "bm25", costUSD: 0, costKnown: true, latencyMs: Math.round(performance.now() - started), fallbacks: [] }
}

/** Where a rerank runs: in-process (`local`), the upstream targets in order, or the refusal. */
const placementOf = (
  routing: Routing["Type"],
  avatar: AvatarRecord,
  input: Pick<RerankInput, "provider" | "model">
): typeof LOCAL | ReadonlyArray<Target> | RoutingError => {
  if (input.provider === LOCAL) {
    return isAuto(input.model) || input.model === "bm25"
      ? LOCAL
      : new Unprocessable({ message: `Provider local reranks with bm25 only; model ${input.model} needs its provider (e.g. cohere, voyage, jina, mixedbread).` })
  }
  const needs = { kind: "rerank", provider: input.provider, model: input.model, plan: avatar.plan as Plan, needsTools: false, contextTokens: 0 } as const
  if (!isAuto(input.provider) || !isAuto(input.model)) return routing.targets(needs)
  // Nothing named: with no usable rerank model configured, BM25 serves the call.
  const found = routing.autoTargets(needs)
  return found.length > 0 ? found : LOCAL
}

const placement = (avatar: AvatarRecord, input: Pick<RerankInput, "provider" | "model">): Effect.Effect<typeof LOCAL | ReadonlyArray<Target>, RoutingError, Routing> =>
  Effect.flatMap(Routing, (routing) => {
    const where = placementOf(routing, avatar, input)
    return where === LOCAL ? Effect.succeed<typeof LOCAL | ReadonlyArray<Target>>(LOCAL) : routed(where)
  })

/** The refusals that depend only on the request and configuration (answered before admission). */
export const check = (avatar: AvatarRecord, input: Pick<RerankInput, "provider" | "model">) => Effect.asVoid(placement(avatar, input))

/** An upstream rerank through the engine (the caller's request id and abort in `call`). */
const upstream = (calls: ProviderCalls["Type"], call: Call, input: RerankInput): Promise<RerankResult> =>
  calls.rerank({ ...call, query: input.query, documents: input.documents, topN: input.topN })

/** Reranks `documents` against `query`: the best `topN`, best first, with their original indexes. */
export const rerank = (avatar: AvatarRecord, input: RerankInput) =>
  Effect.flatMap(placement(avatar, input), (where) =>
    where === LOCAL
      ? Effect.promise(() => local(input))
      : Effect.flatMap(Effect.zip(ProviderCalls, RequestId.current), ([calls, requestId]) =>
        lift((cancel) => upstream(calls, { avatar, targets: where, cancel, requestId }, input))))

/** The fast-lane plan of POST /v1/rerank (Http/Lane.ts): the same placement and answers as `rerank`. */
export const lane: Lane<RerankInput> = {
  plan: ({ calls, routing }, avatar, input) => {
    const where = placementOf(routing, avatar, input)
    if (where === LOCAL) return () => local(input)
    if (!Array.isArray(where)) return where as RoutingError
    const targets = where as ReadonlyArray<Target>
    return (admitted) => upstream(calls, admitted.call(targets), input)
  }
}
