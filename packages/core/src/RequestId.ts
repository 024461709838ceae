/**
 * The request id (docs/observability.md): taken from the caller's `x-request-id` when it is 1–128
 * characters of `[A-Za-z0-9._:-]`, generated otherwise (a UUIDv7: time-ordered), answered as
 * `x-request-id` on every response, sent to upstream providers as `x-request-id`, and written in the
 * request's log lines (log annotation `requestId`).
 *
 * Inside Effect code the current request is a FiberRef (`CurrentRequest`) set by the HTTP edge
 * (Http/Observability.ts) around the whole request; promise code (ChatCalls) gets the id in its
 * call options, and the fast lane passes it there directly. No AsyncLocalStorage.
 */
import { Effect, FiberRef } from "effect"

export const HEADER = "x-request-id"

/**
 * The header a surface's own SDK reads the id from, beside `x-request-id`: the Anthropic SDKs read
 * `request-id` (Anthropic's), for a response's `request_id` and an error's `requestID`. Undefined
 * elsewhere (the OpenAI SDKs read `x-request-id`).
 */
export const surfaceHeader = (path: string): string | undefined => (path.startsWith("/anthropic/") ? "request-id" : undefined)

/** The headers that name a request's id on an answer to `path`: `x-request-id`, and its surface's own (`surfaceHeader`). */
export const answerHeaders = (path: string | undefined, id: string): Record<string, string> => {
  const surface = path === undefined ? undefined : surfaceHeader(path)
  return surface === undefined ? { [HEADER]: id } : { [HEADER]: id, [surface]: id }
}

const VALID = /^[A-Za-z0-9._:-]{1,128}$/

/** True for an acceptable caller-supplied id. */
export const isValid = (id: string): boolean => VALID.test(id)

/** A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits of a v4 UUID. */
export const generate = (): string => {
  const random = crypto.randomUUID()
  const ms = Date.now().toString(16).padStart(12, "0")
  return `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7${random.slice(15)}`
}

/** The id of a request from its `x-request-id` header: the caller's when valid, else a new one. */
export const fromHeader = (header: string | ReadonlyArray<string> | null | undefined): string =>
  typeof header === "string" && VALID.test(header) ? header : generate()

/**
 * What the edge knows about the request in flight; `route` is set by the matched route (its template).
 * `apiKey` is the API key the request presented (Http/Edge.ts `presented`), if it came with one: what it
 * does later (a job it submitted, a conversation's next call) goes on only while that key is not revoked
 * (Accounts/StillActing.ts).
 */
export interface RequestInfo {
  readonly id: string
  route: string
  readonly apiKey?: string | undefined
}

export const CurrentRequest: FiberRef.FiberRef<RequestInfo | undefined> = FiberRef.unsafeMake<RequestInfo | undefined>(undefined)

/** The current request's id, if the fiber serves one. */
export const current: Effect.Effect<string | undefined> = Effect.map(FiberRef.get(CurrentRequest), (r) => r?.id)

/** `headers` plus `x-request-id` when `id` is known. */
export const withHeader = (headers: Record<string, string>, id: string | undefined): Record<string, string> =>
  id === undefined ? headers : { ...headers, [HEADER]: id }
