/**
 * Document parsing vendors against local mocks of their APIs over the real transport: the exact
 * requests (paths, auth headers, multipart parts, JSON bodies), the mapped results, asynchronous
 * jobs (pending, failed, never finishing), vendor error bodies and hostile answers.
 */
import { Effect, Either, Fiber, Option, Redacted, TestClock, TestContext } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ConfiguredProvider } from "../../src/Catalog/Catalog.ts"
import { defaultLimits } from "../../src/Config.ts"
import { MAX_POLLS, type ParseOptions } from "../../src/Providers/Documents/DocumentParser.ts"
import * as LlamaParse from "../../src/Providers/Documents/LlamaParse.ts"
import { REQUEST_TIMEOUT } from "../../src/Providers/internal/http.ts"
import { setReplyLimit } from "../../src/Providers/internal/nodeFetch.ts"
import { endpointTypes, servedBy } from "../../src/Providers/Registry.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { type DocumentVendor, type DocumentVendorMock, startDocumentVendorMock } from "../support/mockDocumentVendors.ts"

const KEY = "doc-key-123"
const TEXT = "Quarterly report\n\nRevenue grew.\fPage two\n\nCosts fell."
const options: ParseOptions = { pollMs: 1, allowPrivateUrls: true }

const providerFor = (id: DocumentVendor, url: string): ConfiguredProvider => {
  const entry = data.providers.find((p) => p.id === id)!
  return { ...entry, capabilities: endpointTypes(entry), endpoint: url, apiKey: Option.some(Redacted.make(KEY)), configured: true, settings: {}, missing: undefined }
}

const parseWith = (provider: ConfiguredProvider, text = TEXT, opts = options) =>
  Effect.runPromise(Effect.either(servedBy(provider).documents!.parse(provider, { bytes: new TextEncoder().encode(text), filename: "report.txt", mimeType: "text/plain" }, opts)))

const left = (result: Either.Either<unknown, UpstreamError>): UpstreamError => {
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

const vendors: ReadonlyArray<{ id: DocumentVendor; auth: (h: Record<string, unknown>) => void }> = [
  { id: "unstructured", auth: (h) => expect(h).toMatchObject({ "unstructured-api-key": KEY }) },
  { id: "llamaparse", auth: (h) => expect(h.authorization).toBe(`Bearer ${KEY}`) },
  { id: "reducto", auth: (h) => expect(h.authorization).toBe(`Bearer ${KEY}`) },
  { id: "landingai", auth: (h) => expect(h.authorization).toBe(`Bearer ${KEY}`) }
]

describe("document vendors in the registry", () => {
  it("serve documents through each of the four vendors", () => {
    for (const { id } of vendors) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(endpointTypes(entry), id).toContain("documents")
    }
  })
})

for (const { id, auth } of vendors) {
  describe(`${id} document parser`, () => {
    let mock: DocumentVendorMock
    let provider: ConfiguredProvider
    beforeAll(async () => {
      mock = await startDocumentVendorMock(id, KEY)
      provider = providerFor(id, mock.url)
    })
    afterAll(() => mock.close())
    afterEach(() => {
      mock.requests.length = 0
      mock.setJob({})
      mock.setUrlResult(false)
      setReplyLimit(defaultLimits.maxUpstreamResponseBytes)
    })

    it("sends the document with the vendor's credentials and never the other header", async () => {
      const result = await parseWith(provider)
      expect(Either.isRight(result)).toBe(true)
      const upload = mock.requests.find((r) => r.files !== undefined)!
      auth(upload.headers as Record<string, unknown>)
      if (id === "unstructured") expect(upload.headers.authorization).toBeUndefined()
      else expect(upload.headers["unstructured-api-key"]).toBeUndefined()
      expect(upload.method).toBe("POST")
      expect(upload.files).toHaveLength(1)
      expect(upload.files![0]).toMatchObject({ name: "report.txt", type: "text/plain", text: TEXT })
      for (const r of mock.requests) auth(r.headers as Record<string, unknown>)
    })

    it("answers a vendor's error body as an upstream error carrying its message", async () => {
      mock.failNext(422, "Unsupported file type")
      const error = left(await parseWith(provider))
      expect(error).toMatchObject({ kind: "http", status: 422, retryable: false })
      expect(error.message).toBe(`${id} answered HTTP 422: Unsupported file type`)
      mock.failNext(503, "Service overloaded")
      expect(left(await parseWith(provider))).toMatchObject({ kind: "http", status: 503, retryable: true })
    })

    it("refuses a wrong key with the vendor's 401", async () => {
      const wrong = { ...provider, apiKey: Option.some(Redacted.make("nope")) }
      expect(left(await parseWith(wrong))).toMatchObject({ kind: "http", status: 401, message: `${id} answered HTTP 401: Invalid API key` })
    })

    it("turns hostile answers into protocol errors", async () => {
      mock.rawNext("text/html", "<html>gateway timeout</html>")
      expect(left(await parseWith(provider))).toMatchObject({ kind: "protocol", message: `${id} sent an unexpected answer: the body is not JSON` })
      mock.rawNext("application/json", JSON.stringify({ surprise: [1, 2, 3] }))
      expect(left(await parseWith(provider))).toMatchObject({ kind: "protocol" })
      mock.rawNext("application/json", "null")
      expect(left(await parseWith(provider))).toMatchObject({ kind: "protocol" })
    })

    it("stops a huge answer at the reply limit", async () => {
      setReplyLimit(64)
      const error = left(await parseWith(provider, `${"many words ".repeat(200)}`))
      expect(error.kind).toBe("protocol")
      expect(error.message).toMatch(/exceeded 64 bytes/)
    })
  })
}

describe("unstructured wire", () => {
  let mock: DocumentVendorMock
  beforeAll(async () => (mock = await startDocumentVendorMock("unstructured", KEY)))
  afterAll(() => mock.close())

  it("posts `files` to /general/v0/general and joins the elements, page by page", async () => {
    const result = Either.getOrThrow(await parseWith(providerFor("unstructured", mock.url)))
    expect(mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /general/v0/general"])
    expect(mock.requests[0]!.files![0]!.field).toBe("files")
    expect(result).toEqual({
      text: "Quarterly report\n\nRevenue grew.\n\nPage two\n\nCosts fell.",
      pages: 2,
      pageTexts: ["Quarterly report\n\nRevenue grew.", "Page two\n\nCosts fell."]
    })
  })

  it("reads an answer of 200,000 elements page by page (a spread of their pages overflowed the stack: a 500)", async () => {
    mock.rawNext("application/json", JSON.stringify(Array.from({ length: 200_000 }, (_, i) => ({ type: "NarrativeText", text: "a", metadata: { page_number: 1 + (i % 3) } }))))
    const result = Either.getOrThrow(await parseWith(providerFor("unstructured", mock.url)))
    expect([result.pages, result.pageTexts?.[2]?.length]).toEqual([3, 66_666 * 3 - 2])
  })

  it("refuses elements without text", async () => {
    mock.rawNext("application/json", JSON.stringify([{ type: "Title", metadata: {} }]))
    expect(left(await parseWith(providerFor("unstructured", mock.url)))).toMatchObject({ kind: "protocol", message: "unstructured sent an unexpected answer: an element has no text" })
  })
})

describe("llamaparse wire (asynchronous)", () => {
  let mock: DocumentVendorMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startDocumentVendorMock("llamaparse", KEY)
    provider = providerFor("llamaparse", mock.url)
  })
  afterAll(() => mock.close())
  afterEach(() => {
    mock.requests.length = 0
    mock.setJob({})
  })

  it("uploads `file`, polls the job until SUCCESS, then reads the Markdown result", async () => {
    mock.setJob({ pendingPolls: 2 })
    const result = Either.getOrThrow(await parseWith(provider))
    const jobId = (mock.requests[1]!.path.split("/").pop())!
    expect(mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      "POST /api/v1/parsing/upload",
      `GET /api/v1/parsing/job/${jobId}`,
      `GET /api/v1/parsing/job/${jobId}`,
      `GET /api/v1/parsing/job/${jobId}`,
      `GET /api/v1/parsing/job/${jobId}/result/markdown`
    ])
    expect(mock.requests[0]!.files![0]!.field).toBe("file")
    expect(result).toEqual({ text: "Quarterly report\n\nRevenue grew.\n---\nPage two\n\nCosts fell.", pages: 2 })
  })

  it("stops on a failed job with the vendor's message, without asking for a result", async () => {
    mock.setJob({ pendingPolls: 1, failWith: "The PDF is encrypted" })
    const error = left(await parseWith(provider))
    expect(error).toMatchObject({ kind: "http", retryable: false, message: "llamaparse could not parse the document: The PDF is encrypted" })
    expect(mock.requests.some((r) => r.path.endsWith("/result/markdown"))).toBe(false)
  })

  it("gives up on a job that never finishes after a bounded number of polls (504)", async () => {
    mock.setJob({ never: true })
    const error = left(await parseWith(provider))
    expect(error).toMatchObject({ kind: "timeout", message: "llamaparse did not finish parsing the document in time" })
    expect(mock.requests.filter((r) => r.method === "GET")).toHaveLength(MAX_POLLS)
  })

  it("refuses an upload answer without a job id and an unknown job status", async () => {
    mock.rawNext("application/json", JSON.stringify({ status: "PENDING" }))
    expect(left(await parseWith(provider))).toMatchObject({ kind: "protocol", message: "llamaparse sent an unexpected answer: the upload answered no job id" })
    expect(left(await Effect.runPromise(Effect.either(LlamaParse.toJobState("llamaparse", { status: "EXPLODED" }))))).toMatchObject({ kind: "protocol" })
    expect(left(await Effect.runPromise(Effect.either(LlamaParse.toParsed("llamaparse", { text: "no markdown" }))))).toMatchObject({ kind: "protocol" })
    expect(Effect.runSync(LlamaParse.toJobState("llamaparse", { status: "CANCELLED" }))).toEqual({ status: "failed", reason: "the job was cancelled" })
  })
})

describe("reducto wire", () => {
  let mock: DocumentVendorMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startDocumentVendorMock("reducto", KEY)
    provider = providerFor("reducto", mock.url)
  })
  afterAll(() => mock.close())
  afterEach(() => {
    mock.requests.length = 0
    mock.setUrlResult(false)
  })

  it("uploads `file`, parses the reducto:// id it answered, and joins the chunks", async () => {
    const result = Either.getOrThrow(await parseWith(provider))
    expect(mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /upload", "POST /parse"])
    expect(mock.requests[0]!.files![0]!.field).toBe("file")
    expect(mock.requests[1]!.json).toEqual({ input: expect.stringMatching(/^reducto:\/\//) })
    expect(mock.requests[1]!.headers["content-type"]).toMatch(/^application\/json/)
    expect(result).toEqual({ text: "Quarterly report\n\nRevenue grew.\n\nPage two\n\nCosts fell.", pages: 2 })
  })

  it("fetches a URL result without the key", async () => {
    mock.setUrlResult(true)
    const result = Either.getOrThrow(await parseWith(provider))
    expect(result.text).toBe("Quarterly report\n\nRevenue grew.\n\nPage two\n\nCosts fell.")
    const fetched = mock.requests.at(-1)!
    expect(fetched.path).toMatch(/^\/results\/.+\.json$/)
    expect(fetched.headers.authorization).toBeUndefined()
  })

  it("refuses a URL result pointing at a private address unless private URLs are allowed", async () => {
    mock.setUrlResult(true)
    const error = left(await parseWith(provider, TEXT, { ...options, allowPrivateUrls: false }))
    expect(error.kind).toBe("protocol")
    expect(error.message).toMatch(/result url refused: 127\.0\.0\.1/)
    expect(mock.requests.some((r) => r.path.startsWith("/results/"))).toBe(false)
  })

  it("gives a result URL that never answers the transport's deadline: a timeout, its request aborted", async () => {
    const { toParsed } = await import("../../src/Providers/Documents/Reducto.ts")
    let arrived!: () => void
    const requested = new Promise<void>((resolve) => (arrived = resolve))
    let closed = false
    const silent = http.createServer((req) => {
      req.socket.on("close", () => (closed = true))
      arrived()
    })
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/results/r.json`
      const result = await Effect.runPromise(Effect.gen(function*() {
        const fiber = yield* Effect.fork(Effect.either(toParsed("reducto", { result: { type: "url", url } }, options)))
        yield* Effect.promise(() => requested)
        yield* TestClock.adjust(REQUEST_TIMEOUT)
        return yield* Fiber.join(fiber)
      }).pipe(Effect.provide(TestContext.TestContext)))
      // It used to wait for good (a client's call held 200 s and more).
      expect(left(result)).toMatchObject({ kind: "timeout", message: "reducto did not answer at its result url in time", retryable: true })
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(closed).toBe(true)
    } finally {
      silent.closeAllConnections()
      silent.close()
    }
  })

  it("refuses an unknown result type and chunks without content", async () => {
    const { toParsed } = await import("../../src/Providers/Documents/Reducto.ts")
    const run = (answer: unknown) => Effect.runPromise(Effect.either(toParsed("reducto", answer, options)))
    expect(left(await run({ result: { type: "stream" } })).message).toMatch(/unknown result type "stream"/)
    expect(left(await run({ result: { type: "full", chunks: [{ embed: "x" }] } })).message).toMatch(/no chunks with content/)
  })
})

describe("landingai wire", () => {
  let mock: DocumentVendorMock
  beforeAll(async () => (mock = await startDocumentVendorMock("landingai", KEY)))
  afterAll(() => mock.close())

  it("posts `document` to /v1/ade/parse; the Markdown as text, pages from the chunks' grounding", async () => {
    const result = Either.getOrThrow(await parseWith(providerFor("landingai", mock.url)))
    expect(mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /v1/ade/parse"])
    expect(mock.requests[0]!.files![0]!.field).toBe("document")
    expect(result.pages).toBe(2)
    expect(result.text).toMatch(/^<a id='[^']+'><\/a>\n\nQuarterly report/)
    expect(result.pageTexts).toHaveLength(2)
    expect(result.pageTexts![0]).toMatch(/Quarterly report[\s\S]*Revenue grew\.$/)
    expect(result.pageTexts![1]).toMatch(/Page two[\s\S]*Costs fell\.$/)
  })

  it("keeps empty trailing pages and drops page texts that contradict the page count", async () => {
    const { toParsed } = await import("../../src/Providers/Documents/LandingAi.ts")
    const run = (answer: unknown) => Effect.runSync(toParsed("landingai", answer))
    const chunk = (page: number) => ({ markdown: `p${page}`, grounding: { page } })
    expect(run({ markdown: "p0", chunks: [chunk(0)], metadata: { page_count: 3 } })).toEqual({ text: "p0", pages: 3, pageTexts: ["p0", "", ""] })
    expect(run({ markdown: "p4", chunks: [chunk(4)], metadata: { page_count: 2 } })).toEqual({ text: "p4", pages: 2 })
  })
})
