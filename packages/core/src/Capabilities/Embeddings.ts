/**
 * Embeddings: routed like completions (kind "embeddings"), called through the engine; or, with
 * `provider: "local"`, computed in the gateway's own process by its local embedder (DESIGN.md §7).
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { type EmbeddingsResult, lift, ProviderCalls } from "../Engine/ProviderCalls.ts"
import { Unprocessable } from "../Errors.ts"
import { LEXICAL_NAME, lexical, TextEmbedder } from "../Ml/TextEmbedder.ts"
import type { Plan } from "../Plans.ts"
import * as RequestId from "../RequestId.ts"
import { routed, Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { BoundedArray } from "../RequestFields.ts"

/** The request of POST /v1/embeddings and the gateway_embed tool. */
export const EmbeddingsBody = Schema.Struct({
  // An empty text has no embedding: OpenAI refuses it too (and a refusal costs no quota).
  texts: BoundedArray(Schema.String.pipe(Schema.minLength(1, { message: () => "texts must not hold an empty string" }), Schema.maxLength(200_000)), {
    min: 1,
    max: 2048,
    minMessage: "texts must hold at least one string",
    maxMessage: "texts holds at most 2048 strings"
  }),
  provider: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" }),
  model: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "auto" })
})

export interface EmbeddingsInput {
  readonly texts: ReadonlyArray<string>
  readonly provider: string
  readonly model: string
}

export type { EmbeddingsResult } from "../Engine/ProviderCalls.ts"

/** The provider id of the gateway's own embedder. */
export const LOCAL = "local"

/**
 * The models of `provider: "local"`: `auto`, the embedder AIGW_LOCAL_EMBEDDER names; `hash` (or the
 * name an answer gives it, `local:hash-256`), hashed words.
 */
const isLexicalModel = (model: string) => model === "hash" || model === LEXICAL_NAME

const localModelProblem = (model: string, own: string): Unprocessable | undefined =>
  model === "auto" || model === "" || isLexicalModel(model) || model === own
    ? undefined
    : new Unprocessable({ message: `Provider local embeds with auto (the AIGW_LOCAL_EMBEDDER embedder) or hash (hashed words); model ${model} needs its provider (e.g. openai, cohere, voyage).` })

const failWith = (problem: Unprocessable | undefined) => (problem === undefined ? Effect.void : Effect.fail(problem))

const makeService = Effect.gen(function*() {
  const routing = yield* Routing
  const calls = yield* ProviderCalls
  const own = Option.getOrElse(yield* Effect.serviceOption(TextEmbedder), () => lexical)

  const targetsOf = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) =>
    routing.targets({ kind: "embeddings", provider: input.provider, model: input.model, plan: avatar.plan as Plan, needsTools: false, contextTokens: 0 })

  /** The refusals that depend only on the request and configuration (answered before admission). */
  const check = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) =>
    input.provider === LOCAL ? failWith(localModelProblem(input.model, own.name)) : Effect.asVoid(routed(targetsOf(avatar, input)))

  /**
   * The gateway's own vectors: what they are named (`local:use-lite-512`, `local:hash-256`) says which
   * embedder made them; no upstream, no tokens counted by one, no cost.
   */
  const embedLocally = (input: EmbeddingsInput) =>
    Effect.gen(function*() {
      yield* failWith(localModelProblem(input.model, own.name))
      const started = performance.now()
      const embedded = yield* (isLexicalModel(input.model) ? lexical : own).embedNamed(input.texts)
      return {
        provider: LOCAL,
        model: embedded.name,
        embeddings: embedded.vectors,
        dimensions: embedded.vectors[0]?.length ?? 0,
        usage: { promptTokens: 0, totalTokens: 0, estimated: false },
        costUSD: 0,
        costKnown: true,
        latencyMs: Math.round(performance.now() - started),
        fallbacks: []
      } satisfies EmbeddingsResult
    })

  /** Embeds through the engine (fallback, usage); interruption aborts the upstream call. */
  const embed = (avatar: AvatarRecord, input: EmbeddingsInput) =>
    input.provider === LOCAL
      ? embedLocally(input)
      : Effect.flatMap(Effect.zip(routed(targetsOf(avatar, input)), RequestId.current), ([targets, requestId]) =>
        lift((cancel) => calls.embed({ avatar, targets, cancel, requestId, texts: input.texts })))

  /**
   * The targets of the fast lane's call (Http/Lane.ts), or undefined to leave it to the Effect route:
   * `local` runs the gateway's own embedder, an Effect service.
   */
  const laneTargets = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) =>
    input.provider === LOCAL ? undefined : targetsOf(avatar, input)

  return { check, embed, laneTargets }
})

export class Embeddings extends Context.Tag("aigw/Embeddings")<Embeddings, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Embeddings, makeService)
