/**
 * ElevenLabs speech to text (Scribe): synchronous.
 *
 * Wire format (https://elevenlabs.io/docs/api-reference/speech-to-text/convert; the catalogue's
 * base URL ends in `/v1`):
 *  - `POST {endpoint}/speech-to-text`, multipart with `file`, `model_id` (scribe_v1) and
 *    `language_code?` (detected when absent) → `{language_code, language_probability, text, words}`.
 *  - auth: `xi-api-key: <key>`; errors are `{detail: {status, message}}`.
 */
import { Effect } from "effect"
import { postMultipart } from "../internal/http.ts"
import type { TranscriptionEndpoint, TranscriptionRequest } from "../Served.ts"
import { keyHeader, multipartWith, transcriptOf } from "./TranscriptionVendor.ts"

/** The multipart form of a request. */
export const formOf = (request: TranscriptionRequest): FormData =>
  multipartWith("file", request.file, { model_id: request.model, ...(request.language ? { language_code: request.language } : {}) })

export const transcription: TranscriptionEndpoint = {
  defaultModel: "scribe_v1",
  transcribe: (provider, request) =>
    Effect.flatMap(
      // ElevenLabs reads the key from `xi-api-key`; the catalogue's `x-api-key` style names a header it ignores.
      postMultipart(provider.id, `${provider.endpoint}/speech-to-text`, keyHeader(provider, "xi-api-key"), formOf(request)),
      (body) => transcriptOf(provider.id, body?.text, body?.language_code)
    )
}
