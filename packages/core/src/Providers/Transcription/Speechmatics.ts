/**
 * Speechmatics batch speech to text: asynchronous.
 *
 * Wire format (https://docs.speechmatics.com/api-ref/batch; the catalogue's base URL ends in `/v2`):
 *  - submit: `POST {endpoint}/jobs`, multipart with `data_file` (the audio) and `config` (JSON
 *    `{type: "transcription", transcription_config: {language, operating_point}}`; language
 *    `auto` identifies it) → `{id}`.
 *  - poll: `GET {endpoint}/jobs/{id}` → `{job: {id, status: running | done | rejected | deleted |
 *    expired, errors?: [{message}]}}`.
 *  - transcript: `GET {endpoint}/jobs/{id}/transcript?format=txt` → the text.
 *  - auth: `Authorization: Bearer <key>`; errors are `{code, error, detail}`.
 */
import { Effect } from "effect"
import type { JobState } from "../internal/jobs.ts"
import type { TranscriptionEndpoint, TranscriptionRequest } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { multipartJob, multipartWith, transcriptOf } from "./TranscriptionVendor.ts"

/** Speechmatics' code where it differs from ISO 639-1 (Mandarin). */
const LANGUAGES: Readonly<Record<string, string>> = { zh: "cmn" }

/** The job config of a request; the model is Speechmatics' operating point (standard, enhanced). */
export const configOf = (request: TranscriptionRequest) => ({
  type: "transcription",
  transcription_config: { language: request.language ? LANGUAGES[request.language] ?? request.language : "auto", operating_point: request.model }
})

/** A job to the poll state. */
export const toJobState = (provider: string, body: any): Effect.Effect<JobState<void>, UpstreamError> => {
  const job = body?.job
  switch (job?.status) {
    case "running":
      return Effect.succeed({ status: "running" })
    case "done":
      return Effect.succeed({ status: "done", value: undefined })
    case "rejected":
    case "deleted":
    case "expired": {
      const errors = Array.isArray(job.errors) ? (job.errors as Array<any>).map((e) => e?.message).filter((m) => typeof m === "string") : []
      return Effect.succeed({ status: "failed", reason: `the job was ${job.status}${errors.length > 0 ? `: ${errors.join("; ")}` : ""}` })
    }
    default:
      return Effect.fail(protocolError(provider, `unknown job status ${JSON.stringify(job?.status)}`))
  }
}

export const transcription: TranscriptionEndpoint = {
  defaultModel: "enhanced",
  unsupported: (request) =>
    ["standard", "enhanced"].includes(request.model) ? undefined : `Speechmatics has no operating point ${request.model}; use standard or enhanced`,
  transcribe: (provider, request, options) =>
    Effect.flatMap(
      multipartJob(provider, multipartWith("data_file", request.file, { config: JSON.stringify(configOf(request)) }), toJobState, "/transcript?format=txt", options.pollMs),
      ({ text }) => transcriptOf(provider.id, text, request.language)
    )
}
