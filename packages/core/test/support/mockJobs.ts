/**
 * Local mock upstreams for the long-running endpoints (video generation, batch, fine-tuning),
 * speaking each vendor's documented wire format. Plain `node:http` on 127.0.0.1:0, no dependencies.
 * Each mock records every request, checks the credential, and moves a job one step further on
 * every poll (`pollsUntilDone`: the poll that returns the terminal state; default 2, i.e. the first
 * poll says "running", the second "done"). `failNext(status)` answers the next request(s) with the
 * vendor's error body for that status (401, 429, 500, ...).
 *
 * References (wire details):
 *  Replicate
 *   - https://replicate.com/docs/reference/http (models.predictions.create: POST /v1/models/{owner}/{name}/predictions
 *     {input}; predictions.get: GET /v1/predictions/{id}; 201 + prediction object {id, model, version, input,
 *     logs, output, data_removed, error, status, created_at, started_at, completed_at, urls{get,cancel,stream,web},
 *     metrics{predict_time}})
 *   - https://replicate.com/docs/topics/predictions/lifecycle (starting, processing, succeeded, failed, canceled, aborted)
 *   - https://replicate.com/docs/topics/predictions/rate-limits (429 {"detail":"Request was throttled. Expected
 *     available in 1 second."})
 *   - https://github.com/pguso/ai-agents-workshop/issues/1 (401 {"title":"Unauthenticated","detail":"You did not
 *     pass an authentication token","status":401})
 *   - https://replicate.com/google/veo-3/api (output: a URL string)
 *  Luma Dream Machine
 *   - https://github.com/lumalabs/lumaai-api/blob/main/openapi.yaml and lumalabs/lumaai-node
 *     src/resources/generations/video.ts (POST /dream-machine/v1/generations/video, model required,
 *     keyframes.frame0 {type:"image",url}; GET /generations/{id}; Generation {id, generation_type, state
 *     queued|dreaming|completed|failed, failure_reason, created_at, assets{video,image}, model, request};
 *     Error {"detail": "..."} e.g. "Invalid API key is provided")
 *  OpenAI Files / Batch / Fine-tuning
 *   - https://platform.openai.com/docs/api-reference/files (POST /v1/files multipart purpose+file → File object;
 *     GET /v1/files/{id}/content)
 *   - https://platform.openai.com/docs/api-reference/batch (Batch object, request input/output line objects;
 *     example output line in https://git.mii.dev/mii/openai-api-rs examples/data/batch_result.json)
 *   - https://github.com/openai/openai-openapi/issues/302 (a request answered 400 lands in the *error* file as
 *     {"response":{"status_code":400,"request_id":..,"body":{"error":{...}}},"error":null})
 *   - https://platform.openai.com/docs/api-reference/fine-tuning (fine_tuning.job, fine_tuning.job.event, list)
 *   - https://help.openai.com/en/articles/6891781-error-code-401-incorrect-api-key-provided (401 body)
 */
import { randomBytes, randomUUID } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

// ---------------------------------------------------------------------------------------------
// Shared plumbing
// ---------------------------------------------------------------------------------------------

export interface RecordedJobRequest {
  readonly method: string
  /** pathname as received (query excluded, see `query`) */
  readonly path: string
  readonly query: Record<string, string>
  readonly headers: IncomingHttpHeaders
  /** parsed JSON; the raw text when not JSON; for multipart uploads `{fields, files}` (see OpenAI mock) */
  body: unknown
}

export interface JobMockOptions {
  apiKey?: string
  /** the poll (1-based) that returns the terminal state; default 2 */
  pollsUntilDone?: number
  /** end jobs in failure instead of success */
  fail?: boolean
  /** the failure message/reason used when `fail` is set */
  failMessage?: string
}

export interface JobMock<O extends JobMockOptions = JobMockOptions> {
  /** the API base to use as the provider's endpoint (e.g. `http://127.0.0.1:1234/v1`) */
  readonly url: string
  readonly requests: RecordedJobRequest[]
  /** changes options for jobs created from now on */
  configure(options: Partial<O>): void
  /**
   * answers the next `times` requests (to a path ending in `path`, when given, optionally after its method: "POST /batches";
   * whose body holds `bodyIncludes`, when given: one job's among others the server is advancing) with HTTP `status` and the vendor's error body
   */
  failNext(status: number, times?: number, path?: string, bodyIncludes?: string): void
  /** drops the failures `failNext` queued that no request has met yet */
  clearFailures(): void
  close(): Promise<void>
}

export interface Reply {
  json(status: number, body: unknown, headers?: Record<string, string>): void
  text(status: number, body: string, contentType: string): void
}

export interface Incoming {
  readonly method: string
  /** pathname relative to the base path, or undefined when outside it */
  readonly route: string | undefined
  readonly query: URLSearchParams
  readonly headers: IncomingHttpHeaders
  readonly raw: Buffer
  readonly record: RecordedJobRequest
}

const parseBody = (raw: Buffer): unknown => {
  if (raw.length === 0) return undefined
  const text = raw.toString("utf8")
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

export const startServer = async (
  basePath: string,
  options: JobMockOptions,
  errorBody: (status: number) => unknown,
  authorized: (headers: IncomingHttpHeaders, apiKey: string) => { ok: true } | { ok: false; body: unknown },
  handle: (req: Incoming, reply: Reply, opts: Required<JobMockOptions>) => void | Promise<void>
): Promise<JobMock> => {
  const requests: RecordedJobRequest[] = []
  const failures: Array<{ readonly status: number; readonly path: string | undefined; readonly bodyIncludes: string | undefined }> = []
  const opts: Required<JobMockOptions> = {
    apiKey: options.apiKey ?? "test-key",
    pollsUntilDone: options.pollsUntilDone ?? 2,
    fail: options.fail ?? false,
    failMessage: options.failMessage ?? "mock failure"
  }
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      const raw = Buffer.concat(chunks)
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      const record: RecordedJobRequest = {
        method: req.method ?? "GET",
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: { ...req.headers },
        body: parseBody(raw)
      }
      requests.push(record)
      const reply = replyTo(res)
      // A path may name its method first ("POST /batches"): only that method's requests fail then.
      const at = failures.findIndex((f) => {
        if (f.bodyIncludes !== undefined && !raw.toString("utf8").includes(f.bodyIncludes)) return false
        if (f.path === undefined) return true
        const [method, path] = f.path.includes(" ") ? f.path.split(" ", 2) : [undefined, f.path]
        return (method === undefined || method === record.method) && record.path.endsWith(path!)
      })
      const forced = at < 0 ? undefined : failures.splice(at, 1)[0]!.status
      if (forced !== undefined) {
        return reply.json(forced, errorBody(forced), forced === 429 ? { "retry-after": "1" } : {})
      }
      const auth = authorized(req.headers, opts.apiKey)
      if (!auth.ok) return reply.json(401, auth.body)
      const route = url.pathname === basePath
        ? "/"
        : url.pathname.startsWith(basePath + "/")
        ? url.pathname.slice(basePath.length)
        : undefined
      await handle({ method: record.method, route, query: url.searchParams, headers: req.headers, raw, record }, reply, opts)
    })().catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain" })
        res.end(`mock crashed: ${String(err)}`)
      } else res.destroy()
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}${basePath}`,
    requests,
    configure: (o) => {
      Object.assign(opts, Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)))
    },
    failNext: (status, times = 1, path, bodyIncludes) => {
      for (let i = 0; i < times; i++) failures.push({ status, path, bodyIncludes })
    },
    clearFailures: () => void failures.splice(0),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()))
        server.closeAllConnections()
      })
  }
}

const replyTo = (res: ServerResponse): Reply => ({
  json: (status, body, headers = {}) => {
    const text = JSON.stringify(body)
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
    res.end(text)
  },
  text: (status, body, contentType) => {
    res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(body) })
    res.end(body)
  }
})

export const bearer = (headers: IncomingHttpHeaders) => /^Bearer (.+)$/.exec(headers.authorization ?? "")?.[1]
const nowSeconds = () => Math.floor(Date.now() / 1000)
const alnum = (n: number) => {
  const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
  return Array.from(randomBytes(n), (b) => chars[b % chars.length]).join("")
}

/**
 * Where a job is after `poll` polls: the terminal state on `pollsUntilDone`, else "early" on the
 * first of three or more polls, else "middle".
 */
export const phase = (poll: number, pollsUntilDone: number): "early" | "middle" | "done" =>
  poll >= pollsUntilDone ? "done" : poll === 1 && pollsUntilDone > 2 ? "early" : "middle"

// ---------------------------------------------------------------------------------------------
// Replicate
// ---------------------------------------------------------------------------------------------

export interface ReplicateMockOptions extends JobMockOptions {
  /** answer `output` as an array of URLs instead of one URL string */
  outputArray?: boolean
  /** with `outputArray`, how many URLs the array holds (a model that made several videos); default 1 */
  outputCount?: number
  /** answer predictions without `model` (a field the gateway only passes on) */
  withoutModel?: boolean
  /** end as "canceled" instead of succeeding */
  cancel?: boolean
}

interface Prediction {
  id: string
  model: string
  version: string
  input: Record<string, unknown>
  createdAt: string
  polls: number
  pollsUntilDone: number
  outcome: "succeeded" | "failed" | "canceled"
  failMessage: string
  outputArray: boolean
  outputCount: number
  withoutModel: boolean
}

export type ReplicateMock = JobMock<ReplicateMockOptions>

export const startReplicateMock = async (options: ReplicateMockOptions = {}): Promise<ReplicateMock> => {
  const predictions = new Map<string, Prediction>()
  let outputArray = options.outputArray ?? false
  let outputCount = options.outputCount ?? 1
  let withoutModel = options.withoutModel ?? false
  let cancel = options.cancel ?? false
  const base = "https://api.replicate.com/v1"

  const view = (p: Prediction, status: string) => {
    const done = status === "succeeded" || status === "failed" || status === "canceled"
    const video = `https://replicate.delivery/xezq/${p.id}/output.mp4`
    const videos = Array.from({ length: p.outputCount }, (_, i) => (i === 0 ? video : `https://replicate.delivery/xezq/${p.id}/output-${i}.mp4`))
    return {
      id: p.id,
      ...(p.withoutModel ? {} : { model: p.model }),
      version: p.version,
      input: p.input,
      logs: status === "starting" ? "" : "Generating video...",
      output: status === "succeeded" ? (p.outputArray ? videos : video) : null,
      data_removed: false,
      error: status === "failed" ? p.failMessage : null,
      status,
      created_at: p.createdAt,
      ...(status !== "starting" ? { started_at: p.createdAt } : {}),
      ...(done ? { completed_at: new Date().toISOString(), metrics: { predict_time: 42.5, total_time: 43.1 } } : {}),
      urls: {
        cancel: `${base}/predictions/${p.id}/cancel`,
        get: `${base}/predictions/${p.id}`,
        stream: `https://stream.replicate.com/v1/files/${p.id}`,
        web: `https://replicate.com/p/${p.id}`
      }
    }
  }

  const mock = await startServer(
    "/v1",
    options,
    (status) =>
      status === 429
        ? { detail: "Request was throttled. Expected available in 1 second.", status: 429 }
        : status === 401
        ? { title: "Unauthenticated", detail: "You did not pass a valid authentication token", status: 401 }
        : { title: status >= 500 ? "Internal Server Error" : "Error", detail: `mock HTTP ${status}`, status },
    (headers, apiKey) => {
      const m = /^(?:Token|Bearer) (.+)$/.exec(headers.authorization ?? "")
      if (!m) return { ok: false, body: { title: "Unauthenticated", detail: "You did not pass an authentication token", status: 401 } }
      if (m[1] !== apiKey) {
        return { ok: false, body: { title: "Unauthenticated", detail: "You did not pass a valid authentication token", status: 401 } }
      }
      return { ok: true }
    },
    (req, reply, opts) => {
      const notFound = () => reply.json(404, { title: "Not found", detail: "The requested resource could not be found.", status: 404 })
      const official = req.route && /^\/models\/([^/]+)\/([^/]+)\/predictions$/.exec(req.route)
      const create = (model: string, version: string) => {
        const body = req.record.body as any
        if (!body || typeof body !== "object" || typeof body.input !== "object" || body.input === null) {
          return reply.json(422, {
            title: "Input validation failed",
            detail: "- input is required",
            status: 422,
            invalid_fields: [{ type: "required", field: "input", description: "input is required" }]
          })
        }
        if (typeof body.input.prompt !== "string" || body.input.prompt.length === 0) {
          return reply.json(422, {
            title: "Input validation failed",
            detail: "- input: prompt is required",
            status: 422,
            invalid_fields: [{ type: "required", field: "input.prompt", description: "prompt is required" }]
          })
        }
        const p: Prediction = {
          id: Array.from(randomBytes(26), (b) => "abcdefghijklmnopqrstuvwxyz234567"[b % 32]).join(""),
          model,
          version,
          input: body.input,
          createdAt: new Date().toISOString(),
          polls: 0,
          pollsUntilDone: opts.pollsUntilDone,
          outcome: opts.fail ? "failed" : cancel ? "canceled" : "succeeded",
          failMessage: opts.failMessage,
          outputArray,
          outputCount,
          withoutModel
        }
        predictions.set(p.id, p)
        reply.json(201, view(p, "starting"), { location: `${base}/predictions/${p.id}` })
      }
      if (req.method === "POST" && official) return create(`${official[1]}/${official[2]}`, "hidden")
      if (req.method === "POST" && req.route === "/predictions") {
        const version = String((req.record.body as any)?.version ?? "")
        const [model, v] = version.includes(":") ? version.split(":") : ["replicate/unknown", version]
        return create(model!, v!)
      }
      // POST /predictions/{id}/cancel: canceled from now on; a prediction that ended stays as it ended.
      const cancelled = req.route && /^\/predictions\/([^/]+)\/cancel$/.exec(req.route)
      if (req.method === "POST" && cancelled) {
        const p = predictions.get(cancelled[1]!)
        if (!p) return notFound()
        if (phase(p.polls, p.pollsUntilDone) !== "done") {
          p.outcome = "canceled"
          p.pollsUntilDone = p.polls + 1
        }
        return reply.json(200, view(p, phase(p.polls, p.pollsUntilDone) === "done" ? p.outcome : "canceled"))
      }
      const get = req.route && /^\/predictions\/([^/]+)$/.exec(req.route)
      if (req.method === "GET" && get) {
        const p = predictions.get(get[1]!)
        if (!p) return notFound()
        p.polls++
        const ph = phase(p.polls, p.pollsUntilDone)
        return reply.json(200, view(p, ph === "done" ? p.outcome : ph === "early" ? "starting" : "processing"))
      }
      notFound()
    }
  )
  const configure = mock.configure
  return {
    ...mock,
    configure: (o: Partial<ReplicateMockOptions>) => {
      if (o.outputArray !== undefined) outputArray = o.outputArray
      if (o.outputCount !== undefined) outputCount = o.outputCount
      if (o.withoutModel !== undefined) withoutModel = o.withoutModel
      if (o.cancel !== undefined) cancel = o.cancel
      configure(o)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Luma Dream Machine
// ---------------------------------------------------------------------------------------------

interface Generation {
  id: string
  request: Record<string, unknown>
  model: string
  createdAt: string
  polls: number
  pollsUntilDone: number
  fail: boolean
  failMessage: string
}

const LUMA_MODELS = ["ray-1-6", "ray-2", "ray-flash-2"]
const LUMA_RATIOS = ["1:1", "16:9", "9:16", "4:3", "3:4", "21:9", "9:21"]

export const startLumaMock = async (options: JobMockOptions = {}): Promise<JobMock> => {
  const generations = new Map<string, Generation>()
  const view = (g: Generation, state: string) => ({
    id: g.id,
    generation_type: "video",
    state,
    failure_reason: state === "failed" ? g.failMessage : null,
    created_at: g.createdAt,
    assets: state === "completed"
      ? {
        video: `https://storage.cdn-luma.com/dream_machine/${g.id}/video.mp4`,
        image: `https://storage.cdn-luma.com/dream_machine/${g.id}/video_0_thumb.jpg`
      }
      : null,
    model: g.model,
    request: g.request
  })
  return startServer(
    "/dream-machine/v1",
    options,
    (status) => ({
      detail: status === 429
        ? "Too many requests"
        : status === 401
        ? "Invalid API key is provided"
        : status >= 500
        ? "Internal server error"
        : `mock HTTP ${status}`
    }),
    (headers, apiKey) =>
      bearer(headers) === apiKey ? { ok: true } : { ok: false, body: { detail: "Invalid API key is provided" } },
    (req, reply, opts) => {
      if (req.method === "POST" && req.route === "/generations/video") {
        const body = req.record.body as any
        const bad = (detail: string) => reply.json(400, { detail })
        if (!body || typeof body !== "object") return bad("Invalid request body")
        if (!LUMA_MODELS.includes(body.model)) return bad(`Invalid model: ${String(body.model)}`)
        if (typeof body.prompt !== "string" || body.prompt.length === 0) return bad("Prompt is required")
        if (body.aspect_ratio !== undefined && !LUMA_RATIOS.includes(body.aspect_ratio)) {
          return bad(`Invalid aspect ratio: ${String(body.aspect_ratio)}`)
        }
        if (body.duration !== undefined && !/^\d+s$/.test(String(body.duration))) return bad(`Invalid duration: ${String(body.duration)}`)
        const frame0 = body.keyframes?.frame0
        if (frame0 !== undefined && !(frame0.type === "image" && typeof frame0.url === "string") && frame0.type !== "generation") {
          return bad("Invalid keyframe")
        }
        const g: Generation = {
          id: randomUUID(),
          request: { generation_type: "video", ...body },
          model: body.model,
          createdAt: new Date().toISOString(),
          polls: 0,
          pollsUntilDone: opts.pollsUntilDone,
          fail: opts.fail,
          failMessage: opts.failMessage
        }
        generations.set(g.id, g)
        return reply.json(201, view(g, "queued"))
      }
      const get = req.route && /^\/generations\/([^/]+)$/.exec(req.route)
      if (req.method === "GET" && get) {
        const g = generations.get(get[1]!)
        if (!g) return reply.json(404, { detail: "Generation not found" })
        g.polls++
        const ph = phase(g.polls, g.pollsUntilDone)
        return reply.json(200, view(g, ph === "done" ? (g.fail ? "failed" : "completed") : ph === "early" ? "queued" : "dreaming"))
      }
      reply.json(404, { detail: "Not Found" })
    }
  )
}

// ---------------------------------------------------------------------------------------------
// OpenAI Files + Batch + Fine-tuning
// ---------------------------------------------------------------------------------------------

interface StoredFile {
  id: string
  filename: string
  purpose: string
  content: string
  createdAt: number
}

interface BatchJob {
  id: string
  inputFileId: string
  endpoint: string
  completionWindow: string
  metadata: unknown
  createdAt: number
  polls: number
  pollsUntilDone: number
  fail: boolean
  failMessage: string
  end: OpenAiJobsOptions["end"]
  /** set once the batch reached its terminal state */
  final?: Record<string, unknown>
}

interface FineTuneJobState {
  id: string
  model: string
  trainingFile: string
  validationFile: string | null
  suffix: string | null
  createdAt: number
  polls: number
  pollsUntilDone: number
  fail: boolean
  failMessage: string
  end: OpenAiJobsOptions["end"]
  events: Array<Record<string, unknown>>
  metadata: unknown
  final?: Record<string, unknown>
}

export interface OpenAiJobsOptions extends JobMockOptions {
  /**
   * How jobs created from now on end when they do not fail: cancelled or expired at the vendor. Such a
   * batch has answered its first request only (the output file holds it, as OpenAI's partial results).
   */
  end?: "completed" | "cancelled" | "expired"
  /**
   * How many of the next creations (a batch, a fine-tuning job) are made but answered with a 500, as an
   * answer lost on the way (a timeout, a proxy's error) would leave them: the job exists at the vendor.
   */
  lostCreates?: number
}

export interface OpenAiJobsMock extends JobMock<OpenAiJobsOptions> {
  /** uploaded and generated files by id (content as stored) */
  readonly files: ReadonlyMap<string, { readonly filename: string; readonly purpose: string; readonly content: string }>
}

const openAiError = (message: string, type: string, param: string | null = null, code: string | null = null) => ({
  error: { message, type, param, code }
})

/** The mock's answer to one chat request body: an echo, or a 400 when a message's content is "FAIL". */
const answerChat = (body: any): { status: number; body: unknown } => {
  const messages: Array<any> = Array.isArray(body?.messages) ? body.messages : []
  if (messages.length === 0) {
    return { status: 400, body: openAiError("Invalid 'messages': empty array. Expected an array with minimum length 1.", "invalid_request_error", "messages", "empty_array") }
  }
  if (messages.some((m) => m?.content === "FAIL")) {
    return { status: 400, body: openAiError("The mock was asked to fail this request.", "invalid_request_error", "messages", null) }
  }
  // A hostile answer: fields of the wrong types, billed all the same.
  if (messages.some((m) => m?.content === "HOSTILE")) {
    return {
      status: 200,
      body: { id: "x", object: "chat.completion", model: { evil: 1 }, choices: [{ index: 0, message: { role: "assistant", content: { nested: ["junk"] } }, finish_reason: ["x"] }], usage: { prompt_tokens: 5, completion_tokens: 2 } }
    }
  }
  // A tool call, for the item to carry.
  if (messages.some((m) => m?.content === "TOOL")) {
    return {
      status: 200,
      body: {
        id: "t", object: "chat.completion", model: String(body?.model), created: nowSeconds(),
        choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: "{\"q\":\"x\"}" } }] }, finish_reason: "tool_calls" }],
        usage: { prompt_tokens: 6, completion_tokens: 3, total_tokens: 9 }
      }
    }
  }
  const last = String(messages.at(-1)?.content ?? "")
  // "LONGANSWER": an answer of 6 million characters (a batch's kept answers are bounded).
  const content = last.startsWith("LONGANSWER") ? "x".repeat(6_000_000) : `Echo: ${last}`
  const prompt = messages.reduce((n, m) => n + Math.ceil(String(m?.content ?? "").length / 4) + 4, 0)
  const completion = Math.ceil(content.length / 4)
  // Usage left out ("NOUSAGE") or counts that are no counts ("BADUSAGE").
  const usage = last.startsWith("NOUSAGE")
    ? undefined
    : last.startsWith("BADUSAGE")
    ? { prompt_tokens: 1e308, completion_tokens: -5, total_tokens: 1e308 }
    : { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
  return {
    status: 200,
    body: {
      id: `chatcmpl-${alnum(29)}`,
      object: "chat.completion",
      created: nowSeconds(),
      model: String(body?.model ?? "gpt-4o-mini"),
      choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, logprobs: null, finish_reason: "stop" }],
      ...(usage !== undefined ? { usage } : {}),
      system_fingerprint: "fp_mock"
    }
  }
}

export const startOpenAiJobsMock = async (options: OpenAiJobsOptions = {}): Promise<OpenAiJobsMock> => {
  let end = options.end ?? "completed"
  let lostCreates = options.lostCreates ?? 0
  /** The answer to a creation, unless it is one whose answer is lost (it was made all the same). */
  const created = (reply: Reply, view: unknown) => {
    if (lostCreates > 0) {
      lostCreates--
      return reply.json(500, openAiError("The server had an error while processing your request.", "server_error"))
    }
    reply.json(200, view)
  }
  const files = new Map<string, StoredFile>()
  const batches = new Map<string, BatchJob>()
  const jobs = new Map<string, FineTuneJobState>()

  const fileObject = (f: StoredFile) => ({
    id: f.id,
    object: "file",
    bytes: Buffer.byteLength(f.content),
    created_at: f.createdAt,
    filename: f.filename,
    purpose: f.purpose,
    status: "processed",
    status_details: null
  })
  const storeFile = (filename: string, purpose: string, content: string) => {
    const f: StoredFile = { id: `file-${alnum(22)}`, filename, purpose, content, createdAt: nowSeconds() }
    files.set(f.id, f)
    return f
  }

  // ---- batch ----
  const batchView = (b: BatchJob, extra: Record<string, unknown>) => ({
    id: b.id,
    object: "batch",
    endpoint: b.endpoint,
    errors: null,
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: "validating",
    output_file_id: null,
    error_file_id: null,
    created_at: b.createdAt,
    in_progress_at: null,
    expires_at: b.createdAt + 86_400,
    finalizing_at: null,
    completed_at: null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    request_counts: { total: 0, completed: 0, failed: 0 },
    metadata: b.metadata ?? null,
    ...extra
  })

  /** Validates the input file line by line like the service does (`errors.data[].line` is 1-based). */
  const validateInput = (b: BatchJob): { lines: Array<any>; errors: Array<Record<string, unknown>> } => {
    const text = files.get(b.inputFileId)?.content ?? ""
    const lines: Array<any> = []
    const errors: Array<Record<string, unknown>> = []
    const seen = new Set<string>()
    text.split("\n").forEach((raw, i) => {
      if (raw.trim() === "") return
      const line = i + 1
      let parsed: any
      try {
        parsed = JSON.parse(raw)
      } catch {
        errors.push({ code: "invalid_json_line", message: "This line is not parseable as valid JSON.", param: null, line })
        return
      }
      if (typeof parsed?.custom_id !== "string") {
        errors.push({ code: "missing_required_parameter", message: "Missing required parameter: 'custom_id'.", param: "custom_id", line })
      } else if (seen.has(parsed.custom_id)) {
        errors.push({ code: "duplicate_custom_id", message: "The custom_id for this request is a duplicate of another request.", param: "custom_id", line })
      } else if (parsed.method !== "POST") {
        errors.push({ code: "invalid_method", message: "Invalid method. Only POST is supported.", param: "method", line })
      } else if (parsed.url !== b.endpoint) {
        errors.push({ code: "mismatched_endpoint", message: `The endpoint of this request does not match the batch endpoint ${b.endpoint}.`, param: "url", line })
      } else {
        seen.add(parsed.custom_id)
        lines.push(parsed)
      }
    })
    if (lines.length === 0 && errors.length === 0) {
      errors.push({ code: "empty_file", message: "The batch input file is empty.", param: null, line: null })
    }
    return { lines, errors }
  }

  const finishBatch = (b: BatchJob): Record<string, unknown> => {
    const now = nowSeconds()
    const { lines, errors } = validateInput(b)
    if (b.fail || errors.length > 0) {
      const data = errors.length > 0 ? errors : [{ code: "batch_failed", message: b.failMessage, param: null, line: null }]
      return { status: "failed", errors: { object: "list", data }, failed_at: now }
    }
    const ok: Array<string> = []
    const bad: Array<string> = []
    const ended = b.end ?? "completed"
    for (const l of ended === "completed" ? lines : lines.slice(0, 1)) {
      const answer = answerChat(l.body)
      const out = JSON.stringify({
        id: `batch_req_${alnum(24)}`,
        custom_id: l.custom_id,
        response: { status_code: answer.status, request_id: randomBytes(16).toString("hex"), body: answer.body },
        error: null
      })
      // "GARBLED": the item's output line arrives cut short, no JSON.
      const garbled = (l.body as any)?.messages?.some((m: any) => m?.content === "GARBLED")
      ;(answer.status === 200 ? ok : bad).push(garbled ? out.slice(0, 40) : out)
    }
    const output = ok.length > 0 ? storeFile("batch_output.jsonl", "batch_output", ok.join("\n") + "\n") : undefined
    const errorFile = bad.length > 0 ? storeFile("batch_errors.jsonl", "batch_output", bad.join("\n") + "\n") : undefined
    if (ended !== "completed") {
      return {
        status: ended,
        in_progress_at: b.createdAt,
        [`${ended}_at`]: now,
        output_file_id: output?.id ?? null,
        error_file_id: errorFile?.id ?? null,
        request_counts: { total: lines.length, completed: ok.length, failed: bad.length }
      }
    }
    return {
      status: "completed",
      in_progress_at: b.createdAt,
      finalizing_at: now,
      completed_at: now,
      output_file_id: output?.id ?? null,
      error_file_id: errorFile?.id ?? null,
      request_counts: { total: lines.length, completed: ok.length, failed: bad.length }
    }
  }

  const pollBatch = (b: BatchJob) => {
    if (b.final) return batchView(b, b.final)
    b.polls++
    const ph = phase(b.polls, b.pollsUntilDone)
    // a bad input file fails in the validating stage, i.e. on the first poll
    if (ph === "done" || validateInput(b).errors.length > 0) {
      b.final = finishBatch(b)
      return batchView(b, b.final)
    }
    if (ph === "early") return batchView(b, {})
    const total = validateInput(b).lines.length
    return batchView(b, {
      status: "in_progress",
      in_progress_at: b.createdAt,
      request_counts: { total, completed: Math.floor(total / 2), failed: 0 }
    })
  }

  // ---- fine-tuning ----
  const event = (j: FineTuneJobState, message: string, level = "info", type = "message", data: unknown = {}) => {
    j.events.push({ object: "fine_tuning.job.event", id: `ftevent-${alnum(24)}`, created_at: nowSeconds(), level, message, data, type })
  }

  const jobView = (j: FineTuneJobState, extra: Record<string, unknown>) => ({
    object: "fine_tuning.job",
    id: j.id,
    model: j.model,
    created_at: j.createdAt,
    finished_at: null,
    fine_tuned_model: null,
    organization_id: "org-mock",
    result_files: [],
    status: "validating_files",
    validation_file: j.validationFile,
    training_file: j.trainingFile,
    hyperparameters: { n_epochs: "auto", batch_size: "auto", learning_rate_multiplier: "auto" },
    trained_tokens: null,
    error: null,
    user_provided_suffix: j.suffix,
    seed: 1234,
    estimated_finish: null,
    integrations: [],
    metadata: j.metadata,
    method: { type: "supervised" },
    ...extra
  })

  const finishJob = (j: FineTuneJobState): Record<string, unknown> => {
    const now = nowSeconds()
    if (j.fail) {
      const error = { code: "invalid_training_file", message: j.failMessage, param: "training_file" }
      event(j, `Training file ${j.trainingFile} failed validation: ${j.failMessage}`, "error")
      event(j, "The job failed due to an invalid training file.", "error")
      return { status: "failed", finished_at: now, error }
    }
    if (j.end === "cancelled") {
      event(j, "Fine-tuning job cancelled")
      return { status: "cancelled", finished_at: now }
    }
    const examples = (files.get(j.trainingFile)?.content ?? "").split("\n").filter((l) => l.trim() !== "")
    const epochs = 3
    const tokens = examples.reduce((n, l) => n + Math.ceil(l.length / 4), 0) * epochs
    const name = `ft:${j.model}:org-mock${j.suffix ? `:${j.suffix}` : ""}:${alnum(8)}`
    const results = storeFile("step_metrics.csv", "fine-tune-results", "step,train_loss\n1,1.5\n2,0.9\n")
    event(j, "Step 1/2: training loss=1.50", "info", "metrics", { step: 1, train_loss: 1.5, total_steps: 2 })
    event(j, "Step 2/2: training loss=0.90", "info", "metrics", { step: 2, train_loss: 0.9, total_steps: 2 })
    event(j, `New fine-tuned model created: ${name}`)
    event(j, "The job has successfully completed")
    return {
      status: "succeeded",
      finished_at: now,
      fine_tuned_model: name,
      trained_tokens: tokens,
      result_files: [results.id],
      hyperparameters: { n_epochs: epochs, batch_size: 1, learning_rate_multiplier: 1.8 }
    }
  }

  const pollJob = (j: FineTuneJobState) => {
    if (j.final) return jobView(j, j.final)
    j.polls++
    const ph = phase(j.polls, j.pollsUntilDone)
    if (ph === "done") {
      j.final = finishJob(j)
      return jobView(j, j.final)
    }
    if (ph === "early") {
      if (!j.events.some((e) => e.message === "Files validated, moving job to queued state")) {
        event(j, "Files validated, moving job to queued state")
      }
      return jobView(j, { status: "queued" })
    }
    if (!j.events.some((e) => e.message === "Fine-tuning job started")) event(j, "Fine-tuning job started")
    return jobView(j, { status: "running", estimated_finish: nowSeconds() + 600 })
  }

  const mock = await startServer(
    "/v1",
    options,
    (status) =>
      status === 429
        ? openAiError("Rate limit reached for requests. Please try again in 1s.", "requests", null, "rate_limit_exceeded")
        : status === 401
        ? openAiError("Incorrect API key provided.", "invalid_request_error", null, "invalid_api_key")
        : status >= 500
        ? openAiError("The server had an error while processing your request. Sorry about that!", "server_error")
        : openAiError(`mock HTTP ${status}`, "invalid_request_error"),
    (headers, apiKey) => {
      const key = bearer(headers)
      if (key === undefined) {
        return {
          ok: false,
          body: openAiError(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "invalid_request_error"
          )
        }
      }
      return key === apiKey
        ? { ok: true }
        : { ok: false, body: openAiError(`Incorrect API key provided: ${key.slice(0, 3)}***.`, "invalid_request_error", null, "invalid_api_key") }
    },
    async (req, reply, opts) => {
      const route = req.route ?? ""
      const body = req.record.body as any
      const invalid = (message: string, param: string | null = null, code: string | null = null) =>
        reply.json(400, openAiError(message, "invalid_request_error", param, code))
      const noSuch = (what: string, id: string, param = "id") =>
        reply.json(404, openAiError(`No such ${what}: ${id}`, "invalid_request_error", param))

      // Files
      if (req.method === "POST" && route === "/files") {
        if (!String(req.headers["content-type"] ?? "").startsWith("multipart/form-data")) {
          return invalid("The request must be multipart/form-data.", null)
        }
        const form = await new Request("http://mock/files", {
          method: "POST",
          headers: { "content-type": String(req.headers["content-type"]) },
          body: new Uint8Array(req.raw)
        }).formData()
        const purpose = form.get("purpose")
        const file = form.get("file")
        const fields: Record<string, string> = {}
        const uploaded: Record<string, { filename: string; type: string; content: string }> = {}
        for (const [k, v] of form.entries()) {
          if (typeof v === "string") fields[k] = v
          else uploaded[k] = { filename: v.name, type: v.type, content: await v.text() }
        }
        req.record.body = { fields, files: uploaded }
        if (typeof purpose !== "string" || !["batch", "fine-tune", "assistants", "vision", "user_data", "evals"].includes(purpose)) {
          return invalid(`'${String(purpose)}' is not one of ['fine-tune', 'assistants', 'batch', 'user_data', 'vision', 'evals'] - 'purpose'`, "purpose")
        }
        if (file === null || typeof file === "string") return invalid("Missing required parameter: 'file'.", "file")
        const content = await file.text()
        if (purpose === "batch" || purpose === "fine-tune") {
          if (!file.name.endsWith(".jsonl")) return invalid(`Invalid file format for ${purpose}. Supported formats: "jsonl"`, "file")
          const badLine = content.split("\n").findIndex((l) => {
            if (l.trim() === "") return false
            try {
              JSON.parse(l)
              return false
            } catch {
              return true
            }
          })
          if (badLine >= 0) return invalid(`Invalid file format. Line ${badLine + 1} is not valid JSON.`, "file")
        }
        return reply.json(200, fileObject(storeFile(file.name, purpose, content)))
      }
      const content = /^\/files\/([^/]+)\/content$/.exec(route)
      if (req.method === "GET" && content) {
        const f = files.get(content[1]!)
        if (!f) return noSuch("File object", content[1]!, "file_id")
        return reply.text(200, f.content, "application/octet-stream")
      }

      // Batch
      if (req.method === "POST" && route === "/batches") {
        if (typeof body?.input_file_id !== "string") return invalid("Missing required parameter: 'input_file_id'.", "input_file_id")
        const input = files.get(body.input_file_id)
        if (!input) return noSuch("File object", body.input_file_id, "input_file_id")
        if (input.purpose !== "batch") return invalid(`File ${input.id} has purpose '${input.purpose}', expected 'batch'.`, "input_file_id")
        if (!["/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions"].includes(body.endpoint)) {
          return invalid(`Invalid value for 'endpoint': ${String(body.endpoint)}.`, "endpoint")
        }
        if (body.completion_window !== "24h") return invalid("Invalid value for 'completion_window': expected '24h'.", "completion_window")
        const b: BatchJob = {
          id: `batch_${randomBytes(16).toString("hex")}`,
          inputFileId: input.id,
          endpoint: body.endpoint,
          completionWindow: body.completion_window,
          metadata: body.metadata,
          createdAt: nowSeconds(),
          polls: 0,
          pollsUntilDone: opts.pollsUntilDone,
          fail: opts.fail,
          failMessage: opts.failMessage,
          end
        }
        batches.set(b.id, b)
        return created(reply, batchView(b, {}))
      }
      // GET /batches?limit=: newest first.
      if (req.method === "GET" && route === "/batches") {
        const limit = Math.max(1, Math.min(Number(req.query.get("limit") ?? 20) || 20, 100))
        const newestFirst = [...batches.values()].reverse()
        return reply.json(200, { object: "list", data: newestFirst.slice(0, limit).map((b) => batchView(b, b.final ?? {})), has_more: newestFirst.length > limit })
      }
      const batch = /^\/batches\/([^/]+)$/.exec(route)
      if (req.method === "GET" && batch) {
        const b = batches.get(batch[1]!)
        if (!b) return noSuch("batch", batch[1]!, "batch_id")
        return reply.json(200, pollBatch(b))
      }

      // POST /batches/{id}/cancel: "cancelling" now, "cancelled" at the next poll; a batch that ended cannot be.
      const cancelBatch = /^\/batches\/([^/]+)\/cancel$/.exec(route)
      if (req.method === "POST" && cancelBatch) {
        const b = batches.get(cancelBatch[1]!)
        if (!b) return noSuch("batch", cancelBatch[1]!, "batch_id")
        if (b.final) return invalid(`Cannot cancel a batch with status '${String(b.final.status)}'.`, null)
        const now = nowSeconds()
        b.final = { status: "cancelled", cancelling_at: now, cancelled_at: now, request_counts: { total: validateInput(b).lines.length, completed: 0, failed: 0 } }
        return reply.json(200, batchView(b, { status: "cancelling", cancelling_at: now }))
      }

      // Fine-tuning
      if (req.method === "POST" && route === "/fine_tuning/jobs") {
        if (typeof body?.model !== "string") return invalid("Missing required parameter: 'model'.", "model")
        if (typeof body?.training_file !== "string") return invalid("Missing required parameter: 'training_file'.", "training_file")
        const training = files.get(body.training_file)
        if (!training) return invalid(`invalid training_file: ${body.training_file}`, "training_file", "invalid_training_file")
        if (training.purpose !== "fine-tune") {
          return invalid(`File ${training.id} has purpose '${training.purpose}', expected 'fine-tune'.`, "training_file", "invalid_training_file")
        }
        const j: FineTuneJobState = {
          id: `ftjob-${alnum(24)}`,
          model: body.model,
          trainingFile: training.id,
          validationFile: typeof body.validation_file === "string" ? body.validation_file : null,
          suffix: typeof body.suffix === "string" ? body.suffix : null,
          createdAt: nowSeconds(),
          polls: 0,
          pollsUntilDone: opts.pollsUntilDone,
          fail: opts.fail,
          failMessage: opts.failMessage,
          end,
          events: [],
          metadata: body.metadata ?? null
        }
        event(j, `Validating training file: ${training.id}`)
        event(j, `Created fine-tuning job: ${j.id}`)
        jobs.set(j.id, j)
        return created(reply, jobView(j, {}))
      }
      // GET /fine_tuning/jobs?limit=: newest first.
      if (req.method === "GET" && route === "/fine_tuning/jobs") {
        const limit = Math.max(1, Math.min(Number(req.query.get("limit") ?? 20) || 20, 100))
        const newestFirst = [...jobs.values()].reverse()
        return reply.json(200, { object: "list", data: newestFirst.slice(0, limit).map((j) => jobView(j, j.final ?? {})), has_more: newestFirst.length > limit })
      }
      const job = /^\/fine_tuning\/jobs\/([^/]+)$/.exec(route)
      if (req.method === "GET" && job) {
        const j = jobs.get(job[1]!)
        if (!j) return noSuch("fine-tuning job", job[1]!, "fine_tuning_job_id")
        return reply.json(200, pollJob(j))
      }
      // POST /fine_tuning/jobs/{id}/cancel: cancelled at once; a job that ended cannot be.
      const cancelJob = /^\/fine_tuning\/jobs\/([^/]+)\/cancel$/.exec(route)
      if (req.method === "POST" && cancelJob) {
        const j = jobs.get(cancelJob[1]!)
        if (!j) return noSuch("fine-tuning job", cancelJob[1]!, "fine_tuning_job_id")
        if (j.final) return invalid(`Job has already ${String(j.final.status)}.`, null)
        event(j, "Fine-tuning job cancelled")
        j.final = { status: "cancelled", finished_at: nowSeconds() }
        return reply.json(200, jobView(j, j.final))
      }
      const events = /^\/fine_tuning\/jobs\/([^/]+)\/events$/.exec(route)
      if (req.method === "GET" && events) {
        const j = jobs.get(events[1]!)
        if (!j) return noSuch("fine-tuning job", events[1]!, "fine_tuning_job_id")
        const newestFirst = [...j.events].reverse()
        const after = req.query.get("after")
        const start = after ? newestFirst.findIndex((e) => e.id === after) + 1 : 0
        const limit = Math.max(1, Math.min(Number(req.query.get("limit") ?? 20) || 20, 100))
        const page = newestFirst.slice(start, start + limit)
        return reply.json(200, { object: "list", data: page, has_more: start + limit < newestFirst.length })
      }
      reply.json(404, openAiError(`Invalid URL (${req.method} ${req.record.path})`, "invalid_request_error"))
    }
  )
  return {
    ...mock,
    files,
    configure: (o) => {
      if (o.end !== undefined) end = o.end
      if (o.lostCreates !== undefined) lostCreates = o.lostCreates
      mock.configure(o)
    }
  }
}
