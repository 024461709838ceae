/**
 * What a vendor delivers for a client to fetch or show (generated images, a finished video), checked
 * before the client gets it, whichever vendor made it: a link is an `http(s)` URL (an image may also
 * come as a `data:image/…` URL or base64 bytes), ids and details are short text or numbers, or a short
 * list of links (a model's several outputs). Anything else (`javascript:` or `file:` links, an object
 * where a URL goes, a 20 MB id, more images than asked for) is the vendor's protocol error, never
 * relayed as the gateway's answer. A detail the vendor left out (absent or `null`) is simply not there,
 * whichever vendor left it out (`finishedVideo`).
 */
import type { GeneratedImage } from "./Served.ts"

/** Longest `http(s)` link taken (a signed storage URL is a few hundred characters). */
const MAX_LINK_CHARACTERS = 16_384
/** Longest id or other text detail taken. */
const MAX_DETAIL_CHARACTERS = 1_024

/** Most output links a finished video's details list: the rest are left out and counted (`outputDetails`). */
export const MAX_OUTPUT_LINKS = 16

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

/**
 * A vendor's list of output links (a model that made several videos) as details: `outputs`, its text
 * entries up to MAX_OUTPUT_LINKS, and `outputsOmitted`, how many more it named; nothing when it names
 * one or none (the video URL is that one). The video was made and billed, so a long list is cut, not refused.
 */
export const outputDetails = (list: unknown): Record<string, unknown> => {
  if (!Array.isArray(list)) return {}
  const links = list.filter((o): o is string => typeof o === "string" && o.length > 0)
  if (links.length <= 1) return {}
  const omitted = links.length - MAX_OUTPUT_LINKS
  return { outputs: links.slice(0, MAX_OUTPUT_LINKS), ...(omitted > 0 ? { outputsOmitted: omitted } : {}) }
}

/** A finished video's details without those the vendor left out (`undefined` or `null`). */
const givenDetails = (details: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const given: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(details)) if (value !== undefined && value !== null) given[name] = value
  return given
}

/**
 * A finished video as a job's result may hold it, whichever vendor made it: its details without those
 * the vendor left out (no vendor's result shows a `null` detail, and a missing `model` is no reason to
 * fail a video it made and billed), or why its link or details cannot be given to a client.
 */
export const finishedVideo = (
  videoUrl: string,
  details: Readonly<Record<string, unknown>>
): { readonly details: Record<string, unknown> } | { readonly problem: string } => {
  const given = givenDetails(details)
  const problem = linkProblem(videoUrl, "its video URL") ?? detailsProblem(given)
  return problem === undefined ? { details: given } : { problem }
}

/** Why a finished video's details (its ids, model, thumbnail, output links: each given) cannot be given as they are, or undefined. */
export const detailsProblem = (details: Readonly<Record<string, unknown>>): string | undefined => {
  for (const [name, value] of Object.entries(details)) {
    if (typeof value === "number" && Number.isFinite(value)) continue
    if (Array.isArray(value)) {
      if (value.length > MAX_OUTPUT_LINKS) return `its ${name} lists ${value.length} links (at most ${MAX_OUTPUT_LINKS})`
      for (const [i, link] of value.entries()) {
        const problem = linkProblem(link, `its ${name}[${i}]`)
        if (problem !== undefined) return problem
      }
      continue
    }
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
