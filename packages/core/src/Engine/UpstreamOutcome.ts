/**
 * The bookkeeping of one upstream attempt, shared by the engine's `firstSuccess` (promise calls)
 * and Routing's `firstSuccessEffect` (Effect clients): provider health (the circuit breaker) and
 * the upstream metrics, plus the warning line of a failure.
 */
import { Effect } from "effect"
import * as Metrics from "../Metrics.ts"
import type { ProviderHealth } from "../Providers/ProviderHealth.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"

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
