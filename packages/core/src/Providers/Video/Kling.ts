/**
 * Kling AI as a video upstream.
 *
 * Wire format (Kling AI developer docs https://app.klingai.com/global/dev/document-api, "API authentication",
 * "Video Generation - Text to Video / Image to Video"):
 *  - auth: every request carries `Authorization: Bearer <JWT>`, an HS256 token signed with the secret key,
 *    `iss` = the access key, `exp` = now + 30 min, `nbf` = now - 5 s. aigw reads the access key from
 *    `KLING_API_KEY` and the secret key from `KLING_SECRET_KEY`, and signs a fresh token per request.
 *  - create: `POST {endpoint}/videos/text2video` with `{model_name, prompt, mode, aspect_ratio, duration}`
 *    (aspect_ratio 16:9 | 9:16 | 1:1; duration "5" | "10", a string), or `POST {endpoint}/videos/image2video`
 *    with `{model_name, image, prompt, mode, duration}` (the video takes the image's aspect ratio). Both
 *    answer `{code: 0, message, request_id, data: {task_id, task_status, created_at, updated_at}}`.
 *  - poll: `GET {endpoint}/videos/{text2video|image2video}/{task_id}` → `data.task_status` submitted |
 *    processing | succeed | failed, `data.task_status_msg` (why it failed), `data.task_result.videos[{id, url,
 *    duration}]`. The upstream id stored for polling is `{text2video|image2video}/{task_id}`.
 *  - errors: `{code, message, request_id}` with HTTP 401 (1000-1004 authentication), 400 (1200-1301
 *    parameters, content policy), 429 (1100-1102 account, 1302-1303 rate), 5xx (5000-5002).
 */
import { Effect, Option, Redacted } from "effect"
import * as jose from "jose"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { getJson, postJson } from "../internal/http.ts"
import { isVendorId } from "../internal/vendorId.ts"
import { protocolError, UpstreamError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { checked, refusal, snapSeconds, type VideoAdapter, type VideoPoll, type VideoRequest, submittedId } from "./VideoAdapter.ts"

export const SECRET_KEY = "KLING_SECRET_KEY"
export const DEFAULT_MODEL = "kling-v2-1-master"
export const ASPECT_RATIOS = ["16:9", "9:16", "1:1"]
/** Token lifetime and the clock skew allowance, as in Kling's authentication example. */
const TOKEN_SECONDS = 1800
const SKEW_SECONDS = 5

/** Kling's own JWT: HS256 over `{iss: accessKey, exp, nbf}` with the secret key. */
export const token = (accessKey: string, secretKey: string, nowSeconds = Math.floor(Date.now() / 1000)) =>
  new jose.SignJWT({})
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer(accessKey)
    .setExpirationTime(nowSeconds + TOKEN_SECONDS)
    .setNotBefore(nowSeconds - SKEW_SECONDS)
    .sign(new TextEncoder().encode(secretKey))

const headers = (provider: ConfiguredProvider): Effect.Effect<Record<string, string>, UpstreamError> => {
  const secret = provider.settings[SECRET_KEY]
  if (Option.isNone(provider.apiKey) || secret === undefined) {
    return Effect.fail(new UpstreamError({ provider: provider.id, kind: "http", status: 401, message: `set KLING_API_KEY (the access key) and ${SECRET_KEY}`, retryable: false }))
  }
  const accessKey = Redacted.value(provider.apiKey.value)
  return Effect.promise(() => token(accessKey, secret)).pipe(Effect.map((jwt) => ({ authorization: `Bearer ${jwt}` })))
}

type Kind = "text2video" | "image2video"

/** What Kling cannot do: an aspect ratio it does not offer, or one with an image (the video takes the image's). */
export const unsupported = (provider: ConfiguredProvider, request: VideoRequest): string | undefined => {
  if (request.aspectRatio === undefined) return undefined
  if (request.imageUrl !== undefined) return refusal(provider.id, "aspectRatio with imageUrl", "Kling's image-to-video takes the image's aspect ratio")
  if (!ASPECT_RATIOS.includes(request.aspectRatio)) return refusal(provider.id, `aspectRatio ${request.aspectRatio}`, `Kling offers ${ASPECT_RATIOS.join(", ")}`)
  return undefined
}

/** The create call's kind and body (for a request `unsupported` accepts). */
export const createCall = (request: VideoRequest): { kind: Kind; body: Record<string, unknown> } => {
  const image = request.imageUrl !== undefined
  const body = {
    model_name: request.model ?? DEFAULT_MODEL,
    prompt: request.prompt,
    mode: "std",
    ...(image ? { image: request.imageUrl } : {}),
    ...(request.aspectRatio !== undefined ? { aspect_ratio: request.aspectRatio } : {}),
    ...(request.durationSeconds !== undefined ? { duration: String(snapSeconds([5, 10], request.durationSeconds)) } : {})
  }
  return { kind: image ? "image2video" : "text2video", body }
}

/** The statuses whose poll answer does not depend on the rest of the task. */
const FIXED_POLLS = new Map<string, VideoPoll>([
  ["submitted", { status: "pending" }],
  ["processing", { status: "running" }]
])

/** A task's `data` to the adapter's poll answer. */
export const toPoll = (provider: string, task: any): Effect.Effect<VideoPoll, UpstreamError> => {
  const fixed = FIXED_POLLS.get(task?.task_status)
  if (fixed) return Effect.succeed(fixed)
  switch (task?.task_status) {
    case "succeed": {
      const videos = Array.isArray(task.task_result?.videos) ? task.task_result.videos : []
      const video = videos.find((v: any) => typeof v?.url === "string" && v.url.length > 0)
      if (!video) return Effect.succeed({ status: "failed", error: "the task succeeded without a video URL" })
      return Effect.succeed({
        status: "succeeded",
        videoUrl: video.url,
        details: {
          taskId: task.task_id,
          ...(typeof video.id === "string" && video.id.length > 0 ? { videoId: video.id } : {}),
          ...(video.duration !== undefined && Number.isFinite(Number(video.duration)) ? { durationSeconds: Number(video.duration) } : {})
        }
      })
    }
    case "failed":
      return Effect.succeed({
        status: "failed",
        error: typeof task.task_status_msg === "string" && task.task_status_msg.length > 0 ? task.task_status_msg : "the task failed"
      })
    default:
      return Effect.fail(protocolError(provider, `unknown task status ${JSON.stringify(task?.task_status)}`))
  }
}

/** Kling answers `{code: 0, data}` on success; any other code is a failure even with HTTP 200. */
const dataOf = (provider: string) => (answer: any): Effect.Effect<any, UpstreamError> =>
  answer?.code === 0 && answer.data && typeof answer.data === "object"
    ? Effect.succeed(answer.data)
    : Effect.fail(protocolError(provider, `code ${JSON.stringify(answer?.code)}: ${typeof answer?.message === "string" ? answer.message : "no data"}`))

/**
 * The stored `{kind}/{task_id}`: the kind is one of the two, the task id everything after the first `/`,
 * escaped as one path segment when polled (a `/` in it stays inside the segment). A task id that is no
 * vendor id (`.` or `..`, which escaping leaves as they are: a job stored before submit checked ids) is refused.
 */
const UPSTREAM_ID = /^(text2video|image2video)\/(.+)$/

export const kling: VideoAdapter = {
  unsupported,
  submit: (provider: ConfiguredProvider, request: VideoRequest) =>
    Effect.gen(function*() {
      yield* checked(provider, request, unsupported)
      const call = createCall(request)
      const auth = yield* headers(provider)
      const task = yield* postJson(provider.id, `${provider.endpoint}/videos/${call.kind}`, auth, call.body).pipe(Effect.flatMap(dataOf(provider.id)))
      return { upstreamId: `${call.kind}/${yield* submittedId(provider.id, task.task_id, "the created task has no task_id")}` }
    }),
  poll: (provider: ConfiguredProvider, upstreamId: string) =>
    Effect.gen(function*() {
      const id = UPSTREAM_ID.exec(upstreamId)
      if (!id || !isVendorId(id[2])) return yield* Effect.fail(protocolError(provider.id, `not a Kling task reference: ${upstreamId}`))
      const auth = yield* headers(provider)
      const task = yield* getJson(provider.id, `${provider.endpoint}/videos/${id[1]}/${encodeURIComponent(id[2]!)}`, auth).pipe(Effect.flatMap(dataOf(provider.id)))
      return yield* toPoll(provider.id, task)
    })
}

/** What aigw serves through Kling (a bespoke provider): the access key is `KLING_API_KEY`, the secret key a setting. */
export const served: Served = {
  video: kling,
  settings: [{ name: SECRET_KEY, description: "Kling secret key; signs the per-request JWT whose issuer is KLING_API_KEY (the access key)", secret: true }],
  credentials: (view, prefix) =>
    !view.hasApiKey
      ? `set ${prefix}_API_KEY (the Kling access key) and ${SECRET_KEY}`
      : view.settings[SECRET_KEY] === undefined
      ? `set ${SECRET_KEY} (the Kling secret key that signs each request's token)`
      : undefined
}
