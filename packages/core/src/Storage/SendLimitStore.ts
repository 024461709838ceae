/**
 * Limits counted in storage, so they hold across restarts and across processes sharing one
 * PostgreSQL:
 * - `tryRecord`: a sliding window of three events per key (the spec's "3 resends per hour per
 *   address"). The SQL layer keeps the last three instants in one row and admits with a single
 *   conditional upsert, so concurrent processes never admit a fourth.
 * - `tryCount` / `uncount`: a counter of up to `limit` events per key in a window that opens at the
 *   first event (failed logins). Also one conditional upsert per admission.
 */
import { Context, Effect, Layer } from "effect"

export const SEND_LIMIT = 3

/** Ended windows are deleted once every this many `tryCount` calls, keys whose last event left the window once every this many `tryRecord` calls (per process). */
export const PRUNE_EVERY = 500

export interface Counted {
  /** False when the window already holds `limit` events; nothing was counted then. */
  readonly admitted: boolean
  /** When the window ends (epoch ms): identifies it for `uncount`, and is the Retry-After of a refusal. */
  readonly expiresAt: number
}

export interface SendLimitStoreService {
  /**
   * Records an event for `key` at `now` if fewer than three were recorded after
   * `now - windowMs`. Returns true when admitted.
   */
  readonly tryRecord: (key: string, now: number, windowMs: number) => Effect.Effect<boolean>
  /**
   * Takes back the event `tryRecord` admitted for `key` at `at` (what it was for was refused after
   * all), so it does not count. The instant it had pushed out of the window was already outside it,
   * so nothing needs to come back in its place.
   */
  readonly unrecord: (key: string, at: number) => Effect.Effect<void>
  /**
   * Counts an event for `key` if its current window holds fewer than `limit`; a key without a
   * window (or whose window ended) starts one of `windowMs` at `now`.
   */
  readonly tryCount: (key: string, now: number, windowMs: number, limit: number) => Effect.Effect<Counted>
  /** Takes back one admitted event, only if the window that counted it (`expiresAt`) is still the key's. */
  readonly uncount: (key: string, expiresAt: number) => Effect.Effect<void>
}

export class SendLimitStore extends Context.Tag("aigw/SendLimitStore")<SendLimitStore, SendLimitStoreService>() {}

export const makeMemory = Effect.sync((): SendLimitStoreService => {
  const slots = new Map<string, Array<number>>()
  const counters = new Map<string, { hits: number; expiresAt: number }>()
  let recorded = 0
  let counted = 0
  return {
    tryRecord: (key, now, windowMs) =>
      Effect.sync(() => {
        if (++recorded % PRUNE_EVERY === 0) for (const [k, times] of slots) if ((times.at(-1) ?? -Infinity) <= now - windowMs) slots.delete(k)
        const last = slots.get(key) ?? []
        if (last.length >= SEND_LIMIT && last[last.length - SEND_LIMIT]! > now - windowMs) return false
        slots.set(key, [...last, now].slice(-SEND_LIMIT))
        return true
      }),
    unrecord: (key, at) =>
      Effect.sync(() => {
        const last = slots.get(key) ?? []
        const i = last.lastIndexOf(at)
        if (i >= 0) slots.set(key, [...last.slice(0, i), ...last.slice(i + 1)])
      }),
    tryCount: (key, now, windowMs, limit) =>
      Effect.sync(() => {
        if (++counted % PRUNE_EVERY === 0) for (const [k, c] of counters) if (c.expiresAt <= now) counters.delete(k)
        const current = counters.get(key)
        if (current === undefined || current.expiresAt <= now) {
          counters.set(key, { hits: 1, expiresAt: now + windowMs })
          return { admitted: true, expiresAt: now + windowMs }
        }
        if (current.hits >= limit) return { admitted: false, expiresAt: current.expiresAt }
        current.hits++
        return { admitted: true, expiresAt: current.expiresAt }
      }),
    uncount: (key, expiresAt) =>
      Effect.sync(() => {
        const current = counters.get(key)
        if (current !== undefined && current.expiresAt === expiresAt && current.hits > 0) current.hits--
      })
  }
})

export const layerMemory = Layer.effect(SendLimitStore, makeMemory)
