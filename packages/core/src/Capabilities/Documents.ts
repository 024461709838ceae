/**
 * Document parsing (provider `local`): plain text, Markdown, CSV, JSON and HTML by hand; PDF text
 * with unpdf (PDF.js) in a sandbox process (Sandboxes.ts: PDF.js inflates content streams whole,
 * so a compression bomb meets the sandbox's memory and time limits, not the gateway's); DOCX text
 * with mammoth, reading the zip through Zip.ts
 * (bounded by AIGW_MAX_INFLATED_BYTES and AIGW_MAX_INFLATE_RATIO: 413 above) rather than its own
 * jszip, which inflates whatever the archive holds. Other formats are refused with the list of
 * supported ones.
 */
import { Effect } from "effect"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, PayloadTooLarge, Unprocessable } from "../Errors.ts"
import { Sandboxes } from "./Sandboxes.ts"
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

/** RFC 4180 CSV: quoted fields, doubled quotes, CRLF or LF rows. */
export const parseCsv = (text: string): Array<Array<string>> => {
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      if (c === "\"" && text[i + 1] === "\"") {
        field += "\""
        i++
      } else if (c === "\"") quoted = false
      else field += c
    } else if (c === "\"") quoted = true
    else if (c === ",") {
      row.push(field)
      field = ""
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++
      row.push(field)
      rows.push(row)
      row = []
      field = ""
    } else field += c
  }
  if (field !== "" || row.length > 0) {
    row.push(field)
    rows.push(row)
  }
  return rows
}

const entities: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: " " }

/** Visible text of an HTML document: scripts and styles dropped, block elements as line breaks. */
export const htmlText = (html: string) =>
  html
    .replace(/<(script|style|noscript|template)[\s\S]*?<\/\1>/gi, "")
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/<(br|\/p|\/div|\/h[1-6]|\/li|\/tr|\/section|\/article|\/header|\/footer)\b[^>]*>/gi, "\n")
    .replace(/<[^>]+>/g, "")
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) =>
      e[0] === "#" ? String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1))) : entities[e.toLowerCase()] ?? m)
    .replace(/[ \t]+/g, " ")
    .replace(/\n\s*\n+/g, "\n\n")
    .trim()

/** A DOCX archive as mammoth's zip interface (`{ file }`), read through the bounded Zip reader. */
const docxFile = (zip: ReturnType<typeof Zip.open>) => ({
  exists: (name: string) => zip.has(name),
  read: async (name: string, encoding?: string) => {
    const bytes = await zip.read(name)
    if (encoding === "base64") return bytes.toString("base64")
    return encoding ? new TextDecoder(encoding).decode(bytes) : bytes
  }
})

const archiveError = (e: unknown) =>
  e instanceof Zip.InflateLimitExceeded
    ? new PayloadTooLarge({ message: `document refused: ${e.message}` })
    : new BadRequest({ message: "file is not a readable DOCX document" })

const decodeUtf8 = (bytes: Uint8Array) =>
  Effect.try({
    try: () => new TextDecoder("utf-8", { fatal: true }).decode(bytes),
    catch: () => new BadRequest({ message: "file is not valid UTF-8 text" })
  })

/** A PDF's time in the sandbox, and the most text it may yield. */
const PDF_TIMEOUT_MS = 30_000
const PDF_MAX_TEXT = 8 * 1024 * 1024

/** The document's format, or the refusal that depends only on the request (answered before admission). */
export const validate = (input: { readonly file: File; readonly provider: string }) =>
  Effect.suspend((): Effect.Effect<Format, Unprocessable> => {
    if (input.provider !== "auto" && input.provider !== "local") {
      return Effect.fail(new Unprocessable({ message: `Documents are parsed locally (provider local); provider ${input.provider} is not supported yet.` }))
    }
    const format = formatOf(input.file.name, input.file.type)
    return format ? Effect.succeed(format) : Effect.fail(new Unprocessable({ message: `Unsupported document type (${input.file.name || input.file.type || "unknown"}); supported: ${SUPPORTED}.` }))
  })

/** Text per page of an untrusted PDF, read in a sandbox process. */
const pdfPages = (bytes: Uint8Array, avatarId: string) =>
  Effect.gen(function*() {
    const sandboxes = yield* Sandboxes
    const sandbox = yield* sandboxes.available("pdf", "unpdf")
    const outcome = yield* sandboxes.run(sandbox, "pdf", { code: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64"), timeoutMs: PDF_TIMEOUT_MS, maxOutput: PDF_MAX_TEXT }, avatarId)
    if (outcome.exitCode === 0 && outcome.result !== null) return JSON.parse(outcome.result) as { readonly totalPages: number; readonly text: ReadonlyArray<string> }
    if (outcome.error === "file is not a readable PDF") return yield* Effect.fail(new BadRequest({ message: outcome.error }))
    return yield* Effect.fail(new Unprocessable({ message: `The PDF could not be read within the sandbox's limits: ${outcome.error ?? "no answer"}.` }))
  })

export const parse = (input: { readonly file: File; readonly provider: string; readonly avatarId: string }) =>
  Effect.gen(function*() {
    const format = yield* validate(input)
    const bytes = new Uint8Array(yield* Effect.promise(() => input.file.arrayBuffer()))
    let text = ""
    const extra: Record<string, unknown> = {}
    switch (format) {
      case "text":
      case "markdown":
        text = yield* decodeUtf8(bytes)
        break
      case "csv": {
        text = yield* decodeUtf8(bytes)
        const rows = parseCsv(text)
        extra.rows = rows
        extra.columns = rows[0] ?? []
        break
      }
      case "json": {
        const raw = yield* decodeUtf8(bytes)
        extra.data = yield* Effect.try({ try: () => JSON.parse(raw) as unknown, catch: (e) => new BadRequest({ message: `file is not valid JSON: ${(e as Error).message}` }) })
        text = JSON.stringify(extra.data, null, 2)
        break
      }
      case "html":
        text = htmlText(yield* decodeUtf8(bytes))
        break
      case "pdf": {
        const pages = yield* pdfPages(bytes, input.avatarId)
        extra.pages = pages.totalPages
        extra.pageTexts = pages.text
        text = pages.text.join("\n\n")
        break
      }
      case "docx": {
        const { limits } = yield* GatewayConfig
        const zip = yield* Effect.try({ try: () => Zip.open(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), limits), catch: archiveError })
        const mammoth = yield* Effect.promise(() => import("mammoth"))
        const result = yield* Effect.tryPromise({
          // mammoth takes an opened zip as `file` (lib/unzip.js); its typings list only path and buffer.
          try: () => mammoth.extractRawText({ file: docxFile(zip) } as unknown as { buffer: Buffer }),
          catch: archiveError
        })
        text = result.value.trim()
        break
      }
    }
    return {
      filename: input.file.name,
      mimeType: input.file.type || null,
      format,
      text,
      characters: text.length,
      words: (text.match(/\S+/g) ?? []).length,
      ...extra,
      provider: "local"
    }
  })
