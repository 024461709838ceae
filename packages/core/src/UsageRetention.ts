/**
 * How long per-call usage records are kept (`AIGW_USAGE_RETENTION_DAYS`). Every metered call leaves one
 * (its provider, model, tokens, cost, latency), so without an end the table grows with the traffic for
 * the deployment's life. Long-lived hosts prune at start and then hourly (`layerLoop`); the Lambda host in
 * each scheduled invocation (`pruneScheduled` as a drainer). The daily totals per avatar, which quota and
 * `/v1/usage` read, are not touched: one row per avatar and day.
 */
import { Duration, Effect, Layer, Schedule } from "effect"
import { GatewayConfig } from "./Config.ts"
import { loggingStateChanges } from "./Jobs/Worker.ts"
import { usageRecordsPruned } from "./Metrics.ts"
import { UsageStore } from "./Storage/UsageStore.ts"

/** Records deleted per statement: on SQLite each batch holds the event loop and the write lock, so it is kept short (docs/performance.md). */
export const PRUNE_BATCH = 250
/** The pause between batches, in which the calls' writes take the SQLite write lock. */
const BATCH_PAUSE = Duration.millis(20)
/** How often a long-lived host prunes after its first run at start. */
export const PRUNE_EVERY = Duration.hours(1)
/**
 * The most of a scheduled run (Lambda, every minute or so) that pruning takes: it runs before the jobs and
 * webhooks, which drain for as long as work is due and would leave it no time under steady load.
 */
const SCHEDULED_SHARE_MS = 5_000
const DAY_MS = 86_400_000

/**
 * Deletes the records older than the retention, a batch at a time, until none is left or `deadlineMs`
 * (epoch ms) has passed; answers how many it deleted. Nothing with a retention of 0.
 */
export const pruneUntil = (deadlineMs = Number.POSITIVE_INFINITY) =>
  Effect.gen(function*() {
    const { usageRetentionDays } = yield* GatewayConfig
    if (usageRetentionDays === 0) return 0
    const store = yield* UsageStore
    const before = Date.now() - usageRetentionDays * DAY_MS
    let deleted = 0
    while (true) {
      const n = yield* store.pruneEvents(before, PRUNE_BATCH)
      deleted += n
      usageRecordsPruned.inc([], n)
      if (n < PRUNE_BATCH || Date.now() >= deadlineMs) break
      yield* Effect.sleep(BATCH_PAUSE)
    }
    if (deleted > 0) {
      yield* Effect.logInfo(`usage retention: ${deleted} usage record(s) older than ${usageRetentionDays} day(s) deleted (AIGW_USAGE_RETENTION_DAYS)`)
    }
    return deleted
  })

/** A scheduled run's pruning (the Lambda host's drainer): until `deadlineMs` or for `SCHEDULED_SHARE_MS`, whichever ends first. */
export const pruneScheduled = (deadlineMs: number) => pruneUntil(Math.min(deadlineMs, Date.now() + SCHEDULED_SHARE_MS))

/** Pruning at start and every `PRUNE_EVERY` for long-lived hosts, when a retention is set; a failed round is logged once until one succeeds. */
export const layerLoop = Layer.scopedDiscard(
  Effect.gen(function*() {
    const { usageRetentionDays } = yield* GatewayConfig
    if (usageRetentionDays === 0) return
    yield* Effect.forkScoped(Effect.repeat(loggingStateChanges("usage retention", pruneUntil(), 0), Schedule.spaced(PRUNE_EVERY)))
  })
)
