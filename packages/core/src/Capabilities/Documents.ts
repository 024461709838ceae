/**
 * Document parsing (provider `local`): plain text, Markdown, CSV, JSON and HTML by hand; PDF text
 * with unpdf (PDF.js) in a sandbox process (Sandboxes.ts: PDF.js inflates content streams whole,
 * so a compression bomb meets the sandbox's memory and time limits, not the gateway's); DOCX text
 * with mammoth in a sandbox process too (it builds a DOM of the whole document: CPU and memory many
 * times the document's size), from the XML parts the gateway inflates through the bounded Zip.ts
 * (bounded by AIGW_MAX_INFLATED_BYTES and AIGW_MAX_INFLATE_RATIO: 413 above) rather than its own
 * jszip, which inflates whatever the archive holds. Other formats are refused with the list of
 * supported ones.
 *
 * A named vendor (Unstructured, LlamaParse, Reducto, LandingAI: Providers/Documents/) parses
 * through its API instead; `auto` and `local` stay in-process, so a document leaves the gateway
 * only when the caller names where it goes. The vendor path takes the same file types (the
 * result's `format` names one of them) and answers the same result shape.
 */
import { Effect } from "effect"
import { GatewayConfig } from "../Config.ts"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { BadRequest, PayloadTooLarge, Unprocessable } from "../Errors.ts"
import { jsonTextProblem } from "../JsonText.ts"
import type { Plan } from "../Plans.ts"
import { servedBy } from "../Providers/Registry.ts"
import { Routing } from "../Routing.ts"
import { parseResult, type SandboxFile } from "./Sandbox.ts"
import { Sandboxes, type Slot } from "./Sandboxes.ts"
import { vendorCall } from "./VendorCall.ts"
import * as Zip from "./Zip.ts"

export type Format = "text" | "markdown" | "csv" | "json" | "html" | "pdf" | "docx"

const byExtension: Record<string, Format> = {
  txt: "text", text: "text", log: "text", md: "markdown", markdown: "markdown", csv: "csv", json: "json", html: "html", htm: "html", pdf: "pdf", docx: "docx"
}
const byMime: Record<string, Format> = {
  "text/plain": "text",
  "text/markdown": "markdown",
  "text/csv": "csv",
  "application/json": "json",
  "text/html": "html",
  "application/pdf": "pdf",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx"
}

export const SUPPORTED = "txt, md, csv, json, html, pdf, docx"

export const formatOf = (filename: string, mime: string): Format | undefined =>
  byExtension[filename.toLowerCase().split(".").pop() ?? ""] ?? byMime[mime.split(";")[0]!.trim().toLowerCase()]

/** The most fields and rows a CSV document may hold: its rows are answered as arrays, each an object to build and send. */
export const MAX_CSV_FIELDS = 1_000_000
export const MAX_CSV_ROWS = 200_000

/**
 * RFC 4180 CSV: quoted fields, doubled quotes, CRLF or LF rows. A string says why there are no rows:
 * more than MAX_CSV_FIELDS fields or MAX_CSV_ROWS rows, or a quoted field never closed (read leniently,
 * it would swallow every row after it into one field).
 */
export const parseCsv = (text: string): Array<Array<string>> | string => {
  const tooLarge = `file holds more than ${MAX_CSV_ROWS} CSV rows or ${MAX_CSV_FIELDS} fields; split it into smaller documents`
  let fields = 0
  let quoteOpenedAt = 0
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let quoted = false
  // The field ends (and with `endsRow`, its row); false past the bounds.
  const endField = (endsRow: boolean) => {
    if (++fields > MAX_CSV_FIELDS || (endsRow && rows.length === MAX_CSV_ROWS)) return false
    row.push(field)
    field = ""
    if (endsRow) {
      rows.push(row)
      row = []
    }
    return true
  }
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      if (c === "\"" && text[i + 1] === "\"") {
        field += "\""
        i++
      } else if (c === "\"") quoted = false
      else field += c
    } else if (c === "\"") {
      quoted = true
      quoteOpenedAt = i
    } else if (c === ",") {
      if (!endField(false)) return tooLarge
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++
      if (!endField(true)) return tooLarge
    } else field += c
  }
  if (quoted) {
    const line = (text.slice(0, quoteOpenedAt).match(/\r\n|\r|\n/g)?.length ?? 0) + 1
    return `file is not valid CSV: the quoted field opened on line ${line} is never closed`
  }
  if ((field !== "" || row.length > 0) && !endField(true)) return tooLarge
  return rows
}

const entities: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: " " }

/** A numeric character reference's character; U+FFFD for one outside Unicode (as browsers do). */
const codePoint = (n: number) => (Number.isInteger(n) && n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : "\uFFFD")

/**
 * `html` without its comments and its script, style, noscript and template elements; one left open runs
 * to the end, as in a browser. A scan from each opening to its close, rather than a lazy regular
 * expression, which rescanned the rest of the text from every unclosed opening (quadratic).
 */
const withoutHiddenParts = (html: string) => {
  const lower = html.toLowerCase()
  const opening = /<!--|<(script|style|noscript|template)\b/gi
  let out = ""
  let at = 0
  for (;;) {
    opening.lastIndex = at
    const open = opening.exec(html)
    if (open === null) return out + html.slice(at)
    out += html.slice(at, open.index)
    const close = open[1] === undefined ? "-->" : `</${open[1].toLowerCase()}`
    const end = lower.indexOf(close, open.index + open[0].length)
    if (end === -1) return out
    at = open[1] === undefined ? end + close.length : Math.max(end + close.length, lower.indexOf(">", end) + 1)
  }
}

/** Visible text of an HTML document: scripts and styles dropped, block elements as line breaks, table cells apart. */
export const htmlText = (html: string) =>
  withoutHiddenParts(html)
    // A tag ends at the first `>` or before the next `<`: `[^>]*` rescanned to the end from every unclosed `<`.
    .replace(
      /<(br|hr|\/(?:p|div|h[1-6]|li|tr|section|article|header|footer|title|table|thead|tbody|tfoot|ul|ol|dl|dt|dd|blockquote|pre|nav|aside|main|figure|figcaption|form|fieldset|address|details|summary|caption))\b[^<>]*>/gi,
      "\n"
    )
    // The words of two cells, or of two items of a line, do not run together.
    .replace(/<\/(td|th|label|option|button)\b[^<>]*>/gi, " ")
    .replace(/<[^<>]+>/g, "")
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) =>
      e[0] === "#" ? codePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1))) : entities[e.toLowerCase()] ?? m)
    .replace(/[ \t]+/g, " ")
    .replace(/\n\s*\n+/g, "\n\n")
    .trim()

const archiveError = (e: unknown) =>
  e instanceof Zip.InflateLimitExceeded
    ? new PayloadTooLarge({ message: `document refused: ${e.message}` })
    : new BadRequest({ message: "file is not a readable DOCX document" })

/**
 * A DOCX archive's XML parts (names ending .xml or .rels), inflated through the bounded reader, as
 * the docx sandbox's files (runner.cjs). mammoth reads nothing else for text: an image part is read
 * only to be embedded in HTML.
 */
const docxParts = (zip: ReturnType<typeof Zip.open>) =>
  Effect.filterOrFail(
    Effect.tryPromise({
      try: async () => {
        const parts: Array<SandboxFile> = []
        for (const name of zip.names()) {
          if (/\.(xml|rels)$/i.test(name)) parts.push({ name, bytes: await zip.read(name) })
        }
        return parts
      },
      catch: archiveError
    }),
    // mammoth finds the main part through _rels/.rels, else at word/document.xml: without either there is no document.
    (parts) => parts.some((p) => p.name === "_rels/.rels" || p.name === "word/document.xml"),
    () => new BadRequest({ message: "file is not a readable DOCX document: it has no main document part" })
  )

const decodeUtf8 = (bytes: Uint8Array) =>
  Effect.try({
    try: () => new TextDecoder("utf-8", { fatal: true }).decode(bytes),
    catch: () => new BadRequest({ message: "file is not valid UTF-8 text" })
  })

/** A document's time in a sandbox, and the most text it may yield. */
const SANDBOX_TIMEOUT_MS = 30_000
const SANDBOX_MAX_TEXT = 8 * 1024 * 1024

/** A document read and checked as far as is cheap: what `parse` continues from. */
type Prepared =
  | { readonly format: "text" | "markdown" | "html"; readonly text: string }
  | { readonly format: "csv"; readonly text: string; readonly rows: Array<Array<string>> }
  | { readonly format: "json"; readonly data: unknown }
  | { readonly format: "pdf"; readonly bytes: Uint8Array; readonly release: Effect.Effect<void> }
  | { readonly format: "docx"; readonly parts: ReadonlyArray<SandboxFile>; readonly release: Effect.Effect<void> }

/** A document a vendor parses: its bytes as they came. */
interface ForVendor {
  readonly format: Format
  readonly vendor: ConfiguredProvider
  readonly bytes: Uint8Array
}

/** What `validate` answers: a document read for the local parsers, or for a vendor. */
export type Validated = Prepared | ForVendor

/** What a parse request carries: the file, the provider named (`auto` when none) and the caller. */
export interface DocumentInput {
  readonly file: File
  readonly provider: string
  readonly avatarId: string
  readonly plan: Plan
}

/** `auto` and `local` parse in-process; any other name is a vendor. */
const isLocal = (provider: string) => provider === "auto" || provider === "local"

/** JSON documents nest at most this deep (a deeper one would overflow the stack when printed back). */
const DOCUMENT_JSON_DEPTH = 256
/** JSON documents hold at most this many array items and object members (as CSV's fields: parsing, printing and answering are on the event loop). */
export const MAX_JSON_ITEMS = 1_000_000

/**
 * The document read as far as is cheap, or the refusal that depends only on the request: provider
 * (a vendor that is unknown, not configured or above the caller's plan), type, text that is not UTF-8, JSON that does not parse, a file that is no PDF or no zip, an archive
 * over its limits, a PDF sandbox that is unavailable or full. Answered before admission (docs/quota.md).
 */
export const validate = (input: DocumentInput) =>
  Effect.gen(function*() {
    if (isLocal(input.provider)) return yield* validateLocal(input.file, input.avatarId)
    const vendor = yield* Effect.flatMap(Routing, (r) => r.providerFor("documents", input.provider, input.plan))
    const format = yield* knownFormat(input.file)
    return { format, vendor, bytes: new Uint8Array(yield* Effect.promise(() => input.file.arrayBuffer())) } satisfies ForVendor as Validated
  })

const knownFormat = (file: File) => {
  const format = formatOf(file.name, file.type)
  return format ? Effect.succeed(format) : Effect.fail(new Unprocessable({ message: `Unsupported document type (${file.name || file.type || "unknown"}); supported: ${SUPPORTED}.` }))
}

/** `validate` for the in-process parsers. */
export const validateLocal = (file: File, avatarId: string) =>
  Effect.gen(function*() {
    const format = yield* knownFormat(file)
    const bytes = new Uint8Array(yield* Effect.promise(() => file.arrayBuffer()))
    switch (format) {
      case "text":
      case "markdown":
      case "html":
        return { format, text: yield* decodeUtf8(bytes) } satisfies Prepared as Prepared
      case "csv": {
        const text = yield* decodeUtf8(bytes)
        const rows = parseCsv(text)
        if (typeof rows === "string") return yield* Effect.fail(new BadRequest({ message: rows }))
        return { format, text, rows } satisfies Prepared as Prepared
      }
      case "json": {
        const raw = yield* decodeUtf8(bytes)
        // Unstorable text (NUL, an escaped lone surrogate) refused, as in a request's own JSON.
        const problem = jsonTextProblem(raw, { maxDepth: DOCUMENT_JSON_DEPTH, maxItems: MAX_JSON_ITEMS, refuseUnstorable: true })
        if (problem !== undefined) return yield* Effect.fail(new BadRequest({ message: `file is not usable JSON: ${problem}` }))
        const data = yield* Effect.try({ try: () => JSON.parse(raw) as unknown, catch: (e) => new BadRequest({ message: `file is not valid JSON: ${(e as Error).message}` }) })
        return { format, data } satisfies Prepared as Prepared
      }
      case "pdf": {
        if (!Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 1024)).includes("%PDF-")) {
          return yield* Effect.fail(new BadRequest({ message: "file is not a readable PDF" }))
        }
        const slot = yield* sandboxSlot("pdf", avatarId)
        return { format, bytes, release: slot.release } satisfies Prepared as Prepared
      }
      case "docx": {
        const { limits } = yield* GatewayConfig
        const zip = yield* Effect.try({ try: () => Zip.open(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), limits), catch: archiveError })
        // Inflated in the slot: the slots bound how many archives are inflated at once, not only how far each is.
        const slot = yield* sandboxSlot("docx", avatarId)
        const parts = yield* Effect.onError(docxParts(zip), () => slot.release)
        return { format, parts, release: slot.release } satisfies Prepared as Prepared
      }
    }
  })

/** The document readers that run in a sandbox process, and the package each needs. */
const readers = { pdf: { name: "PDF", packageName: "unpdf" }, docx: { name: "DOCX document", packageName: "mammoth" } } as const

/**
 * A sandbox slot for `avatarId` to read a document of `format` in, taken before admission (Sandboxes.reserve),
 * or the refusal: its reader is not installed, or no slot is free.
 */
const sandboxSlot = (format: keyof typeof readers, avatarId: string) =>
  Effect.flatMap(Sandboxes, (sandboxes) => Effect.zipRight(sandboxes.available(format, readers[format].packageName), sandboxes.reserve(avatarId)))

/** What the reader of `format` makes of the untrusted document `files` (runner.cjs) in a sandbox process, in the reserved `slot`. */
const readInSandbox = <A>(format: keyof typeof readers, files: ReadonlyArray<SandboxFile>, slot: Slot) =>
  Effect.gen(function*() {
    const sandboxes = yield* Sandboxes
    const { name, packageName } = readers[format]
    const sandbox = yield* sandboxes.available(format, packageName)
    const outcome = yield* sandboxes.run(sandbox, format, { code: "", files, timeoutMs: SANDBOX_TIMEOUT_MS, maxOutput: SANDBOX_MAX_TEXT }, slot)
    if (outcome.exitCode === 0 && outcome.result !== null) return parseResult(outcome.result) as A
    if (outcome.error === `file is not a readable ${name}`) return yield* Effect.fail(new BadRequest({ message: outcome.error }))
    return yield* Effect.fail(new Unprocessable({ message: `The ${name} could not be read within the sandbox's limits: ${outcome.error ?? "no answer"}.` }))
  })

/** How many words `text` holds, counted without keeping them. */
const wordsIn = (text: string) => {
  let n = 0
  for (const _ of text.matchAll(/\S+/g)) n++
  return n
}

/** The result shape every parse answers (ResponseSchemas.ts DocumentParseResult). */
const result = (file: File, format: Format, text: string, extra: Record<string, unknown>, provider: string) => ({
  filename: file.name,
  mimeType: file.type || null,
  format,
  text,
  characters: text.length,
  words: wordsIn(text),
  ...extra,
  provider
})

/** Parses through the named vendor and records the call (no tokens; no known price, so no cost). */
const parseWithVendor = (input: DocumentInput, format: Format, vendor: ConfiguredProvider, bytes: Uint8Array) =>
  Effect.gen(function*() {
    const config = yield* GatewayConfig
    const parser = servedBy(vendor).documents
    if (parser === undefined) return yield* Effect.fail(new Unprocessable({ message: `Provider ${vendor.id} cannot parse documents.` }))
    const parsed = yield* vendorCall(
      input.avatarId,
      vendor,
      "documents",
      parser.parse(vendor, { bytes, filename: input.file.name, mimeType: input.file.type }, { pollMs: config.jobPollMs, allowPrivateUrls: config.allowPrivateUrls })
    )
    const extra = { ...(parsed.pages !== undefined ? { pages: parsed.pages } : {}), ...(parsed.pageTexts !== undefined ? { pageTexts: parsed.pageTexts } : {}) }
    return result(input.file, format, parsed.text, extra, vendor.id)
  })

/** Parses a document `validate` has read and checked (the route's check hands it over: nothing is read twice). */
export const parseValidated = (input: DocumentInput, prepared: Validated) =>
  Effect.gen(function*() {
    if ("vendor" in prepared) return yield* parseWithVendor(input, prepared.format, prepared.vendor, prepared.bytes)
    return yield* parsePrepared(input.file, prepared)
  })

/** `use` of a validated document, after which its sandbox slot, if it holds one, is given back. */
const releasing = <A, E, R>(prepared: Validated, use: Effect.Effect<A, E, R>) => ("release" in prepared ? Effect.ensuring(use, prepared.release) : use)

export const parse = (input: DocumentInput) => Effect.flatMap(validate(input), (prepared) => releasing(prepared, parseValidated(input, prepared)))

/** Parses in-process (provider `local`, and `auto`). */
export const parseLocal = (file: File, avatarId: string) =>
  Effect.flatMap(validateLocal(file, avatarId), (prepared) => releasing(prepared, parsePrepared(file, prepared)))

const parsePrepared = (file: File, prepared: Prepared) =>
  Effect.gen(function*() {
    let text = ""
    const extra: Record<string, unknown> = {}
    switch (prepared.format) {
      case "text":
      case "markdown":
        text = prepared.text
        break
      case "csv":
        text = prepared.text
        extra.rows = prepared.rows
        extra.columns = prepared.rows[0] ?? []
        break
      case "json":
        extra.data = prepared.data
        text = JSON.stringify(prepared.data, null, 2)
        break
      case "html":
        text = htmlText(prepared.text)
        break
      case "pdf": {
        const pages = yield* readInSandbox<{ readonly totalPages: number; readonly text: ReadonlyArray<string> }>(
          "pdf",
          [{ name: "document.pdf", bytes: prepared.bytes }],
          prepared
        )
        extra.pages = pages.totalPages
        extra.pageTexts = pages.text
        text = pages.text.join("\n\n")
        break
      }
      case "docx": {
        const read = yield* readInSandbox<{ readonly text: string }>("docx", prepared.parts, prepared)
        text = read.text
        break
      }
    }
    return result(file, prepared.format, text, extra, "local")
  })
