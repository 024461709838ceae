import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import * as GatewayConfig from "../src/Config.ts"
import { usageRecordsPruned } from "../src/Metrics.ts"
import { makeMemory, type UsageEvent, UsageStore } from "../src/Storage/UsageStore.ts"
import * as UsageRetention from "../src/UsageRetention.ts"

const DAY_MS = 86_400_000

const event = (at: number): UsageEvent => ({
  avatarId: "a", day: new Date(at).toISOString().slice(0, 10), provider: "openai", model: "gpt-4o-mini", capability: "chat",
  promptTokens: 1, completionTokens: 1, costUSD: 0, latencyMs: 1, estimated: false, ok: true, at
})

/**
 * A memory usage store holding `old` records 31 days old and `recent` ones a day old, under a retention of
 * `days`; `pruned.count` is how many its pruning deleted.
 */
const storeWith = (days: number, old: number, recent: number, pruned = { count: 0 }) => {
  const counted = Layer.effect(
    UsageStore,
    Effect.map(makeMemory, (store) => ({
      ...store,
      pruneEvents: (before: number, atMost: number) => Effect.tap(store.pruneEvents(before, atMost), (n) => Effect.sync(() => (pruned.count += n)))
    }))
  )
  const layer = Layer.merge(counted, GatewayConfig.layer({ usageRetentionDays: days }))
  return (check: Effect.Effect<void, never, UsageStore | GatewayConfig.GatewayConfig>) =>
    Effect.runPromise(Effect.provide(Effect.gen(function*() {
      const store = yield* UsageStore
      const now = Date.now()
      for (let i = 0; i < old; i++) yield* store.record(event(now - 31 * DAY_MS - i))
      for (let i = 0; i < recent; i++) yield* store.record(event(now - DAY_MS - i))
      yield* check
    }), layer))
}

/** How many records the store still holds (pruning everything before the far future counts them). */
const remaining = Effect.flatMap(UsageStore, (s) => s.pruneEvents(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER))

describe("usage retention (AIGW_USAGE_RETENTION_DAYS)", () => {
  it("deletes every record older than the retention, in batches, and none newer; counts them in a metric", () =>
    storeWith(30, 2 * UsageRetention.PRUNE_BATCH + 17, 25)(Effect.gen(function*() {
      const counted = usageRecordsPruned.get()
      expect(yield* UsageRetention.pruneUntil()).toBe(2 * UsageRetention.PRUNE_BATCH + 17)
      expect(usageRecordsPruned.get() - counted, "aigw_usage_records_pruned_total").toBe(2 * UsageRetention.PRUNE_BATCH + 17)
      expect(yield* UsageRetention.pruneUntil()).toBe(0)
      expect(yield* remaining).toBe(25)
    })))

  it("keeps every record when it is 0 (the default); two months keep a month's, a century every one", async () => {
    await storeWith(0, 40, 5)(Effect.gen(function*() {
      expect(yield* UsageRetention.pruneUntil()).toBe(0)
      expect(yield* remaining).toBe(45)
    }))
    await storeWith(60, 40, 5)(Effect.gen(function*() {
      expect(yield* UsageRetention.pruneUntil()).toBe(0)
      expect(yield* remaining).toBe(45)
    }))
    // A century: the cutoff is before 1970, and nothing is older.
    await storeWith(GatewayConfig.MAX_RETENTION_DAYS, 40, 5)(Effect.gen(function*() {
      expect(yield* UsageRetention.pruneUntil()).toBe(0)
      expect(yield* remaining).toBe(45)
    }))
    expect(GatewayConfig.defaults().usageRetentionDays).toBe(0)
  })

  it("stops after the batch that ends past its deadline (the Lambda host's scheduled run)", () =>
    storeWith(30, 3 * UsageRetention.PRUNE_BATCH, 0)(Effect.gen(function*() {
      expect(yield* UsageRetention.pruneUntil(Date.now())).toBe(UsageRetention.PRUNE_BATCH)
      expect(yield* UsageRetention.pruneUntil()).toBe(2 * UsageRetention.PRUNE_BATCH)
    })))

  it("a long-lived host prunes at start, in the background; with no retention nothing is deleted", async () => {
    const pruned = { count: 0 }
    await storeWith(30, 10, 3, pruned)(Effect.scoped(Effect.gen(function*() {
      yield* Layer.build(UsageRetention.layerLoop)
      // The loop's first round runs in its own fiber: wait for it, boundedly.
      for (let i = 0; i < 200 && pruned.count < 10; i++) yield* Effect.sleep(10)
      expect(pruned.count).toBe(10)
      expect(yield* remaining).toBe(3)
    })))
    const none = { count: 0 }
    await storeWith(0, 10, 3, none)(Effect.scoped(Effect.gen(function*() {
      yield* Layer.build(UsageRetention.layerLoop)
      yield* Effect.sleep(50)
      expect(none.count).toBe(0)
      expect(yield* remaining).toBe(13)
    })))
  })
})
