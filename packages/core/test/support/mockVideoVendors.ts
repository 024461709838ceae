/**
 * Local mocks of the Runway, Kling and HeyGen video APIs, on the job-mock plumbing of mockJobs.ts
 * (records requests, moves a job one step per poll, `failNext` answers the vendor's error body).
 *
 * References (wire details):
 *  Runway  https://docs.dev.runwayml.com/api/ (POST /v1/image_to_video {model, promptImage, promptText, ratio,
 *          duration}, POST /v1/text_to_video {model, promptText, ratio, duration} → {id}; GET /v1/tasks/{id} →
 *          {id, status PENDING|THROTTLED|RUNNING|SUCCEEDED|FAILED|CANCELLED, createdAt, output[], failure,
 *          failureCode}; Bearer key + X-Runway-Version: 2024-11-06; errors {"error": "..."}).
 *  Kling   https://app.klingai.com/global/dev/document-api (JWT HS256 {iss: access key, exp, nbf} signed with the
 *          secret key; POST /v1/videos/text2video | image2video → {code: 0, message, request_id, data: {task_id,
 *          task_status}}; GET /v1/videos/{kind}/{task_id} → data.task_status submitted|processing|succeed|failed,
 *          task_status_msg, task_result.videos[{id, url, duration}]; errors {code, message, request_id} with
 *          codes 1000-1004 (401), 1200-1301 (400), 1302 (429), 5000 (500)).
 *  HeyGen  https://docs.heygen.com/reference/create-an-avatar-video-v2 and /reference/video-status (POST
 *          /v2/video/generate {video_inputs[{character, voice, background}], dimension} → {error: null, data:
 *          {video_id}}; GET /v1/video_status.get?video_id= → {code: 100, message: "Success", data: {id, status
 *          pending|processing|completed|failed, video_url, thumbnail_url, duration, error}}; X-Api-Key;
 *          errors {error: {code, message}, data: null}).
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import { Effect, Option, Redacted } from "effect"
import { type ConfiguredProvider, data } from "../../src/Catalog/Catalog.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import type { VideoAdapter, VideoPoll } from "../../src/Providers/Video/VideoAdapter.ts"
import { bearer, type JobMock, type JobMockOptions, phase, startServer } from "./mockJobs.ts"

// ---------------------------------------------------------------------------------------------
// Test helpers for the video adapters
// ---------------------------------------------------------------------------------------------

/** A catalogued video provider pointed at a mock, with a key and settings. */
export const videoProvider = (id: string, endpoint: string, key: string, settings: Record<string, string> = {}): ConfiguredProvider => ({
  ...data.providers.find((p) => p.id === id)!,
  endpoint,
  apiKey: Option.some(Redacted.make(key)),
  configured: true,
  settings,
  missing: undefined
})

export const runEither = <A>(e: Effect.Effect<A, UpstreamError>) => Effect.runPromise(Effect.either(e))

/** Polls until the job ends; returns the last answer and the statuses seen. */
export const pollUntilDone = async (adapter: VideoAdapter, provider: ConfiguredProvider, id: string, max = 10) => {
  const seen: Array<VideoPoll["status"]> = []
  for (let i = 0; i < max; i++) {
    const p = await Effect.runPromise(adapter.poll(provider, id))
    seen.push(p.status)
    if (p.status === "succeeded" || p.status === "failed" || p.status === "cancelled") return { last: p, seen }
  }
  throw new Error(`not done after ${max} polls: ${seen.join(",")}`)
}

/** One upstream job: how many polls it has seen and how it ends. */
interface MockTask {
  readonly id: string
  readonly kind: string
  readonly createdAt: number
  readonly pollsUntilDone: number
  readonly fail: boolean
  readonly failMessage: string
  polls: number
  /** Cancelled through the vendor's API: polls answer so from then on. */
  cancelled?: boolean
}

/** Creates and advances tasks: `poll` answers "early" | "middle" | "done". */
const taskBook = () => {
  const tasks = new Map<string, MockTask>()
  return {
    create: (kind: string, opts: Required<JobMockOptions>, id: string = randomUUID()): MockTask => {
      const task: MockTask = { id, kind, createdAt: Date.now(), pollsUntilDone: opts.pollsUntilDone, fail: opts.fail, failMessage: opts.failMessage, polls: 0 }
      tasks.set(id, task)
      return task
    },
    find: (id: string) => tasks.get(id),
    remove: (id: string) => void tasks.delete(id),
    poll: (id: string) => {
      const task = tasks.get(id)
      if (!task) return undefined
      task.polls++
      return { task, at: phase(task.polls, task.pollsUntilDone) }
    }
  }
}

const inList = (list: ReadonlyArray<unknown>, v: unknown) => list.includes(v)

// ---------------------------------------------------------------------------------------------
// Runway
// ---------------------------------------------------------------------------------------------

export const RUNWAY_VERSION = "2024-11-06"
const RUNWAY_RATIOS = ["1280:720", "720:1280", "1104:832", "832:1104", "960:960", "1584:672"]
const RUNWAY_IMAGE_MODELS = ["gen4_turbo", "gen4.5", "veo3.1", "veo3.1_fast"]
const RUNWAY_TEXT_MODELS = ["gen4.5", "veo3.1", "veo3.1_fast", "veo3"]

export interface RunwayMockOptions extends JobMockOptions {
  /** how many URLs a succeeded task's `output` holds; default 1 */
  outputs?: number
  /** answer tasks without `id` */
  withoutId?: boolean
}

export const startRunwayMock = async (options: RunwayMockOptions = {}): Promise<JobMock<RunwayMockOptions>> => {
  const book = taskBook()
  let shape = { outputs: options.outputs ?? 1, withoutId: options.withoutId ?? false }
  // Each task keeps the shape it was created with.
  const shapes = new Map<string, typeof shape>()
  const mock = await startServer(
    "/v1",
    options,
    (status) => ({ error: status === 429 ? "You have exceeded the rate limit." : status === 401 ? "Invalid API key." : status >= 500 ? "Internal server error" : `mock HTTP ${status}` }),
    (headers, apiKey) =>
      bearer(headers) !== apiKey
        ? { ok: false, body: { error: "Invalid API key." } }
        : { ok: true },
    (req, reply, opts) => {
      const bad = (error: string) => reply.json(400, { error })
      if (req.headers["x-runway-version"] !== RUNWAY_VERSION) return bad("The X-Runway-Version header is missing or not a valid API version.")
      if (req.method === "POST" && (req.route === "/image_to_video" || req.route === "/text_to_video")) {
        const body = req.record.body as any
        const image = req.route === "/image_to_video"
        if (!body || typeof body !== "object") return bad("Validation of body failed")
        if (!inList(image ? RUNWAY_IMAGE_MODELS : RUNWAY_TEXT_MODELS, body.model)) return bad(`Validation of body failed: model ${String(body.model)} is not available`)
        if (image && typeof body.promptImage !== "string") return bad("Validation of body failed: promptImage is required")
        if (!image && (typeof body.promptText !== "string" || body.promptText.length === 0)) return bad("Validation of body failed: promptText is required")
        if (typeof body.promptText === "string" && body.promptText.length > 1000) return bad("Validation of body failed: promptText is too long")
        if (body.ratio !== undefined && !RUNWAY_RATIOS.includes(body.ratio)) return bad(`Validation of body failed: invalid ratio ${String(body.ratio)}`)
        if (body.duration !== undefined && !Number.isInteger(body.duration)) return bad("Validation of body failed: duration must be an integer")
        const task = book.create(body.model, opts)
        shapes.set(task.id, shape)
        return reply.json(200, { id: task.id })
      }
      const get = req.route && /^\/tasks\/([^/]+)$/.exec(req.route)
      // DELETE /v1/tasks/{id}: a task still running is cancelled (204), one that ended is deleted.
      if (req.method === "DELETE" && get) {
        const task = book.find(get[1]!)
        if (!task) return reply.json(404, { error: "Task not found." })
        if (phase(task.polls, task.pollsUntilDone) === "done") book.remove(task.id)
        else task.cancelled = true
        return reply.text(204, "", "text/plain")
      }
      if (req.method === "GET" && get) {
        const seen = book.poll(get[1]!)
        if (!seen) return reply.json(404, { error: "Task not found." })
        const { task, at } = seen
        const status = task.cancelled ? "CANCELLED" : at === "done" ? (task.fail ? "FAILED" : "SUCCEEDED") : at === "early" ? "PENDING" : "RUNNING"
        const { outputs, withoutId } = shapes.get(task.id)!
        const output = Array.from({ length: outputs }, (_, i) => `https://dnznrvs05pmza.cloudfront.net/${task.id}${i === 0 ? "" : `-${i}`}.mp4?_jwt=mock`)
        return reply.json(200, {
          ...(withoutId ? {} : { id: task.id }),
          status,
          createdAt: new Date(task.createdAt).toISOString(),
          ...(status === "RUNNING" ? { progress: 0.5 } : {}),
          ...(status === "SUCCEEDED" ? { output } : {}),
          ...(status === "FAILED" ? { failure: task.failMessage, failureCode: "SAFETY.INPUT.TEXT" } : {})
        })
      }
      reply.json(404, { error: "Not found." })
    }
  )
  const configure = mock.configure
  return {
    ...mock,
    configure: (o: Partial<RunwayMockOptions>) => {
      shape = { outputs: o.outputs ?? shape.outputs, withoutId: o.withoutId ?? shape.withoutId }
      configure(o)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Kling
// ---------------------------------------------------------------------------------------------

export interface KlingMockOptions extends JobMockOptions {
  /** the secret key tokens must be signed with (`apiKey` is the access key, the token's `iss`) */
  secretKey?: string
}

export interface KlingMock extends JobMock {
  /** the header and claims of every token that passed verification */
  readonly tokens: Array<{ header: Record<string, unknown>; claims: Record<string, unknown> }>
  /** the next created task gets this `task_id` (a hostile answer: `/` and dots in it) */
  nextTaskId(id: string): void
}

const KLING_MODELS = ["kling-v1", "kling-v1-5", "kling-v1-6", "kling-v2-master", "kling-v2-1-master", "kling-v2-5-turbo"]
const base64url = (b: Buffer) => b.toString("base64url")

/** Verifies an HS256 JWT on its own (node:crypto, not the adapter's library): signature, iss, exp, nbf. */
export const verifyKlingToken = (token: string, accessKey: string, secretKey: string, now = Math.floor(Date.now() / 1000)) => {
  const parts = token.split(".")
  if (parts.length !== 3) return { ok: false as const, code: 1002, message: "Authorization is invalid" }
  const [h, p, s] = parts as [string, string, string]
  const expected = Buffer.from(base64url(createHmac("sha256", secretKey).update(`${h}.${p}`).digest()))
  const given = Buffer.from(s)
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { ok: false as const, code: 1000, message: "Authentication failed" }
  let header: any
  let claims: any
  try {
    header = JSON.parse(Buffer.from(h, "base64url").toString("utf8"))
    claims = JSON.parse(Buffer.from(p, "base64url").toString("utf8"))
  } catch {
    return { ok: false as const, code: 1002, message: "Authorization is invalid" }
  }
  if (header.alg !== "HS256") return { ok: false as const, code: 1002, message: "Authorization is invalid" }
  if (claims.iss !== accessKey) return { ok: false as const, code: 1000, message: "Authentication failed" }
  if (typeof claims.exp !== "number" || claims.exp <= now) return { ok: false as const, code: 1004, message: "Token expired" }
  if (typeof claims.nbf !== "number" || claims.nbf > now) return { ok: false as const, code: 1003, message: "Token is not yet valid" }
  return { ok: true as const, header: header as Record<string, unknown>, claims: claims as Record<string, unknown> }
}

export const startKlingMock = async (options: KlingMockOptions = {}): Promise<KlingMock> => {
  const book = taskBook()
  const secretKey = options.secretKey ?? "kling-secret"
  const tokens: KlingMock["tokens"] = []
  let nextTaskId: string | undefined
  const requestId = () => randomUUID()
  const error = (code: number, message: string) => ({ code, message, request_id: requestId() })
  const authorized = (headers: IncomingHttpHeaders, accessKey: string) => {
    const token = bearer(headers)
    if (token === undefined) return { ok: false as const, body: error(1001, "Authorization is empty") }
    const checked = verifyKlingToken(token, accessKey, secretKey)
    if (!checked.ok) return { ok: false as const, body: error(checked.code, checked.message) }
    tokens.push({ header: checked.header, claims: checked.claims })
    return { ok: true as const }
  }
  const mock = await startServer(
    "/v1",
    options,
    (status) =>
      status === 429
        ? error(1302, "The API request is too fast, please slow down")
        : status === 401
        ? error(1000, "Authentication failed")
        : status >= 500
        ? error(5000, "Server internal error")
        : error(1200, `mock HTTP ${status}`),
    authorized,
    (req, reply, opts) => {
      const create = req.route && /^\/videos\/(text2video|image2video)$/.exec(req.route)
      if (req.method === "POST" && create) {
        const kind = create[1]!
        const body = req.record.body as any
        const bad = (message: string) => reply.json(400, error(1201, message))
        if (!body || typeof body !== "object") return bad("request body is invalid")
        if (body.model_name !== undefined && !KLING_MODELS.includes(body.model_name)) return bad(`model_name value '${String(body.model_name)}' is invalid`)
        if (kind === "image2video" && typeof body.image !== "string") return bad("image is required")
        if (kind === "text2video" && (typeof body.prompt !== "string" || body.prompt.length === 0)) return bad("prompt is required")
        if (body.aspect_ratio !== undefined && !["16:9", "9:16", "1:1"].includes(body.aspect_ratio)) return bad(`aspect_ratio value '${String(body.aspect_ratio)}' is invalid`)
        if (body.duration !== undefined && !["5", "10"].includes(body.duration)) return bad(`duration value '${String(body.duration)}' is invalid`)
        if (body.mode !== undefined && !["std", "pro"].includes(body.mode)) return bad(`mode value '${String(body.mode)}' is invalid`)
        const task = book.create(kind, opts, nextTaskId ?? String(BigInt(`0x${randomBytes(7).toString("hex")}`)))
        nextTaskId = undefined
        return reply.json(200, {
          code: 0,
          message: "SUCCEED",
          request_id: requestId(),
          data: { task_id: task.id, task_status: "submitted", created_at: task.createdAt, updated_at: task.createdAt }
        })
      }
      const get = req.route && /^\/videos\/(text2video|image2video)\/([^/]+)$/.exec(req.route)
      if (req.method === "GET" && get) {
        // The task id is one path segment, escaped: Kling reads it decoded.
        const seen = book.poll(decodeURIComponent(get[2]!))
        if (!seen || seen.task.kind !== get[1]) return reply.json(404, error(1203, "task not found"))
        const { task, at } = seen
        const status = at === "done" ? (task.fail ? "failed" : "succeed") : at === "early" ? "submitted" : "processing"
        return reply.json(200, {
          code: 0,
          message: "SUCCEED",
          request_id: requestId(),
          data: {
            task_id: task.id,
            task_status: status,
            task_status_msg: status === "failed" ? task.failMessage : "",
            created_at: task.createdAt,
            updated_at: Date.now(),
            ...(status === "succeed"
              ? { task_result: { videos: [{ id: `v-${task.id}`, url: `https://cdn.klingai.com/bs2/upload-kling-api/${task.id}.mp4`, duration: "5.1" }] } }
              : {})
          }
        })
      }
      reply.json(404, error(1202, "invalid method"))
    }
  )
  return Object.assign(mock, { tokens, nextTaskId: (id: string) => void (nextTaskId = id) })
}

// ---------------------------------------------------------------------------------------------
// HeyGen
// ---------------------------------------------------------------------------------------------

export const HEYGEN_AVATARS = ["Angela-inTshirt-20220820", "Tyler-incasualsuit-20220721"]
export const HEYGEN_VOICES = ["1bd001e7e50f421d891986aad5158bc8"]

/** `url` is the v2 API (the catalogue's endpoint); the status call is under /v1 of the same host. */
export const startHeyGenMock = async (options: JobMockOptions = {}): Promise<JobMock> => {
  const book = taskBook()
  const error = (code: string, message: string) => ({ error: { code, message }, data: null })
  const mock = await startServer(
    "",
    options,
    (status) =>
      status === 429
        ? error("rate_limit_exceeded", "Too many requests")
        : status === 401
        ? error("authentication_failed", "Unauthorized")
        : status >= 500
        ? error("internal_error", "Internal server error")
        : error("invalid_parameter", `mock HTTP ${status}`),
    (headers, apiKey) => (headers["x-api-key"] === apiKey ? { ok: true } : { ok: false, body: error("authentication_failed", "Unauthorized") }),
    (req, reply, opts) => {
      if (req.method === "POST" && req.route === "/v2/video/generate") {
        const body = req.record.body as any
        const bad = (message: string) => reply.json(400, error("invalid_parameter", message))
        const input = Array.isArray(body?.video_inputs) ? body.video_inputs[0] : undefined
        if (!input) return bad("video_inputs is required")
        if (input.character?.type !== "avatar" || !HEYGEN_AVATARS.includes(input.character.avatar_id)) {
          return bad(`avatar ${String(input.character?.avatar_id)} not found`)
        }
        if (input.voice?.type !== "text" || !HEYGEN_VOICES.includes(input.voice.voice_id)) return bad(`voice ${String(input.voice?.voice_id)} not found`)
        if (typeof input.voice.input_text !== "string" || input.voice.input_text.length === 0 || input.voice.input_text.length > 5000) {
          return bad("input_text must be 1 to 5000 characters")
        }
        if (input.background !== undefined && !(input.background.type === "image" && typeof input.background.url === "string")) return bad("background is invalid")
        const d = body.dimension
        if (d !== undefined && !(Number.isInteger(d.width) && Number.isInteger(d.height) && d.width > 0 && d.height > 0)) return bad("dimension is invalid")
        return reply.json(200, { error: null, data: { video_id: book.create("avatar", opts, randomBytes(16).toString("hex")).id } })
      }
      if (req.method === "GET" && req.route === "/v1/video_status.get") {
        const seen = book.poll(req.query.get("video_id") ?? "")
        if (!seen) return reply.json(404, { code: 400116, message: "Video not found" })
        const { task, at } = seen
        const status = at === "done" ? (task.fail ? "failed" : "completed") : at === "early" ? "pending" : "processing"
        const done = status === "completed"
        return reply.json(200, {
          code: 100,
          message: "Success",
          data: {
            id: task.id,
            status,
            callback_id: null,
            caption_url: null,
            created_at: Math.floor(task.createdAt / 1000),
            duration: done ? 4.2 : null,
            error: status === "failed" ? { code: 40119, message: task.failMessage, detail: task.failMessage } : null,
            gif_url: null,
            thumbnail_url: done ? `https://files2.heygen.ai/aws_pacific/avatar_tmp/${task.id}.jpeg` : null,
            video_url: done ? `https://files2.heygen.ai/aws_pacific/avatar_tmp/${task.id}.mp4?Expires=1` : null,
            video_url_caption: null
          }
        })
      }
      reply.json(404, error("not_found", "Not found"))
    }
  )
  return { ...mock, url: `${mock.url}/v2` }
}
