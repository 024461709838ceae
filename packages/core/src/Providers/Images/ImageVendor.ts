/**
 * What the image vendors' own clients (Stability, fal, Recraft, Leonardo) share: refusals of what
 * a vendor cannot honour, named, and the limits of their job polling (internal/jobs.ts).
 */
import type { ImageRequest } from "../Served.ts"

/** The OpenAI image fields a vendor has no equivalent for, refused by name (undefined: none sent). */
export const extraFieldsRefusal = (vendor: string, request: ImageRequest, takes: ReadonlyArray<string> = []): string | undefined => {
  const fields = Object.keys(request.extra ?? {}).filter((k) => !takes.includes(k))
  return fields.length === 0 ? undefined : `${vendor} does not take the image field${fields.length > 1 ? "s" : ""} ${fields.join(", ")}`
}

/** A request for more images than the vendor makes in one call. */
export const countRefusal = (vendor: string, request: ImageRequest, most: number): string | undefined =>
  request.n > most ? `${vendor} makes at most ${most} image${most > 1 ? "s" : ""} per request (n is ${request.n})` : undefined

/** The first refusal of a list, or undefined. */
export const firstRefusal = (...refusals: ReadonlyArray<string | undefined>): string | undefined => refusals.find((r) => r !== undefined)

/** How long an image job may take in all (the caller waits on the HTTP request) and how often it is polled at most. */
export const IMAGE_JOB = { deadlineMs: 5 * 60_000, maxPolls: 120, task: "generate the images", finish: "finish generating the images" } as const
