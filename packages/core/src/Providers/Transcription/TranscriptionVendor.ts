/** What the speech-to-text vendor modules share: job limits, the file's name and type, a key in a vendor's own header, the transcript's check. */
import { Effect, Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { authHeaders, getJson, getPlainText, postMultipart } from "../internal/http.ts"
import { type JobState, pollJob } from "../internal/jobs.ts"
import type { TranscriptionResult } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"

/** How long a transcription job may take in all (the caller waits on the HTTP request) and how often it is polled at most. */
export const TRANSCRIPTION_JOB = { deadlineMs: 10 * 60_000, maxPolls: 300, task: "transcribe the audio", finish: "finish transcribing the audio" } as const

/** The upload's file name for a multipart part. */
export const fileNameOf = (file: File): string => file.name || "audio"

/** The upload's content type, as the caller sent it. */
export const contentTypeOf = (file: File): string => file.type || "application/octet-stream"

/** The provider's key in a header of the vendor's own (when the catalogue's auth styles have no such header). */
export const keyHeader = (provider: ConfiguredProvider, name: string): Record<string, string> =>
  Option.isSome(provider.apiKey) ? { [name]: Redacted.value(provider.apiKey.value) } : {}

/** A transcript from an answer's text and reported language; an answer without text is a protocol error. */
export const transcriptOf = (provider: string, text: unknown, language?: unknown): Effect.Effect<TranscriptionResult, UpstreamError> =>
  typeof text === "string"
    ? Effect.succeed({ text, ...(typeof language === "string" && language.length > 0 ? { language } : {}) })
    : Effect.fail(protocolError(provider, "no transcript text in the answer"))

/** The job id of a submit answer, or a protocol error naming what was missing. */
export const jobIdOf = (provider: string, id: unknown): Effect.Effect<string, UpstreamError> =>
  typeof id === "string" && id.length > 0 ? Effect.succeed(id) : Effect.fail(protocolError(provider, "the job answered no id"))

/** A multipart form: the text fields, then the upload under `fileField`. */
export const multipartWith = (fileField: string, file: File, fields: Readonly<Record<string, string>>): FormData => {
  const form = new FormData()
  for (const [name, value] of Object.entries(fields)) form.append(name, value)
  form.append(fileField, file, fileNameOf(file))
  return form
}

/**
 * The batch flow of Speechmatics and Rev AI: submit a multipart job to `{endpoint}/jobs` (bearer),
 * poll `{endpoint}/jobs/{id}` until it ends, then read its plain-text transcript at `transcriptPath`
 * (after `/jobs/{id}`). Answers the poll's final value with the trimmed text.
 */
export const multipartJob = <A>(
  provider: ConfiguredProvider,
  form: FormData,
  jobState: (provider: string, body: unknown) => Effect.Effect<JobState<A>, UpstreamError>,
  transcriptPath: string,
  pollMs: number
): Effect.Effect<{ readonly value: A; readonly text: string }, UpstreamError> =>
  Effect.gen(function*() {
    const headers = authHeaders(provider)
    const id = yield* Effect.flatMap(postMultipart(provider.id, `${provider.endpoint}/jobs`, headers, form), (job) => jobIdOf(provider.id, job?.id))
    const url = `${provider.endpoint}/jobs/${encodeURIComponent(id)}`
    const value = yield* pollJob(provider.id, Effect.flatMap(getJson(provider.id, url, headers), (j) => jobState(provider.id, j)), pollMs, TRANSCRIPTION_JOB)
    const text = yield* getPlainText(provider.id, `${url}${transcriptPath}`, headers)
    return { value, text: text.trim() }
  })
