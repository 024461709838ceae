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
 * their statements do not meet it afterwards). And it is run again only while no other caller has
 * a transaction open on the connection, which it would otherwise join.
 */
import type { SqliteHandle } from "./Sqlite.ts"

/** How long a statement waits for another connection's lock: better-sqlite3's default busy timeout. */
export const LOCK_WAIT_MS = 5_000

/** Whether a driver error is SQLITE_BUSY (another connection holds the lock), any of its extended codes. */
export const isLocked = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === "string" && code.startsWith("SQLITE_BUSY")
}

/** Whether a statement that failed with `error` may be run again: SQLITE_BUSY, and no transaction left open. */
export const mayRetry = (db: SqliteHandle, error: unknown): boolean => isLocked(error) && !db.inTransaction

/** The pause before retry `n` + 1: short at first, since the gateway's own transactions are short; at most 50 ms. */
const pause = (n: number) => Math.min(2 ** n, 50)

/**
 * `run`, which has just failed with `error` (`mayRetry`), again after each pause while it fails so,
 * until `deadline` (default: `LOCK_WAIT_MS` from now); then the last SQLITE_BUSY is the answer.
 * A retry runs only while no transaction is open on the connection: one that another caller opened
 * during a pause is waited for as the lock is (the statement would join it). An aborted `signal`
 * ends the waiting before the next try, with its reason, so nothing runs for a caller that is gone.
 */
export const retryWhenUnlocked = <A>(
  db: SqliteHandle,
  run: () => A,
  error: unknown,
  deadline = Date.now() + LOCK_WAIT_MS,
  signal?: AbortSignal
): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    let last = error
    let n = 0
    const retry = () => {
      if (signal?.aborted) return reject(signal.reason)
      if (!db.inTransaction) {
        try {
          return resolve(run())
        } catch (e) {
          if (!mayRetry(db, e)) return reject(e)
          last = e
        }
      }
      if (Date.now() >= deadline) return reject(last)
      setTimeout(retry, pause(n++))
    }
    setTimeout(retry, pause(n++))
  })

/** `run` now, or, when another connection's lock stops it (`mayRetry`), once the lock is free (`retryWhenUnlocked`). */
export const whenUnlocked = <A>(db: SqliteHandle, run: () => A, deadline?: number): Promise<A> => {
  try {
    return Promise.resolve(run())
  } catch (error) {
    return mayRetry(db, error) ? retryWhenUnlocked(db, run, error, deadline) : Promise.reject(error)
  }
}
