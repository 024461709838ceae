/**
 * The typed error set of the gateway. Core services fail with these; only the
 * HTTP and MCP edges turn them into envelopes (see `statusOf`).
 */
import { Schema } from "effect"

const fields = { message: Schema.String }

/** The request is malformed: bad JSON, wrong types, missing fields. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", {
  ...fields,
  /** The request field the problem is at, written as OpenAI's `param` (`messages.[0].content`), when one is. */
  param: Schema.optional(Schema.String),
  /** Machine-readable details of the refusal, answered as Anthropic's `error.details` (a client SDK acts on them). */
  details: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}) {}
/** The request parses but is semantically wrong (e.g. a provider that is not configured). */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fields) {}
/** No or invalid credentials. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {}
/** Authenticated, but not allowed. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}
/**
 * A well-formed request that a business rule turns down (wrong password, token expired).
 * The avatar API answers these with HTTP 200 and `isError: true`, as its spec describes.
 */
export class Rejected extends Schema.TaggedError<Rejected>()("Rejected", fields) {}
/** Daily quota exhausted; `retryAfterSeconds` is the time to the next UTC midnight. */
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number
}) {}
/** Too many requests of another kind (e.g. verification e-mail resends). */
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number
}) {}
/** The gateway is at capacity for this kind of work (e.g. every code sandbox is busy); retry shortly. */
export class Busy extends Schema.TaggedError<Busy>()("Busy", {
  message: Schema.String,
  retryAfterSeconds: Schema.Number
}) {}
/** The upstream provider failed (connect error, 5xx, malformed answer). */
export class UpstreamFailed extends Schema.TaggedError<UpstreamFailed>()("UpstreamFailed", {
  message: Schema.String,
  provider: Schema.String,
  status: Schema.optional(Schema.Number),
  /** The upstream's own short `Retry-After` (a rate limit, an overload), passed on to the client. */
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {}
export class UpstreamTimeout extends Schema.TaggedError<UpstreamTimeout>()("UpstreamTimeout", {
  message: Schema.String,
  provider: Schema.String
}) {}
/** A capability that exists in the contract but needs configuration or a later component. */
export class NotAvailable extends Schema.TaggedError<NotAvailable>()("NotAvailable", fields) {}

export type GatewayError =
  | BadRequest
  | Unprocessable
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | PayloadTooLarge
  | QuotaExceeded
  | TooManyRequests
  | Busy
  | UpstreamFailed
  | UpstreamTimeout
  | NotAvailable
  | Rejected

const statusByTag: Record<GatewayError["_tag"], number> = {
  BadRequest: 400,
  Unprocessable: 422,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  PayloadTooLarge: 413,
  QuotaExceeded: 429,
  TooManyRequests: 429,
  Busy: 503,
  UpstreamFailed: 502,
  UpstreamTimeout: 504,
  NotAvailable: 501,
  Rejected: 422
}

/** The one mapping from error kind to HTTP status. */
export const statusOf = (error: GatewayError): number => statusByTag[error._tag]

export const isGatewayError = (u: unknown): u is GatewayError =>
  typeof u === "object" && u !== null && "_tag" in u && (u as { _tag: string })._tag in statusByTag
