/** Images, moderation, speech (audio bytes) and transcription (multipart). */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Schema } from "effect"
import { ImagesBody, Media } from "../Capabilities/Media.ts"
import { languageName } from "../Capabilities/LlmTasks.ts"
import { BadRequest } from "../Errors.ts"
import { authed, formProblem } from "./Route.ts"
import { onLane } from "./Lane.ts"
import { Provider } from "../RequestFields.ts"
import { ImagesResult, ModerationResult, TranscriptionResult } from "./ResponseSchemas.ts"

const SpeechBody = Schema.Struct({
  text: Schema.String.pipe(Schema.minLength(1, { message: () => "text must not be empty" }), Schema.maxLength(4096, { message: () => "text is limited to 4096 characters" })),
  /** The provider's voice id (OpenAI: alloy, ...; ElevenLabs, Cartesia, LMNT: a voice id; Deepgram: an Aura model); absent: the provider's default voice. */
  voice: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "voice must be a voice id" }))),
  format: Schema.optionalWith(Schema.Literal("mp3", "wav", "opus", "aac", "flac", "pcm"), { default: () => "mp3" as const }),
  provider: Provider
})

const ModerationBody = Schema.Struct({
  text: Schema.String.pipe(Schema.minLength(1, { message: () => "text must not be empty" }), Schema.maxLength(100_000)),
  provider: Provider
})

/** Largest audio upload (the OpenAI transcription limit). */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024

/** The transcription request from its multipart form, or what is wrong with it. */
const transcriptionInput = (form: FormData) =>
  Effect.suspend(() => {
    const problem = formProblem(form, ["file", "language", "provider"])
    if (problem) return Effect.fail(problem)
    const file = form.get("file")
    if (!(file instanceof File) || file.size === 0) return Effect.fail(new BadRequest({ message: "file (a non-empty audio file) is required" }))
    if (file.size > MAX_AUDIO_BYTES) return Effect.fail(new BadRequest({ message: `file is limited to ${MAX_AUDIO_BYTES} bytes` }))
    const language = form.get("language")
    if (language !== null && (typeof language !== "string" || !languageName(language))) {
      return Effect.fail(new BadRequest({ message: "language must be an ISO 639-1 code such as en, de, ja" }))
    }
    const provider = form.get("provider")
    return Effect.succeed({ file, language: language ?? undefined, provider: typeof provider === "string" && provider ? provider : "auto" })
  })

export const mediaRoutes = [
  authed({
    method: "POST",
    path: "/v1/images/generate",
    success: ImagesResult,
    tag: "Media",
    metered: true,
    summary: "Generate images (OpenAI-format image APIs); answers URLs or base64 data",
    ...onLane(ImagesBody, {
      check: ({ avatar, body }) => Effect.flatMap(Media, (m) => m.check.images(avatar, body)),
      handle: ({ avatar, body }) => Effect.flatMap(Media, (m) => m.images(avatar, body))
    })
  }),
  authed({
    method: "POST",
    path: "/v1/moderation",
    success: ModerationResult,
    tag: "Safety",
    metered: true,
    summary: "Moderate text with a provider's moderation model (OpenAI, Mistral) or Hive text moderation; flagged, categories, scores",
    ...onLane(ModerationBody, {
      check: ({ avatar, body }) => Effect.flatMap(Media, (m) => m.check.moderation(avatar, body.provider)),
      handle: ({ avatar, body }) => Effect.flatMap(Media, (m) => m.moderation(avatar, body))
    })
  }),
  authed({
    method: "POST",
    path: "/v1/audio/speech",
    tag: "Media",
    metered: true,
    envelope: "gateway",
    contentType: "audio/mpeg",
    summary: "Text to speech: the answer is the audio bytes (Content-Type audio/*); errors are envelopes",
    body: SpeechBody,
    check: ({ avatar, body }) => Effect.flatMap(Media, (m) => m.check.speech(avatar, body)),
    handle: ({ avatar, body }) =>
      Effect.map(Effect.flatMap(Media, (m) => m.speech(avatar, body)), (audio) =>
        HttpServerResponse.uint8Array(audio.bytes, {
          contentType: audio.contentType,
          // audioOf keeps only an audio/* type; nosniff keeps a browser from reading the bytes as anything else.
          headers: { "x-aigw-provider": audio.provider, "x-aigw-model": audio.model, "x-content-type-options": "nosniff" }
        }))
  }),
  authed({
    method: "POST",
    path: "/v1/audio/transcriptions",
    success: TranscriptionResult,
    tag: "Media",
    metered: true,
    rawBody: true,
    summary: "Speech to text: multipart form with `file` (mp3, wav, m4a …) and optional `language` (ISO 639-1), `provider`",
    check: ({ avatar, form }) => Effect.flatMap(transcriptionInput(form!), (input) => Effect.flatMap(Media, (m) => m.check.transcription(avatar, input))),
    handle: ({ avatar, form }) => Effect.flatMap(transcriptionInput(form!), (input) => Effect.flatMap(Media, (m) => m.transcription(avatar, input)))
  })
]
