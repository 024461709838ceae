/**
 * The HTTP application: every route of the gateway and the avatar API on one router, plus
 * /openapi.json, /docs, and envelope answers for unknown routes. Hosts serve this as it is.
 */
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option } from "effect"
import { GatewayConfig } from "../Config.ts"
import type { CoreServices } from "../Layers.ts"
import { agentCard, MCP_PATH, serverCard } from "../Mcp/Discovery.ts"
import { McpHttpApp } from "../Mcp/Server.ts"
import { anthropicRoutes } from "./AnthropicRoutes.ts"
import { avatarRoutes } from "./AvatarRoutes.ts"
import { gatewayRoutes } from "./GatewayRoutes.ts"
import { docsPage, openApiDocument } from "./OpenApi.ts"
import * as Observability from "./Observability.ts"
import * as Pages from "./Pages.ts"
import { BadRequest, NotFound } from "../Errors.ts"
import { envelopeOfPath, errorBody, errorParts, validHost } from "./Edge.ts"
import { type Route, unroutedHeaders } from "./Route.ts"

export const routes: ReadonlyArray<Route> = [...gatewayRoutes, ...avatarRoutes, ...anthropicRoutes]

/** The 404 body, in its path's envelope, of a request no route serves (also the Lambda host's for a path it cannot route as sent). */
export const notFoundBody = (method: string, path: string): unknown =>
  errorBody(envelopeOfPath(path), new NotFound({ message: `No route for ${method} ${path}.` }))

/** A request's path, without its query: the envelope and the messages name it. */
const pathOf = (request: HttpServerRequest.HttpServerRequest) => request.url.split("?")[0] ?? "/"

/** A 404 in the path's envelope (with the caller's rate-limit headers, as every answer to a caller has). */
const notFound = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
  Effect.map(unroutedHeaders(request), (headers) =>
    HttpServerResponse.unsafeJson(notFoundBody(request.method, pathOf(request)), { status: 404, headers })))

/** A path pattern of the router (`:name` one segment, `*` the rest) as a test of a request's path, and how general it is. */
const matcherOf = (pattern: string): { readonly matches: (path: string) => boolean; readonly generality: number } => {
  const parts = pattern.split("/")
  const segments = parts.map((s) => (s === "*" ? ".*" : s.startsWith(":") ? "[^/]+" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
  const re = new RegExp(`^${segments.join("/")}$`)
  return { matches: (path) => re.test(path), generality: parts.filter((s) => s === "*" || s.startsWith(":")).length }
}

/**
 * The methods `served` takes on a path: none when no route has it. Of the patterns that match, the
 * most specific decide, as in the router (`/api/avatar/verify-email` is not `/api/avatar/:id`). The
 * patterns are compiled on the first question.
 */
export const methodsOn = (served: ReadonlyArray<{ readonly method: string; readonly path: string }>) => {
  let patterns: ReadonlyArray<{ readonly method: string; readonly matches: (path: string) => boolean; readonly generality: number }> | undefined
  return (path: string): ReadonlyArray<string> => {
    patterns ??= served.map((r) => ({ method: r.method, ...matcherOf(r.path) }))
    const matching = patterns.filter((p) => p.matches(path))
    const specific = Math.min(...matching.map((p) => p.generality))
    return [...new Set(matching.filter((p) => p.generality === specific).map((p) => p.method))]
  }
}

/** Whether a path's percent-encoding can be read (`%ZZ`, a lone `%` or bytes that are no UTF-8 cannot). */
const readablePath = (path: string) => {
  try {
    decodeURIComponent(path)
    return true
  } catch {
    return false
  }
}

/** The 405 of a served path asked with another method (RFC 9110 §15.5.6), in the path's envelope, with `Allow`. */
export const methodNotAllowed = (method: string, path: string, allowed: ReadonlyArray<string>) => ({
  status: 405,
  body: errorBody(envelopeOfPath(path), { _tag: "MethodNotAllowed", message: `${method} is not served on ${path}; it takes ${allowed.join(" and ")}.` }),
  headers: { allow: allowed.join(", ") }
})

/** The 405 of `methodNotAllowed` as a response, with the caller's rate-limit headers. */
const refusedMethod = (request: HttpServerRequest.HttpServerRequest, path: string, allowed: ReadonlyArray<string>) => {
  const refused = methodNotAllowed(request.method, path, allowed)
  return Effect.map(unroutedHeaders(request), (headers) =>
    HttpServerResponse.unsafeJson(refused.body, { status: refused.status, headers: { ...headers, ...refused.headers } }))
}

/**
 * The answer to a request no route takes: 405 when its path is served with other methods, else 404.
 * A path a route's pattern takes with this very method was refused by the router as sent: a
 * malformed percent-encoding is a 400, a parameter longer than the router reads (100 characters;
 * no id is that long) a 404.
 */
const unrouted = (served: ReadonlyArray<{ readonly method: string; readonly path: string }>) => {
  const allowedOn = methodsOn(served)
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const path = pathOf(request)
    const allowed = allowedOn(path)
    if (allowed.length === 0 || allowed.includes(request.method)) {
      return readablePath(path) ? notFound : Effect.map(unroutedHeaders(request), (headers) =>
        HttpServerResponse.unsafeJson(errorBody(envelopeOfPath(path), new BadRequest({ message: `The path ${path} has a malformed percent-encoding.` })), { status: 400, headers }))
    }
    return refusedMethod(request, path, allowed)
  })
}

/**
 * The fixed paths a parameter's pattern also matches with another method (`/api/avatar/register` and
 * `GET /api/avatar/:id`), with the methods their own routes take. The router takes such a request to
 * the parameter's route (`GET /api/avatar/register` answered 401 as a profile read, or 400 "id must be
 * a UUID"); it is a 405, as on any other served path.
 */
const shadowedPaths = (served: ReadonlyArray<{ readonly method: string; readonly path: string }>): ReadonlyMap<string, ReadonlyArray<string>> => {
  const allowedOn = methodsOn(served)
  const patterns = served.filter((r) => /[:*]/.test(r.path)).map((r) => ({ method: r.method, ...matcherOf(r.path) }))
  const shadowed = new Map<string, ReadonlyArray<string>>()
  for (const { path } of served) {
    if (/[:*]/.test(path) || shadowed.has(path)) continue
    const own = allowedOn(path)
    if (patterns.some((p) => !own.includes(p.method) && p.matches(path))) shadowed.set(path, own)
  }
  return shadowed
}

/**
 * /mcp and its discovery documents are served when the host provides McpHttpApp
 * (Mcp.layerHttp); otherwise they answer 404 like any unknown route.
 */
const withMcp = (serve: (app: McpHttpApp["Type"]) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>) =>
  Effect.flatMap(Effect.serviceOption(McpHttpApp), Option.match({ onNone: () => notFound, onSome: serve }))

export const makeRouter = (all: ReadonlyArray<Route> = routes, options: { readonly metrics?: boolean } = {}) =>
  Effect.gen(function*() {
    const config = yield* GatewayConfig
    const { version } = config
    const openapi = JSON.stringify(openApiDocument(all, version))
    const docs = docsPage(all, version)
    const mcpCard = HttpServerResponse.unsafeJson(serverCard(config))
    const agent = HttpServerResponse.unsafeJson(agentCard(config))
    let router: HttpRouter.HttpRouter<never, any> = HttpRouter.empty.pipe(
      HttpRouter.get("/openapi.json", Effect.succeed(HttpServerResponse.text(openapi, { contentType: "application/json", headers: { "x-content-type-options": "nosniff" } }))),
      HttpRouter.get("/docs", Effect.succeed(HttpServerResponse.html(docs).pipe(HttpServerResponse.setHeaders(Pages.pageHeaders)))),
      HttpRouter.all(MCP_PATH, withMcp((app) => app)),
      HttpRouter.get("/.well-known/mcp.json", withMcp(() => Effect.succeed(mcpCard))),
      HttpRouter.get("/.well-known/agent.json", withMcp(() => Effect.succeed(agent)))
    )
    // Prometheus metrics, unauthenticated (docs/observability.md: not for the public internet).
    if (options.metrics) router = HttpRouter.get(router, Observability.METRICS_PATH, Observability.metricsResponse)
    for (const r of all) router = HttpRouter.append(router, HttpRouter.makeRoute(r.method, r.path as any, r.run))
    // /mcp (any method) answers its own methods.
    const served = [...router.routes].filter((r) => r.method !== "*").map((r) => ({ method: r.method, path: r.path }))
    // Routes are declared with open requirements; all of them are core services.
    const exact = HttpRouter.withRouterConfig(router, EXACT_PATHS).pipe(Effect.catchTag("RouteNotFound", () => unrouted(served)))
    const shadowed = shadowedPaths(served)
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const path = pathOf(request)
      if (DISGUISED_PATH.test(path)) return notFound
      const allowed = shadowed.get(path)
      return allowed !== undefined && !allowed.includes(request.method) ? refusedMethod(request, path, allowed) : exact
    }) as HttpApp.Default<never, CoreServices>
  })

/**
 * A path is served as the spec spells it, as the fast lane matches it: in its case, without doubled or
 * trailing slashes. The router's defaults served `/METRICS`, `//metrics` and `/metrics/`, past a
 * proxy's rule for `/metrics`.
 */
const EXACT_PATHS = { caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false } as const

/**
 * Spellings of a path the router would read as another (a `;` parameter it cuts off, an encoded letter,
 * digit or `-._~`, which no path needs encoded), answered 404: `/metrics;x` and `/%6detrics` were
 * `/metrics`. Reserved characters stay encodable (`%40` in an address).
 */
const DISGUISED_PATH = /;|%(?:3[0-9]|4[1-9a-f]|5[0-9a]|6[1-9a-f]|7[0-9a]|2[de]|5f|7e)/i

/**
 * RFC 9112 §3.2: a request whose Host header is not a valid host and port is answered 400, in the
 * envelope of its path, before anything else (its credentials included). The fast lane leaves such
 * requests to this app.
 */
const requireValidHost = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    // The node host's request is node's own (its HTTP version known); a web request's is not.
    if (validHost(request.headers.host, (request.source as { readonly httpVersion?: string }).httpVersion)) return app
    const refused = errorParts(envelopeOfPath(pathOf(request)), new BadRequest({ message: "Invalid Host header." }))
    return Effect.succeed(HttpServerResponse.unsafeJson(refused.body, { status: refused.status, headers: refused.headers }))
  })

/**
 * The router behind the edge middleware (Observability.ts): request ids, request metrics and
 * `GET /metrics` unless `AIGW_METRICS=false`, the access log when `AIGW_LOG_REQUESTS=true` (off by
 * default: it costs CPU on every request); requests with an invalid Host header refused.
 */
export const makeApp = Effect.gen(function*() {
  const settings = yield* Observability.options
  const router = yield* makeRouter(routes, { metrics: settings.metrics })
  return Observability.middleware(settings)(requireValidHost(router))
})
