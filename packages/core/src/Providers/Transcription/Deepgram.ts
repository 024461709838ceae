/**
 * Deepgram pre-recorded speech to text: synchronous.
 *
 * Wire format (https://developers.deepgram.com/reference/speech-to-text-api/listen; the
 * catalogue's base URL ends in `/v1`):
 *  - `POST {endpoint}/listen?model=nova-3&language=<code>` (or `detect_language=true` when the
 *    request names no language) with the raw audio bytes as the body and the file's content type.
 *  - answer: `{metadata: {request_id, duration}, results: {channels: [{alternatives: [{transcript,
 *    confidence}], detected_language?}]}}`.
 *  - auth: `Authorization: Token <key>` (the catalogue's `token` style); errors are
 *    `{err_code, err_msg, request_id}`.
 */
import { Effect } from "effect"
import { authHeaders, postBytes } from "../internal/http.ts"
import type { TranscriptionEndpoint } from "../Served.ts"
import { contentTypeOf, transcriptOf } from "./TranscriptionVendor.ts"

/** The query of a request: the model, and the language or language detection. */
export const queryOf = (model: string, language: string | undefined): string =>
  new URLSearchParams({ model, ...(language ? { language } : { detect_language: "true" }) }).toString()

export const transcription: TranscriptionEndpoint = {
  defaultModel: "nova-3",
  transcribe: (provider, request) =>
    Effect.flatMap(
      postBytes(provider.id, `${provider.endpoint}/listen?${queryOf(request.model, request.language)}`, authHeaders(provider), request.file, contentTypeOf(request.file)),
      (body) => {
        const channel = body?.results?.channels?.[0]
        return transcriptOf(provider.id, channel?.alternatives?.[0]?.transcript, channel?.detected_language ?? request.language)
      }
    )
}
