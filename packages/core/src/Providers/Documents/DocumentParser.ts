/**
 * Document parsing vendors (Unstructured, LlamaParse, Reducto, LandingAI): one adapter per vendor
 * API turns a file into text, with the page count and per-page text when the vendor reports
 * them. Capabilities/Documents.ts maps the answer into the gateway's result shape. Asynchronous
 * vendors poll through `pollJob` (bounded polls, one overall deadline, a failed job's message).
 */
import type { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { jobFailed as failedJob, type JobState, pollJob as pollUntilDone } from "../internal/jobs.ts"
import { shownUpstreamText, type UpstreamError } from "../UpstreamError.ts"

export interface DocumentSource {
  readonly bytes: Uint8Array
  readonly filename: string
  readonly mimeType: string
}

export interface ParsedDocument {
  /** The document's text (Markdown for the vendors that answer Markdown). */
  readonly text: string
  readonly pages?: number | undefined
  /** The text of each page, first page first, when the vendor tells which page each part is on. */
  readonly pageTexts?: ReadonlyArray<string> | undefined
}

export interface ParseOptions {
  /** The wait between two polls of an asynchronous job (`AIGW_JOB_POLL_MS`). */
  readonly pollMs: number
  /** Whether result URLs a vendor answers may point at private addresses (`AIGW_ALLOW_PRIVATE_URLS`). */
  readonly allowPrivateUrls: boolean
}

export interface DocumentParser {
  readonly parse: (provider: ConfiguredProvider, source: DocumentSource, options: ParseOptions) => Effect.Effect<ParsedDocument, UpstreamError>
}

/** The file as the single part of a multipart body, under the vendor's field name. */
export const fileForm = (field: string, source: DocumentSource, fields: Readonly<Record<string, string>> = {}): FormData => {
  const form = new FormData()
  form.append(field, new File([source.bytes as BlobPart], source.filename || "document", { type: source.mimeType || "application/octet-stream" }))
  for (const [name, value] of Object.entries(fields)) form.append(name, value)
  return form
}

/** How long a parse may take in all, polls included: the caller waits on the HTTP request. */
export const PARSE_DEADLINE_MS = 5 * 60_000
/** The most polls of one job, whatever the poll interval. */
export const MAX_POLLS = 120

const PARSING = { deadlineMs: PARSE_DEADLINE_MS, maxPolls: MAX_POLLS, task: "parse the document", finish: "finish parsing the document" }

export type { JobState } from "../internal/jobs.ts"

/** A job the vendor reports as failed or cancelled, with the vendor's reason. */
export const jobFailed = (provider: string, reason: string) => failedJob(provider, PARSING.task, reason)

/** Polls a parse job (internal/jobs.ts) within MAX_POLLS polls and PARSE_DEADLINE_MS in all. */
export const pollJob = <A>(provider: string, poll: Effect.Effect<JobState<A>, UpstreamError>, pollMs: number): Effect.Effect<A, UpstreamError> =>
  pollUntilDone(provider, poll, pollMs, PARSING)

/** A vendor's message string, or `fallback` when it sent none. */
export const reasonOf = (value: unknown, fallback: string): string => (typeof value === "string" && value.length > 0 ? shownUpstreamText(value, 500) : fallback)

/**
 * Text and per-page text from parts that each name their page (1-based): pages without parts are
 * empty; parts without a page count for the whole text only, and then no page texts are given.
 */
export const byPage = (parts: ReadonlyArray<{ readonly text: string; readonly page: number | undefined }>): Pick<ParsedDocument, "text" | "pageTexts"> => {
  const text = parts.map((p) => p.text).filter((t) => t.length > 0).join("\n\n")
  if (parts.length === 0 || parts.some((p) => p.page === undefined)) return { text }
  // A loop, not Math.max(...pages): a spread of a vendor's 200,000 parts overflows the stack.
  let count = 0
  for (const p of parts) count = Math.max(count, p.page!)
  const pages: Array<Array<string>> = Array.from({ length: count }, () => [])
  for (const p of parts) if (p.text.length > 0) pages[p.page! - 1]!.push(p.text)
  return { text, pageTexts: pages.map((texts) => texts.join("\n\n")) }
}

/** A page number the vendor sent, when it is one (a positive integer below a sane bound). */
export const pageNumber = (value: unknown, base: 0 | 1): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= base && value < 100_000 + base ? value - base + 1 : undefined

/** A page count the vendor sent, when it is one. */
export const pageCount = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= 100_000 ? value : undefined
