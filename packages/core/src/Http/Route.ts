/**
 * A small typed route layer over HttpRouter. One declaration per endpoint gives the handler
 * decoded input, the authenticated caller and quota admission, and gives /openapi.json and
 * /docs their content. Every failure leaves as an envelope with the status of its kind.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Effect, Option, ParseResult, Schema } from "effect"
import type { ParseOptions } from "effect/SchemaAST"
import { Auth } from "../Accounts/Auth.ts"
import { type EnvelopeKind, failureOf, successOf } from "../Envelope.ts"
import { BadRequest, type GatewayError, isGatewayError, PayloadTooLarge, statusOf } from "../Errors.ts"
import { GatewayConfig } from "../Config.ts"
import { headersOf, Quota, type QuotaState } from "../Quota.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { quotaRefusals } from "../Metrics.ts"
import { markRoute } from "./Observability.ts"
import { jsonTextProblem, NUL_PROBLEM } from "../JsonText.ts"

export { jsonTextProblem }

export type Method = "GET" | "POST" | "PUT" | "DELETE"

export type Envelope = EnvelopeKind | "none" | "openai"

/** A handler's answer with an explicit message (and optionally status / headers). */
export class Reply<A> {
  constructor(
    readonly result: A,
    readonly message: string | null = null,
    readonly status = 200,
    readonly headers: Record<string, string> = {}
  ) {}
}

export interface Input<B, Q> {
  readonly body: B
  readonly query: Q
  readonly params: Readonly<Record<string, string>>
  readonly request: HttpServerRequest.HttpServerRequest
  /** The multipart form of a `rawBody` route (read, bounded, before the check). */
  readonly form: FormData | undefined
}

export interface Docs {
  readonly summary: string
  readonly description?: string
  readonly tag: string
  /** Schema of `result` (or of the whole body for un-enveloped routes), for the docs only. */
  readonly success?: Schema.Schema.Any
  readonly contentType?: string
}

interface Common<B, Q> extends Docs {
  readonly method: Method
  readonly path: string
  readonly body?: Schema.Schema<B, any, never>
  readonly query?: Schema.Schema<Q, any, never>
  /**
   * The envelope of this API: the gateway's or the avatar API's; "none" for raw answers;
   * "openai" for raw answers with OpenAI-shaped errors (`{ error: { message, type, code } }`).
   */
  readonly envelope?: Envelope
  /** The body is multipart/form-data instead of JSON: read before the check, handed over as `form`. */
  readonly rawBody?: boolean
}

type Output = unknown

export interface AuthedSpec<B, Q, R, RC = never> extends Common<B, Q> {
  /** Counts against the daily quota (every capability call). */
  readonly metered?: boolean
  /** How many calls the request counts for (a batch counts its items); default 1. */
  readonly meteredCalls?: (body: B) => number
  /** The `avatarId` the request acts for (Admins may name another avatar; quota is charged to it). */
  readonly avatarIdOf?: (body: B) => string | undefined
  /**
   * Refusals that depend only on the request and configuration (unknown model, provider not
   * configured or not allowed for the plan, a refused URL): answered before the call is counted,
   * so a refused request costs no quota (docs/quota.md).
   */
  readonly check?: (input: Input<B, Q> & { readonly caller: AvatarRecord; readonly avatar: AvatarRecord }) => Effect.Effect<void, GatewayError, RC>
  readonly handle: (
    input: Input<B, Q> & {
      readonly caller: AvatarRecord
      /** The avatar the call acts for: the caller, or the avatar an Admin named. */
      readonly avatar: AvatarRecord
      readonly quota: QuotaState
    }
  ) => Effect.Effect<Output, GatewayError, R>
}

export interface PublicSpec<B, Q, R> extends Common<B, Q> {
  readonly handle: (input: Input<B, Q> & { readonly caller: Option.Option<AvatarRecord> }) => Effect.Effect<Output, GatewayError, R>
}

export interface Route<R = any> {
  readonly method: Method
  readonly path: string
  readonly auth: "required" | "optional"
  readonly metered: boolean
  readonly envelope: Envelope
  readonly docs: Docs
  readonly body: Option.Option<Schema.Schema.Any>
  readonly query: Option.Option<Schema.Schema.Any>
  readonly rawBody: boolean
  readonly run: Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    never,
    R | HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams | HttpRouter.RouteContext | Auth | Quota | GatewayConfig
  >
}

const parseOptions: ParseOptions = { errors: "all", onExcessProperty: "ignore" }

/** "field.path: problem; …" from a schema failure. */
export const describeParseError = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .slice(0, 10)
    .map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message))
    .join("; ")

/** A decoder for a request part (body, query): the value, or the 400 error naming the problems. */
export const decoderNow = <A>(schema: Schema.Schema<A, any, never>, what: string) => {
  const run = Schema.decodeUnknownEither(schema, parseOptions)
  return (value: unknown): A | BadRequest => {
    const result = run(value)
    return result._tag === "Right" ? result.right : new BadRequest({ message: `Invalid ${what}: ${describeParseError(result.left)}` })
  }
}

const asEffect = <A>(decoded: A | BadRequest): Effect.Effect<A, BadRequest> =>
  decoded instanceof BadRequest ? Effect.fail(decoded) : Effect.succeed(decoded)

/** The 413 error of a body above `maxBodyBytes`. */
export const tooLargeError = (maxBodyBytes: number) =>
  new PayloadTooLarge({ message: `Request body exceeds the limit of ${maxBodyBytes} bytes.` })

/** A declared Content-Length above the limit: refused before reading a byte. */
export const declaresTooLarge = (headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>, maxBodyBytes: number) =>
  Number(headers["content-length"] ?? "0") > maxBodyBytes

/** A JSON body's text -> value, or the 400 error of an empty, too deep, NUL-carrying or malformed body. */
export const parseJsonBody = (text: string, maxDepth: number): unknown | BadRequest => {
  if (text.trim() === "") return new BadRequest({ message: "Request body is required (JSON)." })
  const problem = jsonTextProblem(text, maxDepth)
  if (problem !== undefined) return new BadRequest({ message: `Invalid request body: ${problem}` })
  try {
    return JSON.parse(text) as unknown
  } catch (e) {
    return new BadRequest({ message: `Malformed JSON body: ${(e as Error).message}` })
  }
}

/**
 * Reads the body with `read` within the configured size limit: a declared or actual size above
 * it is a 413 envelope (the error is built only when needed: it captures a stack trace).
 */
const readBounded = <A>(
  read: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<A, unknown>,
  size: (body: A) => number
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { maxBodyBytes } = yield* GatewayConfig
    const tooLarge = () => tooLargeError(maxBodyBytes)
    if (declaresTooLarge(request.headers, maxBodyBytes)) return yield* Effect.fail(tooLarge())
    const body = yield* read(request).pipe(
      Effect.provideService(HttpServerRequest.MaxBodySize, Option.some(maxBodyBytes as any)),
      Effect.mapError(tooLarge)
    )
    if (size(body) > maxBodyBytes) return yield* Effect.fail(tooLarge())
    return body
  })

/** The body as text within the configured size limit (the Effect routes and /mcp). */
export const readText = readBounded((r) => r.text, (t) => Buffer.byteLength(t))

/** Reads and parses a JSON body within the configured size, depth and NUL limits. */
export const readJson = Effect.gen(function*() {
  const text = yield* readText
  const { limits } = yield* GatewayConfig
  const parsed = parseJsonBody(text, limits.maxJsonDepth)
  return parsed instanceof BadRequest ? yield* Effect.fail(parsed) : parsed
})

/**
 * Reads a `multipart/form-data` body within the size limit and parses it with the web
 * FormData parser (files arrive as `File`s in memory).
 */
export const readForm = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const contentType = request.headers["content-type"] ?? ""
  if (!contentType.startsWith("multipart/form-data")) {
    return yield* Effect.fail(new BadRequest({ message: "The request must be multipart/form-data." }))
  }
  const bytes = yield* readBounded((r) => r.arrayBuffer, (b) => b.byteLength)
  return yield* Effect.tryPromise({
    try: () => new Response(bytes, { headers: { "content-type": contentType } }).formData(),
    catch: () => new BadRequest({ message: "Malformed multipart/form-data body." })
  })
})

const json = (status: number, body: unknown, headers: Record<string, string>) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

/** OpenAI's error `type` for each of our error kinds (invalid_request_error otherwise). */
const openAiErrorType: Partial<Record<GatewayError["_tag"], string>> = {
  Unauthorized: "authentication_error",
  Forbidden: "permission_error",
  NotFound: "not_found_error",
  QuotaExceeded: "rate_limit_error",
  TooManyRequests: "rate_limit_error",
  Busy: "server_error",
  UpstreamFailed: "api_error",
  UpstreamTimeout: "api_error"
}

export const errorBody = (kind: Envelope, error: { readonly _tag: string; readonly message: string }) =>
  kind === "openai"
    ? { error: { message: error.message, type: openAiErrorType[error._tag as GatewayError["_tag"]] ?? "invalid_request_error", code: error._tag } }
    : failureOf(kind === "none" ? "gateway" : kind, error.message)

/** A typed failure as the status, envelope body and headers of the route's API. */
export const errorParts = (kind: Envelope, error: GatewayError, headers: Record<string, string> = {}) => {
  let status = statusOf(error)
  // Counted here: the one place the Effect routes and the fast lane turn a refusal into an answer.
  if (error._tag === "QuotaExceeded") quotaRefusals.inc()
  // The avatar API answers business rejections with 200 + isError, as its spec describes.
  if (kind === "avatar" && (error._tag === "Rejected" || error._tag === "Conflict")) status = 200
  const extra: Record<string, string> = error._tag === "QuotaExceeded" || error._tag === "TooManyRequests" || error._tag === "Busy"
    ? { "retry-after": String(error.retryAfterSeconds) }
    : {}
  return { status, body: errorBody(kind, error), headers: { ...headers, ...extra } }
}

/** Turns a typed failure into the envelope response of the route's API. */
export const errorResponse = (kind: Envelope, error: GatewayError, headers: Record<string, string> = {}) => {
  const { body, headers: all, status } = errorParts(kind, error, headers)
  return json(status, body, all)
}

/** The last resort: log the cause, answer a generic 500 envelope. */
export const defectResponse = (kind: Envelope, cause: Cause.Cause<unknown>) =>
  Effect.logError("unexpected failure", cause).pipe(
    Effect.as(json(500, errorBody(kind, { _tag: "Internal", message: "Internal server error." }), {}))
  )

const respond = (kind: Envelope, output: Output, headers: Record<string, string>) => {
  if (HttpServerResponse.isServerResponse(output)) return HttpServerResponse.setHeaders(output, headers)
  const raw = kind === "none" || kind === "openai"
  if (output instanceof Reply) {
    const body = raw ? output.result : successOf(kind, output.result, output.message)
    return json(output.status, body, { ...headers, ...output.headers })
  }
  return json(200, raw ? output : successOf(kind, output, null), headers)
}

const hasNul = (values: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>): boolean => {
  for (const key in values) {
    const value = values[key]
    if (key.includes("\0") || (typeof value === "string" ? value.includes("\0") : value?.some((v) => v.includes("\0")))) return true
  }
  return false
}

const make = <B, Q, R>(
  spec: Common<B, Q> & {
    readonly avatarIdOf?: ((body: B) => string | undefined) | undefined
    readonly meteredCalls?: ((body: B) => number) | undefined
    readonly check?: ((input: any) => Effect.Effect<void, GatewayError, R>) | undefined
  },
  auth: "required" | "optional",
  metered: boolean,
  handle: (input: any) => Effect.Effect<Output, GatewayError, R>
): Route<R> => {
  const envelope = spec.envelope ?? "gateway"
  // Decoders built once per route, not per request.
  const decodeQuery = spec.query ? decoderNow(spec.query, "query") : undefined
  const decodeBody = spec.body && !spec.rawBody ? decoderNow(spec.body, "request body") : undefined
  const run = Effect.suspend(() => {
    // Rate-limit headers go on every answer to an authenticated caller, errors included.
    const out = { headers: {} as Record<string, string> }
    return Effect.gen(function*() {
      // The metrics label of the request: this route's template, never the raw path.
      yield* markRoute(spec.path)
      const request = yield* HttpServerRequest.HttpServerRequest
      const authService = yield* Auth
      const quota = yield* Quota
      const credentials = { authorization: request.headers["authorization"], apiKey: request.headers["x-api-key"] }
      const caller = auth === "required"
        ? Option.some(yield* authService.require(credentials))
        // Open endpoints ignore stale or foreign credentials instead of refusing the call.
        : yield* authService.resolve(credentials).pipe(Effect.orElseSucceed(() => Option.none<AvatarRecord>()))
      const searchParams = yield* HttpServerRequest.ParsedSearchParams
      const { params } = yield* HttpRouter.RouteContext
      // PostgreSQL cannot store NUL; refused here for every route and both databases.
      if (hasNul(params) || hasNul(searchParams)) {
        return yield* Effect.fail(new BadRequest({ message: `Invalid path or query: ${NUL_PROBLEM}` }))
      }
      const query = decodeQuery ? yield* asEffect(decodeQuery(searchParams)) : (undefined as Q)
      const body = decodeBody ? yield* Effect.flatMap(readJson, (j) => asEffect(decodeBody(j))) : (undefined as B)
      const form = spec.rawBody ? yield* readForm : undefined
      let state: QuotaState | undefined
      let avatar: AvatarRecord | undefined
      if (Option.isSome(caller)) {
        avatar = spec.avatarIdOf ? yield* authService.actingAs(caller.value, spec.avatarIdOf(body)) : caller.value
        const charged = avatar
        // A refused request still answers with the day's rate-limit headers.
        const withHeaders = Effect.tapError(() => Effect.map(quota.peek(charged), (s) => (out.headers = headersOf(s))))
        // Validation before admission: a refused request costs no quota.
        if (spec.check) yield* spec.check({ body, query, params, request, form, caller: caller.value, avatar }).pipe(withHeaders)
        state = metered
          ? yield* quota.admit(charged, spec.meteredCalls ? spec.meteredCalls(body) : 1).pipe(withHeaders)
          : yield* quota.peek(charged)
        out.headers = headersOf(state)
      }
      const output = yield* handle({
        body,
        query,
        params,
        request,
        form,
        caller: auth === "required" ? Option.getOrThrow(caller) : caller,
        avatar,
        quota: state
      })
      return respond(envelope, output, out.headers)
    }).pipe(
      Effect.catchIf(isGatewayError, (e) => Effect.succeed(errorResponse(envelope, e, out.headers))),
      Effect.catchAllCause((cause) => defectResponse(envelope, cause))
    )
  }) as Route<R>["run"]
  return {
    method: spec.method,
    path: spec.path,
    auth,
    metered,
    envelope,
    docs: spec,
    body: Option.fromNullable(spec.body as Schema.Schema.Any | undefined),
    query: Option.fromNullable(spec.query as Schema.Schema.Any | undefined),
    rawBody: spec.rawBody ?? false,
    run
  }
}

/** An endpoint that needs credentials (401 without). */
export const authed = <B = undefined, Q = undefined, R = never, RC = never>(spec: AuthedSpec<B, Q, R, RC>): Route<R | RC> =>
  make<B, Q, R | RC>(spec, "required", spec.metered ?? false, spec.handle)

/** An endpoint open to everyone; credentials, when sent, are still checked. */
export const open = <B = undefined, Q = undefined, R = never>(spec: PublicSpec<B, Q, R>): Route<R> =>
  make(spec, "optional", false, spec.handle)
