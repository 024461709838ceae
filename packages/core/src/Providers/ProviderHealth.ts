/**
 * Live provider status from recent call outcomes, with a per-provider circuit breaker:
 * after 5 consecutive failures the circuit opens for 30 s (`auto` routing tries the provider after
 * every other candidate, Routing.healthyFirst), then it is a candidate like any other again
 * (half-open: the next outcome closes or reopens it). In memory, per process.
 */
import { Context, Effect, Layer } from "effect"

export type LiveStatus = "unknown" | "up" | "degraded" | "down"

export const FAILURE_THRESHOLD = 5
export const OPEN_MS = 30_000

interface State {
  consecutiveFailures: number
  openedAt: number | null
  lastOutcomeAt: number
  recent: Array<boolean>
}

const makeService = Effect.sync(() => {
  const states = new Map<string, State>()
  const stateOf = (id: string) => {
    let s = states.get(id)
    if (!s) states.set(id, (s = { consecutiveFailures: 0, openedAt: null, lastOutcomeAt: 0, recent: [] }))
    return s
  }
  const record = (providerId: string, ok: boolean) => {
    const s = stateOf(providerId)
    const now = Date.now()
    s.lastOutcomeAt = now
    s.recent.push(ok)
    if (s.recent.length > 20) s.recent.shift()
    if (ok) {
      s.consecutiveFailures = 0
      s.openedAt = null
    } else {
      s.consecutiveFailures += 1
      if (s.consecutiveFailures >= FAILURE_THRESHOLD) s.openedAt = now
    }
  }
  return {
    /** Counts one call's outcome (synchronous: the engine records from promise code). */
    record,
    /** False while the circuit is open; true again once the cool-down passed (half-open). */
    isAvailable: (providerId: string, now = Date.now()) => {
      const s = states.get(providerId)
      return !s || s.openedAt === null || now - s.openedAt >= OPEN_MS
    },
    status: (providerId: string, now = Date.now()): LiveStatus => {
      const s = states.get(providerId)
      if (!s || s.recent.length === 0) return "unknown"
      if (s.openedAt !== null && now - s.openedAt < OPEN_MS) return "down"
      return s.recent.some((ok) => !ok) ? "degraded" : "up"
    }
  }
})

export class ProviderHealth extends Context.Tag("aigw/ProviderHealth")<
  ProviderHealth,
  Effect.Effect.Success<typeof makeService>
>() {}

export const layer = Layer.effect(ProviderHealth, makeService)
