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
 * 4xx) does not count against the provider's health. `counted: false` leaves the metrics to the
 * caller, which knows the attempt's outcome only later (a stream, at its end: `countAttempt`).
 */
export const recordAttempt = (health: ProviderHealth["Type"], providerId: string, error?: UpstreamError, counted = true) => {
  health.record(providerId, error === undefined || !error.retryable)
  if (counted) countAttempt(providerId, error?.kind)
}

/**
 * The upstream metrics of one attempt: `ok` without an error kind, `cancelled` for an attempt its
 * client abandoned, else an `error` of that kind (`aigw_upstream_errors_total`).
 */
export const countAttempt = (providerId: string, errorKind?: UpstreamError["kind"] | "cancelled") => {
  if (errorKind === undefined || errorKind === "cancelled") {
    Metrics.upstreamCalls.inc([providerId, errorKind === undefined ? "ok" : "cancelled"])
    return
  }
  Metrics.upstreamCalls.inc([providerId, "error"])
  Metrics.upstreamErrors.inc([providerId, errorKind])
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
