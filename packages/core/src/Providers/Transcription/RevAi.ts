/**
 * Rev AI asynchronous speech to text.
 *
 * Wire format (https://docs.rev.ai/api/asynchronous/reference; the catalogue's base URL ends in
 * `/speechtotext/v1`):
 *  - submit: `POST {endpoint}/jobs`, multipart with `media` (the audio) and `options` (JSON
 *    `{transcriber, language?}`; without a language Rev AI transcribes English) → `{id, status:
 *    in_progress}`.
 *  - poll: `GET {endpoint}/jobs/{id}` → `{id, status: in_progress | transcribed | failed,
 *    failure, failure_detail, language}`.
 *  - transcript: `GET {endpoint}/jobs/{id}/transcript` with `Accept: text/plain` → the text.
 *  - auth: `Authorization: Bearer <key>`; errors are `{title, detail, status}`.
 */
import { Effect } from "effect"
import type { JobState } from "../internal/jobs.ts"
import type { TranscriptionEndpoint, TranscriptionRequest } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { multipartJob, multipartWith, transcriptOf } from "./TranscriptionVendor.ts"

/** Rev AI's code where it differs from ISO 639-1 (Mandarin). */
const LANGUAGES: Readonly<Record<string, string>> = { zh: "cmn" }

/** The job options of a request; the model is Rev AI's transcriber (machine, low_cost, fusion). */
export const optionsOf = (request: TranscriptionRequest) => ({
  transcriber: request.model,
  ...(request.language ? { language: LANGUAGES[request.language] ?? request.language } : {})
})

/** A job to the poll state, with the language it was transcribed in once done. */
export const toJobState = (provider: string, body: any): Effect.Effect<JobState<string | undefined>, UpstreamError> => {
  switch (body?.status) {
    case "in_progress":
      return Effect.succeed({ status: "running" })
    case "transcribed":
      return Effect.succeed({ status: "done", value: typeof body.language === "string" ? body.language : undefined })
    case "failed":
      return Effect.succeed({ status: "failed", reason: String(body.failure_detail ?? body.failure ?? "the job failed") })
    default:
      return Effect.fail(protocolError(provider, `unknown job status ${JSON.stringify(body?.status)}`))
  }
}

export const transcription: TranscriptionEndpoint = {
  defaultModel: "machine",
  unsupported: (request) =>
    ["machine", "low_cost", "fusion"].includes(request.model) ? undefined : `Rev AI has no transcriber ${request.model}; use machine, low_cost or fusion`,
  transcribe: (provider, request, options) =>
    Effect.flatMap(
      multipartJob(provider, multipartWith("media", request.file, { options: JSON.stringify(optionsOf(request)) }), toJobState, "/transcript", options.pollMs),
      ({ text, value: language }) => transcriptOf(provider.id, text, language ?? request.language ?? "en")
    )
}
