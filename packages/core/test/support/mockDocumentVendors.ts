/**
 * Local mocks of the document parsing vendors, each speaking its documented wire format on
 * 127.0.0.1:0 (references in the adapters: src/Providers/Documents/*.ts). The "parsing" is a
 * transform a test can check: the uploaded file's UTF-8 text, pages split at form feeds (\f),
 * elements at blank lines. Wrong keys are a 401 and missing parts a 422, in FastAPI's
 * `{"detail": ...}` shape all four vendors use.
 *  - unstructured: POST /general/v0/general, multipart `files`, header `unstructured-api-key` →
 *    [{type, element_id, text, metadata {page_number, filename}}].
 *  - llamaparse: POST /api/v1/parsing/upload (multipart `file`) → {id, status}; GET
 *    /api/v1/parsing/job/{id} → {id, status PENDING|SUCCESS|ERROR, error_message}; GET
 *    /api/v1/parsing/job/{id}/result/markdown → {markdown, job_metadata {job_pages}}. Bearer.
 *  - reducto: POST /upload (multipart `file`) → {file_id: "reducto://...", presigned_url}; POST
 *    /parse {input} → {job_id, duration, usage {num_pages, credits}, result {type "full", chunks}
 *    | {type "url", url}}. Bearer.
 *  - landingai: POST /v1/ade/parse (multipart `document`) → {markdown, chunks [{id, type,
 *    markdown, grounding {page (0-based), box}}], splits, metadata {page_count, ...}}. Bearer.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export type DocumentVendor = "unstructured" | "llamaparse" | "reducto" | "landingai"

export interface UploadedFile {
  readonly field: string
  readonly name: string
  readonly type: string
  readonly text: string
}

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  /** The JSON body, when there is one. */
  readonly json?: unknown
  /** The multipart body's files and fields, when it is multipart. */
  readonly files?: ReadonlyArray<UploadedFile>
  readonly fields?: Readonly<Record<string, string>>
}

export interface JobBehaviour {
  /** How many polls answer PENDING before SUCCESS (LlamaParse). */
  readonly pendingPolls?: number
  /** The job ends in ERROR with this message. */
  readonly failWith?: string
  /** The job never leaves PENDING. */
  readonly never?: boolean
}

export interface DocumentVendorMock {
  /** The base URL, as `<ID>_BASE_URL` takes it. */
  readonly url: string
  readonly requests: Array<RecordedRequest>
  /** The next answer is this HTTP error, in the vendor's error shape. */
  failNext(status: number, detail: string): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(contentType: string, body: string): void
  /** How the next LlamaParse jobs run. */
  setJob(behaviour: JobBehaviour): void
  /** Reducto answers its result as a URL to fetch (as it does for large results). */
  setUrlResult(on: boolean): void
  close(): Promise<void>
}

const prefixes: Record<DocumentVendor, string> = { unstructured: "/general/v0", llamaparse: "/api/v1", reducto: "", landingai: "/v1" }

/** The mock's "parse": pages at form feeds, paragraphs at blank lines. */
const pagesOf = (text: string) => text.split("\f").map((page) => page.split(/\n\s*\n/).map((p) => p.trim()).filter((p) => p.length > 0))

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", reject)
  })

const readForm = async (req: IncomingMessage, body: Buffer) => {
  const form = await new Request("http://mock/", { method: "POST", headers: { "content-type": req.headers["content-type"]! }, body: new Uint8Array(body) }).formData()
  const files: Array<UploadedFile> = []
  const fields: Record<string, string> = {}
  for (const [field, value] of form.entries()) {
    if (typeof value === "string") fields[field] = value
    else files.push({ field, name: value.name, type: value.type, text: await value.text() })
  }
  return { files, fields }
}

export const startDocumentVendorMock = async (vendor: DocumentVendor, apiKey: string): Promise<DocumentVendorMock> => {
  const requests: Array<RecordedRequest> = []
  let failure: { status: number; detail: string } | undefined
  let raw: { contentType: string; body: string } | undefined
  let job: JobBehaviour = {}
  let urlResult = false
  const jobs = new Map<string, { text: string; polls: number; behaviour: JobBehaviour }>()
  const uploads = new Map<string, string>()
  const results = new Map<string, unknown>()
  let origin = ""

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" })
    res.end(JSON.stringify(body))
  }
  const detail = (res: ServerResponse, status: number, message: string) => send(res, status, { detail: message })

  const authorized = (req: IncomingMessage) =>
    vendor === "unstructured" ? req.headers["unstructured-api-key"] === apiKey : req.headers.authorization === `Bearer ${apiKey}`

  /** The uploaded file under `field`, or a FastAPI-style 422 naming the missing part. */
  const fileIn = (res: ServerResponse, files: ReadonlyArray<UploadedFile> | undefined, field: string) => {
    const file = files?.find((f) => f.field === field)
    if (!file) detail(res, 422, `field required: ${field}`)
    return file
  }

  const route = (req: IncomingMessage, res: ServerResponse, path: string, recorded: RecordedRequest) => {
    const { files } = recorded
    switch (vendor) {
      case "unstructured": {
        if (req.method !== "POST" || path !== "/general") return detail(res, 404, "Not Found")
        const file = fileIn(res, files, "files")
        if (!file) return
        const elements = pagesOf(file.text).flatMap((paragraphs, i) =>
          paragraphs.map((text, j) => ({ type: j === 0 ? "Title" : "NarrativeText", element_id: randomUUID(), text, metadata: { page_number: i + 1, filename: file.name, languages: ["eng"] } }))
        )
        return send(res, 200, elements)
      }
      case "llamaparse": {
        if (req.method === "POST" && path === "/parsing/upload") {
          const file = fileIn(res, files, "file")
          if (!file) return
          const id = randomUUID()
          jobs.set(id, { text: file.text, polls: 0, behaviour: job })
          return send(res, 200, { id, status: "PENDING" })
        }
        const m = /^\/parsing\/job\/([^/]+)(\/result\/markdown)?$/.exec(path)
        const found = m ? jobs.get(decodeURIComponent(m[1]!)) : undefined
        if (req.method !== "GET" || !m || !found) return detail(res, 404, "Job not found")
        const { behaviour } = found
        const done = !behaviour.never && found.polls >= (behaviour.pendingPolls ?? 0)
        if (m[2]) {
          if (!done || behaviour.failWith) return detail(res, 400, "Job is not complete")
          const pages = pagesOf(found.text)
          return send(res, 200, { markdown: pages.map((p) => p.join("\n\n")).join("\n---\n"), job_metadata: { job_pages: pages.length, job_is_cache_hit: false } })
        }
        found.polls++
        if (!done) return send(res, 200, { id: m[1], status: "PENDING" })
        if (behaviour.failWith) return send(res, 200, { id: m[1], status: "ERROR", error_code: "PDF_IS_BROKEN", error_message: behaviour.failWith })
        return send(res, 200, { id: m[1], status: "SUCCESS" })
      }
      case "reducto": {
        if (req.method === "POST" && path === "/upload") {
          const file = fileIn(res, files, "file")
          if (!file) return
          const id = `reducto://${randomUUID()}.txt`
          uploads.set(id, file.text)
          return send(res, 200, { file_id: id, presigned_url: null })
        }
        if (req.method === "POST" && path === "/parse") {
          const input = (recorded.json as any)?.input
          const text = typeof input === "string" ? uploads.get(input) : undefined
          if (text === undefined) return detail(res, 422, "input must be a URL or a reducto:// file id from /upload")
          const pages = pagesOf(text)
          const chunks = pages.map((p, i) => ({ content: p.join("\n\n"), embed: p.join(" "), enriched: null, blocks: p.map((c) => ({ type: "Text", content: c, bbox: { left: 0, top: 0, width: 1, height: 1, page: i + 1 }, confidence: "high" })) }))
          const jobId = randomUUID()
          const usage = { num_pages: pages.length, credits: pages.length }
          if (!urlResult) return send(res, 200, { job_id: jobId, duration: 0.1, usage, result: { type: "full", chunks } })
          results.set(jobId, chunks)
          return send(res, 200, { job_id: jobId, duration: 0.1, usage, result: { type: "url", url: `${origin}/results/${jobId}.json`, result_id: jobId } })
        }
        return detail(res, 404, "Not Found")
      }
      case "landingai": {
        if (req.method !== "POST" || path !== "/ade/parse") return detail(res, 404, "Not Found")
        const file = fileIn(res, files, "document")
        if (!file) return
        const pages = pagesOf(file.text)
        const chunks = pages.flatMap((paragraphs, page) =>
          paragraphs.map((text) => {
            const id = randomUUID()
            return { id, type: "text", markdown: `<a id='${id}'></a>\n\n${text}`, grounding: { page, box: { left: 0, top: 0, right: 1, bottom: 1 } } }
          })
        )
        return send(res, 200, {
          markdown: chunks.map((c) => c.markdown).join("\n\n"),
          chunks,
          splits: [],
          metadata: { filename: file.name, org_id: null, page_count: pages.length, duration_ms: 12, credit_usage: 3 * pages.length, version: "dpt-2-20251103", job_id: randomUUID() }
        })
      }
    }
  }

  const server = createServer(async (req, res) => {
    try {
      const body = await readBody(req)
      const url = new URL(req.url ?? "/", "http://mock")
      // Reducto's presigned result URLs carry no key.
      if (vendor === "reducto" && req.method === "GET" && url.pathname.startsWith("/results/")) {
        const found = results.get(url.pathname.slice("/results/".length).replace(/\.json$/, ""))
        requests.push({ method: "GET", path: url.pathname, headers: req.headers })
        return found === undefined ? detail(res, 404, "NoSuchKey") : send(res, 200, found)
      }
      const contentType = req.headers["content-type"] ?? ""
      const multipart = contentType.startsWith("multipart/form-data")
      const form = multipart ? await readForm(req, body) : undefined
      const json = contentType.startsWith("application/json") && body.length > 0 ? JSON.parse(body.toString("utf8")) as unknown : undefined
      const recorded: RecordedRequest = { method: req.method ?? "", path: url.pathname, headers: req.headers, ...(json !== undefined ? { json } : {}), ...(form ?? {}) }
      requests.push(recorded)
      if (!authorized(req)) return detail(res, 401, "Invalid API key")
      if (failure) {
        const f = failure
        failure = undefined
        return detail(res, f.status, f.detail)
      }
      if (raw) {
        const r = raw
        raw = undefined
        res.writeHead(200, { "content-type": r.contentType })
        return res.end(r.body)
      }
      const prefix = prefixes[vendor]
      if (!url.pathname.startsWith(prefix)) return detail(res, 404, "Not Found")
      return route(req, res, url.pathname.slice(prefix.length), recorded)
    } catch (e) {
      detail(res, 500, `mock error: ${(e as Error).message}`)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: `${origin}${prefixes[vendor]}`,
    requests,
    failNext: (status, message) => void (failure = { status, detail: message }),
    rawNext: (contentType, body) => void (raw = { contentType, body }),
    setJob: (behaviour) => void (job = behaviour),
    setUrlResult: (on) => void (urlResult = on),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
