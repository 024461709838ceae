/**
 * Luma Dream Machine as a video upstream.
 *
 * Wire format (official OpenAPI https://github.com/lumalabs/lumaai-api/blob/main/openapi.yaml, official SDK
 * https://github.com/lumalabs/lumaai-node src/resources/generations/{video,generations}.ts, guide
 * https://docs.lumalabs.ai/docs/video-generation):
 *  - create: `POST {endpoint}/generations/video` (the current SDK's `generations.video.create`; older docs
 *    show `POST /generations` with the same body) with `{prompt, model, aspect_ratio, duration, resolution,
 *    loop, keyframes: {frame0: {type: "image", url}}}`; `model` is required (ray-1-6 | ray-2 | ray-flash-2),
 *    `duration` is "5s" | "9s", `aspect_ratio` one of 1:1 16:9 9:16 4:3 3:4 21:9 9:21. Answers 201 with
 *    the Generation object.
 *  - poll: `GET {endpoint}/generations/{id}` → `{id, state: queued|dreaming|completed|failed, failure_reason,
 *    assets: {video, image, progress_video}, model, request, created_at}`.
 *  - auth: `Authorization: Bearer <key>`; errors are `{"detail": "..."}` (e.g. "Invalid API key is provided").
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { authHeaders, getJson, postJson } from "../internal/http.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { submittedId, type VideoAdapter, type VideoPoll, type VideoRequest } from "./VideoAdapter.ts"

export const DEFAULT_MODEL = "ray-2"

/** The documented durations; a request's seconds go to the nearest. */
const DURATIONS = [5, 9] as const

export const toDuration = (seconds: number): string => {
  const best = DURATIONS.reduce((a, b) => (Math.abs(b - seconds) < Math.abs(a - seconds) ? b : a))
  return `${best}s`
}

/** The create body. The aspect ratio passes through (Luma rejects one it does not offer). */
export const toBody = (request: VideoRequest) => ({
  prompt: request.prompt,
  model: request.model ?? DEFAULT_MODEL,
  ...(request.aspectRatio !== undefined ? { aspect_ratio: request.aspectRatio } : {}),
  ...(request.durationSeconds !== undefined ? { duration: toDuration(request.durationSeconds) } : {}),
  ...(request.imageUrl !== undefined ? { keyframes: { frame0: { type: "image", url: request.imageUrl } } } : {})
})

/** The states whose poll answer does not depend on the rest of the generation. */
const FIXED_POLLS = new Map<string, VideoPoll>([
  ["queued", { status: "pending" }],
  ["dreaming", { status: "running" }]
])

/** A Generation object to the adapter's poll answer. */
export const toPoll = (provider: string, generation: any): Effect.Effect<VideoPoll, UpstreamError> => {
  const fixed = FIXED_POLLS.get(generation?.state)
  if (fixed) return Effect.succeed(fixed)
  switch (generation?.state) {
    case "completed": {
      const videoUrl = generation?.assets?.video
      if (typeof videoUrl !== "string" || videoUrl.length === 0) {
        return Effect.succeed({ status: "failed", error: "the generation completed without a video asset" })
      }
      return Effect.succeed({
        status: "succeeded",
        videoUrl,
        details: {
          generationId: generation.id,
          ...(typeof generation.model === "string" ? { model: generation.model } : {}),
          ...(typeof generation.assets?.image === "string" ? { thumbnailUrl: generation.assets.image } : {})
        }
      })
    }
    case "failed":
      return Effect.succeed({
        status: "failed",
        error: typeof generation.failure_reason === "string" && generation.failure_reason.length > 0
          ? generation.failure_reason
          : "the generation failed"
      })
    default:
      return Effect.fail(protocolError(provider, `unknown generation state ${JSON.stringify(generation?.state)}`))
  }
}

export const luma: VideoAdapter = {
  submit: (provider: ConfiguredProvider, request: VideoRequest) =>
    postJson(provider.id, `${provider.endpoint}/generations/video`, authHeaders(provider), toBody(request)).pipe(
      Effect.flatMap((generation) => submittedId(provider.id, generation?.id, "the created generation has no id")),
      Effect.map((upstreamId) => ({ upstreamId }))
    ),
  poll: (provider: ConfiguredProvider, upstreamId: string) =>
    getJson(provider.id, `${provider.endpoint}/generations/${encodeURIComponent(upstreamId)}`, authHeaders(provider)).pipe(
      Effect.flatMap((generation) => toPoll(provider.id, generation))
    )
}

/** What aigw serves through Luma (a bespoke provider). */
export const served: Served = { video: luma }
