/**
 * Upstream HTTP, once for every adapter: JSON POST/GET, multipart upload, text download and SSE
 * streams over fetch (`nodeFetch`: node:http for string and byte bodies, see nodeFetch.ts), with
 * timeouts and error mapping. Each exchange is one promise function over an AbortSignal; the Effect
 * forms the adapters use wrap it (`withDeadline`: interruption aborts the request) and send the
 * current request's id (RequestId.ts) as `x-request-id`. The engine calls the promise forms
 * (`postJsonNow`, `postSseNow`) with the id in its headers.
 */
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { GatewayConfig } from "../../Config.ts"
import { connectFailed, fromHttp, protocolError, shownUpstreamText, stoppedError, UpstreamError } from "../UpstreamError.ts"
import { Cancel } from "./cancel.ts"
import { isUndecodable, nodeFetch, RedirectRefused, ReplyTooLarge, setReplyLimit, StoppedByGateway, UpstreamResponse } from "./nodeFetch.ts"
import type { SseEvent } from "./sse.ts"
import { parseUpstreamJson } from "../../JsonText.ts"
import * as RequestId from "../../RequestId.ts"
import { Readable } from "node:stream"

export const REQUEST_TIMEOUT = Duration.seconds(120)
const REQUEST_TIMEOUT_MS = Duration.toMillis(REQUEST_TIMEOUT)
export const STREAM_IDLE_TIMEOUT = Duration.seconds(120)

/** Sets the transport's reply limit from `config.limits.maxUpstreamResponseBytes` (see nodeFetch.ts). */
export const layerReplyLimit = Layer.effectDiscard(Effect.map(GatewayConfig, (c) => setReplyLimit(c.limits.maxUpstreamResponseBytes)))

/** The credential header(s) for a provider's auth style. */
export const authHeaders = (provider: ConfiguredProvider): Record<string, string> => {
  if (Option.isNone(provider.apiKey)) return {}
  const key = Redacted.value(provider.apiKey.value)
  switch (provider.auth) {
    case "bearer":
      return { authorization: `Bearer ${key}` }
    case "x-api-key":
      return { "x-api-key": key }
    case "x-goog-api-key":
      return { "x-goog-api-key": key }
    case "api-key":
      return { "api-key": key }
    case "token":
      return { authorization: `Token ${key}` }
    case "key":
      return { authorization: `Key ${key}` }
    case "basic":
      return { authorization: `Basic ${Buffer.from(key).toString("base64")}` }
  }
}

/** A call that did not `what` within its deadline (a 504, retryable). */
export const timeoutError = (provider: string, what: string) =>
  new UpstreamError({ provider, kind: "timeout", message: `${provider} did not ${what} in time`, retryable: true })

const send = (provider: string, url: string, headers: Record<string, string>, body: unknown, cancel: Cancel) =>
  nodeFetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body)
  }, cancel).catch((cause) => Promise.reject(upstreamError(provider, cause)))

/**
 * One request/answer exchange: sends, reads the whole body, maps non-2xx answers with `fromHttp`
 * and network failures with `connectFailed`, and parses the 2xx body with `parse` (which throws
 * an UpstreamError for a body it cannot use). Interruption aborts the request.
 */
const exchange = <A>(
  provider: string,
  url: string,
  init: Omit<RequestInit, "signal">,
  parse: (text: string) => A
): Effect.Effect<A, UpstreamError> => exchangeWith(provider, url, init, async (res) => parse(await res.text()))

/** `exchange` with the 2xx body read by `read` (for binary answers such as audio). */
const exchangeWith = <A>(
  provider: string,
  url: string,
  init: Omit<RequestInit, "signal">,
  read: (res: Response) => Promise<A>
): Effect.Effect<A, UpstreamError> =>
  Effect.flatMap(RequestId.current, (id) => {
    const sent = id === undefined ? init : { ...init, headers: RequestId.withHeader(init.headers as Record<string, string>, id) }
    return withDeadline(provider, "answer", (cancel) => fetchAnswer(provider, url, sent, read, cancel))
  })

const fetchAnswer = async <A>(
  provider: string,
  url: string,
  init: Omit<RequestInit, "signal">,
  read: (res: Response) => Promise<A>,
  cancel: Cancel
): Promise<A> => {
  const res = await nodeFetch(url, init, cancel).catch((cause) => Promise.reject(upstreamError(provider, cause)))
  if (!res.ok) throw fromHttp(provider, res.status, await res.text().catch(() => ""), res.headers.get("retry-after"))
  return read(res)
}

/**
 * A failure of the transport as an UpstreamError; a reply over the limit, or one that does not decode, is the
 * upstream's fault, not a connect error; a request the gateway's graceful stop ended (nodeFetch
 * `stopWaitingRequests`) is `stopped`.
 */
const upstreamError = (provider: string, e: unknown): UpstreamError =>
  e instanceof UpstreamError
    ? e
    : e instanceof StoppedByGateway
    ? stoppedError(provider, e.message)
    : e instanceof ReplyTooLarge || e instanceof RedirectRefused
    ? protocolError(provider, e.message)
    : isUndecodable(e)
    ? protocolError(provider, `its body did not decode by its Content-Encoding: ${(e as Error).message}`)
    : connectFailed(provider, e)

/**
 * Runs `run` with a Cancel that `caller` (or the deadline) aborts: after REQUEST_TIMEOUT (headers
 * and body alike) it is aborted and the promise fails with a timeout error (`what` did not happen
 * in time). Rejections become UpstreamErrors (see `upstreamError`).
 */
export const deadline = <A>(
  provider: string,
  what: string,
  run: (cancel: Cancel) => Promise<A>,
  caller: Cancel = new Cancel()
): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    // The deadline aborts a Cancel of its own, not `caller`: callers read an aborted Cancel as
    // "the client went away", and a timeout must stay a timeout (504). The caller's abort is
    // forwarded for as long as the caller lives: a stream's body, read after this settled, is
    // broken by it too (nodeFetch's hook on `own`).
    const own = new Cancel()
    caller.onAbort((reason) => own.abort(reason))
    const timer = setTimeout(() => {
      own.abort()
      reject(timeoutError(provider, what))
    }, REQUEST_TIMEOUT_MS)
    run(own).then(
      (a) => {
        clearTimeout(timer)
        resolve(a)
      },
      (e) => {
        clearTimeout(timer)
        reject(upstreamError(provider, e))
      }
    )
  })

/**
 * `deadline` as an Effect: interruption aborts the call. A timer inside the call rather than
 * Effect.timeout, which forks a fiber per call (about 0.1 ms of CPU each; docs/performance.md).
 */
const withDeadline = <A>(
  provider: string,
  what: string,
  run: (cancel: Cancel) => Promise<A>,
  caller: Cancel = new Cancel()
): Effect.Effect<A, UpstreamError> =>
  Effect.async<A, UpstreamError>((resume) => {
    let done = false
    deadline(provider, what, run, caller).then(
      (a) => done || resume(Effect.succeed(a)),
      (e: UpstreamError) => done || resume(Effect.fail(e))
    )
    return Effect.sync(() => {
      done = true
      caller.abort()
    })
  })

const parseJson = (provider: string) => (text: string): any => {
  const parsed = parseUpstreamJson(text)
  if ("value" in parsed) return parsed.value
  throw protocolError(provider, parsed.malformed ? "the body is not JSON" : `the body is not usable JSON: ${parsed.problem}`)
}

const jsonPost = (headers: Record<string, string>, body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json", ...headers },
  body: JSON.stringify(body)
})

/** POSTs JSON and returns the parsed JSON answer; non-2xx answers become UpstreamErrors. */
export const postJson = (provider: string, url: string, headers: Record<string, string>, body: unknown) =>
  exchange(provider, url, jsonPost(headers, body), parseJson(provider))

/** `postJson` as a promise (rejecting with an UpstreamError) that `cancel` aborts. */
export const postJsonNow = (provider: string, url: string, headers: Record<string, string>, body: unknown, cancel: Cancel) =>
  deadline(provider, "answer", (own) => fetchAnswer(provider, url, jsonPost(headers, body), async (res) => parseJson(provider)(await res.text()), own), cancel)

/** POSTs JSON and returns the raw answer bytes with their content type (audio). */
export const postForBytes = (provider: string, url: string, headers: Record<string, string>, body: unknown) =>
  exchangeWith(
    provider,
    url,
    { method: "POST", headers: { "content-type": "application/json", accept: "*/*", ...headers }, body: JSON.stringify(body) },
    async (res) => ({ bytes: new Uint8Array(await res.arrayBuffer()), contentType: res.headers.get("content-type") ?? "application/octet-stream" })
  )

/** GETs and returns the parsed JSON answer; non-2xx answers become UpstreamErrors. */
export const getJson = (provider: string, url: string, headers: Record<string, string>) =>
  exchange(provider, url, { method: "GET", headers: { accept: "application/json", ...headers } }, parseJson(provider))

/** DELETEs a resource (a sandbox, a job); whatever the 2xx body holds is not read as JSON. */
export const deleteResource = (provider: string, url: string, headers: Record<string, string>) =>
  exchange(provider, url, { method: "DELETE", headers: { accept: "application/json", ...headers } }, () => undefined)

/** GETs a document (e.g. a JSONL file's content) and returns its body as text. */
export const getText = (provider: string, url: string, headers: Record<string, string>) =>
  exchange(provider, url, { method: "GET", headers: { accept: "*/*", ...headers } }, (text) => text)

/**
 * GETs a text document (a plain-text transcript): an HTML page or a JSON body in its place (a proxy's
 * error page, an error sent with 200) is a protocol error naming its type, never taken as the text.
 */
export const getPlainText = (provider: string, url: string, headers: Record<string, string>) =>
  exchangeWith(provider, url, { method: "GET", headers: { accept: "text/plain", ...headers } }, async (res) => {
    const type = res.headers.get("content-type") ?? ""
    if (/html|json/i.test(type)) throw protocolError(provider, `${type.split(";", 1)[0]!.trim()} instead of plain text`)
    return res.text()
  })

/**
 * POSTs a `multipart/form-data` body and returns the parsed JSON answer. The content type (with
 * its boundary) is left to fetch, so `headers` must not set one.
 */
export const postMultipart = (provider: string, url: string, headers: Record<string, string>, form: FormData) =>
  exchange(provider, url, { method: "POST", headers: { accept: "application/json", ...headers }, body: form }, parseJson(provider))

/** POSTs raw bytes (an uploaded file) as `contentType` and returns the parsed JSON answer. */
export const postBytes = (provider: string, url: string, headers: Record<string, string>, body: Blob, contentType: string) =>
  exchange(provider, url, { method: "POST", headers: { "content-type": contentType, accept: "application/json", ...headers }, body }, parseJson(provider))

/** Sends a streaming request; a non-2xx answer rejects with its UpstreamError. */
const startSse = async (provider: string, url: string, headers: Record<string, string>, body: unknown, cancel: Cancel) => {
  const res = await send(provider, url, headers, body, cancel)
  if (!res.ok) throw fromHttp(provider, res.status, await res.text().catch(() => ""), res.headers.get("retry-after"))
  return res
}

/** The error of a stream that broke after it started (not retryable: bytes may have been sent on). */
export const streamBroke = (provider: string) => (e: unknown) =>
  new UpstreamError({
    provider,
    kind: "connect",
    message: `${provider} stream broke: ${(e as Error)?.message ?? String(e)}`,
    retryable: false
  })

/** The error of a stream that sent nothing, not even a keep-alive comment, for STREAM_IDLE_TIMEOUT. */
export const idleError = (provider: string) => () => timeoutError(provider, "send the next chunk")

/**
 * POSTs a streaming request and, once the upstream answered 2xx, resolves to its body as a node
 * stream (the engine parses it with `makeSseParser`); `cancel` aborts the request (the engine, the body).
 */
export const postSseNow = async (
  provider: string,
  url: string,
  headers: Record<string, string>,
  body: unknown,
  cancel: Cancel
): Promise<Readable> => {
  const res = await deadline(provider, "start streaming", (own) => startSse(provider, url, headers, body, own), cancel)
  if (res instanceof UpstreamResponse) return res.nodeBody()
  if (!res.body) throw protocolError(provider, "empty stream body")
  return Readable.fromWeb(res.body as any)
}

/** One SSE event's data as JSON, or the protocol error of a payload that is not JSON. */
export const eventJson = (provider: string, event: SseEvent): any => {
  const parsed = parseUpstreamJson(event.data)
  if ("value" in parsed) return parsed.value
  return protocolError(provider, parsed.malformed ? `bad JSON in stream: ${shownUpstreamText(event.data, 100)}` : `a stream event is not usable JSON: ${parsed.problem}`)
}

/** How long a finished stream's remaining bytes may take before its connection is dropped. */
const DRAIN_MS = 5_000

/**
 * Lets a stream that is complete for its reader (its last event read) finish on the wire, so its
 * keep-alive connection goes back to the pool instead of being closed (and re-opened by the next
 * call); one that does not end soon is destroyed.
 */
export const release = (body: Readable) => {
  if (body.readableEnded || body.destroyed) return
  const timer = setTimeout(() => body.destroy(), DRAIN_MS)
  body.once("end", () => clearTimeout(timer))
  body.once("close", () => clearTimeout(timer))
  body.resume()
}
