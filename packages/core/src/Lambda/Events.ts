/**
 * Lambda HTTP events <-> web `Request` / `Response` (the Lambda host's adapter; Host.ts serves
 * them, Streaming.ts streams responses). Three event shapes reach the function:
 *
 *  - API Gateway HTTP API, payload format 2.0 (`version: "2.0"`, `rawPath`, `rawQueryString`,
 *    `cookies`, comma-joined `headers`);
 *  - Lambda Function URLs, which use the same 2.0 shape (`domainName` `<id>.lambda-url.<region>.on.aws`);
 *  - API Gateway REST API (and HTTP API payload 1.0): `httpMethod`, `path`, `headers` plus
 *    `multiValueHeaders`, `queryStringParameters` plus `multiValueQueryStringParameters` (decoded values).
 *
 * Bodies are base64 when `isBase64Encoded` is true (binary uploads). Results: 2.0 answers with
 * `cookies` for Set-Cookie, 1.0 with `multiValueHeaders`; binary response bodies are base64 with
 * `isBase64Encoded: true`. Payload shapes: https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html,
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html,
 * https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html
 */
import { Either, type ParseResult, Schema } from "effect"
import { describeParseError, kindOf, parseOptions } from "../Http/DecodeProblems.ts"

const StringRecord = Schema.Record({ key: Schema.String, value: Schema.String })
const NullableStrings = Schema.optional(Schema.NullOr(StringRecord))
const NullableStringLists = Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) })))
const Body = {
  body: Schema.optional(Schema.NullOr(Schema.String)),
  isBase64Encoded: Schema.optional(Schema.NullOr(Schema.Boolean))
}

/** HTTP API payload 2.0 and Function URL events (only the fields the host reads). */
export const EventV2 = Schema.Struct({
  version: Schema.Literal("2.0"),
  rawPath: Schema.String,
  rawQueryString: Schema.optional(Schema.NullOr(Schema.String)),
  cookies: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  headers: NullableStrings,
  requestContext: Schema.Struct({
    domainName: Schema.optional(Schema.NullOr(Schema.String)),
    stage: Schema.optional(Schema.NullOr(Schema.String)),
    http: Schema.Struct({ method: Schema.String, sourceIp: Schema.optional(Schema.NullOr(Schema.String)) })
  }),
  ...Body
})
export type EventV2 = typeof EventV2.Type

/** REST API (and HTTP API payload 1.0) events. */
export const EventV1 = Schema.Struct({
  httpMethod: Schema.String,
  path: Schema.String,
  headers: NullableStrings,
  multiValueHeaders: NullableStringLists,
  queryStringParameters: NullableStrings,
  multiValueQueryStringParameters: NullableStringLists,
  requestContext: Schema.optional(Schema.NullOr(Schema.Struct({
    domainName: Schema.optional(Schema.NullOr(Schema.String)),
    identity: Schema.optional(Schema.NullOr(Schema.Struct({ sourceIp: Schema.optional(Schema.NullOr(Schema.String)) })))
  }))),
  ...Body
})
export type EventV1 = typeof EventV1.Type

export type HttpEvent =
  | { readonly format: "v2"; readonly event: EventV2 }
  | { readonly format: "v1"; readonly event: EventV1 }

/** The result shape API Gateway / Function URLs expect from a buffered invocation. */
export interface ResultV2 {
  statusCode: number
  headers: Record<string, string>
  cookies?: Array<string>
  body: string
  isBase64Encoded: boolean
}
export interface ResultV1 {
  statusCode: number
  headers: Record<string, string>
  multiValueHeaders: Record<string, Array<string>>
  body: string
  isBase64Encoded: boolean
}
export type HttpResult = ResultV2 | ResultV1

/**
 * What could be read of an event that is not a valid one: its shape (for the result's format), its
 * path (for the envelope) and the caller's request id, each only if present with the right type.
 */
export interface EventTraits {
  readonly format: "v1" | "v2"
  readonly path?: string
  readonly requestId?: string
}

/** An event the host cannot turn into a request: answered with a 400 envelope (of `traits`' path and format). */
export class BadEvent extends Error {
  readonly _tag = "BadEvent"
  constructor(message: string, readonly traits?: EventTraits) {
    super(message)
  }
}

const decodeV2 = Schema.decodeUnknownEither(EventV2, parseOptions)
const decodeV1 = Schema.decodeUnknownEither(EventV1, parseOptions)
/** A field named with what it should be, its value never quoted: events carry credentials and passwords. */
const problem = (error: ParseResult.ParseError) => describeParseError(error, kindOf)

const stringAt = (record: unknown, key: string): string | undefined => {
  if (typeof record !== "object" || record === null) return undefined
  const value = (record as Record<string, unknown>)[key]
  return typeof value === "string" ? value : undefined
}

/** The request id header of raw headers, whatever its case (its validity is checked where it is used). */
const requestIdIn = (headers: unknown): string | undefined => {
  if (typeof headers !== "object" || headers === null) return undefined
  for (const [name, value] of Object.entries(headers)) {
    if (name.toLowerCase() !== "x-request-id") continue
    if (typeof value === "string") return value
    if (Array.isArray(value) && typeof value[0] === "string") return value[0]
  }
  return undefined
}

const traitsOf = (raw: Record<string, unknown>, format: "v1" | "v2"): EventTraits => {
  const rawPath = format === "v2" ? stringAt(raw, "rawPath") : stringAt(raw, "path")
  const routed = rawPath === undefined ? undefined : format === "v2" ? withoutStage(rawPath, stringAt(raw.requestContext, "stage")) : ensureSlash(rawPath)
  const path = routed?.split(/[?#]/)[0]
  const requestId = requestIdIn(raw.headers) ?? (format === "v1" ? requestIdIn(raw.multiValueHeaders) : undefined)
  return { format, ...(path !== undefined ? { path } : {}), ...(requestId !== undefined ? { requestId } : {}) }
}

/** Which event this is, validated. Left: why it is not an HTTP event the host understands. */
export const classify = (input: unknown): Either.Either<HttpEvent, BadEvent> => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return Either.left(new BadEvent("the event is not a JSON object"))
  }
  const raw = input as Record<string, unknown>
  if (raw.version === "2.0") {
    return Either.match(decodeV2(raw), {
      onLeft: (e) => Either.left(new BadEvent(`not a valid payload 2.0 / Function URL event: ${problem(e)}`, traitsOf(raw, "v2"))),
      onRight: (event) => Either.right({ format: "v2" as const, event })
    })
  }
  if ("httpMethod" in raw) {
    return Either.match(decodeV1(raw), {
      onLeft: (e) => Either.left(new BadEvent(`not a valid REST API / payload 1.0 event: ${problem(e)}`, traitsOf(raw, "v1"))),
      onRight: (event) => Either.right({ format: "v1" as const, event })
    })
  }
  return Either.left(
    new BadEvent("not an API Gateway or Function URL event (expected version \"2.0\" with requestContext.http, or httpMethod and path)")
  )
}

const BASE64 = /^[A-Za-z0-9+/\-_]*={0,2}$/

const decodeBody = (body: string | null | undefined, base64: boolean | null | undefined): Uint8Array | undefined => {
  if (body === undefined || body === null) return undefined
  if (!base64) return Buffer.from(body, "utf8")
  const compact = body.replace(/\s+/g, "")
  // One character past whole groups of four carries no byte: Buffer would drop it without a word.
  if (!BASE64.test(compact) || compact.replace(/=+$/, "").length % 4 === 1) throw new BadEvent("isBase64Encoded is true but the body is not base64")
  return Buffer.from(compact, "base64")
}

/**
 * A request path the gateway cannot route as sent: dot segments or backslashes, which a URL resolves
 * into another path (`/v1/x/../health` into `/v1/health`). The node host routes the path as sent and
 * finds no route; so does this host (404).
 */
export class UnroutablePath extends Error {
  readonly _tag = "UnroutablePath"
  /** `onlyTheMethod`: the path is as sent, its method one a web Request cannot carry. */
  constructor(readonly method: string, readonly path: string, readonly onlyTheMethod = false) {
    super(`no route for ${method} ${path}`)
  }
}

const UNSERVED_METHODS = new Set(["CONNECT", "TRACE", "TRACK"])
/** An HTTP method is a token (RFC 9110): what a web Request refuses otherwise. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

/** A path with its percent-encoding undone where it decodes (so that only encoding differences compare equal). */
const decodedPath = (path: string) => {
  try {
    return decodeURI(path)
  } catch {
    return path
  }
}

/**
 * Node reads a header's bytes as Latin-1 and keeps the first of a duplicated credential or host; a
 * value the Fetch API would refuse (characters above U+00FF) is given as those bytes read that way,
 * so a key or Host with such characters is refused as on the node host rather than dropped.
 */
const asOnTheWire = (value: string) => (/[^\u0000-\u00ff]/.test(value) ? Buffer.from(value, "utf8").toString("latin1") : value)

/**
 * Appends a header as the node host holds it: a repeated one joined (its server's `joinDuplicateHeaders`:
 * two Host lines are an invalid Host, two credentials none), skipping names the Fetch API rejects (the AWS
 * samples carry an empty name).
 */
const append = (headers: Headers, name: string, value: string) => {
  try {
    headers.append(name, asOnTheWire(value))
  } catch {
    // an invalid header name (or a value with control characters): not forwardable
  }
}

const ensureSlash = (path: string) => (path.startsWith("/") ? path : `/${path}`)

/** A payload 2.0 path as the gateway routes it: a named HTTP API stage appears in rawPath and is removed. */
const withoutStage = (rawPath: string, stage: string | null | undefined) => {
  const path = ensureSlash(rawPath)
  if (stage && stage !== "$default") {
    const prefix = `/${stage}`
    if (path === prefix) return "/"
    if (path.startsWith(`${prefix}/`)) return path.slice(prefix.length)
  }
  return path
}

const pathV2 = (event: EventV2) => withoutStage(event.rawPath, event.requestContext.stage)

/**
 * The path the request is routed on (without a named stage), which also decides the envelope and the id headers
 * of the answers the host makes itself (a timeout, an answer too large, a failed start).
 */
export const routedPath = (http: HttpEvent) => (http.format === "v2" ? pathV2(http.event) : http.event.path)

const queryV1 = (event: EventV1) => {
  const params = new URLSearchParams()
  const multi = event.multiValueQueryStringParameters ?? {}
  for (const [name, values] of Object.entries(multi)) for (const v of values) params.append(name, v)
  for (const [name, value] of Object.entries(event.queryStringParameters ?? {})) {
    if (!(name in multi)) params.append(name, value)
  }
  const s = params.toString()
  return s ? `?${s}` : ""
}

/** A classified event's headers as node would hold them (cookies of a 2.0 event joined into one). */
export const headersOf = (http: HttpEvent): Headers => {
  const headers = new Headers()
  if (http.format === "v2") {
    const e = http.event
    for (const [name, value] of Object.entries(e.headers ?? {})) append(headers, name, value)
    // As every other header: read as node reads its bytes, and skipped when no header can carry it (never thrown).
    if (e.cookies && e.cookies.length > 0) append(headers, "cookie", e.cookies.join("; "))
  } else {
    const e = http.event
    const multi = e.multiValueHeaders ?? {}
    const lower = new Set(Object.keys(multi).map((k) => k.toLowerCase()))
    for (const [name, values] of Object.entries(multi)) for (const v of values) append(headers, name, v)
    for (const [name, value] of Object.entries(e.headers ?? {})) {
      if (!lower.has(name.toLowerCase())) append(headers, name, value)
    }
  }
  return headers
}

/** The web Request for a classified event. Throws BadEvent for an undecodable body. */
export const toRequest = (http: HttpEvent, signal?: AbortSignal): Request => {
  const headers = headersOf(http)
  let method: string
  let target: string
  let domain: string | null | undefined
  let sourceIp: string | null | undefined
  if (http.format === "v2") {
    const e = http.event
    method = e.requestContext.http.method.toUpperCase()
    const query = e.rawQueryString ? `?${e.rawQueryString.replace(/^\?/, "")}` : ""
    target = `${pathV2(e)}${query}`
    domain = e.requestContext.domainName
    sourceIp = e.requestContext.http.sourceIp
  } else {
    const e = http.event
    method = e.httpMethod.toUpperCase()
    target = `${ensureSlash(e.path)}${queryV1(e)}`
    domain = e.requestContext?.domainName
    sourceIp = e.requestContext?.identity?.sourceIp
  }
  // Not quoted: a value in the wrong place may be anything, a credential too.
  if (!TOKEN.test(method)) throw new BadEvent("the method is not an HTTP method (a token of RFC 9110)")
  // The client address API Gateway saw replaces whatever the client wrote, so the one entry the
  // Lambda host trusts (AIGW_TRUST_PROXY defaults to 1 there) is API Gateway's own.
  if (sourceIp) {
    if (!/^[0-9A-Fa-f.:%\w-]{1,100}$/.test(sourceIp)) throw new BadEvent("the source IP of requestContext is not an address")
    headers.set("x-forwarded-for", sourceIp)
  }
  // The host only completes the URL: routing ignores it and e-mail links use PUBLIC_URL.
  const proto = headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "http" ? "http" : "https"
  const url = [headers.get("host"), domain, "localhost"].reduce<URL | undefined>((found, host) => {
    if (found || !host) return found
    try {
      // Appended, not resolved against the origin: a path that starts with `//` stays a path (the node host routes it).
      return new URL(`${proto}://${host}${target}`)
    } catch {
      return undefined
    }
  }, undefined)
  if (!url) throw new BadEvent(`cannot form a URL from the path "${target}"`)
  const path = target.split(/[?#]/)[0]!
  // Methods a web Request cannot carry (CONNECT, TRACE, TRACK) have no route either.
  if (decodedPath(url.pathname) !== decodedPath(path)) throw new UnroutablePath(method, path)
  if (UNSERVED_METHODS.has(method)) throw new UnroutablePath(method, path, true)
  const body = method === "GET" || method === "HEAD" ? undefined : decodeBody(http.event.body, http.event.isBase64Encoded)
  return new Request(url, { method, headers, body: body as BodyInit | undefined, signal })
}

const TEXTUAL = /^(text\/|application\/(json|[\w.+-]+\+json|xml|[\w.+-]+\+xml|javascript|ecmascript|x-www-form-urlencoded|x-ndjson|yaml|graphql)|image\/svg\+xml)/i

/** Whether a response body can travel as a UTF-8 string; anything else (audio, images, compressed) goes base64. */
export const isTextual = (headers: Headers) => {
  const encoding = headers.get("content-encoding")
  if (encoding && encoding.toLowerCase() !== "identity") return false
  const type = headers.get("content-type")
  return type === null || TEXTUAL.test(type.trim())
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"])

/** Single-valued headers (duplicates comma-joined, as Headers does), without Set-Cookie and hop-by-hop ones. */
export const singleHeaders = (headers: Headers): Record<string, string> => {
  const out: Record<string, string> = {}
  headers.forEach((value, name) => {
    if (name !== "set-cookie" && !HOP_BY_HOP.has(name)) out[name] = value
  })
  return out
}

/** Reads the whole body: UTF-8 text when textual, else base64. */
export const encodeBody = async (response: Response): Promise<{ body: string; isBase64Encoded: boolean }> => {
  const bytes = Buffer.from(await response.arrayBuffer())
  return isTextual(response.headers)
    ? { body: bytes.toString("utf8"), isBase64Encoded: false }
    : { body: bytes.toString("base64"), isBase64Encoded: true }
}

/** The buffered result for the event's payload format. */
export const toResult = async (format: "v1" | "v2", response: Response): Promise<HttpResult> => {
  const { body, isBase64Encoded } = await encodeBody(response)
  const headers = singleHeaders(response.headers)
  const cookies = response.headers.getSetCookie()
  if (format === "v2") {
    return { statusCode: response.status, headers, ...(cookies.length > 0 ? { cookies } : {}), body, isBase64Encoded }
  }
  const multiValueHeaders: Record<string, Array<string>> = {}
  for (const [name, value] of Object.entries(headers)) multiValueHeaders[name] = [value]
  if (cookies.length > 0) multiValueHeaders["set-cookie"] = cookies
  return { statusCode: response.status, headers, multiValueHeaders, body, isBase64Encoded }
}
