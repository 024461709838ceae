/**
 * OpenAI-format media endpoints: image generation (`/images/generations`, also served by
 * OpenAI-compatible image hosts), moderation (`/moderations`; Mistral speaks the same format),
 * speech synthesis (`/audio/speech`, audio bytes) and transcription (`/audio/transcriptions`,
 * multipart). Which provider serves which, with its default model: Providers/Registry.ts.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { authHeaders, postForBytes, postJson, postMultipart } from "./internal/http.ts"
import type { GeneratedImages, ImageRequest, ImageTokens, SpeechRequest, SynthesizedSpeech, TranscriptionRequest, TranscriptionResult } from "./Served.ts"
import { fieldsOutside } from "../JsonText.ts"
import { reportedCount } from "./Chat.ts"
import { protocolError, type UpstreamError } from "./UpstreamError.ts"

/** How an OpenAI-format image host takes the picture's size: OpenAI's `size: "WxH"`, or `width` and `height` (Together AI). */
export type ImageDimensions = "size" | "width and height"

/** The dimensions fields of a request, in the host's form. */
const dimensionsOf = (request: ImageRequest, form: ImageDimensions) =>
  request.width === undefined || request.height === undefined
    ? {}
    : form === "size"
    ? { size: `${request.width}x${request.height}` }
    : { width: request.width, height: request.height }

/**
 * The tokens of a token-billed image answer (`usage.input_tokens`, `usage.output_tokens`); a count
 * that is no count leaves the answer without tokens rather than recording a wrong figure.
 */
const imageTokensOf = (usage: any): ImageTokens | undefined => {
  const input = reportedCount(usage?.input_tokens)
  const output = reportedCount(usage?.output_tokens)
  const images = reportedCount(usage?.input_tokens_details?.image_tokens) ?? 0
  return input === undefined || output === undefined ? undefined : { input, output, inputImages: Math.min(images, input) }
}

/** The `data` list of an OpenAI-format image answer, with its tokens when it reports them. */
export const imagesOf = (provider: string, body: any): Effect.Effect<GeneratedImages, UpstreamError> => {
  if (!Array.isArray(body?.data)) return Effect.fail(protocolError(provider, "no data list in the image answer"))
  const images = (body.data as Array<any>).map((d) => ({
    ...(typeof d?.url === "string" ? { url: d.url } : {}),
    ...(typeof d?.b64_json === "string" ? { b64Json: d.b64_json } : {}),
    ...(typeof d?.revised_prompt === "string" ? { revisedPrompt: d.revised_prompt } : {})
  }))
  const tokens = imageTokensOf(body.usage)
  const extra = fieldsOutside(body, modelledImageAnswer)
  return Effect.succeed({ images, ...(tokens !== undefined ? { tokens } : {}), ...(extra !== undefined ? { extra } : {}) })
}

/** What `imagesOf` models of an answer; the rest is its `extra`. */
const modelledImageAnswer: ReadonlySet<string> = new Set(["data", "usage", "created"])

/** The OpenAI-format image client (`POST {endpoint}/images/generations`) for a host's form of the dimensions. */
export const openAiImages = (form: ImageDimensions) => (provider: ConfiguredProvider, request: ImageRequest): Effect.Effect<GeneratedImages, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/images/generations`, authHeaders(provider), {
    ...request.extra,
    model: request.model,
    prompt: request.prompt,
    n: request.n,
    ...dimensionsOf(request, form)
  }).pipe(Effect.flatMap((body) => imagesOf(provider.id, body)))

/** Image generation in OpenAI's own format (`size: "WxH"`): the client of providers that declare none. */
export const generateImages = openAiImages("size")

/**
 * The sizes OpenAI's fixed-size image models make (its images API reference: `size`); another
 * model (gpt-image-2 takes any size, a newer one unknown here) gets the size as asked.
 */
const OPENAI_IMAGE_SIZES: ReadonlyArray<readonly [models: RegExp, sizes: ReadonlyArray<string>]> = [
  [/^gpt-image-1(?:-mini|\.5)?(?:-\d{4}-\d{2}-\d{2})?$/i, ["1024x1024", "1536x1024", "1024x1536"]],
  [/^dall-e-3$/i, ["1024x1024", "1792x1024", "1024x1792"]],
  [/^dall-e-2$/i, ["256x256", "512x512", "1024x1024"]]
]

/** A size OpenAI's model does not make, refused by name before the call (OpenAI would answer a 400 upstream). */
export const openAiImageSizeRefusal = (request: ImageRequest): string | undefined => {
  if (request.width === undefined || request.height === undefined) return undefined
  const sizes = OPENAI_IMAGE_SIZES.find(([models]) => models.test(request.model))?.[1]
  const size = `${request.width}x${request.height}`
  return sizes === undefined || sizes.includes(size) ? undefined : `OpenAI's ${request.model} has no size ${size}; its sizes: ${sizes.join(", ")}`
}

/** How many keys an object of an upstream's answer has (0 for anything else). */
const keyCount = (value: unknown) => (typeof value === "object" && value !== null ? Object.keys(value).length : 0)

export interface ModerationResult {
  readonly flagged: boolean
  readonly categories: ReadonlyArray<string>
  readonly categoryScores: Readonly<Record<string, number>>
}

/**
 * The most categories a moderation answer may name (OpenAI's has 13, Hive's about 50): a hostile or
 * broken upstream's hundreds of thousands cost the event loop seconds to map and answer.
 */
export const MAX_MODERATION_CATEGORIES = 1_000

/** The refusal of an answer naming more than MAX_MODERATION_CATEGORIES categories, if it does. */
export const tooManyCategories = (providerId: string, count: number) =>
  count > MAX_MODERATION_CATEGORIES ? protocolError(providerId, `the moderation answer names more than ${MAX_MODERATION_CATEGORIES} categories`) : undefined

export const moderate = (provider: ConfiguredProvider, model: string, text: string): Effect.Effect<ModerationResult, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/moderations`, authHeaders(provider), { model, input: text }).pipe(
    Effect.flatMap((body) => {
      const r = body?.results?.[0]
      if (typeof r !== "object" || r === null) return Effect.fail(protocolError(provider.id, "no results in the moderation answer"))
      const tooMany = tooManyCategories(provider.id, Math.max(keyCount(r.categories), keyCount(r.category_scores)))
      if (tooMany) return Effect.fail(tooMany)
      const flags = (r.categories ?? {}) as Record<string, unknown>
      const categories = Object.entries(flags).filter(([, v]) => v === true).map(([k]) => k)
      const scores: Record<string, number> = {}
      for (const [name, v] of Object.entries((r.category_scores ?? {}) as Record<string, unknown>)) {
        // A probability: `1e400` (Infinity) reached clients as null, a negative score as it came.
        if (typeof v !== "number" || !(v >= 0 && v <= 1)) return Effect.fail(protocolError(provider.id, `the score of category ${name} is not a number from 0 to 1`))
        scores[name] = v
      }
      return Effect.succeed({ flagged: typeof r.flagged === "boolean" ? r.flagged : categories.length > 0, categories, categoryScores: scores })
    })
  )

/** OpenAI-format speech; without a voice, OpenAI's `alloy`. */
export const synthesize = (provider: ConfiguredProvider, request: SpeechRequest): Effect.Effect<SynthesizedSpeech, UpstreamError> =>
  postForBytes(provider.id, `${provider.endpoint}/audio/speech`, authHeaders(provider), {
    model: request.model,
    input: request.text,
    voice: request.voice ?? "alloy",
    response_format: request.format
  })

/** OpenAI-format transcription: the client of providers that declare none of their own. */
export const transcribe = (provider: ConfiguredProvider, request: TranscriptionRequest): Effect.Effect<TranscriptionResult, UpstreamError> => {
  const form = new FormData()
  form.append("file", request.file, request.file.name || "audio")
  form.append("model", request.model)
  if (request.language) form.append("language", request.language)
  return postMultipart(provider.id, `${provider.endpoint}/audio/transcriptions`, authHeaders(provider), form).pipe(
    Effect.flatMap((body) =>
      typeof body?.text !== "string"
        ? Effect.fail(protocolError(provider.id, "no text in the transcription answer"))
        // The language it heard, when the host says (verbose_json, Mistral, Groq): a short name, or none.
        : Effect.succeed(typeof body.language === "string" && body.language.length > 0 && body.language.length <= 64 ? { text: body.text, language: body.language } : { text: body.text })
    )
  )
}
