/**
 * Daily call counters and per-call usage records, as Effects. `admit`, `callsOn` and `record` are
 * the Metering port's operations (Metering.ts; on SQL the same statements, Sql/Metering.ts), here
 * for Effect code, where on SQL they join an open transaction. `admit` is the quota gate: one
 * atomic conditional increment in the store, never a read followed by a write.
 */
import { Context, Effect, Layer, Option } from "effect"

export interface UsageEvent {
  readonly avatarId: string
  /** UTC day `YYYY-MM-DD`. */
  readonly day: string
  readonly provider: string
  readonly model: string
  readonly capability: string
  readonly promptTokens: number
  readonly completionTokens: number
  readonly costUSD: number
  readonly latencyMs: number
  /** True when the token counts come from a tokenizer estimate, not the upstream. */
  readonly estimated: boolean
  readonly ok: boolean
  readonly at: number
}

export interface UsageTotals {
  readonly callsToday: number
  readonly tokensToday: number
  /** Spend of the calendar month of `day`. */
  readonly spendMonthUSD: number
}

export interface UsageStoreService {
  /**
   * Adds `count` calls to today's count if the result stays within `limit`; returns the new
   * count, or None when they do not fit (nothing is added then).
   */
  readonly admit: (avatarId: string, day: string, limit: number, count?: number) => Effect.Effect<Option.Option<number>>
  readonly callsOn: (avatarId: string, day: string) => Effect.Effect<number>
  readonly record: (event: UsageEvent) => Effect.Effect<void>
  readonly totals: (avatarId: string, day: string) => Effect.Effect<UsageTotals>
  /**
   * Deletes up to `atMost` per-call records made before `before` (epoch ms), the oldest first; answers how
   * many it deleted (fewer than `atMost`: none older is left). The daily totals stay (UsageRetention.ts).
   */
  readonly pruneEvents: (before: number, atMost: number) => Effect.Effect<number>
}

export class UsageStore extends Context.Tag("aigw/UsageStore")<UsageStore, UsageStoreService>() {}

interface DayRow {
  calls: number
  tokens: number
  spend: number
}

export const makeMemory = Effect.sync((): UsageStoreService => {
  const days = new Map<string, DayRow>()
  let events: Array<UsageEvent> = []
  const keyOf = (avatarId: string, day: string) => `${avatarId}|${day}`
  const row = (avatarId: string, day: string): DayRow => {
    const key = keyOf(avatarId, day)
    let r = days.get(key)
    if (!r) days.set(key, (r = { calls: 0, tokens: 0, spend: 0 }))
    return r
  }
  return {
    admit: (avatarId, day, limit, count = 1) =>
      Effect.sync(() => {
        const r = row(avatarId, day)
        if (r.calls + count > limit) return Option.none()
        r.calls += count
        return Option.some(r.calls)
      }),
    callsOn: (avatarId, day) => Effect.sync(() => days.get(keyOf(avatarId, day))?.calls ?? 0),
    record: (event) =>
      Effect.sync(() => {
        events.push(event)
        const r = row(event.avatarId, event.day)
        r.tokens += event.promptTokens + event.completionTokens
        r.spend += event.costUSD
      }),
    totals: (avatarId, day) =>
      Effect.sync(() => {
        const month = day.slice(0, 7)
        let spend = 0
        for (const [key, r] of days) {
          const [a, d] = key.split("|")
          if (a === avatarId && d!.startsWith(month)) spend += r.spend
        }
        const today = days.get(keyOf(avatarId, day))
        return { callsToday: today?.calls ?? 0, tokensToday: today?.tokens ?? 0, spendMonthUSD: spend }
      }),
    pruneEvents: (before, atMost) =>
      Effect.sync(() => {
        // By position: one event object may have been recorded twice (as two records).
        const oldest = events.flatMap((e, i) => (e.at < before ? [i] : [])).sort((a, b) => events[a]!.at - events[b]!.at)
        const doomed = new Set(oldest.slice(0, atMost))
        if (doomed.size > 0) events = events.filter((_, i) => !doomed.has(i))
        return doomed.size
      })
  }
})

export const layerMemory = Layer.effect(UsageStore, makeMemory)
