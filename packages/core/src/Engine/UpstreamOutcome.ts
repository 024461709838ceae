/**
 * One upstream attempt of a fallback loop, shared by the engine's `firstSuccess` (promise calls)
 * and Routing's `firstSuccessEffect` (Effect clients): its bookkeeping (provider health, the circuit
 * breaker, and the upstream metrics), the warning line of a failure, and what the loop does next.
 */
import { Effect } from "effect"
import * as Metrics from "../Metrics.ts"
import type { ProviderHealth } from "../Providers/ProviderHealth.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import type { Fallback } from "../Routing.ts"

/**
 * Counts one attempt: a success, or a failure. A non-retryable failure (the request's fault, a
 * 4xx) does not count against the provider's health.
 */
export const recordAttempt = (health: ProviderHealth["Type"], providerId: string, error?: UpstreamError) => {
  if (error === undefined) {
    health.record(providerId, true)
    Metrics.upstreamCalls.inc([providerId, "ok"])
    return
  }
  health.record(providerId, !error.retryable)
  Metrics.upstreamCalls.inc([providerId, "error"])
  Metrics.upstreamErrors.inc([providerId, error.kind])
}

/** The warning logged for a failed attempt. */
export const failureWarning = (providerId: string, model: string, error: UpstreamError) =>
  Effect.logWarning(`upstream ${providerId}/${model} failed: ${error.message}`)

/**
 * What a fallback loop does after candidate `index` of `count` failed with `error`: the entry that
 * records it among the call's fallbacks when the next candidate is tried (a retryable failure with
 * one left), else undefined, and the loop ends with this error.
 */
export const fallbackAfter = (providerId: string, model: string, error: UpstreamError, index: number, count: number): Fallback | undefined =>
  error.retryable && index < count - 1 ? { provider: providerId, model, error: error.message } : undefined
