/**
 * One call to a task vendor (guardrails, translation) that bills per request, not per token:
 * its upstream errors become gateway errors (502/504), and a successful call is recorded in
 * usage with its latency (no tokens; no known price, so no cost).
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import { toGatewayError } from "../Providers/UpstreamError.ts"
import { Usage } from "../Usage.ts"

export const vendorCall = <A>(avatarId: string, vendor: ConfiguredProvider, capability: string, call: Effect.Effect<A, UpstreamError>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const value = yield* Effect.mapError(call, toGatewayError)
    const usage = yield* Usage
    yield* usage.record({
      avatarId, provider: vendor.id, model: vendor.id, capability, promptTokens: 0, completionTokens: 0, costUSD: 0,
      latencyMs: Math.round(performance.now() - started), estimated: false, ok: true
    })
    return value
  })
