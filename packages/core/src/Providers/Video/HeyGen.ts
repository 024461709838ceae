/**
 * HeyGen avatar videos as a video upstream: an avatar speaks the request's prompt.
 *
 * Wire format (https://docs.heygen.com/reference/create-an-avatar-video-v2,
 * https://docs.heygen.com/reference/video-status):
 *  - create: `POST {root}/v2/video/generate` with `{video_inputs: [{character: {type: "avatar", avatar_id,
 *    avatar_style}, voice: {type: "text", input_text, voice_id}, background?: {type: "image", url}}],
 *    dimension: {width, height}}` → `{error: null, data: {video_id}}`.
 *  - poll: `GET {root}/v1/video_status.get?video_id=...` → `{code: 100, message: "Success", data: {id, status:
 *    pending|waiting|processing|completed|failed, video_url, thumbnail_url, duration, error: {code, message,
 *    detail}}}`. (The catalogue's endpoint is the v2 API; the status call lives under v1 of the same host.)
 *  - auth: `X-Api-Key: <key>`; errors are `{error: {code, message}, data: null}` (v2) or `{code, message}` (v1).
 *
 * What the gateway request cannot carry comes from settings: the avatar (`HEYGEN_AVATAR_ID`, or the request's
 * `model`) and the voice (`HEYGEN_VOICE_ID`). `imageUrl` becomes the background; `aspectRatio` the dimension
 * (720 px on the short side). `duration` is refused: the video lasts as long as the avatar speaks the prompt.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { authHeaders, getJson, postJson } from "../internal/http.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { checked, refusal, submittedId, type VideoAdapter, type VideoPoll, type VideoRequest } from "./VideoAdapter.ts"

export const AVATAR_ID = "HEYGEN_AVATAR_ID"
export const VOICE_ID = "HEYGEN_VOICE_ID"
/** HeyGen's limit on one input's script. */
export const MAX_SCRIPT = 5000
const SHORT_SIDE = 720

/** The API root: the catalogue's endpoint without its `/v2`. */
const rootOf = (endpoint: string) => endpoint.replace(/\/v2\/?$/, "")

/** `W:H` to HeyGen's dimension, 720 px on the short side (even sizes, as video encoders want). */
export const dimensionOf = (aspectRatio: string) => {
  const [w, h] = aspectRatio.split(":").map(Number) as [number, number]
  const long = 2 * Math.round((SHORT_SIDE * Math.max(w, h)) / Math.min(w, h) / 2)
  return w >= h ? { width: long, height: SHORT_SIDE } : { width: SHORT_SIDE, height: long }
}

/** What HeyGen cannot do: a set duration, a script over its limit, a video without an avatar or a voice. */
export const unsupported = (provider: ConfiguredProvider, request: VideoRequest): string | undefined => {
  if (request.durationSeconds !== undefined) return refusal(provider.id, "duration", "a HeyGen avatar video lasts as long as the avatar speaks the prompt")
  if (request.prompt.length > MAX_SCRIPT) {
    return refusal(provider.id, `a prompt over ${MAX_SCRIPT} characters`, "it is the avatar's script, and HeyGen takes at most that")
  }
  if ((request.model ?? provider.settings[AVATAR_ID]) === undefined) return refusal(provider.id, "a video without an avatar", `set ${AVATAR_ID} or send the avatar id as model`)
  if (provider.settings[VOICE_ID] === undefined) return refusal(provider.id, "a video without a voice", `set ${VOICE_ID}`)
  return undefined
}

/** The create body (for a request `unsupported` accepts). */
export const toBody = (provider: ConfiguredProvider, request: VideoRequest) => ({
  video_inputs: [{
    character: { type: "avatar", avatar_id: request.model ?? provider.settings[AVATAR_ID], avatar_style: "normal" },
    voice: { type: "text", input_text: request.prompt, voice_id: provider.settings[VOICE_ID] },
    ...(request.imageUrl !== undefined ? { background: { type: "image", url: request.imageUrl } } : {})
  }],
  ...(request.aspectRatio !== undefined ? { dimension: dimensionOf(request.aspectRatio) } : {})
})

/** The statuses whose poll answer does not depend on the rest of the video. */
const FIXED_POLLS = new Map<string, VideoPoll>([
  ["pending", { status: "pending" }],
  ["waiting", { status: "pending" }],
  ["processing", { status: "running" }]
])

const failureOf = (error: any): string => {
  const text = [error?.message, error?.detail].filter((t): t is string => typeof t === "string" && t.length > 0)
  return text.length > 0 ? [...new Set(text)].join(": ") : "the video failed to render"
}

/** A video status's `data` to the adapter's poll answer. */
export const toPoll = (provider: string, video: any): Effect.Effect<VideoPoll, UpstreamError> => {
  const fixed = FIXED_POLLS.get(video?.status)
  if (fixed) return Effect.succeed(fixed)
  switch (video?.status) {
    case "completed":
      if (typeof video.video_url !== "string" || video.video_url.length === 0) {
        return Effect.succeed({ status: "failed", error: "the video completed without a video_url" })
      }
      return Effect.succeed({
        status: "succeeded",
        videoUrl: video.video_url,
        details: {
          videoId: video.id,
          ...(typeof video.thumbnail_url === "string" ? { thumbnailUrl: video.thumbnail_url } : {}),
          ...(typeof video.duration === "number" ? { durationSeconds: video.duration } : {})
        }
      })
    case "failed":
      return Effect.succeed({ status: "failed", error: failureOf(video.error) })
    default:
      return Effect.fail(protocolError(provider, `unknown video status ${JSON.stringify(video?.status)}`))
  }
}

export const heygen: VideoAdapter = {
  unsupported,
  submit: (provider: ConfiguredProvider, request: VideoRequest) =>
    checked(provider, request, unsupported).pipe(
      Effect.flatMap(() => postJson(provider.id, `${rootOf(provider.endpoint)}/v2/video/generate`, authHeaders(provider), toBody(provider, request))),
      Effect.flatMap((answer) => submittedId(provider.id, answer?.data?.video_id, "the answer has no data.video_id")),
      Effect.map((upstreamId) => ({ upstreamId }))
    ),
  poll: (provider: ConfiguredProvider, upstreamId: string) =>
    getJson(provider.id, `${rootOf(provider.endpoint)}/v1/video_status.get?video_id=${encodeURIComponent(upstreamId)}`, authHeaders(provider)).pipe(
      Effect.flatMap((answer) =>
        answer?.data && typeof answer.data === "object"
          ? toPoll(provider.id, answer.data)
          : Effect.fail(protocolError(provider.id, "the video status has no data"))
      )
    )
}

/** What aigw serves through HeyGen (a bespoke provider): avatar and voice come from settings. */
export const served: Served = {
  video: heygen,
  settings: [
    { name: AVATAR_ID, description: "HeyGen avatar that speaks the prompt (a request's model overrides it)" },
    { name: VOICE_ID, description: "HeyGen voice the avatar speaks with" }
  ],
  credentials: (view, prefix) =>
    !view.hasApiKey
      ? `set ${prefix}_API_KEY, ${VOICE_ID} and ${AVATAR_ID}`
      : view.settings[VOICE_ID] === undefined
      ? `set ${VOICE_ID} (the voice HeyGen's avatar speaks the prompt with)`
      : undefined
}
