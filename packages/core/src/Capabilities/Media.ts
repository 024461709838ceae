/**
 * Images, moderation, speech and transcription through providers with an OpenAI-format media
 * API, or a vendor's own image client (Providers/Images/). A named provider is used or refused;
 * `auto` takes the first configured one allowed on the plan. Upstream retryable failures are
 * retried on the next configured provider.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, Unprocessable } from "../Errors.ts"
import type { Plan } from "../Plans.ts"
import { generateImages, moderate, synthesize, transcribe } from "../Providers/OpenAiMedia.ts"
import { servedBy } from "../Providers/Registry.ts"
import type { ImageRequest, SpeechFormat, SpeechRequest, TranscriptionRequest } from "../Providers/Served.ts"
import { toGatewayError, type UpstreamError } from "../Providers/UpstreamError.ts"
import { Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Usage } from "../Usage.ts"
import { Provider } from "../RequestFields.ts"

const Pixels = (name: string) => Schema.optional(Schema.Int.pipe(Schema.between(64, 4096, { message: () => `${name} must be an integer from 64 to 4096` })))

/** The request of POST /v1/images/generate and the gateway_generate_image tool. */
export const ImagesBody = Schema.Struct({
  prompt: Schema.String.pipe(Schema.minLength(1, { message: () => "prompt must not be empty" }), Schema.maxLength(32_000)),
  provider: Provider,
  model: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  width: Pixels("width"),
  height: Pixels("height"),
  n: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 10, { message: () => "n must be an integer from 1 to 10" })), { default: () => 1 })
})

type MediaCapability = "images" | "moderation" | "speech" | "transcription"

const makeService = Effect.gen(function*() {
  const routing = yield* Routing
  const usage = yield* Usage
  const config = yield* GatewayConfig

  /** The provider (Routing) and model: the request's, else the provider's default (Providers/Registry.ts). */
  const providerAndModel = (avatar: AvatarRecord, capability: MediaCapability, provider: string, model?: string) =>
    Effect.gen(function*() {
      const p = yield* routing.providerFor(capability, provider, avatar.plan as Plan)
      const chosen = model ?? servedBy(p)[capability]?.defaultModel
      if (!chosen) return yield* Effect.fail(new Unprocessable({ message: `Name a model for ${capability} on ${p.id}.` }))
      return { provider: p, model: chosen }
    })

  const record = (avatar: AvatarRecord, provider: string, model: string, capability: string, latencyMs: number) =>
    usage.record({ avatarId: avatar.id, provider, model, capability, promptTokens: 0, completionTokens: 0, costUSD: 0, latencyMs, estimated: false, ok: true })

  /** Runs an upstream call and measures it; upstream errors become gateway errors (502/504). */
  const timed = <A>(effect: Effect.Effect<A, UpstreamError>) =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.map(Effect.mapError(effect, toGatewayError), (value) => ({ value, latencyMs: Math.round(performance.now() - started) }))
    })

  type ImagesInput = {
    readonly prompt: string
    readonly provider: string
    readonly model?: string | undefined
    readonly width?: number | undefined
    readonly height?: number | undefined
    readonly n: number
    /** Further OpenAI image fields: forwarded to OpenAI-format hosts, refused by name by vendors that cannot take them. */
    readonly extra?: Readonly<Record<string, unknown>> | undefined
  }

  /** The provider, model and image request; what the provider cannot honour is refused by name (400). */
  const imagesTarget = (avatar: AvatarRecord, input: Omit<ImagesInput, "prompt"> & { readonly prompt?: string }) =>
    Effect.gen(function*() {
      if ((input.width === undefined) !== (input.height === undefined)) {
        return yield* Effect.fail(new BadRequest({ message: "width and height go together: give both or neither" }))
      }
      const { model, provider } = yield* providerAndModel(avatar, "images", input.provider, input.model)
      const endpoint = servedBy(provider).images!
      const request: ImageRequest = { model, prompt: input.prompt ?? "", n: input.n, width: input.width, height: input.height, extra: input.extra }
      const refusal = endpoint.unsupported?.(request)
      if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
      return { provider, request, generate: endpoint.generate ?? generateImages }
    })

  /** The provider, model and client of a moderation; a vendor with its own client moderates with its own model only. */
  const moderationTarget = (avatar: AvatarRecord, named: string, requested?: string) =>
    Effect.gen(function*() {
      const { model, provider } = yield* providerAndModel(avatar, "moderation", named, requested)
      const own = servedBy(provider).moderation?.moderate
      if (own === undefined) return { provider, model, run: (text: string) => moderate(provider, model, text) }
      if (model !== servedBy(provider).moderation!.defaultModel) {
        return yield* Effect.fail(new Unprocessable({ message: `Provider ${provider.id} moderates with the model its account is set up with; model ${model} cannot be chosen there.` }))
      }
      return { provider, model, run: (text: string) => own(provider, text) }
    })

  type SpeechInput = {
    readonly text: string
    /** The provider's voice id; absent: its default voice. */
    readonly voice?: string | undefined
    readonly provider: string
    readonly format: SpeechFormat
  }

  /** The provider, speech request and client; what the provider cannot honour is refused by name (400). */
  const speechTarget = (avatar: AvatarRecord, input: SpeechInput) =>
    Effect.gen(function*() {
      const { model, provider } = yield* providerAndModel(avatar, "speech", input.provider)
      const endpoint = servedBy(provider).speech!
      const request: SpeechRequest = { model, text: input.text, voice: input.voice, format: input.format }
      const refusal = endpoint.unsupported?.(request)
      if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
      return { provider, request, synthesize: endpoint.synthesize ?? synthesize }
    })

  type TranscriptionInput = { readonly file: File; readonly language?: string | undefined; readonly provider: string }

  /** The provider, request and client of a transcription; what the vendor cannot honour is refused by name (400). */
  const transcriptionTarget = (avatar: AvatarRecord, input: TranscriptionInput) =>
    Effect.gen(function*() {
      const { model, provider } = yield* providerAndModel(avatar, "transcription", input.provider)
      const endpoint = servedBy(provider).transcription!
      const request: TranscriptionRequest = { model, file: input.file, language: input.language }
      const refusal = endpoint.unsupported?.(request)
      if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
      return { provider, request, transcribe: endpoint.transcribe ?? transcribe }
    })

  /**
   * The refusals that depend only on the request and configuration (provider unknown, not
   * configured or not allowed for the plan; no model): answered before admission.
   */
  const check = {
    images: (avatar: AvatarRecord, input: Omit<ImagesInput, "prompt" | "n"> & { readonly n?: number | undefined }) =>
      Effect.asVoid(imagesTarget(avatar, { ...input, n: input.n ?? 1 })),
    moderation: (avatar: AvatarRecord, provider: string, model?: string) => Effect.asVoid(moderationTarget(avatar, provider, model)),
    speech: (avatar: AvatarRecord, input: SpeechInput) => Effect.asVoid(speechTarget(avatar, input)),
    transcription: (avatar: AvatarRecord, input: TranscriptionInput) => Effect.asVoid(transcriptionTarget(avatar, input))
  }

  const images = Effect.fn("Media.images")(function*(avatar: AvatarRecord, input: ImagesInput) {
    const { generate, provider, request } = yield* imagesTarget(avatar, input)
    const { model } = request
    const size = input.width && input.height ? `${input.width}x${input.height}` : undefined
    const { latencyMs, value } = yield* timed(generate(provider, request, { pollMs: config.jobPollMs }))
    yield* record(avatar, provider.id, model, "images", latencyMs)
    return { provider: provider.id, model, images: value, n: value.length, ...(size ? { size } : {}) }
  })

  const moderation = Effect.fn("Media.moderation")(function*(
    avatar: AvatarRecord,
    input: { readonly text: string; readonly provider: string; readonly model?: string | undefined }
  ) {
    const { model, provider, run } = yield* moderationTarget(avatar, input.provider, input.model)
    const { latencyMs, value } = yield* timed(run(input.text))
    yield* record(avatar, provider.id, model, "moderation", latencyMs)
    return { ...value, provider: provider.id, model }
  })

  const speech = Effect.fn("Media.speech")(function*(avatar: AvatarRecord, input: SpeechInput) {
    const { provider, request, synthesize } = yield* speechTarget(avatar, input)
    const { latencyMs, value } = yield* timed(synthesize(provider, request))
    yield* record(avatar, provider.id, request.model, "speech", latencyMs)
    return { ...value, provider: provider.id, model: request.model }
  })

  const transcription = Effect.fn("Media.transcription")(function*(avatar: AvatarRecord, input: TranscriptionInput) {
    const { provider, request, transcribe } = yield* transcriptionTarget(avatar, input)
    const { model } = request
    const { latencyMs, value } = yield* timed(transcribe(provider, request, { pollMs: config.jobPollMs }))
    yield* record(avatar, provider.id, model, "transcription", latencyMs)
    return { text: value.text, language: value.language ?? input.language ?? null, provider: provider.id, model }
  })

  return { check, images, moderation, speech, transcription }
})

export class Media extends Context.Tag("aigw/Media")<Media, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Media, makeService)
