/**
 * `Observability.asServerSpan`: the server span of a request the fast lane serves with a route's own
 * Effects is the one the platform's HTTP tracer opens on the route: named by the span name generator,
 * parented by the caller's trace context, with the URL, client address and redacted headers, the
 * answer's status, and none where the embedder's `withTracerDisabledWhen` predicate says so.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import { Effect, Exit, type Tracer } from "effect"
import { describe, expect, it } from "vitest"
import { asServerSpan } from "../../src/Http/Observability.ts"

const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
const request = {
  method: "POST",
  url: "/v1/memory/store?mode=fast",
  headers: {
    host: "gw.example:8080",
    "user-agent": "test-client/1.0",
    authorization: "Bearer secret-token-xyz",
    traceparent: `00-${traceId}-00f067aa0ba902b7-01`
  },
  socket: { remoteAddress: "10.1.2.3" }
}

/** The span the handler runs under (none: undefined), after the request ended with `status`. */
const spanOf = (wrap: (effect: Effect.Effect<Tracer.Span | undefined>) => Effect.Effect<Tracer.Span | undefined> = (e) => e, status = 201) =>
  Effect.runPromise(
    wrap(asServerSpan(request, (exit) => (Exit.isSuccess(exit) ? status : 500))(Effect.map(Effect.option(Effect.currentSpan), (s) => s._tag === "Some" ? s.value : undefined)))
  )

describe("asServerSpan", () => {
  it("opens the route's server span under the caller's trace context, with its attributes and the answer's status", async () => {
    const span = (await spanOf())!
    expect(span.name).toBe("http.server POST")
    expect(span.kind).toBe("server")
    expect(span.traceId).toBe(traceId)
    expect(span.parent._tag === "Some" && span.parent.value.spanId).toBe("00f067aa0ba902b7")
    const attributes = Object.fromEntries(span.attributes)
    expect(attributes).toMatchObject({
      "http.request.method": "POST",
      // Query values never reach a span (one-time tokens travel there); their names do.
      "url.full": "http://gw.example:8080/v1/memory/store?mode=REDACTED",
      "url.path": "/v1/memory/store",
      "url.query": "mode=REDACTED",
      "url.scheme": "http",
      "user_agent.original": "test-client/1.0",
      "client.address": "10.1.2.3",
      "http.response.status_code": 201
    })
    expect(JSON.stringify([...span.attributes])).not.toContain("secret-token-xyz")
    expect(attributes["http.request.header.authorization"]).toBeDefined()
  })

  it("follows the embedder's span name generator", async () => {
    const span = await spanOf((e) => Effect.provideService(e, HttpMiddleware.SpanNameGenerator, (req) => `lane ${req.method} ${req.url}`))
    expect(span?.name).toBe("lane POST /v1/memory/store?mode=fast")
  })

  it("opens none where withTracerDisabledWhen says so, or when tracing is off", async () => {
    expect(await spanOf((e) => HttpMiddleware.withTracerDisabledWhenEffect(e, (req) => req.url.startsWith("/v1/memory/")))).toBeUndefined()
    expect(await spanOf((e) => HttpMiddleware.withTracerDisabledWhenEffect(e, (req) => req.url === "/health"))).toBeDefined()
    expect(await spanOf(Effect.withTracerEnabled(false))).toBeUndefined()
  })
})
