/**
 * The Lambda host: configuration -> core layers -> the core HTTP application, built once per
 * container and reused by every invocation, behind the buffered, streamed, migrate and scheduled
 * entry points. Events.ts maps events to requests, Streaming.ts streams responses; the host
 * package (hosts/lambda) only picks the drainers and exports the handlers.
 *
 * Cold start: the first invocation reads the configuration (environment, or the AIGW_CONFIG file),
 * checks what Lambda needs (a PostgreSQL DATABASE_URL, a fixed JWT key, an up-to-date schema)
 * and builds the layers. A failure is logged with its cause and answered with a 503 envelope
 * "gateway failed to start: …"; it is not cached, so the next invocation tries again (a database
 * that was briefly unreachable does not poison the container).
 */
import * as PlatformHttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Config, ConfigProvider, type Context, Duration, Effect, Either, Exit, Layer, ManagedRuntime, Option } from "effect"
import { warnWithoutPublicUrl } from "../Config.ts"
import * as ConfigFile from "../ConfigFile.ts"
import * as HttpApp from "../Http/App.ts"
import { RequestDeadline, stopBefore } from "../Http/RequestDeadline.ts"
import { unroutedHeaders } from "../Http/Route.ts"
import { BadRequest, Busy, type GatewayError, UpstreamFailed, UpstreamTimeout } from "../Errors.ts"
import { defectParts, envelopeOfPath, errorParts } from "../Http/Edge.ts"
import * as Layers from "../Layers.ts"
import * as Mcp from "../Mcp/Server.ts"
import * as Exporters from "../Observability/Exporters.ts"
import { RATE_LIMIT_HEADERS } from "../Quota.ts"
import * as RequestId from "../RequestId.ts"
import { knownStartupReason, redactUrls, StartupError } from "../StartupError.ts"
import * as Database from "../Storage/Database.ts"
import { migrate as runMigrations, migrations } from "../Storage/Sql/Migrations.ts"
import { BadEvent, classify, headersOf, type HttpResult, routedPath, toRequest, toResult, UnroutablePath } from "./Events.ts"
import { type ResponseStream, streamResponse } from "./Streaming.ts"

/** The Lambda context fields the host reads. */
export interface LambdaContext {
  readonly getRemainingTimeInMillis?: () => number
  readonly awsRequestId?: string
}

/**
 * What the runtime provides to the application and to drainers: the core services plus the MCP
 * endpoint (/mcp), as on the node host. The API key cache is off unless AIGW_KEY_CACHE_SECONDS
 * asks for it: a frozen instance may read a revocation's notification only after the next call.
 */
const gatewayLayer = (options: { readonly migrate: boolean }) =>
  Mcp.layerHttp.pipe(Layer.provideMerge(Layers.layerFromEnv({ ...options, keyCacheSeconds: 0 })))
type GatewayLayer = ReturnType<typeof gatewayLayer>
export type GatewayServices = Layer.Layer.Success<GatewayLayer>

/**
 * Background work run by the scheduled handler: gets the wall-clock deadline (epoch ms) by which it
 * must stop claiming new work, and returns when it is done or out of time.
 */
export interface Drainer {
  readonly name: string
  readonly drain: (deadlineMs: number) => Effect.Effect<unknown, unknown, GatewayServices>
}

export interface HostOptions {
  /** Configuration variables to use instead of process.env and AIGW_CONFIG (tests). */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** Background work for the scheduled handler. */
  readonly drainers?: ReadonlyArray<Drainer>
  /** Time kept free at the end of a scheduled invocation, ms. Default: 10 s or 20 % of the budget. */
  readonly drainMarginMs?: number
  /**
   * The Node-API version the deployed native modules need (the bundle's prebuilt argon2: 10, Node
   * 22.14+). Checked before anything loads them: an older runtime is a clear start-up failure
   * naming the runtime to choose, not a crash. `ARGON2_PREBUILD` (a locally compiled argon2) skips it.
   */
  readonly nodeApi?: number
}

/** The start-up failure of a runtime older than the native modules need, if it is. */
export const runtimeProblem = (needed: number | undefined, versions: NodeJS.ProcessVersions = process.versions, env = process.env) =>
  needed !== undefined && Number(versions.napi) < needed && !env.ARGON2_PREBUILD
    ? new StartupError({
      message: `this Lambda bundle needs Node.js 22.14 or newer (Lambda runtime nodejs22.x): its argon2 binaries need Node-API ${needed}, and this is Node.js ${versions.node} (Node-API ${versions.napi})`
    })
    : undefined

/** The longest an invocation waits for the usage exporters to send their queue (Observability/Exporters.ts). */
const EXPORT_FLUSH_MS = 2_000

/**
 * Time kept at the end of an invocation for its answer: a request still unanswered then is cut off
 * and answered 504, in its envelope. Past the function's timeout Lambda would end the invocation
 * itself: the client would get API Gateway's own bare error body (or a stream cut without its end),
 * and the next invocation a cold start.
 */
export const ANSWER_MARGIN_MS = 1_000

const TIME_UP = Symbol("time up")

/**
 * The largest result a buffered invocation may return (its JSON, body included): Lambda refuses a
 * larger one, and API Gateway then answers its own bare 502.
 */
export const BUFFERED_RESULT_LIMIT = 6 * 1024 * 1024

/**
 * The result's size as Lambda counts it (its JSON in UTF-8) when it passes the limit, else undefined.
 * Serialised only when the body alone does not decide: a JSON string escape takes at most 6 bytes per
 * UTF-16 unit and headers are small, while every unit takes at least one byte (then the size given is
 * the body's, a lower bound: `atLeast`).
 */
const overLimit = (result: HttpResult): { readonly bytes: number; readonly atLeast: boolean } | undefined => {
  if (result.body.length * 6 + 65_536 <= BUFFERED_RESULT_LIMIT) return undefined
  if (result.body.length > BUFFERED_RESULT_LIMIT) return { bytes: result.body.length, atLeast: true }
  const bytes = Buffer.byteLength(JSON.stringify(result))
  return bytes > BUFFERED_RESULT_LIMIT ? { bytes, atLeast: false } : undefined
}

/** The error of an answer larger than a buffered invocation may return. */
const tooLarge = ({ atLeast, bytes }: { readonly bytes: number; readonly atLeast: boolean }) =>
  new UpstreamFailed({
    provider: "lambda",
    message: `The answer is ${atLeast ? "at least " : ""}${(bytes / 1e6).toFixed(1)} MB as this Lambda function's result, over the 6 MB (6,291,456 bytes) a buffered Lambda function may return. ` +
      "Use the streaming function (a Function URL with InvokeMode RESPONSE_STREAM, up to 200 MB), or ask for a smaller answer (fewer or smaller images, a URL instead of base64)."
  })

/**
 * One request's share of the invocation's time (the context's remaining time when it started;
 * undefined without one): the deadline its streams stop at (RequestDeadline.ts), and `within`,
 * which settles as the answer does or with TIME_UP at the cut. With less than twice the margin left
 * the cut is halfway: every request cut at once would serve none.
 */
const invocationTime = (context: LambdaContext | undefined, streaming: boolean) => {
  const remaining = context?.getRemainingTimeInMillis?.()
  if (remaining === undefined) return undefined
  const cutMs = Math.max(remaining - ANSWER_MARGIN_MS, remaining / 2)
  const message = `The request did not finish within this Lambda function's time (${Math.round(remaining / 1000)} s left when it started). ` +
    (streaming
      ? "Raise the function's Timeout."
      : "Raise the function's Timeout (and the API Gateway integration's), or use the streaming function for long answers.")
  return {
    deadline: RequestDeadline.context({ at: Date.now() + stopBefore(cutMs), message }),
    message,
    within: <A>(answer: Promise<A>): Promise<A | typeof TIME_UP> => orAfter(answer, cutMs, TIME_UP)
  }
}

/** `answer`, or `otherwise` once `ms` have passed first; the timer is cleared when either settles. */
const orAfter = <A, B>(answer: Promise<A>, ms: number, otherwise: B): Promise<A | B> => {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([answer, new Promise<B>((resolve) => (timer = setTimeout(() => resolve(otherwise), ms)))]).finally(() => clearTimeout(timer))
}

/** Lambda's only writable place; the file mailer and other data-dir users go there by default. */
const LAMBDA_DATA_DIR = "/tmp/aigw"

const configProvider = (options: HostOptions): ConfigProvider.ConfigProvider => {
  const base = options.env
    ? ConfigProvider.fromMap(new Map(Object.entries(options.env).filter((e): e is [string, string] => e[1] !== undefined)))
    : ConfigFile.providerFor(process.env.AIGW_CONFIG)
  return ConfigProvider.orElse(base, () => ConfigProvider.fromMap(new Map([["AIGW_DATA_DIR", LAMBDA_DATA_DIR], ["AIGW_TRUST_PROXY", "1"]])))
}

/**
 * One line saying why a cause failed, without credentials: a recognised start-up failure as the node
 * host words it (a bad value names its variable once), else the messages of the error and its causes.
 */
const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const known = knownStartupReason(cause)
  if (known !== undefined) return known
  const error = Cause.squash(cause)
  const parts: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 4 && current; depth++) {
    const message = current instanceof Error ? current.message : typeof current === "object" ? (current as any).message : String(current)
    if (typeof message === "string" && message && !parts.includes(message)) parts.push(message)
    current = typeof current === "object" ? (current as any).cause : undefined
  }
  return redactUrls(parts.join(": ") || "unknown error")
}

/** PostgreSQL only: the SQLite driver is not in the Lambda bundle. */
const databaseUrl = Effect.gen(function*() {
  const url = yield* Config.option(Config.string("DATABASE_URL"))
  if (Option.isNone(url) || url.value === "") {
    return yield* Effect.fail(new StartupError({ message: "DATABASE_URL is not set; the Lambda host needs PostgreSQL (postgres://…)" }))
  }
  if (!/^postgres(ql)?:\/\//.test(url.value)) {
    return yield* Effect.fail(
      new StartupError({ message: `DATABASE_URL must be a postgres:// or postgresql:// URL on Lambda (got "${url.value.split(":")[0]}:…"); SQLite is not bundled` })
    )
  }
  return url.value
})

/** Checks that only concern Lambda, before any layer is built. */
const preflight = (options: HostOptions) => Effect.gen(function*() {
  const outdated = runtimeProblem(options.nodeApi)
  if (outdated) return yield* Effect.fail(outdated)
  yield* databaseUrl
  const secret = yield* Config.option(Config.string("JWT_SECRET"))
  const key = yield* Config.option(Config.string("JWT_PRIVATE_KEY"))
  if (Option.isNone(Option.filter(secret, (s) => s !== "")) && Option.isNone(Option.filter(key, (s) => s !== ""))) {
    return yield* Effect.fail(
      new StartupError({ message: "JWT_SECRET or JWT_PRIVATE_KEY must be set on Lambda: a generated key would differ between containers" })
    )
  }
  yield* warnWithoutPublicUrl(false)
  const smtp = yield* Config.option(Config.string("SMTP_URL"))
  if (Option.isNone(smtp)) {
    yield* Effect.logWarning("SMTP_URL is not set: e-mails (with their one-time links) go to the log and /tmp, not to the recipients")
  }
})

const latestBundledMigration = Math.max(0, ...Object.keys(migrations).map((k) => Number(/^(\d+)_/.exec(k)?.[1] ?? 0)))

/** The schema must be migrated by the `migrate` function first; say so instead of failing each request. */
const schemaCheck = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ latest: number | string | null }>`SELECT max(migration_id) AS latest FROM aigw_migrations`.pipe(
    // 42P01 undefined_table: never migrated
    Effect.catchIf((e) => (e.cause as { code?: string } | undefined)?.code === "42P01", () => Effect.succeed([{ latest: null }]))
  )
  const latest = Number(rows[0]?.latest ?? 0)
  if (latest < latestBundledMigration) {
    return yield* Effect.fail(
      new StartupError({
        message:
          `the database schema is not up to date (at migration ${latest}, this build needs ${latestBundledMigration}): invoke the migrate function first`
      })
    )
  }
})

interface Built {
  readonly handle: (request: Request, context?: Context.Context<never>) => Promise<Response>
  readonly runtime: ManagedRuntime.ManagedRuntime<GatewayServices, never>
}

/** The methods the application's routes take on a path (HttpApp.methodsOn), for the answers made here. */
const allowedOn = HttpApp.methodsOn(HttpApp.routes)

/**
 * An answer made here, outside the application, as the application would make it: the body in the
 * envelope of the request's path (the gateway's when the event has none) and the request's id (the
 * caller's `x-request-id` when valid).
 */

const outsideAnswer = (
  { body, headers = {}, status }: { readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> },
  requestId: string | null | undefined,
  path: string | undefined
) => {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers, ...RequestId.answerHeaders(path, RequestId.fromHeader(requestId)) }
  })
}

/** The envelope of a request's path; the gateway's for an event that has none. */
const envelopeAt = (path: string | undefined) => (path === undefined ? "gateway" : envelopeOfPath(path))

/** A refusal of a request outside the application, in its path's envelope (with the caller's rate-limit headers, when known). */
const refusal = (path: string | undefined, error: GatewayError, requestId: string | null | undefined, day: Record<string, string> = {}) =>
  outsideAnswer(errorParts(envelopeAt(path), error, day), requestId, path)

/** The rate-limit headers of an answer the application made (for the answer that replaces it here). */
const dayOf = (headers: Headers): Record<string, string> => {
  const day: Record<string, string> = {}
  for (const name of RATE_LIMIT_HEADERS) {
    const value = headers.get(name)
    if (value !== null) day[name] = value
  }
  return day
}

/** How long the 504 of a cut-off request may wait for its caller's rate-limit headers (the database may be what is slow). */
const DAY_AT_CUT_MS = 250

/** The last resort of a failure outside the application, as the routes' (`defectParts`: its cause is logged, never sent). */
const defectAnswer = (path: string | undefined, failure: unknown, requestId: string | null | undefined) =>
  outsideAnswer(defectParts(envelopeAt(path), failure), requestId, path)

/** A failed start: 503, to be retried (the next invocation builds the runtime again). */
const unavailable = (path: string, message: string, requestId: string | null) =>
  refusal(path, new Busy({ message, retryAfterSeconds: 5 }), requestId)

const log = (effect: Effect.Effect<void>) => Effect.runSync(effect)

export const makeLambdaHost = (options: HostOptions = {}) => {
  // Read lazily: a bad AIGW_CONFIG file is a clear startup failure, not a module load crash.
  let provider: ConfigProvider.ConfigProvider | undefined
  const providerEffect = Effect.try({
    try: () => (provider ??= configProvider(options)),
    catch: (e) => new StartupError({ message: (e as Error).message })
  })
  const withConfig = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.flatMap(providerEffect, (p) => Effect.withConfigProvider(effect, p))
  let building: Promise<Built> | undefined

  const build = async (): Promise<Built> => {
    const started = Date.now()
    const checked = await Effect.runPromiseExit(withConfig(preflight(options)))
    if (Exit.isFailure(checked)) throw checked.cause
    const layer = gatewayLayer({ migrate: false }).pipe(Layer.provide(Layer.setConfigProvider(provider!)))
    const runtime = ManagedRuntime.make(layer)
    const ready = await Effect.runPromiseExit(
      Effect.gen(function*() {
        const rt = yield* runtime.runtimeEffect
        yield* Effect.provide(schemaCheck, rt)
        // The access log (opt-in, AIGW_LOG_REQUESTS) never includes query strings, which may hold one-time tokens.
        const app = yield* Effect.provide(withConfig(HttpApp.makeApp), rt)
        return PlatformHttpApp.toWebHandlerRuntime(rt)(app)
      })
    )
    if (Exit.isFailure(ready)) {
      await runtime.dispose().catch(() => undefined)
      throw ready.cause
    }
    log(Effect.logInfo(`aigw: runtime ready in ${Date.now() - started} ms`))
    return { handle: ready.value, runtime }
  }

  /** The container's runtime; a failed build is forgotten so that the next call retries. */
  const runtime = (): Promise<Built> => {
    building ??= build().catch((failure: unknown) => {
      building = undefined
      const cause = Cause.isCause(failure) ? failure : Cause.die(failure)
      log(Effect.logError("aigw: gateway failed to start", cause))
      throw new StartupError({ message: `gateway failed to start: ${reasonOf(cause)}` })
    })
    return building
  }

  /**
   * The rate-limit headers of the caller a request's headers name (none without credentials, and
   * then no runtime is built), which the application's own 404 and 405 carry (Route.ts
   * `unroutedHeaders`), for those answered here.
   */
  const callerHeaders = async (headers: Headers): Promise<Record<string, string>> => {
    if (!headers.has("authorization") && !headers.has("x-api-key")) return {}
    try {
      const built = await runtime()
      const request = HttpServerRequest.fromWeb(new Request("https://lambda.invalid/", { headers }))
      return await built.runtime.runPromise(unroutedHeaders(request))
    } catch {
      return {}
    }
  }

  /** Serves one request (with its deadline, when the invocation has one); never rejects. */
  const serve = async (request: Request, path: string, deadline?: Context.Context<never>): Promise<Response> => {
    let built: Built
    try {
      built = await runtime()
    } catch (e) {
      return unavailable(path, (e as Error).message, request.headers.get(RequestId.HEADER))
    }
    // A request cut off while the runtime was being built is not started: its abort has passed.
    if (request.signal.aborted) return refusal(path, new Busy({ message: "The request was cut off before it started.", retryAfterSeconds: 1 }), request.headers.get(RequestId.HEADER))
    try {
      return await built.handle(request, deadline)
    } catch (e) {
      log(Effect.logError("aigw: request failed outside the application", Cause.die(e)))
      return defectAnswer(path, e, request.headers.get(RequestId.HEADER))
    }
  }

  /**
   * Sends the queued usage events (Observability/Exporters.ts) before the invocation returns: Lambda
   * freezes the container afterwards, so the exporters' interval cannot be relied on. Bounded by
   * EXPORT_FLUSH_MS and the invocation's remaining time; never fails the invocation.
   */
  const flushExports = async (context: LambdaContext | undefined) => {
    const built = await building?.catch(() => undefined)
    if (built === undefined) return
    const remaining = context?.getRemainingTimeInMillis?.() ?? EXPORT_FLUSH_MS * 2
    const deadline = Date.now() + Math.max(0, Math.min(EXPORT_FLUSH_MS, remaining - EXPORT_FLUSH_MS))
    await built.runtime.runPromise(Exporters.flushUntil(deadline)).catch(() => undefined)
  }

  /**
   * Event -> Response (400 envelope for an event that is not an HTTP request). The response is
   * answered as soon as it is known, with `format` and `path`; `served` settles when it is.
   */
  const respond = (input: unknown, signal?: AbortSignal, deadline?: Context.Context<never>): {
    readonly format: "v1" | "v2"
    readonly path?: string
    readonly requestId: string | null
    /** The request's headers, when the event was one the application serves. */
    readonly headers?: Headers
    readonly served: Promise<Response>
  } => {
    const http = classify(input)
    if (Either.isLeft(http)) {
      log(Effect.logWarning(`aigw: bad event: ${http.left.message}`))
      // Answered in the envelope of the path it names, with the caller's id, as a request the host could read.
      const { format = "v2", path, requestId = null } = http.left.traits ?? {}
      const bad = new BadRequest({ message: `Bad Lambda event: ${http.left.message}` })
      return { format, ...(path !== undefined ? { path } : {}), requestId, served: Promise.resolve(refusal(path, bad, requestId)) }
    }
    const { format } = http.right
    const path = routedPath(http.right)
    let request: Request
    try {
      request = toRequest(http.right, signal)
    } catch (e) {
      const requestId = headersOf(http.right).get(RequestId.HEADER)
      if (e instanceof UnroutablePath) {
        // A method a web Request cannot carry, on a served path: 405 with Allow, as the node host answers it.
        const allowed = e.onlyTheMethod ? allowedOn(e.path) : []
        const answer: { readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> } = allowed.length > 0
          ? HttpApp.methodNotAllowed(e.method, e.path, allowed)
          : { status: 404, body: HttpApp.notFoundBody(e.method, e.path) }
        const served = callerHeaders(headersOf(http.right)).then((headers) => outsideAnswer({ ...answer, headers: { ...headers, ...answer.headers } }, requestId, path))
        return { format, path, requestId, served }
      }
      const message = e instanceof BadEvent ? e.message : String(e)
      log(Effect.logWarning(`aigw: bad event: ${message}`))
      return { format, path, requestId, served: Promise.resolve(refusal(path, new BadRequest({ message: `Bad Lambda event: ${message}` }), requestId)) }
    }
    // The id settled here, so that an answer made outside the application (the 504) carries the one the application logs.
    const requestId = RequestId.fromHeader(request.headers.get(RequestId.HEADER))
    request.headers.set(RequestId.HEADER, requestId)
    return { format, path, requestId, headers: request.headers, served: serve(request, path, deadline) }
  }

  /**
   * The 504 of a request cut off by the invocation's time: the request is aborted (its upstream call
   * with it). A call admitted before the cut is counted, so the answer carries its caller's day as
   * the application's answers do, unless reading it takes longer than DAY_AT_CUT_MS.
   */
  const cutOff = async (abort: AbortController, path: string | undefined, requestId: string | null, headers: Headers | undefined, message: string) => {
    abort.abort()
    log(Effect.logWarning(`aigw: ${path ?? "request"} did not finish within the invocation's time; answered 504`))
    const day = headers === undefined ? {} : await orAfter(callerHeaders(headers), DAY_AT_CUT_MS, {})
    return refusal(path, new UpstreamTimeout({ provider: "lambda", message }), requestId, day)
  }

  /**
   * Buffered invocation (API Gateway HTTP API 2.0 / REST API 1.0 / Function URL BUFFERED): the whole
   * response, SSE streams included, in one result. A stream still running shortly before the
   * invocation's time ends is ended with its error chunk (and answered with what it sent); a request
   * still unanswered `ANSWER_MARGIN_MS` before then is cut off and answered 504.
   */
  const handler = async (event: unknown, context?: LambdaContext): Promise<HttpResult> => {
    const abort = new AbortController()
    const time = invocationTime(context, false)
    const { format, headers, path, requestId, served } = respond(event, abort.signal, time?.deadline)
    const whole = served.then(async (response) => {
      try {
        const result = await toResult(format, response)
        const over = overLimit(result)
        if (over === undefined) return result
        log(Effect.logWarning(`aigw: ${path ?? "request"} answered ${over.atLeast ? "at least " : ""}${over.bytes} bytes, over a buffered result's limit; answered 502`))
        // The call was made and counted: its answer's rate-limit headers stay.
        return await toResult(format, refusal(path, tooLarge(over), response.headers.get(RequestId.HEADER), dayOf(response.headers)))
      } catch (e) {
        if (abort.signal.aborted) throw e
        log(Effect.logError("aigw: response body failed", Cause.die(e)))
        return toResult(format, defectAnswer(path, e, response.headers.get(RequestId.HEADER)))
      }
    })
    try {
      if (time === undefined) return await whole
      // The abandoned answer's failure, if it fails once aborted, is expected: nothing waits for it.
      whole.catch(() => undefined)
      const first = await time.within(whole)
      return first !== TIME_UP ? first : await toResult(format, await cutOff(abort, path, requestId, headers, time.message))
    } finally {
      await flushExports(context)
    }
  }

  /**
   * Streamed invocation (Function URL with InvokeMode RESPONSE_STREAM): status and headers go first
   * as the HTTP integration prelude, then the body as it is produced. A client that goes away
   * aborts the request, which interrupts the upstream call. As in `handler`, a request whose
   * status is still unknown at the cut is answered 504, and a stream still running shortly before
   * it ends with its error chunk.
   */
  const streamingHandler = async (event: unknown, responseStream: ResponseStream, context?: LambdaContext): Promise<void> => {
    const abort = new AbortController()
    const time = invocationTime(context, true)
    const { headers, path, requestId, served } = respond(event, abort.signal, time?.deadline)
    try {
      const head = time === undefined ? await served : await time.within(served)
      if (head === TIME_UP) {
        // An answer that comes after the cut is not read: its body (a stream) is cancelled, which ends its upstream call.
        void served.then((late) => late.body?.cancel().catch(() => undefined))
        await streamResponse(responseStream, await cutOff(abort, path, requestId, headers, time!.message), abort)
      } else {
        await streamResponse(responseStream, head, abort)
      }
    } finally {
      await flushExports(context)
    }
  }

  /** Runs every pending migration (a separate function: never on a gateway cold start). */
  const migrate = async (_event?: unknown, _context?: LambdaContext) => {
    const exit = await Effect.runPromiseExit(
      withConfig(
        Effect.gen(function*() {
          const url = yield* databaseUrl
          const applied = yield* Effect.provide(runMigrations, Database.layerClient(url, { maxConnections: 1 }))
          return applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`)
        })
      )
    )
    if (Exit.isFailure(exit)) {
      log(Effect.logError("aigw: migration failed", exit.cause))
      throw new Error(`migration failed: ${reasonOf(exit.cause)}`)
    }
    log(Effect.logInfo(`aigw: migrations applied: ${exit.value.length === 0 ? "none pending" : exit.value.join(", ")}`))
    return { applied: exit.value, latest: latestBundledMigration }
  }

  /**
   * EventBridge schedule: runs each drainer until the deadline (the invocation's remaining time
   * minus a margin). Lambda freezes a container between invocations, so background work (job
   * polling, webhook delivery) advances here instead of in fibers. Throws when a drainer failed so
   * that the invocation counts as an error in CloudWatch.
   */
  const scheduled = async (_event?: unknown, context?: LambdaContext) => {
    const budget = context?.getRemainingTimeInMillis?.() ?? 60_000
    const margin = options.drainMarginMs ?? Math.min(10_000, Math.floor(budget * 0.2))
    const deadlineMs = Date.now() + Math.max(0, budget - margin)
    const built = await runtime()
    const results: Array<{ name: string; ok: boolean; ms: number; skipped?: boolean; cutOff?: boolean; result?: unknown; error?: string }> = []
    for (const drainer of options.drainers ?? []) {
      const started = Date.now()
      if (started >= deadlineMs) {
        results.push({ name: drainer.name, ok: true, ms: 0, skipped: true })
        continue
      }
      // Cut off at the deadline: a step still running is interrupted, and puts its job (or delivery) back due now.
      const bounded = Effect.timeoutOption(drainer.drain(deadlineMs), Duration.millis(deadlineMs - started))
      const exit = await built.runtime.runPromiseExit(bounded)
      if (Exit.isSuccess(exit)) {
        const result = Option.getOrUndefined(exit.value)
        results.push({
          name: drainer.name,
          ok: true,
          ms: Date.now() - started,
          ...(Option.isNone(exit.value) ? { cutOff: true } : result === undefined ? {} : { result })
        })
      } else {
        log(Effect.logError(`aigw: drainer ${drainer.name} failed`, exit.cause))
        results.push({ name: drainer.name, ok: false, ms: Date.now() - started, error: reasonOf(exit.cause) })
      }
    }
    const summary = { deadline: new Date(deadlineMs).toISOString(), drainers: results }
    log(Effect.logInfo(`aigw: scheduled run ${JSON.stringify(summary)}`))
    const failed = results.filter((r) => !r.ok)
    if (failed.length > 0) throw new Error(`drainers failed: ${failed.map((r) => `${r.name} (${r.error})`).join("; ")}`)
    return summary
  }

  /** Builds the runtime ahead of the first request (Lambda's init phase); true when it is ready. */
  const warm = (): Promise<boolean> => runtime().then(() => true, () => false)

  /** Releases the runtime (database pool); the next invocation builds a new one. */
  const dispose = async () => {
    const current = building
    building = undefined
    if (!current) return
    const built = await current.catch(() => undefined)
    await built?.runtime.dispose()
  }

  return { handler, streamingHandler, migrate, scheduled, warm, dispose }
}

export type LambdaHost = ReturnType<typeof makeLambdaHost>
