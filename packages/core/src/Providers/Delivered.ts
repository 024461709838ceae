/**
 * What a vendor delivers for a client to fetch or show (generated images, a finished video), checked
 * before the client gets it, whichever vendor made it: a link is an `http(s)` URL (an image may also
 * come as a `data:image/…` URL or base64 bytes), ids and details are short text or numbers. Anything
 * else (`javascript:` or `file:` links, an object where a URL goes, a 20 MB id, more images than
 * asked for) is the vendor's protocol error, never relayed as the gateway's answer.
 */
import type { GeneratedImage } from "./Served.ts"

/** Longest `http(s)` link taken (a signed storage URL is a few hundred characters). */
const MAX_LINK_CHARACTERS = 16_384
/** Longest id or other text detail taken. */
const MAX_DETAIL_CHARACTERS = 1_024

/** Base64 once its line breaks are taken out (one pass each, no backtracking: the character sets do not overlap). */
const isBase64 = (text: string) => /^[A-Za-z0-9+/]+={0,2}$/.test(text.replace(/[\r\n]/g, ""))

/** Why `value` is no link a client may be given (`data:image/` URLs only where `images` says), or undefined. */
export const linkProblem = (value: unknown, what: string, images = false): string | undefined => {
  if (typeof value !== "string" || value === "") return `${what} is not a URL`
  if (images && value.startsWith("data:image/")) return undefined
  if (value.length > MAX_LINK_CHARACTERS) return `${what} is a URL of ${value.length} characters`
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return `${what} is not a URL`
  }
  return url.protocol === "https:" || url.protocol === "http:" ? undefined : `${what} is a ${url.protocol} URL, not an http(s) one`
}

/** Why a finished video's details (its ids, model, thumbnail) cannot be given as they are, or undefined. */
export const detailsProblem = (details: Readonly<Record<string, unknown>>): string | undefined => {
  for (const [name, value] of Object.entries(details)) {
    if (typeof value === "number" && Number.isFinite(value)) continue
    if (typeof value !== "string" || value.length > MAX_DETAIL_CHARACTERS) return `its ${name} is not a short text or a number`
    if (/url$/i.test(name)) {
      const problem = linkProblem(value, `its ${name}`)
      if (problem !== undefined) return problem
    }
  }
  return undefined
}

/** Why generated images cannot be given to a client who asked for `n`, or undefined. */
export const imagesProblem = (images: ReadonlyArray<GeneratedImage>, n: number): string | undefined => {
  if (images.length === 0) return "no image in the answer"
  if (images.length > n) return `${images.length} images where ${n} ${n === 1 ? "was" : "were"} asked for`
  for (const [i, image] of images.entries()) {
    if (image.url === undefined && image.b64Json === undefined) return `image ${i} has neither a URL nor base64 bytes`
    if (image.url !== undefined) {
      const problem = linkProblem(image.url, `image ${i}'s url`, true)
      if (problem !== undefined) return problem
    }
    if (image.b64Json !== undefined && !isBase64(image.b64Json)) return `image ${i}'s bytes are not base64`
  }
  return undefined
}
