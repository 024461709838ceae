/**
 * Upstream HTTP, once for every adapter: JSON POST/GET, multipart upload, text download and SSE
 * streams over fetch, with the Effect interruption wired to the request's AbortSignal (a client
 * that goes away cancels the upstream call), timeouts, and error mapping.
 */
import { Duration, Effect, Option, Redacted, Scope, Stream } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { connectFailed, fromHttp, protocolError, UpstreamError } from "../UpstreamError.ts"
import { parseSse, type SseEvent } from "./sse.ts"

export const REQUEST_TIMEOUT = Duration.seconds(120)
export const STREAM_IDLE_TIMEOUT = Duration.seconds(120)

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
    case "token":
      return { authorization: `Token ${key}` }
    case "key":
      return { authorization: `Key ${key}` }
    case "basic":
      return { authorization: `Basic ${Buffer.from(key).toString("base64")}` }
  }
}

const timeoutError = (provider: string, what: string) =>
  new UpstreamError({ provider, kind: "timeout", message: `${provider} did not ${what} in time`, retryable: true })

const send = (provider: string, url: string, headers: Record<string, string>, body: unknown, signal: AbortSignal) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
    signal
  }).catch((cause) => Promise.reject(connectFailed(provider, cause)))

/** POSTs JSON and returns the parsed JSON answer; non-2xx answers become UpstreamErrors. */
export const postJson = (provider: string, url: string, headers: Record<string, string>, body: unknown) =>
  Effect.tryPromise({
    try: async (signal) => {
      const res = await send(provider, url, headers, body, signal)
      const text = await res.text()
      if (!res.ok) throw fromHttp(provider, res.status, text)
      try {
        return JSON.parse(text) as any
      } catch {
        throw protocolError(provider, "the body is not JSON")
      }
    },
    catch: (e) => (e instanceof UpstreamError ? e : connectFailed(provider, e))
  }).pipe(Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => timeoutError(provider, "answer") }))

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
): Effect.Effect<A, UpstreamError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const res = await fetch(url, { ...init, signal }).catch((cause) => Promise.reject(connectFailed(provider, cause)))
      const text = await res.text()
      if (!res.ok) throw fromHttp(provider, res.status, text)
      return parse(text)
    },
    catch: (e) => (e instanceof UpstreamError ? e : connectFailed(provider, e))
  }).pipe(Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => timeoutError(provider, "answer") }))

const parseJson = (provider: string) => (text: string): any => {
  try {
    return JSON.parse(text) as any
  } catch {
    throw protocolError(provider, "the body is not JSON")
  }
}

/** GETs and returns the parsed JSON answer; non-2xx answers become UpstreamErrors. */
export const getJson = (provider: string, url: string, headers: Record<string, string>) =>
  exchange(provider, url, { method: "GET", headers: { accept: "application/json", ...headers } }, parseJson(provider))

/** GETs a document (e.g. a JSONL file's content) and returns its body as text. */
export const getText = (provider: string, url: string, headers: Record<string, string>) =>
  exchange(provider, url, { method: "GET", headers: { accept: "*/*", ...headers } }, (text) => text)

/**
 * POSTs a `multipart/form-data` body and returns the parsed JSON answer. The content type (with
 * its boundary) is left to fetch, so `headers` must not set one.
 */
export const postMultipart = (provider: string, url: string, headers: Record<string, string>, form: FormData) =>
  exchange(provider, url, { method: "POST", headers: { accept: "application/json", ...headers }, body: form }, parseJson(provider))

/**
 * POSTs and, once the upstream answered 2xx, returns its SSE events as a stream. The request
 * lives in the caller's scope: closing the scope (or interrupting) aborts it.
 */
export const postSse = (
  provider: string,
  url: string,
  headers: Record<string, string>,
  body: unknown
): Effect.Effect<Stream.Stream<SseEvent, UpstreamError>, UpstreamError, Scope.Scope> =>
  Effect.gen(function*() {
    const controller = yield* Effect.acquireRelease(
      Effect.sync(() => new AbortController()),
      (c) => Effect.sync(() => c.abort())
    )
    const res = yield* Effect.tryPromise({
      try: () => send(provider, url, headers, body, controller.signal),
      catch: (e) => (e instanceof UpstreamError ? e : connectFailed(provider, e))
    }).pipe(
      Effect.timeoutFail({ duration: REQUEST_TIMEOUT, onTimeout: () => timeoutError(provider, "start streaming") }),
      Effect.onInterrupt(() => Effect.sync(() => controller.abort()))
    )
    if (!res.ok) {
      const text = yield* Effect.promise(() => res.text().catch(() => ""))
      return yield* Effect.fail(fromHttp(provider, res.status, text))
    }
    if (!res.body) return yield* Effect.fail(protocolError(provider, "empty stream body"))
    const bytes = Stream.fromReadableStream(
      () => res.body!,
      (e) =>
        new UpstreamError({
          provider,
          kind: "connect",
          message: `${provider} stream broke: ${(e as Error)?.message ?? String(e)}`,
          retryable: false
        })
    )
    return parseSse(bytes).pipe(
      Stream.timeoutFail(() => timeoutError(provider, "send the next chunk"), STREAM_IDLE_TIMEOUT)
    )
  })

/** Parses one SSE data payload as JSON or fails with a protocol error. */
export const json = (provider: string, data: string): Effect.Effect<any, UpstreamError> =>
  Effect.try({ try: () => JSON.parse(data), catch: () => protocolError(provider, `bad JSON in stream: ${data.slice(0, 100)}`) })
