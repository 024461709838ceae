/**
 * LlamaParse (LlamaCloud) as a document parser: asynchronous.
 *
 * Wire format (LlamaCloud parsing API v1, https://docs.cloud.llamaindex.ai, the `parsing` upload,
 * job and result operations; the catalogue's base URL ends in `/api/v1`):
 *  - upload: `POST {endpoint}/parsing/upload`, multipart with the document as `file`; answers the
 *    job `{id, status}`.
 *  - poll: `GET {endpoint}/parsing/job/{id}` → `{id, status: PENDING | SUCCESS | ERROR |
 *    PARTIAL_SUCCESS | CANCELLED, error_code?, error_message?}`.
 *  - result: `GET {endpoint}/parsing/job/{id}/result/markdown` → `{markdown, job_metadata:
 *    {job_pages, ...}}`.
 *  - auth: `Authorization: Bearer <key>`; errors are `{"detail": "..."}`.
 */
import { Effect } from "effect"
import { authHeaders, getJson, postMultipart } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { type DocumentParser, fileForm, type JobState, pageCount, type ParsedDocument, pollJob, reasonOf } from "./DocumentParser.ts"

/** A job's status to the poll state; the result is fetched once the job succeeded. */
export const toJobState = (provider: string, job: any): Effect.Effect<JobState<void>, UpstreamError> => {
  switch (job?.status) {
    case "PENDING":
      return Effect.succeed({ status: "running" })
    case "SUCCESS":
    case "PARTIAL_SUCCESS":
      return Effect.succeed({ status: "done", value: undefined })
    case "ERROR":
      return Effect.succeed({ status: "failed", reason: reasonOf(job.error_message, `the job failed${typeof job.error_code === "string" ? ` (${job.error_code})` : ""}`) })
    case "CANCELLED":
    case "CANCELED":
      return Effect.succeed({ status: "failed", reason: "the job was cancelled" })
    default:
      return Effect.fail(protocolError(provider, `unknown job status ${JSON.stringify(job?.status)}`))
  }
}

/** The Markdown result to the parsed document. */
export const toParsed = (provider: string, result: any): Effect.Effect<ParsedDocument, UpstreamError> =>
  typeof result?.markdown === "string"
    ? Effect.succeed({ text: result.markdown, pages: pageCount(result.job_metadata?.job_pages) })
    : Effect.fail(protocolError(provider, "the result has no markdown"))

export const parser: DocumentParser = {
  parse: (provider, source, options) =>
    Effect.gen(function*() {
      const headers = authHeaders(provider)
      const job = yield* postMultipart(provider.id, `${provider.endpoint}/parsing/upload`, headers, fileForm("file", source))
      if (typeof job?.id !== "string" || job.id.length === 0) return yield* Effect.fail(protocolError(provider.id, "the upload answered no job id"))
      const jobUrl = `${provider.endpoint}/parsing/job/${encodeURIComponent(job.id)}`
      yield* pollJob(provider.id, Effect.flatMap(getJson(provider.id, jobUrl, headers), (j) => toJobState(provider.id, j)), options.pollMs)
      return yield* Effect.flatMap(getJson(provider.id, `${jobUrl}/result/markdown`, headers), (r) => toParsed(provider.id, r))
    })
}

/** What aigw serves through LlamaParse (a bespoke provider). */
export const served: Served = { documents: parser }
