/**
 * The HTTP edge as plain functions, shared by the Effect routes (Route.ts), the node host's fast
 * lane (FastLane.ts), /mcp (Mcp/Server.ts) and the Lambda adapter: reading credentials, the bounded
 * body reader and its 413, JSON body checks, error envelopes and SSE framing. Each behaviour is
 * written here once; the callers only differ in how they hand a request in and an answer out.
 */
import type { ServerResponse } from "node:http"
import { Readable } from "node:stream"
import type { Credentials } from "../Accounts/Auth.ts"
import { KEY_PREFIX } from "../Accounts/ApiKeys.ts"
import { failureOf, successOf } from "../Envelope.ts"
import { BadRequest, Busy, type GatewayError, PayloadTooLarge, statusOf } from "../Errors.ts"
import type { SecurityLimits } from "../Config.ts"
import { type JsonTextLimits, parseJsonText } from "../JsonText.ts"
import { quotaRefusals } from "../Metrics.ts"
import { isRetryableStatus } from "../Providers/UpstreamError.ts"

export type EnvelopeKind = "gateway" | "avatar"

/**
 * The envelope of an API: the gateway's or the avatar API's; "none" for raw answers; "openai" and
 * "anthropic" for raw answers with OpenAI- or Anthropic-shaped errors.
 */
export type Envelope = EnvelopeKind | "none" | "openai" | "anthropic"

/** The API a path belongs to, for answers outside any route (unknown paths, a gateway that cannot start). */
export const envelopeOfPath = (path: string): "openai" | "anthropic" | EnvelopeKind =>
  path.startsWith("/openai/") ? "openai" : path.startsWith("/anthropic/") ? "anthropic" : path.startsWith("/api/") ? "avatar" : "gateway"

type HeaderValue = string | ReadonlyArray<string> | undefined
export type RequestHeaders = Readonly<Record<string, HeaderValue>>

/**
 * A syntactically valid Host header (RFC 3986 host and optional port), or none where the request's HTTP
 * version allows none (HTTP/1.0; `httpVersion` unknown: a host that routes requests without one, as
 * Lambda's events). RFC 9112 §3.2: an HTTP/1.1 request without Host, or with an invalid one, is answered 400.
 */
export const validHost = (host: string | undefined, httpVersion?: string) =>
  host === undefined ? httpVersion !== "1.1" : /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::\d{0,5})?$/.test(host)

/** A request's headers (node's, each name once, lowercase) as web Headers, repeated values appended. */
export const webHeaders = (headers: RequestHeaders): Headers => {
  const out = new Headers()
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined) continue
    if (typeof value === "string") out.append(name, value)
    else for (const v of value) out.append(name, v)
  }
  return out
}

const single = (value: HeaderValue): string | undefined => (typeof value === "string" || value === undefined ? value : value.join(", "))

/** The credential headers of a request (Authorization, X-Api-Key). */
export const credentialsOf = (headers: RequestHeaders): Credentials => ({
  authorization: single(headers["authorization"]),
  apiKey: single(headers["x-api-key"])
})

/** What a request's credentials are, before anything is looked up: X-Api-Key wins over Authorization. */
export type Presented =
  | { readonly _tag: "None" }
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "ApiKey"; readonly secret: string }
  | { readonly _tag: "Jwt"; readonly token: string }

export const presented = (c: Credentials): Presented => {
  const apiKey = c.apiKey?.trim()
  const auth = c.authorization?.trim()
  const match = auth ? /^Bearer\s+(\S+)$/i.exec(auth) : null
  // Both headers must name one credential: which of two differing ones the caller meant is not guessed.
  if (apiKey) return !auth || match?.[1] === apiKey ? { _tag: "ApiKey", secret: apiKey } : { _tag: "Malformed" }
  if (!auth) return { _tag: "None" }
  if (!match) return { _tag: "Malformed" }
  const token = match[1]!
  return token.startsWith(KEY_PREFIX) ? { _tag: "ApiKey", secret: token } : { _tag: "Jwt", token }
}

/** The API key a request presents, if its credentials are one (RequestId.RequestInfo `apiKey`). */
export const presentedKey = (p: Presented): string | undefined => (p._tag === "ApiKey" ? p.secret : undefined)

/** The 413 error of a body above `maxBodyBytes`. */
export const tooLargeError = (maxBodyBytes: number) =>
  new PayloadTooLarge({ message: `Request body exceeds the limit of ${maxBodyBytes} bytes (AIGW_MAX_BODY_BYTES).` })

/**
 * Whether a request's body took long enough to come, after its credentials were checked, that they
 * must be checked again before anything is counted: a key revoked (or a password reset) while a slow
 * body trickled in is refused, not served. Bodies that come with their headers, or with their event
 * (Lambda), take microseconds and are not checked twice (the second check is a cache read that
 * every call would pay); the bound leaves a window no longer than a call's own time in flight.
 */
export const bodyTookLong = (checkedAt: number): boolean => performance.now() - checkedAt > 50

/** A declared Content-Length above the limit: refused before reading a byte. */
export const declaresTooLarge = (headers: RequestHeaders, maxBodyBytes: number) =>
  Number(headers["content-length"] ?? "0") > maxBodyBytes

export const TOO_LARGE: unique symbol = Symbol("too large")

const empty = new Uint8Array(0)
const clientLeft = new Error("the client closed the connection before the body ended")

/**
 * A body's bytes, read until `limit`: TOO_LARGE as soon as it is larger (the rest is drained, not
 * kept). `source` is a node request (read with stream events: no promise per chunk, this is every
 * metered call's path) or a web stream (Lambda, embedders). A client that leaves mid-upload rejects.
 */
export const readLimited = (source: Readable | ReadableStream<Uint8Array> | null, limit: number): Promise<Uint8Array | typeof TOO_LARGE> => {
  if (source === null) return Promise.resolve(empty)
  const body = source instanceof ReadableStream ? Readable.fromWeb(source as any) : source
  return new Promise((resolve, reject) => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    const onData = (chunk: Uint8Array) => {
      size += chunk.byteLength
      if (size <= limit) return void chunks.push(chunk)
      body.off("data", onData)
      body.resume()
      resolve(TOO_LARGE)
    }
    body.on("data", onData)
    body.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : chunks.length === 0 ? empty : Buffer.concat(chunks)))
    // After "end" (or a refusal) these settle nothing: the promise is already resolved. "close" follows
    // every request, so its error is one shared value, not a stack trace per call.
    body.once("error", reject)
    body.once("close", () => reject(clientLeft))
  })
}

/**
 * The 400 error of a body sent with a Content-Encoding (bodies are read as sent, not decompressed),
 * or undefined.
 */
export const encodingRefusal = (headers: RequestHeaders): BadRequest | undefined => {
  const encoding = single(headers["content-encoding"])?.trim().toLowerCase()
  return encoding === undefined || encoding === "" || encoding === "identity"
    ? undefined
    : new BadRequest({ message: `Content-Encoding ${encoding} is not supported: send the request body uncompressed.` })
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * How a text (JSON) body is read: its decoder (UTF-8, or the charset its Content-Type declares when
 * it is a WHATWG encoding), or the 400 error of a body that cannot be read as sent (a
 * Content-Encoding, or a charset no decoder knows).
 */
export const textDecoderOf = (headers: RequestHeaders): TextDecoder | BadRequest => {
  const encoded = encodingRefusal(headers)
  if (encoded !== undefined) return encoded
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(single(headers["content-type"]) ?? "")?.[1]?.toLowerCase()
  if (charset === undefined || charset === "utf-8" || charset === "utf8") return utf8
  try {
    return new TextDecoder(charset, { fatal: true })
  } catch {
    return new BadRequest({ message: `charset ${charset} is not supported: send the request body as UTF-8.` })
  }
}

/** Bytes as text by `decoder` (UTF-8 by default; a leading BOM dropped), or the 400 error of bytes that are not in its encoding. */
export const decodeText = (bytes: Uint8Array, decoder: TextDecoder = utf8): string | BadRequest => {
  try {
    return decoder.decode(bytes)
  } catch {
    return new BadRequest({ message: `The request body is not valid ${decoder.encoding === "utf-8" ? "UTF-8" : decoder.encoding}.` })
  }
}

/** `readLimited` as text by `decoder` (`textDecoderOf`; UTF-8 by default), or the 400 error of bytes that are not in its encoding. */
export const readLimitedText = async (
  source: Readable | ReadableStream<Uint8Array> | null,
  limit: number,
  decoder: TextDecoder = utf8
): Promise<string | typeof TOO_LARGE | BadRequest> => {
  const bytes = await readLimited(source, limit)
  return bytes === TOO_LARGE ? bytes : decodeText(bytes, decoder)
}

/** Members of one object in a client's body: no API of the gateway takes an object of more (its largest maps hold hundreds). */
export const MAX_REQUEST_OBJECT_MEMBERS = 10_000

const requestLimits = new WeakMap<SecurityLimits, JsonTextLimits>()

/** What a client's JSON body may hold (AIGW_MAX_JSON_DEPTH, AIGW_MAX_JSON_CONTAINERS, MAX_REQUEST_OBJECT_MEMBERS, no NUL), made once per configuration. */
export const requestJsonLimits = (limits: SecurityLimits): JsonTextLimits => {
  let made = requestLimits.get(limits)
  if (made === undefined) {
    made = { maxDepth: limits.maxJsonDepth, maxContainers: limits.maxJsonContainers, maxMembers: MAX_REQUEST_OBJECT_MEMBERS, refuseUnstorable: true }
    requestLimits.set(limits, made)
  }
  return made
}

/**
 * A JSON body's text -> value, or the 400 error of an empty, too deep, too large in objects and arrays, NUL-carrying, malformed or
 * prototype-keyed body. A malformed body sent as something else than JSON (a form, say) is told so: its
 * `Content-Type` is named. Bodies are read as JSON whatever their type, as curl's `-d` sends JSON as a form.
 */
export const parseJsonBody = (text: string, limits: SecurityLimits, contentType?: string): unknown | BadRequest => {
  if (text.trim() === "") return new BadRequest({ message: "Request body is required (JSON)." })
  const parsed = parseJsonText(text, requestJsonLimits(limits))
  if ("value" in parsed) return parsed.value
  if (!parsed.malformed) return new BadRequest({ message: `Invalid request body: ${parsed.problem}` })
  const type = contentType?.split(";", 1)[0]!.trim().toLowerCase()
  const sentAs = type && type !== "application/x-www-form-urlencoded" && !type.includes("json") ? ` (sent as ${type.slice(0, 100)}; this route takes application/json)` : ""
  return new BadRequest({ message: `Malformed JSON body: ${parsed.problem}${sentAs}` })
}

/** The content types a web page's form (or a fetch without a preflight) may post to another site. */
const FORM_TYPES = new Set(["", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])

/**
 * The refusal of a JSON body a browser posted from another site as a form (`Sec-Fetch-Site` cross-site or
 * same-site, a content type a form can send): a page could make its visitors register accounts, ask for
 * reset mails or run anonymous MCP tools from their own addresses, past the per-address limits (CSRF).
 * API clients send `application/json`, or no `Sec-Fetch-Site`; the gateway's own pages post same-origin.
 */
export const crossSiteFormProblem = (headers: RequestHeaders): BadRequest | undefined => {
  const site = headers["sec-fetch-site"]
  if (site !== "cross-site" && site !== "same-site") return undefined
  const contentType = headers["content-type"]
  const type = (typeof contentType === "string" ? contentType : "").split(";", 1)[0]!.trim().toLowerCase()
  return FORM_TYPES.has(type)
    ? new BadRequest({ message: `A page of another site posted this request as a form (${type === "" ? "no content type" : type}): this route takes application/json.` })
    : undefined
}

/** The body of a successful answer: the result as it is (raw APIs) or in the API's envelope. */
export const successBody = (kind: Envelope, result: unknown, message: string | null = null) =>
  kind === "none" || kind === "openai" || kind === "anthropic" ? result : successOf(kind, result, message)

/** An error kind of the edges: the gateway's errors, and `Internal` (a defect's answer). */
type ErrorKind = GatewayError["_tag"] | "Internal"

/**
 * Each vendor surface's error `type` by our error kind, `invalid_request_error` for the kinds not listed: the
 * gateway's own failures are server errors on both (OpenAI's 5xx are `server_error`, Anthropic's `api_error`),
 * never the request's fault.
 */
const openAiErrorType: Partial<Record<ErrorKind, string>> = {
  Unauthorized: "authentication_error",
  Forbidden: "permission_error",
  NotFound: "not_found_error",
  QuotaExceeded: "rate_limit_error",
  TooManyRequests: "rate_limit_error",
  Busy: "server_error",
  Internal: "server_error",
  NotAvailable: "server_error",
  UpstreamFailed: "api_error",
  UpstreamTimeout: "api_error"
}

/** docs.anthropic.com/en/api/errors */
const anthropicErrorType: Partial<Record<ErrorKind, string>> = {
  Unauthorized: "authentication_error",
  Forbidden: "permission_error",
  NotFound: "not_found_error",
  PayloadTooLarge: "request_too_large",
  QuotaExceeded: "rate_limit_error",
  TooManyRequests: "rate_limit_error",
  Busy: "overloaded_error",
  Internal: "api_error",
  NotAvailable: "api_error",
  UpstreamFailed: "api_error",
  UpstreamTimeout: "api_error"
}

const errorTypeOf = (table: Partial<Record<ErrorKind, string>>, tag: string) => table[tag as ErrorKind] ?? "invalid_request_error"

export const errorBody = (
  kind: Envelope,
  error: { readonly _tag: string; readonly message: string; readonly param?: string | undefined; readonly details?: Readonly<Record<string, unknown>> | undefined }
) =>
  kind === "openai"
    ? {
      error: {
        message: error.message,
        type: errorTypeOf(openAiErrorType, error._tag),
        param: error.param ?? null,
        code: error._tag
      }
    }
    : kind === "anthropic"
    ? { type: "error", error: { type: errorTypeOf(anthropicErrorType, error._tag), message: error.message, ...(error.details !== undefined ? { details: error.details } : {}) } }
    : failureOf(kind === "none" ? "gateway" : kind, error.message)

/** The avatar API's answers carry a JWT, a profile or what a sign-in was refused for: no cache keeps them. */
export const AVATAR_HEADERS: Readonly<Record<string, string>> = { "cache-control": "no-store" }

/**
 * How long a client should wait before sending a refused request again, where the refusal knows: the
 * quota's reset, a limit's window, a busy gateway, an upstream's own Retry-After. HTTP answers it as
 * `Retry-After`, MCP as the tool error's `retryAfterSeconds`.
 */
export const retryAfterOf = (error: GatewayError): number | undefined =>
  error._tag === "QuotaExceeded" || error._tag === "TooManyRequests" || error._tag === "Busy" || error._tag === "UpstreamFailed"
    ? error.retryAfterSeconds
    : undefined

/** A typed failure as the status, envelope body and headers of the route's API. */
export const errorParts = (kind: Envelope, error: GatewayError, headers: Record<string, string> = {}) => {
  let status = statusOf(error)
  // Counted here: the one place every edge turns a refusal into an answer.
  if (error._tag === "QuotaExceeded") quotaRefusals.inc()
  // The avatar API answers business rejections with 200 + isError, as its spec describes.
  if (kind === "avatar" && (error._tag === "Rejected" || error._tag === "Conflict")) status = 200
  const retryAfter = retryAfterOf(error)
  const extra: Record<string, string> = retryAfter !== undefined ? { "retry-after": String(retryAfter) } : {}
  if (kind === "avatar") Object.assign(extra, AVATAR_HEADERS)
  // The OpenAI and Anthropic SDKs retry 429s and 5xx, after any Retry-After however long (Anthropic's up to
  // the next midnight): this tells them not to where a retry cannot succeed and would be counted again.
  if (isFinal(error)) extra["x-should-retry"] = "false"
  // RFC 9110 §11.6.1: a 401 names the scheme that would be accepted (an API key rides on it too, as on OpenAI's API).
  if (status === 401) extra["www-authenticate"] = 'Bearer realm="aigw"'
  // A body refused for its size is left unread: the connection closes after the answer, or node would read
  // the rest of it (gigabytes a client declared) to reach the next request.
  if (error._tag === "PayloadTooLarge") extra.connection = "close"
  return { status, body: errorBody(kind, error), headers: { ...headers, ...extra } }
}

/**
 * A failure that the same request cannot escape by retrying: the day's quota is spent, or the upstream
 * refused the request itself (a 4xx other than 408 and 429: too long a prompt, a parameter it rejects).
 */
const isFinal = (error: GatewayError): boolean =>
  error._tag === "QuotaExceeded" ||
  (error._tag === "UpstreamFailed" && error.status !== undefined && error.status >= 400 && error.status < 500 && !isRetryableStatus(error.status))

/** The generic 500 body of an unexpected failure (its cause is logged, never sent). */
export const internalErrorBody = (kind: Envelope) => errorBody(kind, { _tag: "Internal", message: "Internal server error." })

/** Whether a failure is SQLite's lock still held by another process when the wait for it ended (SQLITE_BUSY, SQLITE_LOCKED). */
const isDatabaseLocked = (failure: unknown): boolean => {
  let at: any = failure
  for (let depth = 0; depth < 4 && at !== null && typeof at === "object"; depth++, at = at.cause) {
    if (typeof at.code === "string" && /^SQLITE_(BUSY|LOCKED)/.test(at.code)) return true
  }
  return false
}

/**
 * The refusal an unexpected failure is after all, or undefined: a database that another process kept
 * locked is a Busy to retry (on every edge: HTTP's 503, MCP's tool error).
 */
export const refusalOfDefect = (failure: unknown): Busy | undefined =>
  isDatabaseLocked(failure) ? new Busy({ message: "The database is locked by another process; retry shortly.", retryAfterSeconds: 1 }) : undefined

/** The answer of an unexpected failure (its cause is logged, never sent): `refusalOfDefect`'s, else the generic 500. */
export const defectParts = (kind: Envelope, failure: unknown) => {
  const refusal = refusalOfDefect(failure)
  return refusal !== undefined ? errorParts(kind, refusal) : { status: 500, body: internalErrorBody(kind), headers: {} as Record<string, string> }
}

/** The response headers of an SSE answer. */
export const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" } as const

/** One SSE event carrying `json` (JSON text already). */
export const sseData = (json: string) => `data: ${json}\n\n`

/** One SSE event carrying `value` as JSON. */
export const sseFrame = (value: unknown) => sseData(JSON.stringify(value))

/** The last event of an OpenAI stream. */
export const SSE_DONE = "data: [DONE]\n\n"

/** Writes a JSON answer on a node response. */
export const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string>) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/** Writes a typed failure as the envelope answer of the route's API on a node response. */
export const sendError = (res: ServerResponse, envelope: Envelope, error: GatewayError, headers: Record<string, string> = {}) => {
  const parts = errorParts(envelope, error, headers)
  sendJson(res, parts.status, parts.body, parts.headers)
}
