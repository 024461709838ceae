/**
 * Waiting for SQLite's write lock without holding the event loop.
 *
 * better-sqlite3 is synchronous: with a busy timeout, a statement that finds another connection's
 * write lock sleeps inside the driver until the lock goes or the timeout ends, and the whole
 * process sleeps with it (no request, no health probe, no stream chunk is served meanwhile). So
 * the gateway's connection has no busy timeout: such a statement fails at once with SQLITE_BUSY,
 * having done nothing, and `whenUnlocked` runs it again after a pause, the event loop free in
 * between, until `LOCK_WAIT_MS` have passed since the wait began; then the SQLITE_BUSY stands
 * (the edge answers it 503 to retry, Http/Edge.ts).
 *
 * Only a statement that left no transaction open is run again: one outside a transaction, or a
 * `BEGIN IMMEDIATE` that could not take the lock (the gateway's transactions take it at BEGIN, so
 * their statements do not meet it afterwards).
 */
import type { SqliteHandle } from "./Sqlite.ts"

/** How long a statement waits for another connection's lock: better-sqlite3's default busy timeout. */
export const LOCK_WAIT_MS = 5_000

/** Whether a driver error is SQLITE_BUSY (another connection holds the lock), any of its extended codes. */
export const isLocked = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === "string" && code.startsWith("SQLITE_BUSY")
}

/** The pause before try `n` + 1: short at first (the gateway's own transactions take well under a millisecond), at most 50 ms. */
const pause = (n: number) => Math.min(2 ** n, 50)

/**
 * `run` now; while it fails with SQLITE_BUSY and no transaction is open, again after a pause until
 * `deadline` (default: `LOCK_WAIT_MS` from the first failure), when the last SQLITE_BUSY is the
 * answer. An aborted `signal` stops the waiting before the next try (its reason is the answer), so
 * nothing runs for a caller that is gone.
 */
export const whenUnlocked = <A>(db: SqliteHandle, run: () => A, deadline?: number, signal?: AbortSignal): Promise<A> => {
  const attempt = (n: number, until: number | undefined): Promise<A> => {
    if (signal?.aborted) return Promise.reject(signal.reason)
    try {
      return Promise.resolve(run())
    } catch (error) {
      if (!isLocked(error) || db.inTransaction) return Promise.reject(error)
      const end = until ?? Date.now() + LOCK_WAIT_MS
      if (Date.now() >= end) return Promise.reject(error)
      return new Promise<A>((resolve) => setTimeout(() => resolve(attempt(n + 1, end)), pause(n)))
    }
  }
  return attempt(0, deadline)
}
