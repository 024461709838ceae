/**
 * OpenAI Files, Batch and Fine-tuning clients: plain Effect functions over a ConfiguredProvider
 * (`provider.endpoint` is the API base, e.g. `https://api.openai.com/v1`; auth from `authHeaders`).
 *
 * Wire format (https://platform.openai.com/docs/api-reference/files, .../batch, .../fine-tuning; object
 * shapes mirrored in openai-python `types/batch.py` and openai-node `FileObject` / `FineTuningJob`):
 *  - `POST /files` multipart (`purpose`, `file`) → File object `{id: "file-…", object: "file", bytes,
 *    created_at, filename, purpose}`; `GET /files/{id}/content` → the raw file (JSONL for batch files).
 *  - Batch input lines: `{custom_id, method: "POST", url: "/v1/chat/completions", body}`.
 *    `POST /batches {input_file_id, endpoint, completion_window: "24h"}` → Batch object; `GET /batches/{id}`:
 *    `status` validating | failed | in_progress | finalizing | completed | expired | cancelling | cancelled,
 *    `request_counts {total, completed, failed}`, `output_file_id`, `error_file_id`, `errors {object: "list",
 *    data: [{code, message, param, line}]}` (validation errors of the input file).
 *  - Batch output lines: `{id: "batch_req_…", custom_id, response: {status_code, request_id, body} | null,
 *    error: {code, message} | null}`. Requests the upstream answered with non-2xx are written to the
 *    *error* file (with `response.status_code` 4xx/5xx and the error in `response.body.error`, `error: null`:
 *    https://github.com/openai/openai-openapi/issues/302); line order need not follow the input, match on
 *    `custom_id`.
 *  - `POST /fine_tuning/jobs {training_file, model, suffix?, validation_file?}` → `fine_tuning.job`;
 *    `GET /fine_tuning/jobs/{id}`: `status` validating_files | queued | running | succeeded | failed |
 *    cancelled, `fine_tuned_model`, `trained_tokens`, `error {code, message, param}`;
 *    `GET /fine_tuning/jobs/{id}/events?limit=&after=` → `{object: "list", data: [fine_tuning.job.event
 *    {id, created_at, level, message, type, data}], has_more}` (newest first).
 */
import { Effect, Option } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { authHeaders, getJson, getText, postJson, postMultipart } from "./internal/http.ts"
import { protocolError, shownUpstreamText, type UpstreamError } from "./UpstreamError.ts"
import { isVendorId, vendorId } from "./internal/vendorId.ts"
import { cutText } from "../Cut.ts"
import { parseUpstreamJson } from "../JsonText.ts"

// ---------------------------------------------------------------------------------------------
// Types (the fields the gateway reads; the wire objects carry more)
// ---------------------------------------------------------------------------------------------

export type FilePurpose = "batch" | "fine-tune"

export interface OpenAiFile {
  readonly id: string
  readonly bytes: number
  readonly filename: string
  readonly purpose: string
}

export type BatchStatus =
  | "validating"
  | "failed"
  | "in_progress"
  | "finalizing"
  | "completed"
  | "expired"
  | "cancelling"
  | "cancelled"

export interface BatchError {
  readonly code?: string | null
  readonly message?: string | null
  readonly param?: string | null
  readonly line?: number | null
}

export interface Batch {
  readonly id: string
  readonly status: BatchStatus
  readonly endpoint: string
  readonly inputFileId: string
  readonly outputFileId: string | null
  readonly errorFileId: string | null
  readonly requestCounts: { readonly total: number; readonly completed: number; readonly failed: number }
  readonly errors: ReadonlyArray<BatchError>
  readonly createdAt: number | null
  readonly completedAt: number | null
}

/** One line of a batch output or error file, as sent. */
export interface BatchOutputLine {
  readonly id: string
  readonly custom_id: string
  readonly response: { readonly status_code: number; readonly request_id?: string; readonly body: unknown } | null
  readonly error: { readonly code?: string | null; readonly message?: string | null } | null
}

/** One batch item's outcome, normalised. */
export type BatchItemResult =
  | { readonly customId: string; readonly ok: true; readonly statusCode: number; readonly body: unknown }
  | {
    readonly customId: string
    readonly ok: false
    readonly statusCode: number | null
    readonly code: string | null
    readonly message: string
  }

export type FineTuneStatus = "validating_files" | "queued" | "running" | "succeeded" | "failed" | "cancelled"

export interface FineTuneJob {
  readonly id: string
  readonly status: FineTuneStatus
  readonly model: string
  readonly trainingFile: string
  readonly fineTunedModel: string | null
  readonly trainedTokens: number | null
  readonly error: { readonly code: string | null; readonly message: string; readonly param: string | null } | null
  readonly createdAt: number | null
  readonly finishedAt: number | null
}

export interface FineTuneEvent {
  readonly id: string
  readonly createdAt: number
  readonly level: string
  readonly message: string
  readonly type: string | null
  readonly data: unknown
}

// ---------------------------------------------------------------------------------------------
// Decoding helpers
// ---------------------------------------------------------------------------------------------

const str = (v: unknown): string | null => (typeof v === "string" ? v : null)
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null)
/** A count: a whole number from 0 (a negative `trained_tokens` is no count). */
const count = (v: unknown): number | null => (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : null)
/** Unix seconds a date can be made of (up to the year 9999): `1e300` once made the job step throw. */
const unixSeconds = (v: unknown): number | null => (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 253_402_300_799 ? v : null)
/** The validation errors of a batch, each an object with its fields typed: a `null` in the list once made the job step throw. */
const batchErrors = (v: unknown): ReadonlyArray<BatchError> =>
  Array.isArray(v)
    ? v.filter((e): e is Record<string, unknown> => typeof e === "object" && e !== null)
      .map((e) => ({ code: str(e.code), message: str(e.message), param: str(e.param), line: count(e.line) }))
    : []
const nonEmpty = (v: unknown): string | null => (typeof v === "string" && v.length > 0 ? v : null)
/** A file's or model's id as the vendor gave it, when it is one the gateway can keep and use (internal/vendorId.ts). */
const idOrNull = (v: unknown): string | null => (isVendorId(v) ? v : null)

const BATCH_STATUSES: ReadonlyArray<BatchStatus> = [
  "validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"
]
const FINE_TUNE_STATUSES: ReadonlyArray<FineTuneStatus> = [
  "validating_files", "queued", "running", "succeeded", "failed", "cancelled"
]

/**
 * Both job kinds are objects with a string id and a status from a known list; anything else is
 * not what the provider promised. `build` reads the rest of the fields.
 */
const decodeJob = <S extends string, A extends { readonly id: string; readonly status: S }>(
  what: string,
  statuses: ReadonlyArray<S>,
  build: (json: any) => Omit<A, "id" | "status">
) =>
(provider: string, json: any): Effect.Effect<A, UpstreamError> =>
  !statuses.includes(json?.status)
    ? Effect.fail(protocolError(provider, `not ${what} (status ${cutText(String(JSON.stringify(json?.status)), 100)})`))
    : Effect.map(vendorId(provider, json.id, `${what} without an id`, `the id of ${what}`), (id) => ({ id, status: json.status, ...build(json) } as A))

export const decodeBatch = decodeJob<BatchStatus, Batch>("a batch object", BATCH_STATUSES, (json) => {
  const counts = json.request_counts ?? {}
  return {
    endpoint: str(json.endpoint) ?? "",
    inputFileId: idOrNull(json.input_file_id) ?? "",
    // A file id the gateway cannot use is no file: the items it would hold have no result.
    outputFileId: idOrNull(json.output_file_id),
    errorFileId: idOrNull(json.error_file_id),
    requestCounts: { total: count(counts.total) ?? 0, completed: count(counts.completed) ?? 0, failed: count(counts.failed) ?? 0 },
    errors: batchErrors(json.errors?.data),
    createdAt: unixSeconds(json.created_at),
    completedAt: unixSeconds(json.completed_at)
  }
})

export const decodeFineTune = decodeJob<FineTuneStatus, FineTuneJob>("a fine-tuning job", FINE_TUNE_STATUSES, (json) => {
  // A job that has not failed may carry `error: {}` or `error: null`.
  const e = json.error
  const error = e && typeof e === "object" && (nonEmpty(e.message) || nonEmpty(e.code))
    ? { code: str(e.code), message: nonEmpty(e.message) ?? str(e.code) ?? "fine-tuning failed", param: str(e.param) }
    : null
  return {
    model: idOrNull(json.model) ?? "",
    trainingFile: idOrNull(json.training_file) ?? "",
    // A name no client could call (megabytes of it, control characters) is not kept.
    fineTunedModel: idOrNull(json.fine_tuned_model),
    trainedTokens: count(json.trained_tokens),
    error,
    createdAt: unixSeconds(json.created_at),
    finishedAt: unixSeconds(json.finished_at)
  }
})

/** The most characters of an event's message kept (an event is a line of the job's log). */
const EVENT_MESSAGE_CHARACTERS = 1_000

const decodeEvent = (e: any): FineTuneEvent => ({
  id: idOrNull(e?.id) ?? "",
  createdAt: unixSeconds(e?.created_at) ?? 0,
  level: cutText(str(e?.level) ?? "info", 20),
  message: shownUpstreamText(str(e?.message) ?? "", EVENT_MESSAGE_CHARACTERS),
  type: idOrNull(e?.type),
  data: e?.data ?? null
})

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

/** Serialises values as JSONL: one compact JSON document per line, newline-terminated. */
export const toJsonl = (lines: ReadonlyArray<unknown>): string => lines.map((l) => JSON.stringify(l)).join("\n") + "\n"

/** Uploads `lines` as a JSONL file for `purpose`; returns the file id. */
export const uploadJsonl = (
  provider: ConfiguredProvider,
  purpose: FilePurpose,
  lines: ReadonlyArray<unknown>,
  filename: string
): Effect.Effect<string, UpstreamError> =>
  Effect.gen(function*() {
    const form = new FormData()
    form.append("purpose", purpose)
    form.append("file", new Blob([toJsonl(lines)], { type: "application/jsonl" }), filename)
    const file = yield* postMultipart(provider.id, `${provider.endpoint}/files`, authHeaders(provider), form)
    return yield* vendorId(provider.id, file?.id, "the uploaded file has no id", "the uploaded file's id")
  })

/** A file's raw content (`GET /files/{id}/content`). */
export const fileContent = (provider: ConfiguredProvider, fileId: string): Effect.Effect<string, UpstreamError> =>
  getText(provider.id, `${provider.endpoint}/files/${encodeURIComponent(fileId)}/content`, authHeaders(provider))

// ---------------------------------------------------------------------------------------------
// Batch
// ---------------------------------------------------------------------------------------------

export const BATCH_ENDPOINT = "/v1/chat/completions"

/** One batch input line for a Chat Completions request body. */
export const batchInputLine = (customId: string, body: unknown) => ({
  custom_id: customId,
  method: "POST",
  url: BATCH_ENDPOINT,
  body
})

export const createBatch = (
  provider: ConfiguredProvider,
  inputFileId: string,
  metadata?: Record<string, string>
): Effect.Effect<Batch, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/batches`, authHeaders(provider), {
    input_file_id: inputFileId,
    endpoint: BATCH_ENDPOINT,
    completion_window: "24h",
    ...(metadata ? { metadata } : {})
  }).pipe(Effect.flatMap((json) => decodeBatch(provider.id, json)))

/** The metadata key that names the gateway's job on the vendor's batch or fine-tuning job it created. */
export const JOB_METADATA_KEY = "aigw_job"

/** The most pages of 100 a lookup for a lost creation reads (the account's jobs made since the gateway's job). */
const LOOKUP_PAGES = 10
/** How far before the gateway's job the lookup reads (the vendor's clock is not ours). */
const LOOKUP_SLACK_SECONDS = 60

/**
 * The vendor's job made for the gateway's job `jobId` (its metadata names it, and `fits` says it is made of
 * what the gateway uploaded), if any: a creation whose answer was lost (a timeout, a proxy's 5xx) made the job
 * all the same, and creating it again would make and bill a second one nobody tracks. The list (`GET
 * {path}?limit=100`, newest first) is read page by page (`after`) back to jobs made before the gateway's job
 * (`jobCreatedAt`, epoch ms; less LOOKUP_SLACK_SECONDS), at most LOOKUP_PAGES pages. An entry that does not read as a job,
 * or does not fit, is not the job's. A vendor that does not list (a 4xx: a proxy without the route, a key that
 * may create but not list; or a list that is none) cannot be asked: undefined, and the job is created; one that
 * failed in a way that may pass (a 5xx, a timeout) fails the step, which is retried.
 */
const createdFor = <A>(
  provider: ConfiguredProvider,
  path: string,
  jobId: string,
  jobCreatedAt: number,
  decode: (provider: string, json: unknown) => Effect.Effect<A, UpstreamError>,
  fits: (job: A) => boolean
): Effect.Effect<A | undefined, UpstreamError> => {
  const since = Math.floor(jobCreatedAt / 1000) - LOOKUP_SLACK_SECONDS
  const page = (after: string | undefined, left: number): Effect.Effect<A | undefined, UpstreamError> =>
    getJson(provider.id, `${provider.endpoint}${path}?limit=100${after === undefined ? "" : `&after=${encodeURIComponent(after)}`}`, authHeaders(provider)).pipe(
      Effect.flatMap((json) => {
        if (!Array.isArray(json?.data)) return Effect.fail(protocolError(provider.id, `the list of ${path} has no data list`))
        const entries = json.data as Array<any>
        return Effect.flatMap(
          Effect.forEach(entries.filter((j) => j?.metadata?.[JOB_METADATA_KEY] === jobId), (j) => Effect.option(decode(provider.id, j))),
          (decoded) => {
            const mine = decoded.flatMap((d) => (Option.isSome(d) && fits(d.value) ? [d.value] : []))[0]
            if (mine !== undefined) return Effect.succeed(mine)
            const last = entries.at(-1)
            const older = typeof last?.created_at === "number" && last.created_at < since
            return json.has_more === true && !older && left > 1 && isVendorId(last?.id) ? page(last.id, left - 1) : Effect.succeed(undefined)
          }
        )
      })
    )
  return page(undefined, LOOKUP_PAGES).pipe(
    Effect.catchIf((e) => !e.retryable, (e) =>
      Effect.as(Effect.logWarning(`${provider.id}: ${path} could not be listed to find a creation whose answer was lost (${e.message}); creating it`), undefined))
  )
}

/** The batch made for the gateway's job `jobId` (made at `jobCreatedAt`, epoch ms) from the file `inputFileId`, if one was (`createdFor`). */
export const batchCreatedFor = (provider: ConfiguredProvider, jobId: string, jobCreatedAt: number, inputFileId: string) =>
  createdFor(provider, "/batches", jobId, jobCreatedAt, decodeBatch, (b) => b.inputFileId === inputFileId)

/** The fine-tuning job made for the gateway's job `jobId` (made at `jobCreatedAt`, epoch ms) on the file `trainingFileId`, if one was (`createdFor`). */
export const fineTuneCreatedFor = (provider: ConfiguredProvider, jobId: string, jobCreatedAt: number, trainingFileId: string) =>
  createdFor(provider, "/fine_tuning/jobs", jobId, jobCreatedAt, decodeFineTune, (j) => j.trainingFile === trainingFileId)

export const getBatch = (provider: ConfiguredProvider, id: string): Effect.Effect<Batch, UpstreamError> =>
  getJson(provider.id, `${provider.endpoint}/batches/${encodeURIComponent(id)}`, authHeaders(provider)).pipe(
    Effect.flatMap((json) => decodeBatch(provider.id, json))
  )

/** Asks the vendor to stop a batch (`POST /batches/{id}/cancel`): it goes `cancelling`, then `cancelled`. */
export const cancelBatch = (provider: ConfiguredProvider, id: string): Effect.Effect<Batch, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/batches/${encodeURIComponent(id)}/cancel`, authHeaders(provider), {}).pipe(
    Effect.flatMap((json) => decodeBatch(provider.id, json))
  )

/** A batch output or error file's lines, and what was wrong with each line that could not be read. */
export interface BatchOutput {
  readonly lines: ReadonlyArray<BatchOutputLine>
  readonly unreadable: ReadonlyArray<string>
}

/**
 * Parses a batch output or error file. Blank lines are skipped. A line that is not one (no JSON, no
 * `custom_id`) is set aside with its problem: the other lines are the items' answers, which the vendor
 * made and billed, and the items it would have answered end without a result that names it.
 */
export const parseBatchOutput = (text: string): BatchOutput => {
  const lines: Array<BatchOutputLine> = []
  const unreadable: Array<string> = []
  for (const [n, raw] of text.split("\n").entries()) {
    const line = raw.trim()
    if (line.length === 0) continue
    const parsed = parseUpstreamJson(line)
    const o = "value" in parsed ? parsed.value as any : undefined
    if (typeof o?.custom_id === "string" && (o.response == null || typeof o.response === "object")) lines.push(o)
    else unreadable.push(`line ${n + 1} ${"value" in parsed ? "has no custom_id" : `is not ${parsed.malformed ? "JSON" : `usable JSON: ${parsed.problem}`}`}`)
  }
  return { lines, unreadable }
}

/** One output line's outcome: 2xx with no `error` is success; anything else is a failure with its message. */
export const batchItemResult = (line: BatchOutputLine): BatchItemResult => {
  const status = line.response ? num(line.response.status_code) : null
  if (!line.error && status !== null && status >= 200 && status < 300) {
    return { customId: line.custom_id, ok: true, statusCode: status, body: line.response!.body }
  }
  const bodyError = (line.response?.body as any)?.error
  const given = nonEmpty(line.error?.message) ?? nonEmpty(bodyError?.message)
  // The vendor's words, as an upstream error's are shown: cut, credentials hidden.
  const message = given !== null ? shownUpstreamText(given) : status !== null ? `the request failed with HTTP ${status}` : "the request failed"
  const code = str(line.error?.code) ?? str(bodyError?.code) ?? str(bodyError?.type)
  return { customId: line.custom_id, ok: false, statusCode: status, code: code === null ? null : cutText(code, 100), message }
}

/** Downloads and merges a finished batch's output and error files: one result per line read (any order), and the lines that could not be. */
export const batchResults = (
  provider: ConfiguredProvider,
  batch: Batch
): Effect.Effect<{ readonly results: ReadonlyArray<BatchItemResult>; readonly unreadable: ReadonlyArray<string> }, UpstreamError> =>
  Effect.forEach([batch.outputFileId, batch.errorFileId].filter((f): f is string => f !== null), (fileId) =>
    Effect.map(fileContent(provider, fileId), (text) => ({ fileId, ...parseBatchOutput(text) }))).pipe(
      Effect.map((files) => ({
        results: files.flatMap((f) => f.lines.map(batchItemResult)),
        unreadable: files.flatMap((f) => f.unreadable.map((problem) => `${problem} of file ${f.fileId}`))
      }))
    )

// ---------------------------------------------------------------------------------------------
// Fine-tuning
// ---------------------------------------------------------------------------------------------

export interface FineTuneRequest {
  readonly trainingFileId: string
  readonly model: string
  readonly validationFileId?: string | undefined
  /** Up to 64 characters added to the fine-tuned model's name. */
  readonly suffix?: string | undefined
  /** Key-value pairs kept with the job (the gateway's job id: `fineTuneCreatedFor`). */
  readonly metadata?: Record<string, string> | undefined
}

export const createFineTune = (provider: ConfiguredProvider, request: FineTuneRequest): Effect.Effect<FineTuneJob, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/fine_tuning/jobs`, authHeaders(provider), {
    training_file: request.trainingFileId,
    model: request.model,
    ...(request.validationFileId ? { validation_file: request.validationFileId } : {}),
    ...(request.suffix ? { suffix: request.suffix } : {}),
    ...(request.metadata ? { metadata: request.metadata } : {})
  }).pipe(Effect.flatMap((json) => decodeFineTune(provider.id, json)))

export const getFineTune = (provider: ConfiguredProvider, id: string): Effect.Effect<FineTuneJob, UpstreamError> =>
  getJson(provider.id, `${provider.endpoint}/fine_tuning/jobs/${encodeURIComponent(id)}`, authHeaders(provider)).pipe(
    Effect.flatMap((json) => decodeFineTune(provider.id, json))
  )

/** Asks the vendor to stop a fine-tuning job (`POST /fine_tuning/jobs/{id}/cancel`). */
export const cancelFineTune = (provider: ConfiguredProvider, id: string): Effect.Effect<FineTuneJob, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/fine_tuning/jobs/${encodeURIComponent(id)}/cancel`, authHeaders(provider), {}).pipe(
    Effect.flatMap((json) => decodeFineTune(provider.id, json))
  )

/** A page of a job's events, newest first; pass the last event's id as `after` for the next page. */
export const listFineTuneEvents = (
  provider: ConfiguredProvider,
  id: string,
  options: { readonly limit?: number; readonly after?: string } = {}
): Effect.Effect<{ readonly events: ReadonlyArray<FineTuneEvent>; readonly hasMore: boolean }, UpstreamError> => {
  const query = new URLSearchParams()
  if (options.limit !== undefined) query.set("limit", String(options.limit))
  if (options.after !== undefined) query.set("after", options.after)
  const qs = query.toString() ? `?${query}` : ""
  return getJson(provider.id, `${provider.endpoint}/fine_tuning/jobs/${encodeURIComponent(id)}/events${qs}`, authHeaders(provider)).pipe(
    Effect.flatMap((json) =>
      Array.isArray(json?.data)
        // At most the page asked for, whatever the vendor sent.
        ? Effect.succeed({ events: (json.data as Array<unknown>).slice(0, options.limit ?? 20).map(decodeEvent), hasMore: json.has_more === true })
        : Effect.fail(protocolError(provider.id, "the events answer has no data list"))
    )
  )
}
