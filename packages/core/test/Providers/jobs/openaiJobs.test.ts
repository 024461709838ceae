/**
 * The OpenAI Files, Batch and Fine-tuning clients against a mock that parses the multipart
 * upload, runs each batch line, and advances jobs on every poll.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../../src/Catalog/Catalog.ts"
import {
  batchInputLine,
  batchItemResult,
  batchResults,
  createBatch,
  createFineTune,
  batchCreatedFor,
  decodeBatch,
  decodeFineTune,
  fileContent,
  getBatch,
  getFineTune,
  listFineTuneEvents,
  parseBatchOutput,
  uploadJsonl
} from "../../../src/Providers/OpenAiJobs.ts"
import type { UpstreamError } from "../../../src/Providers/UpstreamError.ts"
import { type OpenAiJobsMock, startOpenAiJobsMock } from "../../support/mockJobs.ts"
import { MAX_VENDOR_ID } from "../../../src/Providers/internal/vendorId.ts"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

const KEY = "sk-test-jobs"

const providerAt = (endpoint: string, key = KEY): ConfiguredProvider => ({
  ...data.providers.find((p) => p.id === "openai")!,
  endpoint,
  apiKey: Option.some(Redacted.make(key)),
  configured: true,
  settings: {},
  missing: undefined
})

const run = <A>(e: Effect.Effect<A, UpstreamError>) => Effect.runPromise(Effect.either(e))
const ok = <A>(e: Effect.Effect<A, UpstreamError>) => Effect.runPromise(e)

const chat = (content: string) => ({ model: "gpt-4o-mini", messages: [{ role: "user", content }] })

const trainingExamples = [
  { messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] },
  { messages: [{ role: "user", content: "2+2?" }, { role: "assistant", content: "4" }] }
]

describe("OpenAI jobs clients (Files, Batch, Fine-tuning)", () => {
  let mock: OpenAiJobsMock
  let provider: ConfiguredProvider
  beforeAll(async () => {
    mock = await startOpenAiJobsMock({ apiKey: KEY })
    provider = providerAt(mock.url)
  })
  afterAll(() => mock.close())
  beforeEach(() => mock.configure({ pollsUntilDone: 2, fail: false }))

  describe("files", () => {
    it("uploads JSONL as multipart (purpose + file) with bearer auth and returns the file id", async () => {
      const lines = [batchInputLine("a", chat("one")), batchInputLine("b", chat("two"))]
      const id = await ok(uploadJsonl(provider, "batch", lines, "items.jsonl"))
      expect(id).toMatch(/^file-\w{22}$/)
      const sent = mock.requests.at(-1)!
      expect(sent.method).toBe("POST")
      expect(sent.path).toBe("/v1/files")
      expect(sent.headers.authorization).toBe(`Bearer ${KEY}`)
      expect(String(sent.headers["content-type"])).toMatch(/^multipart\/form-data; boundary=/)
      const body = sent.body as { fields: Record<string, string>; files: Record<string, { filename: string; content: string }> }
      expect(body.fields).toEqual({ purpose: "batch" })
      expect(body.files.file!.filename).toBe("items.jsonl")
      expect(body.files.file!.content.split("\n")).toEqual([JSON.stringify(lines[0]), JSON.stringify(lines[1]), ""])
      expect(mock.files.get(id)).toMatchObject({ purpose: "batch", filename: "items.jsonl" })
      expect(await ok(fileContent(provider, id))).toBe(body.files.file!.content)
      expect(mock.requests.at(-1)!.path).toBe(`/v1/files/${id}/content`)
    })

    it("an unknown file's content is a non-retryable 404", async () => {
      const result = await run(fileContent(provider, "file-missing"))
      expect(Either.isLeft(result) && result.left).toMatchObject({ provider: "openai", kind: "http", status: 404, retryable: false })
      if (Either.isLeft(result)) expect(result.left.message).toContain("No such File object")
    })

    it("a wrong key is 401 with OpenAI's message, not retryable", async () => {
      const result = await run(uploadJsonl(providerAt(mock.url, "sk-wrong"), "batch", [{}], "x.jsonl"))
      expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 401, retryable: false })
      if (Either.isLeft(result)) expect(result.left.message).toContain("Incorrect API key provided")
    })
  })

  describe("batch", () => {
    it("runs a batch: create, poll in_progress → completed, then per-item results from the output and error files", async () => {
      const fileId = await ok(uploadJsonl(provider, "batch", [
        batchInputLine("item-0", chat("hello")),
        batchInputLine("item-1", chat("FAIL")),
        batchInputLine("item-2", chat("world"))
      ], "batch.jsonl"))

      const created = await ok(createBatch(provider, fileId, { job: "job-1" }))
      const sent = mock.requests.at(-1)!
      expect(sent.path).toBe("/v1/batches")
      expect(sent.headers.authorization).toBe(`Bearer ${KEY}`)
      expect(sent.body).toEqual({
        input_file_id: fileId,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { job: "job-1" }
      })
      expect(created).toMatchObject({ status: "validating", inputFileId: fileId, outputFileId: null, errorFileId: null })
      expect(created.id).toMatch(/^batch_[0-9a-f]{32}$/)

      const first = await ok(getBatch(provider, created.id))
      expect(mock.requests.at(-1)!.path).toBe(`/v1/batches/${created.id}`)
      expect(first).toMatchObject({ status: "in_progress", requestCounts: { total: 3, completed: 1, failed: 0 } })

      const done = await ok(getBatch(provider, created.id))
      expect(done).toMatchObject({ status: "completed", requestCounts: { total: 3, completed: 2, failed: 1 } })
      expect(done.outputFileId).toMatch(/^file-/)
      expect(done.errorFileId).toMatch(/^file-/)
      // terminal: later polls keep answering the same batch
      expect(await ok(getBatch(provider, created.id))).toEqual(done)

      // the raw output file: one line per successful request
      const output = parseBatchOutput(await ok(fileContent(provider, done.outputFileId!))).lines
      expect(output.map((l) => l.custom_id)).toEqual(["item-0", "item-2"])
      expect(output[0]).toMatchObject({
        id: expect.stringMatching(/^batch_req_/),
        response: { status_code: 200, request_id: expect.any(String), body: { object: "chat.completion" } },
        error: null
      })

      const { results, unreadable } = await ok(batchResults(provider, done))
      expect(unreadable).toEqual([])
      const byId = new Map(results.map((r) => [r.customId, r]))
      expect(results).toHaveLength(3)
      expect(byId.get("item-0")).toMatchObject({ ok: true, statusCode: 200 })
      expect((byId.get("item-0") as any).body.choices[0].message).toEqual({ role: "assistant", content: "Echo: hello", refusal: null })
      expect((byId.get("item-2") as any).body.choices[0].message.content).toBe("Echo: world")
      expect(byId.get("item-1")).toEqual({
        customId: "item-1",
        ok: false,
        statusCode: 400,
        code: "invalid_request_error",
        message: "The mock was asked to fail this request."
      })
    })

    it("a batch whose input fails validation ends failed with the bad line's error", async () => {
      const fileId = await ok(uploadJsonl(provider, "batch", [
        batchInputLine("ok", chat("fine")),
        { custom_id: "bad", method: "POST", url: "/v1/embeddings", body: {} }
      ], "bad.jsonl"))
      const created = await ok(createBatch(provider, fileId))
      // validation errors end the batch in the validating stage: the first poll
      const done = await ok(getBatch(provider, created.id))
      expect(done.status).toBe("failed")
      expect(done.outputFileId).toBeNull()
      expect(done.errors).toEqual([expect.objectContaining({ code: "mismatched_endpoint", line: 2 })])
    })

    it("a batch the upstream fails ends failed with its errors list", async () => {
      mock.configure({ fail: true, failMessage: "Enqueued token limit reached for gpt-4o-mini." })
      const fileId = await ok(uploadJsonl(provider, "batch", [batchInputLine("x", chat("x"))], "x.jsonl"))
      const created = await ok(createBatch(provider, fileId))
      expect((await ok(getBatch(provider, created.id))).status).toBe("in_progress")
      const done = await ok(getBatch(provider, created.id))
      expect(done).toMatchObject({ status: "failed", outputFileId: null, errorFileId: null })
      expect(done.errors[0]!.message).toBe("Enqueued token limit reached for gpt-4o-mini.")
    })

    it("creating a batch from an unknown file is a non-retryable 404", async () => {
      const result = await run(createBatch(provider, "file-nope"))
      expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 404, retryable: false })
    })

    it("429 and 500 while polling are retryable and do not advance the batch", async () => {
      const fileId = await ok(uploadJsonl(provider, "batch", [batchInputLine("x", chat("x"))], "x.jsonl"))
      const created = await ok(createBatch(provider, fileId))
      mock.failNext(429)
      const throttled = await run(getBatch(provider, created.id))
      expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ kind: "http", status: 429, retryable: true })
      if (Either.isLeft(throttled)) expect(throttled.left.message).toContain("Rate limit reached")
      mock.failNext(500)
      const broken = await run(getBatch(provider, created.id))
      expect(Either.isLeft(broken) && broken.left).toMatchObject({ kind: "http", status: 500, retryable: true })
      expect((await ok(getBatch(provider, created.id))).status).toBe("in_progress")
    })

    it("sets aside output lines it cannot read, naming their problems, and normalises line-level errors", async () => {
      const bad = parseBatchOutput('{"custom_id":"a","response":null,"error":null}\nnot json\n{"response":{}}\n[1]\n')
      expect(bad.lines.map((l) => l.custom_id)).toEqual(["a"])
      expect(bad.unreadable).toEqual(["line 2 is not JSON", "line 3 has no custom_id", "line 4 has no custom_id"])
      const lines = parseBatchOutput('\n{"id":"batch_req_1","custom_id":"z","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}\n\n').lines
      expect(lines.map(batchItemResult)).toEqual([{
        customId: "z",
        ok: false,
        statusCode: null,
        code: "batch_expired",
        message: "This request could not be executed before the completion window expired."
      }])
    })
  })

  describe("fine-tuning", () => {
    it("uploads training data, creates the job and polls validating_files → queued → running → succeeded", async () => {
      mock.configure({ pollsUntilDone: 3 })
      const fileId = await ok(uploadJsonl(provider, "fine-tune", trainingExamples, "train.jsonl"))
      expect((mock.requests.at(-1)!.body as any).fields).toEqual({ purpose: "fine-tune" })

      const created = await ok(createFineTune(provider, { trainingFileId: fileId, model: "gpt-4o-mini-2024-07-18", suffix: "terse" }))
      const sent = mock.requests.at(-1)!
      expect(sent.path).toBe("/v1/fine_tuning/jobs")
      expect(sent.headers.authorization).toBe(`Bearer ${KEY}`)
      expect(sent.body).toEqual({ training_file: fileId, model: "gpt-4o-mini-2024-07-18", suffix: "terse" })
      expect(created).toMatchObject({ status: "validating_files", trainingFile: fileId, fineTunedModel: null, error: null })
      expect(created.id).toMatch(/^ftjob-/)

      const statuses = []
      let job = created
      for (let i = 0; i < 3; i++) {
        job = await ok(getFineTune(provider, created.id))
        statuses.push(job.status)
      }
      expect(mock.requests.at(-1)!.path).toBe(`/v1/fine_tuning/jobs/${created.id}`)
      expect(statuses).toEqual(["queued", "running", "succeeded"])
      expect(job.fineTunedModel).toMatch(/^ft:gpt-4o-mini-2024-07-18:org-mock:terse:/)
      expect(job.trainedTokens).toBeGreaterThan(0)
      expect(job.error).toBeNull()
      expect(job.finishedAt).toEqual(expect.any(Number))

      const { events, hasMore } = await ok(listFineTuneEvents(provider, created.id))
      expect(mock.requests.at(-1)!.path).toBe(`/v1/fine_tuning/jobs/${created.id}/events`)
      expect(hasMore).toBe(false)
      expect(events[0]!.message).toBe("The job has successfully completed")
      expect(events.map((e) => e.message)).toContain(`New fine-tuned model created: ${job.fineTunedModel}`)
      expect(events.at(-1)!.message).toBe(`Validating training file: ${fileId}`)
      expect(events.find((e) => e.type === "metrics")).toMatchObject({ level: "info", data: { step: 2, train_loss: 0.9 } })

      const page1 = await ok(listFineTuneEvents(provider, created.id, { limit: 2 }))
      expect(mock.requests.at(-1)!.query).toEqual({ limit: "2" })
      expect(page1.hasMore).toBe(true)
      const page2 = await ok(listFineTuneEvents(provider, created.id, { limit: 2, after: page1.events.at(-1)!.id }))
      expect(page2.events.map((e) => e.id)).toEqual(events.slice(2, 4).map((e) => e.id))
    })

    it("a failed job carries OpenAI's error object", async () => {
      mock.configure({ fail: true, failMessage: "The job failed due to an invalid training file. Expected file to have JSONL format." })
      const fileId = await ok(uploadJsonl(provider, "fine-tune", trainingExamples, "train.jsonl"))
      const created = await ok(createFineTune(provider, { trainingFileId: fileId, model: "gpt-4o-mini-2024-07-18" }))
      expect((await ok(getFineTune(provider, created.id))).status).toBe("running")
      const job = await ok(getFineTune(provider, created.id))
      expect(job).toMatchObject({
        status: "failed",
        fineTunedModel: null,
        error: {
          code: "invalid_training_file",
          param: "training_file",
          message: "The job failed due to an invalid training file. Expected file to have JSONL format."
        }
      })
      const { events } = await ok(listFineTuneEvents(provider, created.id))
      expect(events[0]!.level).toBe("error")
    })

    it("training on a batch-purpose file is a non-retryable 400", async () => {
      const fileId = await ok(uploadJsonl(provider, "batch", [batchInputLine("x", chat("x"))], "x.jsonl"))
      const result = await run(createFineTune(provider, { trainingFileId: fileId, model: "gpt-4o-mini-2024-07-18" }))
      expect(Either.isLeft(result) && result.left).toMatchObject({ kind: "http", status: 400, retryable: false })
    })

    it("500 on create and 429 on poll are retryable", async () => {
      const fileId = await ok(uploadJsonl(provider, "fine-tune", trainingExamples, "train.jsonl"))
      mock.failNext(500)
      const broken = await run(createFineTune(provider, { trainingFileId: fileId, model: "gpt-4o-mini-2024-07-18" }))
      expect(Either.isLeft(broken) && broken.left).toMatchObject({ kind: "http", status: 500, retryable: true })
      if (Either.isLeft(broken)) expect(broken.left.message).toContain("The server had an error")
      const created = await ok(createFineTune(provider, { trainingFileId: fileId, model: "gpt-4o-mini-2024-07-18" }))
      mock.failNext(429)
      const throttled = await run(getFineTune(provider, created.id))
      expect(Either.isLeft(throttled) && throttled.left).toMatchObject({ kind: "http", status: 429, retryable: true })
      mock.failNext(429)
      const eventsThrottled = await run(listFineTuneEvents(provider, created.id))
      expect(Either.isLeft(eventsThrottled) && eventsThrottled.left).toMatchObject({ status: 429, retryable: true })
    })
  })

  describe("hostile answers (a vendor's answer is untrusted input)", () => {
    const batch = (over: Record<string, unknown>) => ({ id: "batch_1", object: "batch", status: "completed", endpoint: "/v1/chat/completions", input_file_id: "file-in", ...over })
    it("refuses a job id that is no usable id: too long, a dot segment, control characters; a file id so is no file", async () => {
      for (const id of ["..", ".", "x".repeat(MAX_VENDOR_ID + 1), "a\nb"]) {
        const decoded = await run(decodeBatch("openai", batch({ id })))
        expect(Either.isLeft(decoded) && [decoded.left.kind, decoded.left.retryable]).toEqual(["protocol", false])
        if (Either.isLeft(decoded)) expect(decoded.left.message).toMatch(/the id of a batch object is not a usable id/)
      }
      const missing = await run(decodeBatch("openai", batch({ id: undefined })))
      expect(Either.isLeft(missing) && missing.left.message).toMatch(/a batch object without an id/)
      const files = await ok(decodeBatch("openai", batch({ output_file_id: "..", error_file_id: "e".repeat(10_000_000) })))
      expect([files.outputFileId, files.errorFileId]).toEqual([null, null])
      expect((await ok(decodeBatch("openai", batch({ id: "x".repeat(MAX_VENDOR_ID) })))).id).toHaveLength(MAX_VENDOR_ID)
    })

    it("keeps no fine-tuned model name or training file of megabytes", async () => {
      const ft = await ok(decodeFineTune("openai", { id: "ftjob-1", status: "succeeded", fine_tuned_model: "m".repeat(8_000_000), training_file: "f".repeat(8_000_000), model: "gpt-4o-mini" }))
      expect([ft.fineTunedModel, ft.trainingFile, ft.model]).toEqual([null, "", "gpt-4o-mini"])
    })

    it("cuts an item's error message and code, and keeps at most the page of events asked for, each message cut", async () => {
      const item = batchItemResult({ id: "r", custom_id: "item-0", response: { status_code: 500, body: { error: { message: "m".repeat(5_000_000), code: "c".repeat(10_000) } } }, error: null } as any)
      expect(item.ok).toBe(false)
      if (!item.ok) expect([item.message.length < 2_000, (item.code ?? "").length < 200]).toEqual([true, true])
      const server = createServer((_, res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ object: "list", has_more: false, data: Array.from({ length: 30_000 }, (_, i) => ({ id: `ev-${i}`, created_at: 1, level: "info", message: "x".repeat(i === 0 ? 100_000 : 10) })) }))
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      try {
        const { events } = await ok(listFineTuneEvents(providerAt(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`), "ftjob-1", { limit: 20 }))
        expect(events).toHaveLength(20)
        expect(events[0]!.message.length).toBeLessThan(2_000)
      } finally {
        server.close()
      }
    })

    it("finds a batch a lost creation made by the job id in its metadata, only one made of the job's file, paging back to the job's time; a vendor that cannot list is not asked", async () => {
      const batchOf = (id: string, jobId: string, file: string, createdAt: number, status: unknown = "validating") =>
        ({ id, object: "batch", status, endpoint: "/v1/chat/completions", input_file_id: file, created_at: createdAt, metadata: { aigw_job: jobId } })
      // The gateway's job was made at unix second 1060: the lookup reads back to the vendor's jobs of second 1000.
      const JOB_MADE = 1_060_000
      let pages: Record<string, unknown> = {}
      let listStatus = 200
      const asked: Array<string> = []
      const server = createServer((req, res) => {
        asked.push(req.url!)
        const after = new URL(req.url!, "http://x").searchParams.get("after") ?? ""
        res.writeHead(listStatus, { "content-type": "application/json" })
        res.end(JSON.stringify(listStatus === 200 ? pages[after] : { error: { message: "Not found", type: "invalid_request_error" } }))
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const vendor = providerAt(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`)
      try {
        // Page one: someone else's batch naming the job (another file), one that does not read as a batch; page two: the job's.
        pages = {
          "": { object: "list", has_more: true, data: [batchOf("batch_spoof", "job-1", "file-other", 2000), batchOf("batch_bad", "job-1", "file-1", 2000, "SUCCEEDED!!"), batchOf("batch_x", "job-2", "file-2", 1990)] },
          batch_x: { object: "list", has_more: true, data: [batchOf("batch_mine", "job-1", "file-1", 1500), batchOf("batch_y", "job-3", "file-3", 900)] },
          batch_y: { object: "list", has_more: false, data: [] }
        }
        expect((await ok(batchCreatedFor(vendor, "job-1", JOB_MADE, "file-1")))?.id).toBe("batch_mine")
        // Paging stops at jobs older than the gateway's job.
        asked.length = 0
        expect(await ok(batchCreatedFor(vendor, "job-9", JOB_MADE, "file-9"))).toBeUndefined()
        expect(asked).toEqual(["/v1/batches?limit=100", "/v1/batches?limit=100&after=batch_x"])
        // A vendor that does not list (a proxy without the route): the job is created, not failed.
        listStatus = 404
        expect(await ok(batchCreatedFor(vendor, "job-1", JOB_MADE, "file-1"))).toBeUndefined()
        // One whose list may come back (a 5xx) fails the step, which is retried.
        listStatus = 503
        const retried = await run(batchCreatedFor(vendor, "job-1", JOB_MADE, "file-1"))
        expect(Either.isLeft(retried) && retried.left.retryable).toBe(true)
      } finally {
        server.close()
      }
    })
  })
})
