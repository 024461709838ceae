/**
 * A sliding-window limit of three events per key (the spec's "3 resends per hour per
 * address"). The SQL layer keeps the last three instants in one row and admits with a single
 * conditional upsert, so concurrent processes on one PostgreSQL never admit a fourth.
 */
import { Context, Effect, Layer } from "effect"

export const SEND_LIMIT = 3

export interface SendLimitStoreService {
  /**
   * Records an event for `key` at `now` if fewer than three were recorded after
   * `now - windowMs`. Returns true when admitted.
   */
  readonly tryRecord: (key: string, now: number, windowMs: number) => Effect.Effect<boolean>
}

export class SendLimitStore extends Context.Tag("aigw/SendLimitStore")<SendLimitStore, SendLimitStoreService>() {}

export const makeMemory = Effect.sync((): SendLimitStoreService => {
  const slots = new Map<string, Array<number>>()
  return {
    tryRecord: (key, now, windowMs) =>
      Effect.sync(() => {
        const last = slots.get(key) ?? []
        if (last.length >= SEND_LIMIT && last[last.length - SEND_LIMIT]! > now - windowMs) return false
        slots.set(key, [...last, now].slice(-SEND_LIMIT))
        return true
      })
  }
})

export const layerMemory = Layer.effect(SendLimitStore, makeMemory)
