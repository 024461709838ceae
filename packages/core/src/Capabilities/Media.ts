/**
 * Images, moderation, speech and transcription through providers with an OpenAI-format media
 * API, or a vendor's own image client (Providers/Images/). A named provider is used or refused;
 * `auto` tries the providers Routing.providersFor ranks, the next after a retryable upstream
 * failure (the engine's firstSuccessEffect).
 */
import { Context, Effect, Either, Layer, Option, Schema } from "effect"
import { Catalog, type ConfiguredProvider } from "../Catalog/Catalog.ts"
import { ProviderCalls } from "../Engine/ProviderCalls.ts"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, Unprocessable } from "../Errors.ts"
import type { Plan } from "../Plans.ts"
import { generateImages, moderate, synthesize, transcribe } from "../Providers/OpenAiMedia.ts"
import { servedBy } from "../Providers/Registry.ts"
import { speak } from "../Providers/Speech/SpeechVendor.ts"
import type { ImageRequest, SpeechFormat, SpeechRequest, TranscriptionRequest } from "../Providers/Served.ts"
import { imagesProblem } from "../Providers/Delivered.ts"
import { protocolError, type UpstreamError } from "../Providers/UpstreamError.ts"
import { type FallbackCandidate, Routing, wrongKind } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Usage } from "../Usage.ts"
import { recordedFirstAnswer, type ReportedTokens } from "./VendorCall.ts"
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
  const calls = yield* ProviderCalls
  const usage = yield* Usage
  const config = yield* GatewayConfig
  const catalog = yield* Catalog

  /** The provider's model: the request's, else the provider's default (Providers/Registry.ts). */
  const modelOf = (provider: ConfiguredProvider, capability: MediaCapability, model?: string) => {
    const chosen = model ?? servedBy(provider)[capability]?.defaultModel
    return chosen ? Effect.succeed(chosen) : Effect.fail(new Unprocessable({ message: `Name a model for ${capability} on ${provider.id}.` }))
  }

  /**
   * The targets to try, in order (Routing.providersFor), each made by `targetOf` from a provider
   * and its model. A named provider is used or refused. Under `auto`, a provider that cannot take
   * the request (no model, a refusal) is skipped, and when none can, the first one's refusal
   * answers; a named model is the first provider's, so it gets no fallback.
   */
  const targetsOf = <T>(
    avatar: AvatarRecord,
    capability: MediaCapability,
    namedAs: string,
    requestedAs: string | undefined,
    targetOf: (provider: ConfiguredProvider, model: string) => Effect.Effect<T, BadRequest | Unprocessable>
  ) =>
    Effect.gen(function*() {
      // `provider/model` names the provider, as for chat (`xai/grok-2-image` went to the first provider, named so).
      const spelled = requestedAs === undefined ? undefined : routing.providerAndModel(namedAs, requestedAs)
      const named = spelled?.provider ?? namedAs
      // Model `auto` (`openai/auto`) is the provider's default model, as for chat.
      const model = spelled?.model ?? requestedAs
      const requested = model === "auto" ? undefined : model
      // The catalogue lists chat, embeddings and rerank models: one of those is no model of this capability.
      const other = requested === undefined ? Option.none() : catalog.model(requested)
      if (Option.isSome(other)) return yield* Effect.fail(wrongKind(other.value, capability))
      const providers = yield* routing.providersFor(capability, named, avatar.plan as Plan)
      const tried = yield* Effect.forEach(requested === undefined ? providers : providers.slice(0, 1), (provider) =>
        Effect.either(Effect.flatMap(modelOf(provider, capability, requested), (model) => Effect.map(targetOf(provider, model), (target) => ({ ...target, provider, model })))))
      const usable = tried.filter(Either.isRight).map((t) => t.right)
      return usable.length > 0 ? usable : yield* Effect.fail(Either.getLeft(tried[0]!).pipe(Option.getOrThrow))
    })

  /** Runs `call` on the targets in order (VendorCall.ts `recordedFirstAnswer`): the target that answered, and its answer. */
  const firstAnswer = <T extends FallbackCandidate, A>(
    avatar: AvatarRecord,
    capability: string,
    targets: ReadonlyArray<T>,
    call: (target: T) => Effect.Effect<A, UpstreamError>,
    tokensOf?: ReportedTokens<A>
  ) =>
    Effect.map(recordedFirstAnswer(avatar.id, capability, targets, call, tokensOf), (answered) => ({ target: answered.candidate, value: answered.value })).pipe(
      Effect.provideService(Usage, usage),
      Effect.provideService(ProviderCalls, calls)
    )

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
    targetsOf(avatar, "images", input.provider, input.model, (provider, model) =>
    Effect.gen(function*() {
      if ((input.width === undefined) !== (input.height === undefined)) {
        return yield* Effect.fail(new BadRequest({ message: "width and height go together: give both or neither" }))
      }
      const endpoint = servedBy(provider).images!
      const request: ImageRequest = { model, prompt: input.prompt ?? "", n: input.n, width: input.width, height: input.height, extra: input.extra }
      const refusal = endpoint.unsupported?.(request)
      if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
      return { provider, request, generate: endpoint.generate ?? generateImages }
    }))

  /** The provider, model and client of a moderation; a vendor with its own client moderates with its own model only. */
  const moderationTarget = (avatar: AvatarRecord, named: string, requested?: string) =>
    targetsOf(avatar, "moderation", named, requested, (provider, model) =>
    Effect.gen(function*() {
      const own = servedBy(provider).moderation?.moderate
      if (own === undefined) return { provider, model, run: (text: string) => moderate(provider, model, text) }
      if (model !== servedBy(provider).moderation!.defaultModel) {
        return yield* Effect.fail(new Unprocessable({ message: `Provider ${provider.id} moderates with the model its account is set up with; model ${model} cannot be chosen there.` }))
      }
      return { provider, model, run: (text: string) => own(provider, text) }
    }))

  type SpeechInput = {
    readonly text: string
    /** The provider's voice id; absent: its default voice. */
    readonly voice?: string | undefined
    readonly provider: string
    readonly format: SpeechFormat
  }

  /** The provider, speech request and client; what the provider cannot honour is refused by name (400). */
  const speechTarget = (avatar: AvatarRecord, input: SpeechInput) =>
    targetsOf(avatar, "speech", input.provider, undefined, (provider, model) =>
    Effect.gen(function*() {
      const endpoint = servedBy(provider).speech!
      const request: SpeechRequest = { model, text: input.text, voice: input.voice, format: input.format }
      const refusal = endpoint.unsupported?.(request)
      if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
      return { provider, request, synthesize: endpoint.synthesize ?? synthesize }
    }))

  type TranscriptionInput = { readonly file: File; readonly language?: string | undefined; readonly provider: string }

  /** The provider, request and client of a transcription; what the vendor cannot honour is refused by name (400). */
  const transcriptionTarget = (avatar: AvatarRecord, input: TranscriptionInput) =>
    targetsOf(avatar, "transcription", input.provider, undefined, (provider, model) =>
    Effect.gen(function*() {
      const endpoint = servedBy(provider).transcription!
      const request: TranscriptionRequest = { model, file: input.file, language: input.language }
      const refusal = endpoint.unsupported?.(request)
      if (refusal !== undefined) return yield* Effect.fail(new BadRequest({ message: refusal }))
      return { provider, request, transcribe: endpoint.transcribe ?? transcribe }
    }))

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
    const { target: { provider, request }, value } = yield* firstAnswer(
      avatar,
      "images",
      yield* imagesTarget(avatar, input),
      (t) =>
        Effect.flatMap(t.generate(t.provider, t.request, { pollMs: config.jobPollMs }), (generated) => {
          // Whichever vendor made them: links a client may follow, bytes that are base64, no more than asked for.
          const problem = imagesProblem(generated.images, t.request.n)
          return problem === undefined ? Effect.succeed(generated) : Effect.fail(protocolError(t.provider.id, problem))
        }),
      ({ tokens }) => tokens && { promptTokens: tokens.input, completionTokens: tokens.output }
    )
    const { model } = request
    const size = input.width && input.height ? `${input.width}x${input.height}` : undefined
    const { images, tokens, extra } = value
    return {
      provider: provider.id, model, images, n: images.length, ...(size ? { size } : {}),
      ...(tokens ? { usage: { promptTokens: tokens.input, completionTokens: tokens.output, totalTokens: tokens.input + tokens.output, promptImageTokens: tokens.inputImages } } : {}),
      ...(extra ? { extra } : {})
    }
  })

  const moderation = Effect.fn("Media.moderation")(function*(
    avatar: AvatarRecord,
    input: { readonly text: string; readonly provider: string; readonly model?: string | undefined }
  ) {
    const { target: { model, provider }, value } = yield* firstAnswer(avatar, "moderation", yield* moderationTarget(avatar, input.provider, input.model), (t) => t.run(input.text))
    return { ...value, provider: provider.id, model }
  })

  const speech = Effect.fn("Media.speech")(function*(avatar: AvatarRecord, input: SpeechInput) {
    const { target: { provider, request }, value } = yield* firstAnswer(avatar, "speech", yield* speechTarget(avatar, input), (t) => speak(t.synthesize, t.provider, t.request))
    return { ...value, provider: provider.id, model: request.model }
  })

  const transcription = Effect.fn("Media.transcription")(function*(avatar: AvatarRecord, input: TranscriptionInput) {
    const { target: { provider, request }, value } = yield* firstAnswer(
      avatar,
      "transcription",
      yield* transcriptionTarget(avatar, input),
      (t) => t.transcribe(t.provider, t.request, { pollMs: config.jobPollMs })
    )
    const { model } = request
    return { text: value.text, language: value.language ?? input.language ?? null, provider: provider.id, model }
  })

  return { check, images, moderation, speech, transcription }
})

export class Media extends Context.Tag("aigw/Media")<Media, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Media, makeService)
