/**
 * fal image generation through its queue: asynchronous.
 *
 * Wire format (https://docs.fal.ai, "Queue"; the catalogue's base URL is `https://queue.fal.run`):
 *  - submit: `POST {endpoint}/{model_id}` (e.g. `fal-ai/flux/schnell`) with the model's input
 *    `{prompt, num_images, image_size?: {width, height}}` → `{request_id, status: IN_QUEUE, ...}`.
 *  - poll: `GET {endpoint}/{app_id}/requests/{request_id}/status` → `{status: IN_QUEUE |
 *    IN_PROGRESS | COMPLETED, error?}`; the app id is the model id's first two segments
 *    (`fal-ai/flux` for `fal-ai/flux/schnell`).
 *  - result: `GET {endpoint}/{app_id}/requests/{request_id}` → `{images: [{url, width, height,
 *    content_type}], seed, ...}`; a failed request answers an error status with `{detail}`.
 *  - auth: `Authorization: Key <key>`.
 */
import { Effect } from "effect"
import { authHeaders, getJson, postJson } from "../internal/http.ts"
import { type JobState, pollJob } from "../internal/jobs.ts"
import type { GeneratedImage, ImageRequest, ImagesEndpoint, Served } from "../Served.ts"
import { protocolError, shownUpstreamText, type UpstreamError } from "../UpstreamError.ts"
import { countRefusal, extraFieldsRefusal, firstRefusal, IMAGE_JOB } from "./ImageVendor.ts"

const VENDOR = "fal"

/** A model id: `owner/app` and optional sub-paths of letters, digits, `.`, `_` and `-`, none starting with a dot (it becomes the URL's path). */
const MODEL_ID = /^\w[\w.-]*(\/\w[\w.-]*)+$/

/** The app a model belongs to (its queue's requests live under it). */
export const appIdOf = (model: string) => model.split("/").slice(0, 2).join("/")

const unsupported = (request: ImageRequest): string | undefined =>
  firstRefusal(
    MODEL_ID.test(request.model) ? undefined : `${VENDOR} model ids look like owner/app[/path] (e.g. fal-ai/flux/schnell), not ${request.model}`,
    countRefusal(VENDOR, request, 4),
    extraFieldsRefusal(VENDOR, request)
  )

/** The model input of a request. */
export const inputOf = (request: ImageRequest) => ({
  prompt: request.prompt,
  num_images: request.n,
  ...(request.width !== undefined && request.height !== undefined ? { image_size: { width: request.width, height: request.height } } : {})
})

/** A queue status to the poll state. */
export const toJobState = (provider: string, status: any): Effect.Effect<JobState<void>, UpstreamError> => {
  switch (status?.status) {
    case "IN_QUEUE":
    case "IN_PROGRESS":
      return Effect.succeed({ status: "running" })
    case "COMPLETED":
      return typeof status.error === "string" && status.error.length > 0
        ? Effect.succeed({ status: "failed", reason: shownUpstreamText(status.error, 500) })
        : Effect.succeed({ status: "done", value: undefined })
    default:
      return Effect.fail(protocolError(provider, `unknown queue status ${JSON.stringify(status?.status)}`))
  }
}

/** The result's images to the gateway's images (their URLs). */
export const toImages = (provider: string, result: any): Effect.Effect<ReadonlyArray<GeneratedImage>, UpstreamError> => {
  const urls = Array.isArray(result?.images) ? (result.images as Array<any>).map((i) => i?.url) : []
  return urls.length > 0 && urls.every((u) => typeof u === "string" && u.length > 0)
    ? Effect.succeed(urls.map((url: string) => ({ url })))
    : Effect.fail(protocolError(provider, "no image URLs in the result"))
}

export const images: ImagesEndpoint = {
  defaultModel: "fal-ai/flux/schnell",
  unsupported,
  generate: (provider, request, options) =>
    Effect.gen(function*() {
      const headers = authHeaders(provider)
      const queued = yield* postJson(provider.id, `${provider.endpoint}/${request.model}`, headers, inputOf(request))
      const id = queued?.request_id
      if (typeof id !== "string" || id.length === 0) return yield* Effect.fail(protocolError(provider.id, "the queue answered no request_id"))
      const requestUrl = `${provider.endpoint}/${appIdOf(request.model)}/requests/${encodeURIComponent(id)}`
      yield* pollJob(provider.id, Effect.flatMap(getJson(provider.id, `${requestUrl}/status`, headers), (s) => toJobState(provider.id, s)), options.pollMs, IMAGE_JOB)
      return { images: yield* Effect.flatMap(getJson(provider.id, requestUrl, headers), (r) => toImages(provider.id, r)) }
    })
}

/** What aigw serves through fal (a bespoke provider). */
export const served: Served = { images }
