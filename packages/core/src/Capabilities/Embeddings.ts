/** Embeddings: routed like completions (kind "embeddings"), with fallback and usage recording. */
import { Context, Effect, Layer, Schema } from "effect"
import { costOf } from "../Cost.ts"
import type { Plan } from "../Plans.ts"
import { embeddingAdapterOf } from "../Providers/Embeddings.ts"
import { type Fallback, Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { countText } from "../Tokens.ts"
import { Usage } from "../Usage.ts"

/** The request of POST /v1/embeddings and the gateway_embed tool. */
export const EmbeddingsBody = Schema.Struct({
  texts: Schema.Array(Schema.String.pipe(Schema.maxLength(200_000))).pipe(
    Schema.minItems(1, { message: () => "texts must hold at least one string" }),
    Schema.maxItems(2048, { message: () => "texts holds at most 2048 strings" })
  ),
  provider: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" }),
  model: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "auto" })
})

export interface EmbeddingsInput {
  readonly texts: ReadonlyArray<string>
  readonly provider: string
  readonly model: string
}

export interface EmbeddingsResult {
  readonly provider: string
  readonly model: string
  readonly embeddings: ReadonlyArray<ReadonlyArray<number>>
  readonly dimensions: number
  readonly usage: { readonly promptTokens: number; readonly totalTokens: number; readonly estimated: boolean }
  readonly costUSD: number
  readonly latencyMs: number
  readonly fallbacks: ReadonlyArray<Fallback>
}

const makeService = Effect.gen(function*() {
  const routing = yield* Routing
  const usage = yield* Usage

  const targetsOf = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) =>
    routing.targets({ kind: "embeddings", provider: input.provider, model: input.model, plan: avatar.plan as Plan, needsTools: false, contextTokens: 0 })

  /** The refusals that depend only on the request and configuration (answered before admission). */
  const check = (avatar: AvatarRecord, input: Pick<EmbeddingsInput, "provider" | "model">) => Effect.asVoid(targetsOf(avatar, input))

  const embed = Effect.fn("Embeddings.embed")(function*(avatar: AvatarRecord, input: EmbeddingsInput) {
    const targets = yield* targetsOf(avatar, input)
    const started = performance.now()
    const { fallbacks, target, value } = yield* routing.firstSuccess(targets, (t) => embeddingAdapterOf(t.provider)!.embed(t, input.texts))
    const latencyMs = Math.round(performance.now() - started)
    const estimated = value.promptTokens === undefined
    const promptTokens = value.promptTokens ?? (yield* Effect.map(Effect.forEach(input.texts, countText), (n) => n.reduce((a, b) => a + b, 0)))
    const costUSD = costOf(target.model, promptTokens, 0)
    yield* usage.record({
      avatarId: avatar.id,
      provider: target.provider.id,
      model: target.model.id,
      capability: "embeddings",
      promptTokens,
      completionTokens: 0,
      costUSD,
      latencyMs,
      estimated,
      ok: true
    })
    const result: EmbeddingsResult = {
      provider: target.provider.id,
      model: target.model.id,
      embeddings: value.vectors,
      dimensions: value.vectors[0]?.length ?? 0,
      usage: { promptTokens, totalTokens: promptTokens, estimated },
      costUSD,
      latencyMs,
      fallbacks
    }
    return result
  })

  return { check, embed }
})

export class Embeddings extends Context.Tag("aigw/Embeddings")<Embeddings, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Embeddings, makeService)
