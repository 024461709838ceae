/**
 * The upstream client's transport: the part of `fetch` the adapters use, on node:http / node:https
 * with keep-alive agents. Undici's fetch costs several hundred microseconds of CPU per call (web
 * streams, Request/Response objects, header guards); a plain node:http exchange costs a fraction of
 * that, and a gateway pays it on every call. See docs/performance.md.
 *
 * Handled here: http(s) URLs, bodies that are a string, bytes or absent; the answer's `status`,
 * `ok`, `headers`, `text()`, `arrayBuffer()`, `json()` and `body` (a web ReadableStream, created
 * only when asked for). Like fetch it sends fetch's default headers (`accept`, `accept-encoding`,
 * `user-agent`, a text content type for string bodies) and decodes gzip / deflate / br,
 * follows up to 20 redirects (303, and 301/302 after a POST, continue as GET without body; to another
 * origin only headers that carry no credential go on, and never into private address space from a public
 * one: `RedirectRefused`), and aborts on the signal (or the
 * Cancel given instead, cancel.ts), before and after the answer arrived. Anything else (FormData, Blob and stream bodies, other schemes) goes to
 * the global fetch, whose answer gets the same bounded body.
 *
 * Every body read from outside (here, and the orchestrators' answers; webhook receivers' answers
 * are not read) goes through `bounded`: decompression is streamed and stops, with the connection
 * destroyed, once the decoded bytes pass the limit (`config.limits.maxUpstreamResponseBytes`).
 */
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import { pipeline, Readable, type Transform } from "node:stream"
import * as zlib from "node:zlib"
import { defaultLimits } from "../../Config.ts"
import { isBlockedAddress, systemResolver } from "../../UrlGuard.ts"
import { Cancel } from "./cancel.ts"
import { parseUpstreamJson } from "../../JsonText.ts"

const agentOptions = {
  keepAlive: true,
  maxSockets: Infinity,
  maxFreeSockets: 256,
  scheduling: "lifo" as const,
  // Idle pooled sockets are closed after 4 s (undici's default), before servers drop them. An
  // active request only gets a 'timeout' event, which nothing here listens to: the callers' own
  // timeouts decide when to give up.
  timeout: 4_000
}
const httpAgent = new http.Agent(agentOptions)
const httpsAgent = new https.Agent(agentOptions)

const utf8 = new TextDecoder()

const abortError = (cancel: Cancel): unknown => cancel.reason ?? new DOMException("This operation was aborted", "AbortError")

/** A request the gateway ended itself before its answer came (a graceful stop); `message` is for the client. */
export class StoppedByGateway extends Error {}

/**
 * The requests sent through the global fetch (multipart and stream bodies: uploads) for a client's
 * request, until their answer came: undici's sockets are not ours to walk, so these few are kept
 * here, each with the stop that ends it. The calls of the plain path are not (see below).
 */
const waitingUploads = new Set<AbortController>()

/**
 * Ends, with StoppedByGateway(message), every request made for a client's request (it carries that
 * request's `x-request-id`; background work's carry none) that has no answer yet. On the pooled
 * agents, which already hold each request in flight (a socket's current request), no list of calls
 * is kept for this: a long-lived collection of per-call objects costs every call
 * (docs/performance.md, twenty-eighth session). Uploads sent through fetch are in `waitingUploads`.
 */
export const stopWaitingRequests = (message: string): void => {
  for (const upload of waitingUploads) upload.abort(new StoppedByGateway(message))
  for (const agent of [httpAgent, httpsAgent]) {
    for (const sockets of Object.values(agent.sockets)) {
      for (const socket of sockets ?? []) {
        // node:http's current request of a socket, and its answer once one came (not public API: the graceful stop's e2e test covers it).
        const req = (socket as unknown as { _httpMessage?: http.ClientRequest | null })._httpMessage
        if (req && (req as unknown as { res?: unknown }).res == null && req.getHeader("x-request-id") !== undefined) req.destroy(new StoppedByGateway(message))
      }
    }
  }
}

/** A reply body that passed its byte limit. */
export class ReplyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`the reply exceeded ${limit} bytes (AIGW_MAX_UPSTREAM_RESPONSE_BYTES)`)
  }
}

/**
 * The limit of provider replies. The transport is plain functions called by every adapter and by
 * the fast lane with no Effect context to read the configuration from, so the layer sets it once
 * at build (`http.ts` layerReplyLimit); until then it is the default.
 */
let replyLimit = defaultLimits.maxUpstreamResponseBytes
/** The reply limit in force (for readers of replies outside this transport). */
export const currentReplyLimit = (): number => replyLimit

export const setReplyLimit = (bytes: number): void => {
  replyLimit = bytes
}

const kSeen = Symbol("bytesSeen")
const kLimit = Symbol("byteLimit")
const kPush = Symbol("push")

interface Limited {
  [kSeen]: number
  [kLimit]: number
  [kPush]: Readable["push"]
}

// One function for every limited stream, its state on the stream. V8 allocates a function literal
// assigned to a property in the old generation, and such a closure on every body kept each exchange
// alive until the next full collection (docs/performance.md; test/FunctionProperties.test.ts).
function limitedPush(this: Readable & Limited, chunk: any, encoding?: BufferEncoding): boolean {
  if (chunk !== null && (this[kSeen] += chunk.length) > this[kLimit]) {
    this.destroy(new ReplyTooLarge(this[kLimit]))
    return false
  }
  return this[kPush](chunk, encoding)
}

/**
 * Makes `stream` fail with ReplyTooLarge (destroyed, so a socket under it is closed) once more
 * than `limit` bytes were pushed into it. Its own `push` is replaced rather than a counting stream
 * added: on the hot path one more stream costs about as much as the exchange itself
 * (docs/performance.md).
 */
const limitPushes = (stream: Readable, limit: number): Readable => {
  const limited = stream as Readable & Limited
  // What is buffered already (a body that came in one packet with the headers) counts too.
  limited[kSeen] = stream.readableLength
  limited[kLimit] = limit
  limited[kPush] = stream.push
  limited.push = limitedPush
  if (limited[kSeen] > limit) stream.destroy(new ReplyTooLarge(limit))
  return stream
}

/**
 * A body read from outside: `source`, decoded by `decoder` if given, failing with ReplyTooLarge
 * past `limit` decoded bytes. The decoder runs only as fast as the result is read, so a
 * compression bomb inflates no further than the limit; a failure (or destroying the result)
 * destroys the source, and its socket, too.
 */
export const bounded = (source: Readable, limit: number, decoder?: Transform): Readable => {
  if (!decoder) return limitPushes(source, limit)
  // The decoder's own failure (the body is not what its Content-Encoding says) is marked; a failure
  // of the source (the connection), which the pipeline passes on to the decoder, is not.
  let sourceFailed = false
  source.once("error", () => (sourceFailed = true))
  decoder.once("error", (e) => {
    if (!sourceFailed) undecodable.add(e)
  })
  pipeline(source, decoder, () => {})
  return limitPushes(decoder, limit)
}

/** Errors of bodies that did not decode by their Content-Encoding: the upstream's fault, not the network's. */
const undecodable = new WeakSet<object>()
export const isUndecodable = (e: unknown): boolean => typeof e === "object" && e !== null && undecodable.has(e)

/** The whole of a (bounded) body. Events rather than `for await`: the async iterator costs several ticks per answer. */
export const readAll = (stream: Readable): Promise<Buffer> => {
  if (stream.errored) return Promise.reject(stream.errored)
  return new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
    stream.once("error", reject)
  })
}

/** A web body (undici's fetch) bounded like ours; an absent body is empty. */
export const readWebBody = (body: ReadableStream<Uint8Array> | null, limit: number): Promise<Buffer> =>
  body === null ? Promise.resolve(Buffer.alloc(0)) : readAll(bounded(Readable.fromWeb(body as any), limit))

/** The answer: what the adapters read of a fetch Response. */
export class UpstreamResponse {
  #headers: Headers | undefined
  #body: ReadableStream<Uint8Array> | undefined
  #used = false

  constructor(
    private readonly message: http.IncomingMessage,
    private readonly stream: Readable,
    readonly url: string,
    readonly redirected: boolean
  ) {}

  get status(): number {
    return this.message.statusCode ?? 0
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300
  }

  get statusText(): string {
    return this.message.statusMessage ?? ""
  }

  get headers(): Headers {
    if (this.#headers === undefined) {
      const headers = new Headers()
      const raw = this.message.rawHeaders
      for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!)
      this.#headers = headers
    }
    return this.#headers
  }

  get bodyUsed(): boolean {
    return this.#used
  }

  /** The body as the node stream it is (decoded), for readers that want no web stream in between. */
  nodeBody(): Readable {
    if (this.#used) throw new TypeError("Body is unusable: Body has already been read")
    this.#used = true
    return this.stream
  }

  /** The body as a web stream (created on first access). */
  get body(): ReadableStream<Uint8Array> {
    if (this.#body === undefined) {
      this.#used = true
      this.#body = Readable.toWeb(this.stream) as unknown as ReadableStream<Uint8Array>
    }
    return this.#body
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = await this.bytes()
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer
  }

  async bytes(): Promise<Uint8Array> {
    if (this.#used) throw new TypeError("Body is unusable: Body has already been read")
    this.#used = true
    return readAll(this.stream)
  }

  async text(): Promise<string> {
    return utf8.decode(await this.bytes())
  }

  /** Within the bounds of an upstream's JSON (JsonText.UPSTREAM_JSON_LIMITS); a SyntaxError otherwise, as fetch's. */
  async json(): Promise<any> {
    const parsed = parseUpstreamJson(await this.text())
    if ("value" in parsed) return parsed.value
    throw new SyntaxError(parsed.problem)
  }
}

const isPlainBody = (body: unknown): body is string | Uint8Array | undefined | null =>
  body === undefined || body === null || typeof body === "string" || body instanceof Uint8Array

const headerRecord = (headers: RequestInit["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  if (headers === undefined) return out
  if (headers instanceof Headers || Array.isArray(headers)) {
    for (const [k, v] of headers instanceof Headers ? headers.entries() : headers) out[k.toLowerCase()] = v!
    return out
  }
  for (const k in headers) out[k.toLowerCase()] = (headers as Record<string, string>)[k]!
  return out
}

const decoderOf = (message: http.IncomingMessage): Transform | undefined => {
  switch ((message.headers["content-encoding"] ?? "").trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return zlib.createGunzip({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH })
    case "deflate":
      return zlib.createInflate({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH })
    case "br":
      return zlib.createBrotliDecompress()
    default:
      return undefined
  }
}

interface Attempt {
  readonly url: URL
  readonly method: string
  readonly headers: Record<string, string>
  readonly body: string | Uint8Array | undefined
}

/** One request on the pooled agents; a stale pooled socket that resets before any answer is retried once. */
const exchange = (attempt: Attempt, cancel: Cancel | undefined, retried = false): Promise<http.IncomingMessage> =>
  new Promise((resolve, reject) => {
    const secure = attempt.url.protocol === "https:"
    const headers = { ...attempt.headers }
    if (attempt.body !== undefined) headers["content-length"] = String(Buffer.byteLength(attempt.body))
    const { hostname, port, pathname, search } = attempt.url
    const req = (secure ? https : http).request({
      protocol: attempt.url.protocol,
      // URL keeps IPv6 literals in brackets; node:http wants them bare.
      hostname: hostname.startsWith("[") ? hostname.slice(1, -1) : hostname,
      port,
      path: pathname + search,
      method: attempt.method,
      headers,
      agent: secure ? httpsAgent : httpAgent,
      ...(attempt.url.username ? { auth: `${decodeURIComponent(attempt.url.username)}:${decodeURIComponent(attempt.url.password)}` } : {})
    })
    const stopListening = cancel?.onAbort(() => req.destroy(abortError(cancel) as Error))
    req.once("response", (message) => {
      stopListening?.()
      resolve(message)
    })
    req.once("error", (error: NodeJS.ErrnoException) => {
      stopListening?.()
      if (cancel?.aborted) return reject(abortError(cancel))
      if (!retried && req.reusedSocket && (error.code === "ECONNRESET" || error.code === "EPIPE")) {
        return resolve(exchange(attempt, cancel, true))
      }
      reject(error)
    })
    req.end(attempt.body)
  })

const REDIRECTS = new Set([301, 302, 303, 307, 308])

/**
 * A redirect the transport does not follow: to another origin at a private or loopback address (from a
 * public one), or to a scheme other than http(s). Answered as the upstream's fault (internal/http.ts).
 */
export class RedirectRefused extends Error {}

/** The headers sent on to another origin: none that can carry a credential (x-api-key, x-goog-api-key, api-key, …). */
const CROSS_ORIGIN_HEADERS = new Set(["accept", "accept-encoding", "accept-language", "user-agent", "content-type", "content-length", "content-encoding", "content-language", "x-request-id", "traceparent"])

/** The host's addresses (UrlGuard's resolver), none when its name does not resolve. */
const lookup = (hostname: string) => systemResolver(hostname).catch((): ReadonlyArray<string> => [])

/**
 * Whether any address `url`'s host names is one a public request must not reach (UrlGuard.isBlockedAddress);
 * `unresolved` when its name resolves to nothing.
 */
const reachesPrivate = async (url: URL, unresolved: boolean) => {
  const host = url.hostname.replace(/^\[|\]$/g, "")
  const addresses = net.isIP(host) ? [host] : await lookup(host)
  return addresses.length === 0 ? unresolved : addresses.some(isBlockedAddress)
}

/**
 * The refusal of a redirect from `from` (the chain began at `origin`) to another origin `to`, if refused:
 * a provider's base URL is the operator's choice, a redirect's target is the upstream's, so it may lead
 * into private address space only from a chain that began there (a self-hosted upstream).
 */
export const crossOriginRefusal = async (origin: URL, to: URL): Promise<RedirectRefused | undefined> => {
  if (to.protocol !== "http:" && to.protocol !== "https:") return new RedirectRefused(`redirected to a ${to.protocol} URL, which is not followed`)
  if (!(await reachesPrivate(origin, false)) && (await reachesPrivate(to, true))) {
    return new RedirectRefused(`redirected to ${to.host}, a private or loopback address, which is not followed`)
  }
  return undefined
}

/** A request sent through the global fetch; one made for a client's request is in `waitingUploads` until its answer came. */
const uploaded = async (input: string | URL, given: RequestInit, cancel: Cancel | undefined): Promise<Response> => {
  // fetch would carry every header but `authorization` through a redirect to another origin: a redirect is
  // answered as it came (the adapters read a 3xx as a failed call).
  const init: RequestInit = { redirect: "manual", ...given }
  if (headerRecord(init.headers)["x-request-id"] === undefined) return fetch(input, cancel === undefined ? init : { ...init, signal: cancel.signal() })
  const stop = new AbortController()
  waitingUploads.add(stop)
  try {
    return await fetch(input, { ...init, signal: cancel === undefined ? stop.signal : AbortSignal.any([cancel.signal(), stop.signal]) })
  } catch (e) {
    throw stop.signal.aborted ? stop.signal.reason : e
  } finally {
    waitingUploads.delete(stop)
  }
}

/**
 * `fetch` for upstream calls; see the module comment for what is handled here. The answer is an
 * `UpstreamResponse` (typed as the `Response` subset it implements) or, for the rest, fetch's own.
 * `cancel`, when given, aborts the call instead of `init.signal`.
 */
export const nodeFetch = (input: string | URL, init: RequestInit = {}, cancel?: Cancel): Promise<Response> => {
  if (cancel !== undefined || !init.signal) return send(input, init, cancel) as Promise<Response>
  // The caller's AbortSignal is followed while the exchange lasts: its listener goes with the body.
  const followed = Cancel.following(init.signal)
  return send(input, init, followed.cancel, followed.release).catch((e) => {
    followed.release()
    throw e
  }) as Promise<Response>
}

const noRelease = () => {}

/** The exchange; `release` runs once its body closed (or, with the rejection, by the caller). */
const send = async (input: string | URL, init: RequestInit, cancel: Cancel | undefined, release = noRelease): Promise<UpstreamResponse | Response> => {
  const url = new URL(input)
  const { body } = init
  if ((url.protocol !== "http:" && url.protocol !== "https:") || !isPlainBody(body) || init.redirect === "manual" || init.redirect === "error") {
    const res = await uploaded(input, init, cancel)
    if (res.body === null) {
      release()
      return res
    }
    const answer = bounded(Readable.fromWeb(res.body as any), replyLimit)
    answer.once("close", release)
    return new Response(Readable.toWeb(answer) as any, res)
  }
  if (cancel?.aborted) throw abortError(cancel)
  const headers = headerRecord(init.headers)
  // The defaults fetch (undici, Node 20) sends.
  headers["accept"] ??= "*/*"
  headers["accept-encoding"] ??= "gzip, deflate"
  headers["user-agent"] ??= "node"
  if (typeof body === "string") headers["content-type"] ??= "text/plain;charset=UTF-8"
  let attempt: Attempt = { url, method: (init.method ?? "GET").toUpperCase(), headers, body: body ?? undefined }
  for (let redirects = 0; ; redirects++) {
    const message = await exchange(attempt, cancel)
    const location = message.headers.location
    if (!REDIRECTS.has(message.statusCode ?? 0) || location === undefined) {
      const stream = bounded(message, replyLimit, decoderOf(message))
      if (cancel) {
        // An abort after the answer arrived breaks the body, as with fetch.
        const stopListening = cancel.onAbort(() => stream.destroy(abortError(cancel) as Error))
        stream.once("close", stopListening)
      }
      stream.once("close", release)
      return new UpstreamResponse(message, stream, attempt.url.href, redirects > 0)
    }
    // A redirect's body is not used: drained for keep-alive, up to the limit.
    bounded(message, replyLimit).resume()
    if (redirects === 20) throw new TypeError("fetch failed: redirect count exceeded")
    const next = new URL(location, attempt.url)
    const crossOrigin = next.origin !== attempt.url.origin
    if (crossOrigin) {
      const refused = await crossOriginRefusal(url, next)
      if (refused !== undefined) throw refused
    }
    const status = message.statusCode!
    const toGet = status === 303 ? attempt.method !== "HEAD" : (status === 301 || status === 302) && attempt.method === "POST"
    // To another origin only headers that carry no credential go on (fetch drops `authorization` alone; the
    // gateway's keys also travel as x-api-key, x-goog-api-key, api-key).
    const nextHeaders = crossOrigin ? Object.fromEntries(Object.entries(attempt.headers).filter(([h]) => CROSS_ORIGIN_HEADERS.has(h))) : { ...attempt.headers }
    if (toGet) for (const h of ["content-type", "content-length", "content-encoding", "content-language", "content-location"]) delete nextHeaders[h]
    attempt = { url: next, method: toGet ? "GET" : attempt.method, headers: nextHeaders, body: toGet ? undefined : attempt.body }
  }
}
