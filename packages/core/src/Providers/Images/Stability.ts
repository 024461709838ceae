/**
 * Stability AI image generation (Stable Image API v2beta; the catalogue's base URL ends in `/v2beta`).
 *
 * Wire format (https://platform.stability.ai/docs/api-reference, "Generate"):
 *  - `POST {endpoint}/stable-image/generate/core` (Stable Image Core), `/ultra` (Stable Image
 *    Ultra) or `/sd3` (Stable Diffusion 3.5, the model in the `model` field), a
 *    `multipart/form-data` body with `prompt`, `aspect_ratio` (16:9, 1:1, 21:9, 2:3, 3:2, 4:5, 5:4,
 *    9:16, 9:21) and `output_format` (png); `accept: application/json` answers
 *    `{image: <base64>, finish_reason: SUCCESS | CONTENT_FILTERED, seed}`.
 *  - one image per request; the model picks the pixel size for the aspect ratio.
 *  - auth: `Authorization: Bearer <key>`; errors are `{id, name, errors: [...]}`.
 */
import { Effect } from "effect"
import { authHeaders, postMultipart } from "../internal/http.ts"
import type { ImageRequest, ImagesEndpoint, Served } from "../Served.ts"
import { protocolError, UpstreamError } from "../UpstreamError.ts"
import { countRefusal, extraFieldsRefusal, firstRefusal } from "./ImageVendor.ts"

const VENDOR = "Stability AI"

/** The route of each model: Stable Image Core and Ultra have their own; SD 3.5 models share `sd3`. */
const ROUTES: Readonly<Record<string, { readonly path: string; readonly model?: string }>> = {
  "stable-image-core": { path: "core" },
  "stable-image-ultra": { path: "ultra" },
  "sd3.5-large": { path: "sd3", model: "sd3.5-large" },
  "sd3.5-large-turbo": { path: "sd3", model: "sd3.5-large-turbo" },
  "sd3.5-medium": { path: "sd3", model: "sd3.5-medium" },
  "sd3.5-flash": { path: "sd3", model: "sd3.5-flash" }
}

const ASPECT_RATIOS = ["16:9", "1:1", "21:9", "2:3", "3:2", "4:5", "5:4", "9:16", "9:21"]

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b))

/** `width:height` in lowest terms (1024x576 → 16:9). */
export const aspectRatioOf = (width: number, height: number): string => {
  const d = gcd(width, height)
  return `${width / d}:${height / d}`
}

const unsupported = (request: ImageRequest): string | undefined =>
  firstRefusal(
    ROUTES[request.model] ? undefined : `${VENDOR} has no model ${request.model}; use one of ${Object.keys(ROUTES).join(", ")}`,
    countRefusal(VENDOR, request, 1),
    request.width !== undefined && request.height !== undefined && !ASPECT_RATIOS.includes(aspectRatioOf(request.width, request.height))
      ? `${VENDOR} takes an aspect ratio, not a pixel size: width:height ${aspectRatioOf(request.width, request.height)} is none of ${ASPECT_RATIOS.join(", ")}`
      : undefined,
    extraFieldsRefusal(VENDOR, request)
  )

/** The multipart form of a request. */
export const formOf = (request: ImageRequest): FormData => {
  const form = new FormData()
  form.append("prompt", request.prompt)
  form.append("output_format", "png")
  if (request.width !== undefined && request.height !== undefined) form.append("aspect_ratio", aspectRatioOf(request.width, request.height))
  const model = ROUTES[request.model]?.model
  if (model !== undefined) form.append("model", model)
  return form
}

/** The JSON answer to the generated image; a filtered image is the vendor's refusal, not an image. */
export const toImages = (provider: string, body: any): Effect.Effect<ReadonlyArray<{ readonly b64Json: string }>, UpstreamError> => {
  if (body?.finish_reason === "CONTENT_FILTERED") {
    return Effect.fail(new UpstreamError({ provider, kind: "http", message: `${provider} filtered the image (finish_reason CONTENT_FILTERED)`, retryable: false }))
  }
  return typeof body?.image === "string" && body.image.length > 0
    ? Effect.succeed([{ b64Json: body.image }])
    : Effect.fail(protocolError(provider, "no image in the answer"))
}

export const images: ImagesEndpoint = {
  defaultModel: "stable-image-core",
  unsupported,
  generate: (provider, request) =>
    Effect.flatMap(
      postMultipart(provider.id, `${provider.endpoint}/stable-image/generate/${ROUTES[request.model]?.path ?? "core"}`, authHeaders(provider), formOf(request)),
      (body) => Effect.map(toImages(provider.id, body), (images) => ({ images }))
    )
}

/** What aigw serves through Stability AI (a bespoke provider). */
export const served: Served = { images }
