/**
 * Leonardo.Ai image generation: asynchronous.
 *
 * Wire format (https://docs.leonardo.ai, "Create a Generation of Images" and "Get a Single
 * Generation"; the catalogue's base URL ends in `/api/rest/v1`):
 *  - submit: `POST {endpoint}/generations` with `{prompt, modelId, num_images (1..8), width?,
 *    height? (multiples of 8, 32..1536)}` → `{sdGenerationJob: {generationId, apiCreditCost}}`.
 *  - poll: `GET {endpoint}/generations/{id}` → `{generations_by_pk: {status: PENDING | COMPLETE |
 *    FAILED, generated_images: [{id, url, nsfw}]}}`.
 *  - auth: `Authorization: Bearer <key>`; errors are `{error, path, code}`.
 */
import { Effect } from "effect"
import { authHeaders, getJson, postJson } from "../internal/http.ts"
import { type JobState, pollJob } from "../internal/jobs.ts"
import type { GeneratedImage, ImageRequest, ImagesEndpoint, Served } from "../Served.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import { countRefusal, extraFieldsRefusal, firstRefusal, IMAGE_JOB } from "./ImageVendor.ts"

const VENDOR = "Leonardo.Ai"

/** A side Leonardo generates: a multiple of 8 from 32 to 1536. */
const isSide = (px: number) => px % 8 === 0 && px >= 32 && px <= 1536

const unsupported = (request: ImageRequest): string | undefined =>
  firstRefusal(
    countRefusal(VENDOR, request, 8),
    request.width !== undefined && request.height !== undefined && !(isSide(request.width) && isSide(request.height))
      ? `${VENDOR} takes width and height as multiples of 8 from 32 to 1536 (not ${request.width}x${request.height})`
      : undefined,
    extraFieldsRefusal(VENDOR, request)
  )

/** The body of a generation. */
export const bodyOf = (request: ImageRequest) => ({
  prompt: request.prompt,
  modelId: request.model,
  num_images: request.n,
  ...(request.width !== undefined && request.height !== undefined ? { width: request.width, height: request.height } : {})
})

/** A generation to the poll state, with its images once complete. */
export const toJobState = (provider: string, body: any): Effect.Effect<JobState<ReadonlyArray<GeneratedImage>>, UpstreamError> => {
  const generation = body?.generations_by_pk
  switch (generation?.status) {
    case "PENDING":
      return Effect.succeed({ status: "running" })
    case "FAILED":
      return Effect.succeed({ status: "failed", reason: "the generation failed" })
    case "COMPLETE": {
      const urls = Array.isArray(generation.generated_images) ? (generation.generated_images as Array<any>).map((i) => i?.url) : []
      return urls.length > 0 && urls.every((u) => typeof u === "string" && u.length > 0)
        ? Effect.succeed({ status: "done", value: urls.map((url: string) => ({ url })) })
        : Effect.fail(protocolError(provider, "the complete generation has no image URLs"))
    }
    default:
      return Effect.fail(protocolError(provider, `unknown generation status ${JSON.stringify(generation?.status)}`))
  }
}

export const images: ImagesEndpoint = {
  // Leonardo Lightning XL, a platform model (GET /platformModels lists the others).
  defaultModel: "b24e16ff-06e3-43eb-8d33-4416c2d75876",
  unsupported,
  generate: (provider, request, options) =>
    Effect.gen(function*() {
      const headers = authHeaders(provider)
      const job = yield* postJson(provider.id, `${provider.endpoint}/generations`, headers, bodyOf(request))
      const id = job?.sdGenerationJob?.generationId
      if (typeof id !== "string" || id.length === 0) return yield* Effect.fail(protocolError(provider.id, "the generation answered no generationId"))
      const url = `${provider.endpoint}/generations/${encodeURIComponent(id)}`
      return { images: yield* pollJob(provider.id, Effect.flatMap(getJson(provider.id, url, headers), (g) => toJobState(provider.id, g)), options.pollMs, IMAGE_JOB) }
    })
}

/** What aigw serves through Leonardo.Ai (a bespoke provider). */
export const served: Served = { images }
