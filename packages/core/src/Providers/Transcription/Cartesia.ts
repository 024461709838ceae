/**
 * Cartesia batch speech to text (Ink): synchronous.
 *
 * Wire format (https://docs.cartesia.ai/api-reference/stt/transcribe; the catalogue's base URL is
 * the API's root):
 *  - `POST {endpoint}/stt`, multipart with `file`, `model` (ink-whisper) and `language?` (ISO
 *    639-1; Cartesia assumes English without it) → `{type: transcript, text, language, duration, words?}`.
 *  - headers: `X-API-Key: <key>` (the catalogue's `x-api-key` style) and `Cartesia-Version`.
 */
import { Effect } from "effect"
import { authHeaders, postMultipart } from "../internal/http.ts"
import type { TranscriptionEndpoint, TranscriptionRequest } from "../Served.ts"
import { multipartWith, transcriptOf } from "./TranscriptionVendor.ts"

/** The API version the adapter is written against. */
export const CARTESIA_VERSION = "2025-04-16"

/** The multipart form of a request. */
export const formOf = (request: TranscriptionRequest): FormData =>
  multipartWith("file", request.file, { model: request.model, ...(request.language ? { language: request.language } : {}) })

export const transcription: TranscriptionEndpoint = {
  defaultModel: "ink-whisper",
  transcribe: (provider, request) =>
    Effect.flatMap(
      postMultipart(provider.id, `${provider.endpoint}/stt`, { ...authHeaders(provider), "cartesia-version": CARTESIA_VERSION }, formOf(request)),
      (body) => transcriptOf(provider.id, body?.text, body?.language ?? request.language ?? "en")
    )
}
