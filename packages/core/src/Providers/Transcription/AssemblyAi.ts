/**
 * AssemblyAI speech to text: asynchronous.
 *
 * Wire format (https://www.assemblyai.com/docs/api-reference; the catalogue's base URL ends in `/v2`):
 *  - upload: `POST {endpoint}/upload` with the raw audio bytes (`application/octet-stream`) →
 *    `{upload_url}`.
 *  - submit: `POST {endpoint}/transcript` with `{audio_url, speech_models, language_code}` (or
 *    `language_detection: true` when the request names no language) → `{id, status: queued}`;
 *    `speech_models` lists models in priority order (the singular `speech_model` is deprecated).
 *  - poll: `GET {endpoint}/transcript/{id}` → `{id, status: queued | processing | completed |
 *    error, text, language_code, error}`.
 *  - auth: the key itself in `Authorization`, without a scheme; errors are `{error}`.
 */
import { Effect } from "effect"
import { getJson, postBytes, postJson } from "../internal/http.ts"
import { type JobState, pollJob } from "../internal/jobs.ts"
import type { TranscriptionEndpoint, TranscriptionRequest, TranscriptionResult } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { jobIdOf, keyHeader, TRANSCRIPTION_JOB, transcriptOf } from "./TranscriptionVendor.ts"

/** AssemblyAI's broadest model (99 languages): the fallback for languages the requested model lacks. */
const FALLBACK_MODEL = "universal-2"

/** The body of a transcript request for an uploaded file. */
export const bodyOf = (audioUrl: string, request: TranscriptionRequest) => ({
  audio_url: audioUrl,
  speech_models: request.model === FALLBACK_MODEL ? [FALLBACK_MODEL] : [request.model, FALLBACK_MODEL],
  ...(request.language ? { language_code: request.language } : { language_detection: true })
})

/** A transcript to the poll state, with the text once completed. */
export const toJobState = (provider: string, body: any): Effect.Effect<JobState<TranscriptionResult>, UpstreamError> => {
  switch (body?.status) {
    case "queued":
    case "processing":
      return Effect.succeed({ status: "running" })
    case "error":
      return Effect.succeed({ status: "failed", reason: typeof body.error === "string" ? body.error : "the transcript failed" })
    case "completed":
      return Effect.map(transcriptOf(provider, body.text, body.language_code), (value) => ({ status: "done", value }))
    default:
      return Effect.fail(protocolError(provider, `unknown transcript status ${JSON.stringify(body?.status)}`))
  }
}

export const transcription: TranscriptionEndpoint = {
  // AssemblyAI's documented default: Universal-3 Pro for its six languages, Universal-2 for the others.
  defaultModel: "universal-3-pro",
  transcribe: (provider, request, options) =>
    Effect.gen(function*() {
      // AssemblyAI takes the bare key in Authorization; the catalogue's `bearer` would add a scheme it rejects.
      const headers = keyHeader(provider, "authorization")
      const upload = yield* postBytes(provider.id, `${provider.endpoint}/upload`, headers, request.file, "application/octet-stream")
      if (typeof upload?.upload_url !== "string") return yield* Effect.fail(protocolError(provider.id, "the upload answered no upload_url"))
      const job = yield* postJson(provider.id, `${provider.endpoint}/transcript`, headers, bodyOf(upload.upload_url, request))
      const id = yield* jobIdOf(provider.id, job?.id)
      const url = `${provider.endpoint}/transcript/${encodeURIComponent(id)}`
      return yield* pollJob(provider.id, Effect.flatMap(getJson(provider.id, url, headers), (t) => toJobState(provider.id, t)), options.pollMs, TRANSCRIPTION_JOB)
    })
}
