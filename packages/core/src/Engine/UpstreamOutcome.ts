/**
 * One upstream attempt of a fallback loop, shared by the engine's `firstSuccess` (promise calls)
 * and `firstSuccessEffect` (Effect clients; Engine/ProviderCalls.ts): its bookkeeping (provider health, the circuit
 * breaker, and the upstream metrics), the warning line of a failure, and what the loop does next.
 */
import { Effect } from "effect"
import * as Metrics from "../Metrics.ts"
import type { ProviderHealth } from "../Providers/ProviderHealth.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import type { Fallback } from "../Routing.ts"

/**
 * Whether a failure counts against its provider's health: the provider was unreachable, slow or broke
 * off (connect, timeout), or answered 408, 429 or 5xx. An answer that cannot be read, or that failed by
 * its finish reason, does not: a request can cause one (a reply past the size limit, a tool call the
 * model garbled), and one tenant's requests must not take a provider away from every other's.
 */
const countsAgainstProvider = (error: UpstreamError) =>
  error.kind === "connect" || error.kind === "timeout" || (error.kind === "http" && error.retryable)

/**
 * A provider's health after one attempt's outcome (undefined: a success). Every path records here, once
 * per attempt: a JSON call when its answer is read, a stream at its end (`settled: false` at its opening).
 * The gateway's own stop says nothing of the provider, and is not recorded.
 */
export const recordHealth = (health: ProviderHealth["Type"], providerId: string, error?: UpstreamError) => {
  if (error?.kind === "stopped") return
  health.record(providerId, error === undefined || !countsAgainstProvider(error))
}

/**
 * Counts one attempt: a success, or a failure (health and metrics). `settled: false` is an accepted
 * attempt whose outcome comes later (a stream, at its end: `recordHealth` and `countAttempt` then).
 */
export const recordAttempt = (health: ProviderHealth["Type"], providerId: string, error?: UpstreamError, settled = true) => {
  if (!settled) return
  recordHealth(health, providerId, error)
  countAttempt(providerId, error?.kind)
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
