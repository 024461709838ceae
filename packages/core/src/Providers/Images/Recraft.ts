/**
 * Recraft image generation: the OpenAI image format (OpenAiMedia.ts) with Recraft's models, sizes
 * and fields.
 *
 * Wire format (https://www.recraft.ai/docs, "Generate image"; the catalogue's base URL ends in `/v1`):
 *  - `POST {endpoint}/images/generations` with `{prompt, model (recraftv3, recraftv2), n (1..6),
 *    size ("1024x1024", ... from a fixed list), style?, substyle?, negative_prompt?,
 *    response_format?: url | b64_json}` → `{created, data: [{url} | {b64_json}]}`.
 *  - auth: `Authorization: Bearer <key>`.
 */
import { openAiImages } from "../OpenAiMedia.ts"
import type { ImageRequest, ImagesEndpoint, Served } from "../Served.ts"
import { countRefusal, extraFieldsRefusal, firstRefusal } from "./ImageVendor.ts"

const VENDOR = "Recraft"

/** The sizes Recraft generates. */
export const SIZES = [
  "1024x1024", "1365x1024", "1024x1365", "1536x1024", "1024x1536", "1820x1024", "1024x1820", "1024x2048",
  "2048x1024", "1434x1024", "1024x1434", "1024x1280", "1280x1024", "1024x1707", "1707x1024"
]

/** The Recraft fields beyond OpenAI's core a request may carry (from the OpenAI surface). */
const FIELDS = ["style", "substyle", "negative_prompt", "response_format", "controls", "text_layout"]

const unsupported = (request: ImageRequest): string | undefined =>
  firstRefusal(
    countRefusal(VENDOR, request, 6),
    request.width !== undefined && !SIZES.includes(`${request.width}x${request.height}`)
      ? `${VENDOR} has no size ${request.width}x${request.height}; its sizes: ${SIZES.join(", ")}`
      : undefined,
    extraFieldsRefusal(VENDOR, request, FIELDS)
  )

export const images: ImagesEndpoint = { defaultModel: "recraftv3", unsupported, generate: openAiImages("size") }

/** What aigw serves through Recraft (a bespoke provider). */
export const served: Served = { images }
