/**
 * Replicate predictions as a video upstream.
 *
 * Wire format (https://replicate.com/docs/reference/http, https://replicate.com/docs/topics/predictions/lifecycle,
 * https://replicate.com/changelog/2025-08-05-run-all-models-with-the-same-api-endpoint):
 *  - official models: `POST {endpoint}/models/{owner}/{name}/predictions` with `{"input": {...}}`;
 *    a pinned version (`owner/name:version` or a bare 64-hex version id): `POST {endpoint}/predictions`
 *    with `{"version": ..., "input": {...}}`. Both answer 201 with the prediction object (async mode:
 *    no `Prefer: wait` header is sent, so the answer comes back at once with `status: "starting"`).
 *  - poll: `GET {endpoint}/predictions/{id}`; `status` is starting | processing | succeeded | failed |
 *    canceled (| aborted: deadline passed before it started); `output` is the model's output (for the
 *    video models here a URL string, some models give an array of URLs: the first is the video, several
 *    are listed as `outputs`, Delivered.ts `outputDetails`); `error` is set on failure;
 *    `metrics.predict_time` on terminal predictions. `id` and `model` are kept when present.
 *  - auth: `Authorization: Token <key>` (the catalogue's "token" style; Bearer is accepted too).
 *  - errors are problem-details JSON, e.g. 401 `{"title":"Unauthenticated","detail":"You did not pass a
 *    valid authentication token","status":401}`, 429 `{"detail":"Request was throttled. ..."}`
 *    (https://replicate.com/docs/topics/predictions/rate-limits); `upstreamMessage` reads `detail`.
 *
 * Each model has its own input schema, so the gateway's fields are mapped per model (see `inputsOf`).
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { outputDetails } from "../Delivered.ts"
import { authHeaders, getJson, postJson } from "../internal/http.ts"
import { protocolError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { checked, refusal, submittedId, type VideoAdapter, type VideoPoll, type VideoRequest } from "./VideoAdapter.ts"

/** google/veo-3: text-to-video and image-to-video, `duration` 4|6|8, `aspect_ratio` 16:9|9:16. */
export const DEFAULT_MODEL = "google/veo-3"

/** How one model names the gateway's inputs. Absent duration/aspect ⇒ the model has no such input. */
export interface ModelInputs {
  /** Input field for the first-frame / seed image. */
  readonly image: string
  /** Integer `duration` in seconds: the documented choices (snapped to the nearest), a range (clamped), or any integer. */
  readonly duration?: ReadonlyArray<number> | { readonly min: number; readonly max: number } | "any"
  /** Whether the model takes `aspect_ratio` ("W:H", passed through; the model validates the value). */
  readonly aspectRatio?: boolean
}

/**
 * Input schemas of the video models we know (from each model's "API" page on replicate.com):
 *  - minimax/video-01 (also -live, -director): prompt, first_frame_image, prompt_optimizer; no duration or
 *    aspect ratio (the video takes the first frame's aspect ratio)
 *    https://replicate.com/minimax/video-01/versions/c8bcc4751328608bb75043b3af7bed4eabcf1a6c0a478d50a4cf57fa04bd5101/api
 *  - google/veo-2: image, aspect_ratio 16:9|9:16, duration 5|6|7|8
 *    https://replicate.com/google/veo-2/versions/0546b4e90d4f215c7fc42c9b8d815df3a7b6e47a754ee94ddb62b3f667fea9a5/api
 *  - google/veo-3, veo-3-fast, veo-3.1: image, aspect_ratio 16:9|9:16, duration 4|6|8, resolution, generate_audio
 *    https://replicate.com/google/veo-3-fast/versions/368d4063e21ecf73746b8e6d27989837d97ba07b5eca43a4e5488c852e10c2ec/api
 *  - bytedance/seedance-2.0 (and -fast): image, duration -1..15, aspect_ratio
 *    https://replicate.com/bytedance/seedance-2.0/versions/d456b64a60da3903c3692f7128d491004d021bbc2e1e19c63bccb117d3f4ab7b/api
 */
const knownModels: Readonly<Record<string, ModelInputs>> = {
  "minimax/video-01": { image: "first_frame_image" },
  "minimax/video-01-live": { image: "first_frame_image" },
  "minimax/video-01-director": { image: "first_frame_image" },
  "google/veo-2": { image: "image", duration: [5, 6, 7, 8], aspectRatio: true },
  "google/veo-3": { image: "image", duration: [4, 6, 8], aspectRatio: true },
  "google/veo-3-fast": { image: "image", duration: [4, 6, 8], aspectRatio: true },
  "google/veo-3.1": { image: "image", duration: [4, 6, 8], aspectRatio: true },
  "bytedance/seedance-2.0": { image: "image", duration: { min: 1, max: 15 }, aspectRatio: true },
  "bytedance/seedance-2.0-fast": { image: "image", duration: { min: 1, max: 15 }, aspectRatio: true }
}

/** Unknown models get the most common naming (`image`, `duration`, `aspect_ratio`). */
const fallbackInputs: ModelInputs = { image: "image", duration: "any", aspectRatio: true }

/** The model's own id without a pinned version (`owner/name`). */
const baseModel = (model: string) => model.split(":")[0]!

export const inputsOf = (model: string): ModelInputs => knownModels[baseModel(model)] ?? fallbackInputs

const isChoices = (d: NonNullable<ModelInputs["duration"]>): d is ReadonlyArray<number> => Array.isArray(d)

const nearest = (choices: ReadonlyArray<number>, wanted: number) =>
  choices.reduce((best, c) => (Math.abs(c - wanted) < Math.abs(best - wanted) ? c : best), choices[0]!)

/** What a known model has no input for: `duration` or `aspectRatio` (minimax/video-01 takes neither), refused by name. */
export const unsupported = (provider: ConfiguredProvider, request: VideoRequest): string | undefined => {
  const model = request.model ?? DEFAULT_MODEL
  const spec = inputsOf(model)
  if (request.durationSeconds !== undefined && spec.duration === undefined) {
    return refusal(provider.id, `duration with ${baseModel(model)}`, "the model has no duration input (its videos have a fixed length)")
  }
  if (request.aspectRatio !== undefined && !spec.aspectRatio) {
    return refusal(provider.id, `aspectRatio with ${baseModel(model)}`, "the model has no aspect ratio input")
  }
  return undefined
}

/** The prediction's `input` object for a model. */
export const toInput = (model: string, request: VideoRequest): Record<string, unknown> => {
  const spec = inputsOf(model)
  const input: Record<string, unknown> = { prompt: request.prompt }
  if (request.imageUrl !== undefined) input[spec.image] = request.imageUrl
  const seconds = request.durationSeconds
  if (seconds !== undefined && spec.duration !== undefined) {
    const d = spec.duration
    input.duration = d === "any"
      ? Math.round(seconds)
      : isChoices(d)
      ? nearest(d, seconds)
      : Math.min(Math.max(Math.round(seconds), d.min), d.max)
  }
  if (request.aspectRatio !== undefined && spec.aspectRatio) input.aspect_ratio = request.aspectRatio
  return input
}

const OFFICIAL = /^([A-Za-z0-9][\w.-]*)\/([A-Za-z0-9][\w.-]*)$/
const VERSIONED = /^([A-Za-z0-9][\w.-]*)\/([A-Za-z0-9][\w.-]*):([0-9a-f]{64})$|^[0-9a-f]{64}$/

/** Where and what to POST for a model id. */
export const createCall = (endpoint: string, model: string, input: Record<string, unknown>) => {
  const official = OFFICIAL.exec(model)
  if (official) {
    return {
      url: `${endpoint}/models/${encodeURIComponent(official[1]!)}/${encodeURIComponent(official[2]!)}/predictions`,
      body: { input }
    }
  }
  if (VERSIONED.test(model)) return { url: `${endpoint}/predictions`, body: { version: model, input } }
  return undefined
}

/** The video URL in a prediction's output: a URL string, or the first URL of an array. */
const videoUrlOf = (output: unknown): string | undefined => {
  if (typeof output === "string" && output.length > 0) return output
  if (Array.isArray(output)) return output.find((o): o is string => typeof o === "string" && o.length > 0)
  if (output && typeof output === "object") {
    const o = output as Record<string, unknown>
    for (const key of ["video", "url", "output"]) if (typeof o[key] === "string" && o[key]) return o[key] as string
  }
  return undefined
}

const errorText = (error: unknown, fallback: string): string =>
  typeof error === "string" && error.length > 0
    ? error
    : error && typeof error === "object"
    ? JSON.stringify(error)
    : fallback

/** The statuses whose poll answer does not depend on the rest of the prediction. */
const FIXED_POLLS = new Map<string, VideoPoll>([
  ["starting", { status: "pending" }],
  ["processing", { status: "running" }],
  ["canceled", { status: "cancelled", error: "the prediction was canceled at Replicate" }],
  ["aborted", { status: "failed", error: "the prediction was aborted: its deadline passed before it started" }]
])

/** A prediction object to the adapter's poll answer. */
export const toPoll = (provider: string, prediction: any): Effect.Effect<VideoPoll, ReturnType<typeof protocolError>> => {
  const fixed = FIXED_POLLS.get(prediction?.status)
  if (fixed) return Effect.succeed(fixed)
  switch (prediction?.status) {
    case "succeeded": {
      const videoUrl = videoUrlOf(prediction.output)
      if (!videoUrl) return Effect.succeed({ status: "failed", error: "the prediction succeeded without a video URL in its output" })
      return Effect.succeed({
        status: "succeeded",
        videoUrl,
        details: {
          predictionId: prediction.id,
          model: prediction.model,
          ...outputDetails(prediction.output),
          ...(typeof prediction?.metrics?.predict_time === "number" ? { predictTimeSeconds: prediction.metrics.predict_time } : {})
        }
      })
    }
    case "failed":
      return Effect.succeed({ status: "failed", error: errorText(prediction.error, "the prediction failed") })
    default:
      return Effect.fail(protocolError(provider, `unknown prediction status ${JSON.stringify(prediction?.status)}`))
  }
}

export const replicate: VideoAdapter = {
  unsupported,
  submit: (provider: ConfiguredProvider, request: VideoRequest) =>
    Effect.gen(function*() {
      yield* checked(provider, request, unsupported)
      const model = request.model ?? DEFAULT_MODEL
      const call = createCall(provider.endpoint, model, toInput(model, request))
      if (!call) return yield* Effect.fail(protocolError(provider.id, `not a Replicate model id: ${model}`))
      const prediction = yield* postJson(provider.id, call.url, authHeaders(provider), call.body)
      return { upstreamId: yield* submittedId(provider.id, prediction?.id, "the created prediction has no id") }
    }),
  poll: (provider: ConfiguredProvider, upstreamId: string) =>
    getJson(provider.id, `${provider.endpoint}/predictions/${encodeURIComponent(upstreamId)}`, authHeaders(provider)).pipe(
      Effect.flatMap((prediction) => toPoll(provider.id, prediction))
    ),
  // POST /v1/predictions/{id}/cancel: the prediction ends `canceled`.
  cancel: (provider: ConfiguredProvider, upstreamId: string) =>
    Effect.asVoid(postJson(provider.id, `${provider.endpoint}/predictions/${encodeURIComponent(upstreamId)}/cancel`, authHeaders(provider), {}))
}

/** What aigw serves through Replicate (a bespoke provider). */
export const served: Served = { video: replicate }
