/**
 * A small typed route layer over HttpRouter. One declaration per endpoint gives the handler
 * decoded input, the authenticated caller and quota admission, and gives /openapi.json and
 * /docs their content. Every failure leaves as an envelope with the status of its kind.
 */
import { cutText } from "../Cut.ts"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Readable } from "node:stream"
import { MIMEType } from "node:util"
import { Cause, Effect, Option, Schema } from "effect"
import { Auth } from "../Accounts/Auth.ts"
import { BadRequest, type GatewayError, isGatewayError } from "../Errors.ts"
import { GatewayConfig } from "../Config.ts"
import { admitted, headersOf, Quota, type QuotaState } from "../Quota.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import type { Lane } from "./Lane.ts"
import { markRoute } from "./Observability.ts"
import { jsonTextProblem, NUL_PROBLEM } from "../JsonText.ts"
import { parseOptions, problemsOf, strictParseOptions } from "./DecodeProblems.ts"
import {
  AVATAR_HEADERS,
  bodyTookLong,
  credentialsOf,
  crossSiteFormProblem,
  declaresTooLarge,
  encodingRefusal,
  type Envelope,
  defectParts,
  errorParts,
  parseJsonBody,
  readLimited,
  readLimitedText,
  textDecoderOf,
  successBody,
  TOO_LARGE,
  tooLargeError
} from "./Edge.ts"

export { jsonTextProblem, parseJsonBody }
export type { Envelope }

export type Method = "GET" | "POST" | "PUT" | "DELETE"

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
   * "openai" for raw answers with OpenAI-shaped errors (`{ error: { message, type, code } }`);
   * "anthropic" for raw answers with Anthropic-shaped errors (`{ type: "error", error: { type, message } }`).
   */
  readonly envelope?: Envelope
  /** The body is multipart/form-data instead of JSON: read before the check, handed over as `form`. */
  readonly rawBody?: boolean
  /** A probe's route (health, readiness): a query is not refused (monitors add cache-busting parameters), and nothing in it is read. */
  readonly ignoresQuery?: boolean
}

type Output = unknown

/**
 * A check's answer that holds something for the request (a sandbox slot, taken before admission so a
 * burst cannot all pass the check and be refused once counted): released when the request ends, whether
 * admission refused it, the handler failed or it answered.
 */
export interface Held {
  readonly release: Effect.Effect<void>
}

const isHeld = (checked: unknown): checked is Held =>
  typeof checked === "object" && checked !== null && Effect.isEffect((checked as { release?: unknown }).release)

export interface AuthedSpec<B, Q, R, RC = never, C = void> extends Common<B, Q> {
  /** Counts against the daily quota (every capability call). */
  readonly metered?: boolean
  /** How many calls the request counts for (a batch counts its items); default 1. */
  readonly meteredCalls?: (body: B) => number
  /** The `avatarId` the request acts for (Admins may name another avatar; quota is charged to it). */
  readonly avatarIdOf?: (body: B) => string | undefined
  /**
   * Refusals that depend only on the request and configuration (unknown model, provider not
   * configured or not allowed for the plan, a refused URL): answered before the call is counted,
   * so a refused request costs no quota (docs/quota.md). What it answers is handed to `handle` as
   * `checked`, so work the check did (a document read and parsed) is not done twice.
   */
  readonly check?: (input: Input<B, Q> & { readonly caller: AvatarRecord; readonly avatar: AvatarRecord }) => Effect.Effect<C, GatewayError, RC>
  /** Served on the node host's fast lane too (Lane.ts, FastLane.ts): same contract, plain functions. */
  readonly lane?: Lane<B>
  readonly handle: (
    input: Input<B, Q> & {
      readonly caller: AvatarRecord
      /** The avatar the call acts for: the caller, or the avatar an Admin named. */
      readonly avatar: AvatarRecord
      readonly quota: QuotaState
      /** What `check` answered (undefined without one). */
      readonly checked: C
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
  /** The body decoder (JSON routes). */
  readonly decode: ((json: unknown) => unknown) | undefined
  /** The avatar a request acts for, when the route lets an Admin name one. */
  readonly avatarIdOf: ((body: any) => string | undefined) | undefined
  /** How many calls a request counts for. */
  readonly meteredCalls: (body: any) => number
  readonly lane: Lane<any> | undefined
  readonly run: Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    never,
    R | HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams | HttpRouter.RouteContext | Auth | Quota | GatewayConfig
  >
}

/** A decoder for a request part (body, query): the value, or the 400 error naming the problems. */
export const decoderNow = <A>(schema: Schema.Schema<A, any, never>, what: string, options = parseOptions) => {
  const run = Schema.decodeUnknownEither(schema, options)
  return (value: unknown): A | BadRequest => {
    const result = run(value)
    if (result._tag === "Right") return result.right
    const { param, text } = problemsOf(result.left)
    return new BadRequest({ message: `Invalid ${what}: ${text}`, ...(param !== undefined ? { param } : {}) })
  }
}

const asEffect = <A>(decoded: A | BadRequest): Effect.Effect<A, BadRequest> =>
  decoded instanceof BadRequest ? Effect.fail(decoded) : Effect.succeed(decoded)

/** The body source of a platform request: the node request itself, or a web request's stream. */
const sourceOf = (request: HttpServerRequest.HttpServerRequest): Readable | ReadableStream<Uint8Array> | null => {
  const source = request.source as Readable | Request
  return source instanceof Readable ? source : source.body
}

/**
 * The body read by `read` (Edge.readLimited or readLimitedText) within the configured size limit: a
 * declared or actual size above it is a 413 envelope; a client that leaves mid-upload is a 400.
 */
const readBounded = <P, A>(
  prepare: (headers: HttpServerRequest.HttpServerRequest["headers"]) => P | BadRequest,
  read: (source: Readable | ReadableStream<Uint8Array> | null, limit: number, prepared: P) => Promise<A | typeof TOO_LARGE | BadRequest>
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const { maxBodyBytes } = yield* GatewayConfig
    if (declaresTooLarge(request.headers, maxBodyBytes)) return yield* Effect.fail(tooLargeError(maxBodyBytes))
    const prepared = prepare(request.headers)
    if (prepared instanceof BadRequest) return yield* Effect.fail(prepared)
    const body = yield* Effect.tryPromise({
      try: () => read(sourceOf(request), maxBodyBytes, prepared),
      catch: () => new BadRequest({ message: "The request body could not be read." })
    })
    if (body === TOO_LARGE) return yield* Effect.fail(tooLargeError(maxBodyBytes))
    return body instanceof BadRequest ? yield* Effect.fail(body) : body as A
  })

/** The body as text (its charset, UTF-8 by default) within the configured size limit (the Effect routes and /mcp). */
export const readText = readBounded(textDecoderOf, readLimitedText)

/** Reads and parses a JSON body within the configured size, depth and NUL limits. */
export const readJson = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const crossSite = crossSiteFormProblem(request.headers)
  if (crossSite !== undefined) return yield* Effect.fail(crossSite)
  const text = yield* readText
  const { limits } = yield* GatewayConfig
  const parsed = parseJsonBody(text, limits, request.headers["content-type"])
  return parsed instanceof BadRequest ? yield* Effect.fail(parsed) : parsed
})

/** A multipart body holds at most this many parts: the gateway's forms carry a file and a few fields, and the parser's time grows with the parts. */
export const MAX_FORM_PARTS = 1_000

/**
 * The boundary of `contentType` when it is one multipart/form-data type naming one, read as the form parser
 * reads it (a WHATWG MIME type: quoted values, the first of a repeated parameter, the type in any case); else
 * undefined. A list of types (a comma outside quotes), which the parser reads as its last, is none: the part
 * counter would read another boundary than the parser and let a body of any number of parts past the count.
 */
const formBoundary = (contentType: string): string | undefined => {
  let quoted = false
  for (let i = 0; i < contentType.length; i++) {
    const c = contentType[i]
    if (quoted && c === "\\") i++
    else if (c === '"') quoted = !quoted
    else if (c === "," && !quoted) return undefined
  }
  try {
    const type = new MIMEType(contentType)
    const boundary = type.params.get("boundary") ?? ""
    return type.essence === "multipart/form-data" && boundary !== "" ? boundary : undefined
  } catch {
    return undefined
  }
}

/** Whether `body` holds more than `max` parts, counted as delimiters (`--boundary`) with native searches before anything is parsed. */
export const holdsMoreParts = (body: Buffer, contentType: string, max: number) => {
  const boundary = formBoundary(contentType)
  if (boundary === undefined) return false
  const delimiter = Buffer.from(`--${boundary}`)
  let delimiters = 0
  // One delimiter before each part and the closing one after the last.
  for (let at = body.indexOf(delimiter); at !== -1; at = body.indexOf(delimiter, at + delimiter.length)) {
    if (++delimiters > max + 1) return true
  }
  return false
}

/**
 * Reads a `multipart/form-data` body within the size limit and parses it with the web
 * FormData parser (files arrive as `File`s in memory).
 */
export const readForm = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const contentType = request.headers["content-type"] ?? ""
  if (formBoundary(contentType) === undefined) {
    return yield* Effect.fail(new BadRequest({ message: "The request must be multipart/form-data, with one Content-Type naming its boundary." }))
  }
  const bytes = yield* readBounded(encodingRefusal, (source, limit) => readLimited(source, limit))
  const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (holdsMoreParts(body, contentType, MAX_FORM_PARTS)) {
    return yield* Effect.fail(new BadRequest({ message: `The multipart/form-data body holds more than ${MAX_FORM_PARTS} parts.` }))
  }
  const form = yield* Effect.tryPromise({
    try: () => new Response(bytes as Uint8Array<ArrayBuffer>, { headers: { "content-type": contentType } }).formData(),
    catch: () => new BadRequest({ message: "Malformed multipart/form-data body." })
  })
  const undecodable = yield* undecodableField(form, body, contentType)
  return undecodable === undefined ? form : yield* Effect.fail(undecodable)
})

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })
/** Whether `bytes` are UTF-8. */
const decodes = (bytes: Uint8Array) => {
  try {
    strictUtf8.decode(bytes)
    return true
  } catch {
    return false
  }
}

/** `text` as the form parser read it (`read`) from bytes that were UTF-8: it holds no U+FFFD, or `raw`, the same entry read from the body's bytes each taken as a character, are UTF-8. */
const readAsSent = (read: string, raw: string) =>
  !read.includes("\uFFFD") || (raw !== read && !/[^\u0000-\u00ff]/.test(raw) && decodes(Buffer.from(raw, "latin1")))

/**
 * The refusal of a form whose field names or text fields are not UTF-8, as a JSON body's text is refused: the
 * form parser puts U+FFFD in place of bytes it cannot read, so such a field would be used other than sent. Only
 * a form with a U+FFFD in a name or text can hold one. The same parser then reads the body again with each of
 * its bytes made the character of that code (Latin-1 as UTF-8: ASCII, and so the boundary, line breaks and
 * headers' syntax, unchanged), which gives every name and text field as the bytes sent; those must be UTF-8. A
 * part whose bytes come through an encoding (`Content-Transfer-Encoding: base64`) reads the same both times
 * and cannot be told from sent bytes: a U+FFFD in it is refused. Files are bytes, not text, and are not read.
 */
export const undecodableField = (form: FormData, body: Buffer, contentType: string): Effect.Effect<BadRequest | undefined> => {
  const entries = [...form]
  if (!entries.some(([name, value]) => name.includes("\uFFFD") || (typeof value === "string" && value.includes("\uFFFD")))) return Effect.succeed(undefined)
  const bytesAsCharacters = Buffer.from(body.toString("latin1"), "utf8")
  return Effect.promise(() =>
    new Response(bytesAsCharacters, { headers: { "content-type": contentType } }).formData().then((raw) => [...raw], () => undefined)
  ).pipe(Effect.map((raw) => {
    if (raw === undefined || raw.length !== entries.length) return new BadRequest({ message: "Malformed multipart/form-data body." })
    for (const [i, [name, value]] of entries.entries()) {
      const [rawName, rawValue] = raw[i]!
      if (!readAsSent(name, rawName) || (typeof value === "string" && !readAsSent(value, typeof rawValue === "string" ? rawValue : value))) {
        const field = cutText(name, 100)
        return new BadRequest({ message: `Invalid request body: the form field ${JSON.stringify(field)} is not valid UTF-8.`, param: field })
      }
    }
    return undefined
  }))
}

/**
 * A form's problem with the fields a route takes: a name it does not take, or one given twice (a second
 * file would otherwise be dropped without a word); undefined when there is none.
 */
export const formProblem = (form: FormData, takes: ReadonlyArray<string>): BadRequest | undefined => {
  const counts = new Map<string, number>()
  for (const name of form.keys()) counts.set(name, (counts.get(name) ?? 0) + 1)
  for (const [name, count] of counts) {
    if (!takes.includes(name)) return new BadRequest({ message: `${cutText(JSON.stringify(name), 100)} is not a field of this form; it takes ${takes.join(", ")}.`, param: cutText(name, 100) })
    if (count > 1) return new BadRequest({ message: `${name} is given ${count} times; send it once (one request per file).`, param: name })
  }
  return undefined
}

const json = (status: number, body: unknown, headers: Record<string, string>) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

/** Turns a typed failure into the envelope response of the route's API. */
export const errorResponse = (kind: Envelope, error: GatewayError, headers: Record<string, string> = {}) => {
  const { body, headers: all, status } = errorParts(kind, error, headers)
  return json(status, body, all)
}

/** The last resort: log the cause, answer a generic 500 envelope (a 503 for a locked database: `defectParts`). */
export const defectResponse = (kind: Envelope, cause: Cause.Cause<unknown>) => {
  const { body, headers, status } = defectParts(kind, Cause.squash(cause))
  return Effect.as(logUnexpected(cause), json(status, body, headers))
}

/** The log line of a request's unexpected failure: its cause, with its text and stack (the JSON log's `cause`). */
export const logUnexpected = (cause: Cause.Cause<unknown>) => Effect.logError("unexpected failure", cause)

/** A handler's JSON answer (a value or a Reply) as its status, body and headers, in the route's envelope. */
export const answerParts = (kind: Envelope, output: unknown, given: Record<string, string>) => {
  const headers = kind === "avatar" ? { ...AVATAR_HEADERS, ...given } : given
  return output instanceof Reply
    ? { status: output.status, body: successBody(kind, output.result, output.message), headers: { ...headers, ...output.headers } }
    : { status: 200, body: successBody(kind, output, null), headers }
}

const respond = (kind: Envelope, output: Output, headers: Record<string, string>) => {
  if (HttpServerResponse.isServerResponse(output)) return HttpServerResponse.setHeaders(output, headers)
  const answer = answerParts(kind, output, headers)
  return json(answer.status, answer.body, answer.headers)
}

const hasNul = (values: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>): boolean => {
  for (const key in values) {
    const value = values[key]
    if (key.includes("\0") || (typeof value === "string" ? value.includes("\0") : value?.some((v) => v.includes("\0")))) return true
  }
  return false
}

/**
 * PostgreSQL cannot store NUL: a request whose path parameters or query (decoded names and values,
 * as `HttpServerRequest.searchParamsFromURL` gives them) hold one is refused, for every route and
 * both databases.
 */
export const nulRefusal = (
  params: Readonly<Record<string, string | undefined>>,
  query: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
): BadRequest | undefined =>
  hasNul(params) || hasNul(query) ? new BadRequest({ message: `Invalid path or query: ${NUL_PROBLEM}` }) : undefined

/**
 * The refusal of a request's path parameters and query before its body is read: a NUL anywhere
 * (`nulRefusal`), and, on the gateway's own API (its un-enveloped answers too), a query parameter on a
 * route that takes none, named as a body's unexpected field is (`Invalid query: foo: is unexpected`),
 * as routes that take a query refuse one they do not know. The OpenAI, Anthropic and avatar APIs keep
 * their leniency, and so do the probes (`ignoresQuery`).
 */
export const pathAndQueryRefusal = (
  route: { readonly envelope: Envelope; readonly takesQuery: boolean },
  params: Readonly<Record<string, string | undefined>>,
  query: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
): BadRequest | undefined => {
  const nul = nulRefusal(params, query)
  if (nul !== undefined || (route.envelope !== "gateway" && route.envelope !== "none") || route.takesQuery) return nul
  const unexpected = Object.keys(query)[0]
  return unexpected === undefined ? undefined : new BadRequest({ message: `Invalid query: ${cutText(unexpected, 100)}: is unexpected` })
}

/**
 * The rate-limit headers of a request no route takes (404, 405): its caller's day as it stands when its
 * credentials name one, else none. Bad or stale credentials are not refused here: the answer is the
 * route's absence either way.
 */
export const unroutedHeaders = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.flatMap(Auth, (auth) => auth.resolve(credentialsOf(request.headers))).pipe(
    Effect.orElseSucceed(() => Option.none<AvatarRecord>()),
    Effect.flatMap(Option.match({ onNone: () => Effect.succeed({}), onSome: (caller) => refusalHeaders(undefined, caller) }))
  )

/** An avatar's rate-limit headers, its day as it stands now. */
export const dayHeaders = (avatar: AvatarRecord) => Effect.flatMap(Quota, (quota) => Effect.map(Effect.promise(() => quota.peek(avatar)), headersOf))

/** The rate-limit headers of a refusal: the admission's, else the charged avatar's day as it stands, else none (no caller). */
const refusalHeaders = (admitted: Record<string, string> | undefined, charged: AvatarRecord | undefined) =>
  admitted !== undefined || charged === undefined ? Effect.succeed(admitted ?? {}) : dayHeaders(charged)

const make = <B, Q, R>(
  spec: Common<B, Q> & {
    readonly avatarIdOf?: ((body: B) => string | undefined) | undefined
    readonly meteredCalls?: ((body: B) => number) | undefined
    readonly check?: ((input: any) => Effect.Effect<unknown, GatewayError, R>) | undefined
    readonly lane?: Lane<B> | undefined
  },
  auth: "required" | "optional",
  metered: boolean,
  handle: (input: any) => Effect.Effect<Output, GatewayError, R>
): Route<R> => {
  const envelope = spec.envelope ?? "gateway"
  // Decoders built once per route, not per request.
  const options = envelope === "gateway" ? strictParseOptions : parseOptions
  const decodeQuery = spec.query ? decoderNow(spec.query, "query", options) : undefined
  const decodeBody = spec.body && !spec.rawBody ? decoderNow(spec.body, "request body", options) : undefined
  const meteredCalls = (body: B) => (spec.meteredCalls ? spec.meteredCalls(body) : 1)
  const run = Effect.suspend(() => {
    // Rate-limit headers go on every answer to an authenticated caller, errors included: those of
    // its admission, or for a refusal before it, the day's as they stand for the avatar charged.
    const out: { headers: Record<string, string> | undefined; charged: AvatarRecord | undefined } = { headers: undefined, charged: undefined }
    return Effect.gen(function*() {
      // The metrics label of the request: this route's template, never the raw path.
      yield* markRoute(spec.path)
      const request = yield* HttpServerRequest.HttpServerRequest
      const authService = yield* Auth
      const quota = yield* Quota
      const credentials = credentialsOf(request.headers)
      const callerNow = auth === "required"
        ? Effect.map(authService.require(credentials), Option.some)
        // Open endpoints ignore stale or foreign credentials instead of refusing the call.
        : authService.resolve(credentials).pipe(Effect.orElseSucceed(() => Option.none<AvatarRecord>()))
      let caller = yield* callerNow
      if (Option.isSome(caller)) out.charged = caller.value
      const checkedAt = performance.now()
      const searchParams = yield* HttpServerRequest.ParsedSearchParams
      const { params } = yield* HttpRouter.RouteContext
      const refused = pathAndQueryRefusal({ envelope, takesQuery: spec.query !== undefined || spec.ignoresQuery === true }, params, searchParams)
      if (refused !== undefined) return yield* Effect.fail(refused)
      const query = decodeQuery ? yield* asEffect(decodeQuery(searchParams)) : (undefined as Q)
      const body = decodeBody ? yield* Effect.flatMap(readJson, (j) => asEffect(decodeBody(j))) : (undefined as B)
      const form = spec.rawBody ? yield* readForm : undefined
      if (Option.isSome(caller) && bodyTookLong(checkedAt)) caller = yield* callerNow
      let avatar: AvatarRecord | undefined
      if (Option.isSome(caller)) {
        avatar = spec.avatarIdOf ? yield* authService.actingAs(caller.value, spec.avatarIdOf(body)) : caller.value
        out.charged = avatar
      }
      /** Admission, then the handler, given what the check answered. */
      const admittedAndHandled = (checked: unknown) =>
        Effect.gen(function*() {
          let state: QuotaState | undefined
          if (avatar !== undefined) {
            const charged = avatar
            state = metered
              ? yield* admitted((gone) => quota.admit(charged, meteredCalls(body), gone))
              : yield* Effect.promise(() => quota.peek(charged))
            out.headers = headersOf(state)
          }
          return yield* handle({
            body,
            query,
            params,
            request,
            form,
            caller: auth === "required" ? Option.getOrThrow(caller) : caller,
            avatar,
            quota: state,
            checked
          })
        })
      // Validation before admission: a refused request costs no quota. What the check holds (`Held`) is
      // released whatever follows, an interruption between the two included.
      const output = yield* (avatar !== undefined && spec.check
        ? Effect.acquireUseRelease(
          spec.check({ body, query, params, request, form, caller: Option.getOrThrow(caller), avatar }),
          admittedAndHandled,
          (checked) => (isHeld(checked) ? checked.release : Effect.void)
        )
        : admittedAndHandled(undefined))
      return respond(envelope, output, out.headers ?? {})
    }).pipe(
      Effect.catchIf(isGatewayError, (e) =>
        Effect.map(refusalHeaders(out.headers, out.charged), (headers) => errorResponse(envelope, e, headers))),
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
    decode: decodeBody,
    avatarIdOf: spec.avatarIdOf,
    meteredCalls,
    lane: spec.lane,
    run
  }
}

/** An endpoint that needs credentials (401 without). */
export const authed = <B = undefined, Q = undefined, R = never, RC = never, C = void>(spec: AuthedSpec<B, Q, R, RC, C>): Route<R | RC> =>
  make<B, Q, R | RC>(spec, "required", spec.metered ?? false, spec.handle)

/** An endpoint open to everyone; credentials, when sent, are still checked. */
export const open = <B = undefined, Q = undefined, R = never>(spec: PublicSpec<B, Q, R>): Route<R> =>
  make(spec, "optional", false, spec.handle)
