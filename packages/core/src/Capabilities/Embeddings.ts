/** Embeddings: routed like completions (kind "embeddings"), called through the engine. */
import { Context, Effect, Layer, Schema } from "effect"
import { lift, ProviderCalls } from "../Engine/ProviderCalls.ts"
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

const makeService = Effect.gen(function*() {
  const routing = yield* Routing
  const calls = yield* ProviderCalls

  const targetsOf = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) =>
    routing.targets({ kind: "embeddings", provider: input.provider, model: input.model, plan: avatar.plan as Plan, needsTools: false, contextTokens: 0 })

  /** The refusals that depend only on the request and configuration (answered before admission). */
  const check = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) =>
    Effect.asVoid(routed(targetsOf(avatar, input)))

  /** Embeds through the engine (fallback, usage); interruption aborts the upstream call. */
  const embed = (avatar: AvatarRecord, input: EmbeddingsInput) =>
    Effect.flatMap(Effect.zip(routed(targetsOf(avatar, input)), RequestId.current), ([targets, requestId]) =>
      lift((cancel) => calls.embed({ avatar, targets, cancel, requestId, texts: input.texts })))

  return { check, embed, targetsOf }
})

export class Embeddings extends Context.Tag("aigw/Embeddings")<Embeddings, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Embeddings, makeService)
