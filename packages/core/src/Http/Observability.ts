/**
 * Observability at the HTTP edge (docs/observability.md), shared by the Effect app (App.ts) and the
 * fast lane (FastLane.ts):
 *
 * - the request id (RequestId.ts): read or generated, answered as `x-request-id`, annotated on every
 *   log line of the request, and held in `RequestId.CurrentRequest` for upstream calls;
 * - request metrics (Metrics.ts): `aigw_http_requests_total` and the duration histogram, labelled by
 *   the route's path template (set by Route.ts when a route matched; fixed names for the few
 *   non-Route endpoints; `unmatched` otherwise: a raw path never becomes a label);
 * - the access log (`AIGW_LOG_REQUESTS=true`): one line per request with the request id;
 * - `GET /metrics`: the registry in the Prometheus text format, with the job and webhook backlogs
 *   read from storage on scrape.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Headers from "@effect/platform/Headers"
import * as HttpTraceContext from "@effect/platform/HttpTraceContext"
import { Config, Context, Effect, type Exit, FiberRef, Option } from "effect"
import * as Metrics from "../Metrics.ts"
import { redactedUrl } from "../RedactedUrl.ts"
import * as RequestId from "../RequestId.ts"
import { credentialsOf, presented, presentedKey, type RequestHeaders, webHeaders } from "./Edge.ts"

export const METRICS_PATH = "/metrics"

/** Endpoints served outside Route.ts, labelled by their own (fixed) path. */
const FIXED_ROUTES = new Set(["/openapi.json", "/docs", "/mcp", "/.well-known/mcp.json", "/.well-known/agent.json", METRICS_PATH])

/** The label of a request no Route.ts route matched. */
export const UNMATCHED = "unmatched"

const pathOf = (url: string) => {
  const q = url.indexOf("?")
  return q === -1 ? url : url.slice(0, q)
}

/** `AIGW_METRICS` (default true) and `AIGW_LOG_REQUESTS` (default false). */
export const options = Effect.all({
  metrics: Config.boolean("AIGW_METRICS").pipe(Config.withDefault(true)),
  logRequests: Config.boolean("AIGW_LOG_REQUESTS").pipe(Config.withDefault(false))
})

/** The access log line of a request, with its fields as annotations (JSON logs get them as keys). */
export const accessLogLine = (requestId: string, method: string, path: string, route: string, status: number, ms: number) =>
  Effect.logInfo(`${method} ${path} ${status} ${ms.toFixed(1)}ms`).pipe(
    Effect.annotateLogs({ requestId, method, route, status, durationMs: Math.round(ms * 10) / 10 })
  )

/** Runs `effect` as part of the request `info`: its id for upstream calls, and on every log line. */
export const asRequest = (info: RequestId.RequestInfo) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  effect.pipe(Effect.locally(RequestId.CurrentRequest, info), Effect.annotateLogs("requestId", info.id))

/** What the fast lane knows of a request: node's IncomingMessage, or anything shaped like it. */
export interface LaneRequest {
  readonly method?: string | undefined
  readonly url?: string | undefined
  readonly headers: RequestHeaders
  readonly socket?: { readonly remoteAddress?: string | undefined } | undefined
}

/**
 * Headers whose values a span carries: those that describe a request and hold nothing of a caller's
 * (content type and length, user agent, the ids of the request and its trace, the API version
 * headers of the surfaces). Every other header's value is redacted, whatever its name: a list of the
 * names that hold credentials missed some (`cf-access-jwt-assertion`, `dpop`, a `referer` carrying a
 * reset link's token). Set for every server span by the tracing layers (Tracing.ts) and read by the
 * platform's tracer and `asServerSpan` alike.
 */
const SHOWN_HEADERS = [
  "accept",
  "accept-encoding",
  "accept-language",
  "anthropic-beta",
  "anthropic-version",
  "cache-control",
  "connection",
  "content-encoding",
  "content-length",
  "content-type",
  "expect",
  "host",
  "openai-beta",
  "traceparent",
  "tracestate",
  "transfer-encoding",
  "user-agent",
  "x-forwarded-proto",
  "x-request-id"
]
export const REDACTED_HEADERS: ReadonlyArray<string | RegExp> = [new RegExp(`^(?!(?:${SHOWN_HEADERS.join("|")})$)`, "i")]

/**
 * A request URL as spans carry it (RedactedUrl.ts: query values and credentials `REDACTED`). The
 * platform's tracer sets `url.full` and `url.query` with the values; these attributes, set after it,
 * replace them.
 */
export const spanUrlAttributes = (url: URL): Record<string, string> => {
  const shown = redactedUrl(url)
  const query = shown.search.slice(1)
  return {
    "url.full": shown.toString(),
    "url.path": shown.pathname,
    ...(query !== "" ? { "url.query": query } : {}),
    "url.scheme": shown.protocol.slice(0, -1)
  }
}

/** A rebuilt request keeps only its path and query (as `request.url` on the node server); its URL's host is the Host header's. */
const SPAN_BASE = "http://aigw.internal"

/**
 * The server span of a request the fast lane serves with the route's own Effects (Lane.onLane), as
 * the platform's HTTP tracer middleware opens it for the Effect app (the middleware itself is not
 * public): over the request rebuilt as a platform request (method, path and query, headers, client
 * address; no body), it is skipped where the embedder's `HttpMiddleware.withTracerDisabledWhen`
 * predicate says so, named by `HttpMiddleware.SpanNameGenerator`, parented by the caller's trace
 * context, and carries the same attributes (URL, method, user agent, headers with credentials
 * redacted, client address, the answer's status), so the handler's spans keep their root. A no-op
 * when tracing is off: the request is rebuilt only when spans are on.
 */
export const asServerSpan = (request: LaneRequest, statusOf: (exit: Exit.Exit<unknown, unknown>) => number) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) => {
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return effect
    const rebuilt = HttpServerRequest.fromWeb(
      new Request(new URL(request.url ?? "/", SPAN_BASE), { method: request.method ?? "POST", headers: webHeaders(request.headers) })
    )
    const address = request.socket?.remoteAddress
    const platformRequest = address === undefined ? rebuilt : rebuilt.modify({ remoteAddress: address })
    if (fiber.getFiberRef(HttpMiddleware.currentTracerDisabledWhen)(platformRequest)) return effect
    const name = Context.get(fiber.currentContext, HttpMiddleware.SpanNameGenerator)(platformRequest)
    const headers = platformRequest.headers
    return Effect.useSpan(name, { parent: Option.getOrUndefined(HttpTraceContext.fromHeaders(headers)), kind: "server", captureStackTrace: false }, (span) => {
      span.attribute("http.request.method", platformRequest.method)
      const url = Option.getOrUndefined(HttpServerRequest.toURL(platformRequest))
      if (url !== undefined) for (const [name, value] of Object.entries(spanUrlAttributes(url))) span.attribute(name, value)
      if (headers["user-agent"] !== undefined) span.attribute("user_agent.original", headers["user-agent"])
      const redacted = Headers.redact(headers, fiber.getFiberRef(Headers.currentRedactedNames))
      for (const name in redacted) span.attribute(`http.request.header.${name}`, String(redacted[name]))
      if (address !== undefined) span.attribute("client.address", address)
      return Effect.onExit(Effect.withParentSpan(effect, span), (exit) => Effect.sync(() => span.attribute("http.response.status_code", statusOf(exit))))
    })
  })

/** Marks the route template of the request in flight (Route.ts, for the metrics label). */
export const markRoute = (template: string) =>
  Effect.map(FiberRef.get(RequestId.CurrentRequest), (info) => {
    if (info !== undefined) info.route = template
  })

/**
 * The edge middleware of the Effect app: request id in and out, log annotation, metrics, and the
 * access log when `logRequests`.
 */
export const middleware = (settings: { readonly metrics: boolean; readonly logRequests: boolean }) =>
  HttpMiddleware.make((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const started = performance.now()
      const path = pathOf(request.url)
      const info: RequestId.RequestInfo = {
        id: RequestId.fromHeader(request.headers[RequestId.HEADER]),
        route: FIXED_ROUTES.has(path) ? path : UNMATCHED,
        apiKey: presentedKey(presented(credentialsOf(request.headers)))
      }
      const counted = (status: number) => {
        const ms = performance.now() - started
        if (settings.metrics) Metrics.recordRequest(info.route, request.method, status, ms / 1000)
        return settings.logRequests ? accessLogLine(info.id, request.method, path, info.route, status, ms) : Effect.void
      }
      // The platform's server span (its tracer runs outside this middleware) carries the URL's query values: replaced.
      const span = yield* Effect.option(Effect.currentSpan)
      if (Option.isSome(span) && span.value.kind === "server") {
        const url = Option.getOrUndefined(HttpServerRequest.toURL(request))
        if (url !== undefined) for (const [name, value] of Object.entries(spanUrlAttributes(url))) span.value.attribute(name, value)
      }
      // A client that leaves interrupts the request: it is counted and logged as 499, as the platform's span has it.
      const response = yield* Effect.onInterrupt(asRequest(info)(app), () => counted(499))
      yield* counted(response.status)
      const answered = HttpServerResponse.setHeader(response, RequestId.HEADER, info.id)
      const surface = RequestId.surfaceHeader(path)
      return surface === undefined ? answered : HttpServerResponse.setHeader(answered, surface, info.id)
    })
  )

/** Job and webhook backlogs, read from the SQL store when there is one (memory stores: not reported). */
const readBacklogs = Effect.gen(function*() {
  const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
  if (Option.isNone(sql)) return
  const count = (rows: ReadonlyArray<{ readonly n: unknown }>) => Number(rows[0]?.n ?? 0)
  const jobs = yield* sql.value<{ n: unknown }>`SELECT COUNT(*) AS n FROM jobs WHERE status IN ('queued', 'running')`
  const hooks = yield* sql.value<{ n: unknown }>`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'pending'`
  Metrics.jobsBacklog.set(count(jobs))
  Metrics.webhooksBacklog.set(count(hooks))
}).pipe(
  Effect.catchAllCause((cause) =>
    Effect.zipRight(
      Effect.sync(() => {
        Metrics.jobsBacklog.clear()
        Metrics.webhooksBacklog.clear()
      }),
      Effect.logWarning("metrics: the backlogs could not be read", cause)
    )
  )
)

/** `GET /metrics`: the process's metrics in the text exposition format 0.0.4. */
export const metricsResponse = Effect.map(readBacklogs, () =>
  HttpServerResponse.text(Metrics.registry.render(), { contentType: Metrics.CONTENT_TYPE }))
