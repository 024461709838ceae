/**
 * Runway as a video upstream.
 *
 * Wire format (API reference https://docs.dev.runwayml.com/api/, task shape as in
 * https://github.com/api-evangelist/runway json-schema/runway-task-schema.json):
 *  - create: `POST {endpoint}/image_to_video` with `{model, promptImage, promptText, ratio, duration}`
 *    (models gen4_turbo, gen4.5, veo3.1, ...), or `POST {endpoint}/text_to_video` with
 *    `{model, promptText, ratio, duration}` (models gen4.5, veo3.1, veo3.1_fast, veo3). Both answer `{id}`.
 *  - `ratio` is in output pixels (`1280:720`, `720:1280`, `1104:832`, `832:1104`, `960:960`, `1584:672`);
 *    `duration` is whole seconds (gen4_turbo 5 | 10; gen4.5 2..10; veo3.x 4 | 6 | 8).
 *  - poll: `GET {endpoint}/tasks/{id}` → `{id, status: PENDING|THROTTLED|RUNNING|SUCCEEDED|FAILED|CANCELLED,
 *    createdAt, output: [url], failure, failureCode, progress}`; the first output is the video, several are
 *    listed as `outputs` (Delivered.ts `outputDetails`).
 *  - cancel: `DELETE {endpoint}/tasks/{id}` → 204 ("cancel or delete a task": a task still running is
 *    cancelled, one that ended is deleted).
 *  - auth: `Authorization: Bearer <key>` and `X-Runway-Version: 2024-11-06` on every call; errors are
 *    `{"error": "..."}` (with `issues` on validation failures).
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { outputDetails } from "../Delivered.ts"
import { authHeaders, deleteResource, getJson, postJson } from "../internal/http.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { checked, type DurationSpec, submittedId, refusal, snapSeconds, type VideoAdapter, type VideoPoll, type VideoRequest } from "./VideoAdapter.ts"

export const API_VERSION = "2024-11-06"
/** The default model for image-to-video (it needs an image) and for text-to-video. */
export const DEFAULT_IMAGE_MODEL = "gen4_turbo"
export const DEFAULT_TEXT_MODEL = "gen4.5"

/** The gateway's `W:H` aspect ratios to Runway's output sizes. */
export const RATIOS: Readonly<Record<string, string>> = {
  "16:9": "1280:720",
  "9:16": "720:1280",
  "4:3": "1104:832",
  "3:4": "832:1104",
  "1:1": "960:960",
  "21:9": "1584:672"
}

/** Documented durations per model; other models get whole seconds. */
const DURATIONS: Readonly<Record<string, DurationSpec>> = {
  gen4_turbo: [5, 10],
  "gen4.5": { min: 2, max: 10 },
  "veo3.1": [4, 6, 8],
  "veo3.1_fast": [4, 6, 8],
  veo3: [8]
}

/** Models that only animate an image (no text-to-video). */
const IMAGE_ONLY = new Set(["gen4_turbo"])

export const toDuration = (model: string, seconds: number): number => {
  const spec = DURATIONS[model]
  return spec === undefined ? Math.round(seconds) : snapSeconds(spec, seconds)
}

const headers = (provider: ConfiguredProvider) => ({ ...authHeaders(provider), "x-runway-version": API_VERSION })

const modelOf = (request: VideoRequest) => request.model ?? (request.imageUrl !== undefined ? DEFAULT_IMAGE_MODEL : DEFAULT_TEXT_MODEL)

/** What Runway cannot do: text-to-video on an image-only model, an aspect ratio it has no size for. */
export const unsupported = (provider: ConfiguredProvider, request: VideoRequest): string | undefined => {
  const model = modelOf(request)
  if (request.imageUrl === undefined && IMAGE_ONLY.has(model)) {
    return refusal(provider.id, "text-to-video", `${model} only animates an image: send imageUrl, or a text-to-video model such as ${DEFAULT_TEXT_MODEL}`)
  }
  if (request.aspectRatio !== undefined && RATIOS[request.aspectRatio] === undefined) {
    return refusal(provider.id, `aspectRatio ${request.aspectRatio}`, `Runway offers ${Object.keys(RATIOS).join(", ")}`)
  }
  return undefined
}

/** Where and what to POST for a request (one `unsupported` accepts). */
export const createCall = (endpoint: string, request: VideoRequest) => {
  const image = request.imageUrl !== undefined
  const model = modelOf(request)
  const body = {
    model,
    promptText: request.prompt,
    ...(image ? { promptImage: request.imageUrl } : {}),
    ...(request.aspectRatio !== undefined ? { ratio: RATIOS[request.aspectRatio] } : {}),
    ...(request.durationSeconds !== undefined ? { duration: toDuration(model, request.durationSeconds) } : {})
  }
  return { url: `${endpoint}/${image ? "image_to_video" : "text_to_video"}`, body }
}

/** The statuses whose poll answer does not depend on the rest of the task. */
const FIXED_POLLS = new Map<string, VideoPoll>([
  ["PENDING", { status: "pending" }],
  ["THROTTLED", { status: "pending" }],
  ["RUNNING", { status: "running" }],
  ["PROCESSING", { status: "running" }],
  ["CANCELLED", { status: "cancelled", error: "the task was cancelled at Runway" }]
])

/** A task object to the adapter's poll answer. */
export const toPoll = (provider: string, task: any): Effect.Effect<VideoPoll, UpstreamError> => {
  const fixed = FIXED_POLLS.get(task?.status)
  if (fixed) return Effect.succeed(fixed)
  switch (task?.status) {
    case "SUCCEEDED": {
      const outputs = Array.isArray(task.output) ? task.output.filter((o: unknown): o is string => typeof o === "string" && o.length > 0) : []
      if (outputs.length === 0) return Effect.succeed({ status: "failed", error: "the task succeeded without an output URL" })
      return Effect.succeed({
        status: "succeeded",
        videoUrl: outputs[0],
        details: { taskId: task.id, ...outputDetails(task.output) }
      })
    }
    case "FAILED": {
      const reason = typeof task.failure === "string" && task.failure.length > 0 ? task.failure : "the task failed"
      return Effect.succeed({ status: "failed", error: typeof task.failureCode === "string" ? `${reason} (${task.failureCode})` : reason })
    }
    default:
      return Effect.fail(protocolError(provider, `unknown task status ${JSON.stringify(task?.status)}`))
  }
}

export const runway: VideoAdapter = {
  unsupported,
  submit: (provider: ConfiguredProvider, request: VideoRequest) =>
    checked(provider, request, unsupported).pipe(
      Effect.map(() => createCall(provider.endpoint, request)),
      Effect.flatMap((call) => postJson(provider.id, call.url, headers(provider), call.body)),
      Effect.flatMap((task) => submittedId(provider.id, task?.id, "the created task has no id")),
      Effect.map((upstreamId) => ({ upstreamId }))
    ),
  poll: (provider: ConfiguredProvider, upstreamId: string) =>
    getJson(provider.id, `${provider.endpoint}/tasks/${encodeURIComponent(upstreamId)}`, headers(provider)).pipe(
      Effect.flatMap((task) => toPoll(provider.id, task))
    ),
  cancel: (provider: ConfiguredProvider, upstreamId: string) =>
    Effect.asVoid(deleteResource(provider.id, `${provider.endpoint}/tasks/${encodeURIComponent(upstreamId)}`, headers(provider)))
}

/** What aigw serves through Runway (a bespoke provider). */
export const served: Served = { video: runway }
