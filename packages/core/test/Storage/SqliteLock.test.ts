/**
 * Waiting for SQLite's write lock off the event loop (Storage/Sql/SqliteLock.ts): another
 * connection on the same file keeps `BEGIN IMMEDIATE` open while the gateway's connection writes,
 * through `whenUnlocked` itself, the metering path's group commit and the SqlClient. Throughout, a
 * timer must keep firing: the driver's own busy wait held the event loop for as long as the lock.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { Cause, Effect, Exit, Fiber, Layer, ManagedRuntime } from "effect"
import { defectParts } from "../../src/Http/Edge.ts"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Db from "../../src/Storage/Database.ts"
import { CallerGone, Metering, type MeteringService } from "../../src/Storage/Metering.ts"
import { isLocked, retryWhenUnlocked, whenUnlocked } from "../../src/Storage/Sql/SqliteLock.ts"
import * as Stores from "../../src/Storage/Stores.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "aigw-lock-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** Counts timer ticks (every 5 ms) while `f` runs: a held event loop ticks not at all. */
const ticking = async <A>(f: () => Promise<A>): Promise<{ value: A; ticks: number; ms: number }> => {
  let ticks = 0
  const timer = setInterval(() => ticks++, 5)
  const started = performance.now()
  try {
    const value = await f()
    return { value, ticks, ms: performance.now() - started }
  } finally {
    clearInterval(timer)
  }
}

/** Another process's connection holding the write lock until `release`. */
const holdLock = (file: string) => {
  const other = new Database(file)
  other.exec("BEGIN IMMEDIATE")
  return {
    release: () => {
      if (other.inTransaction) other.exec("ROLLBACK")
    },
    close: () => {
      if (other.inTransaction) other.exec("ROLLBACK")
      other.close()
    }
  }
}

describe("whenUnlocked", () => {
  const file = path.join(dir, "plain.sqlite")
  let db: Database.Database
  beforeAll(() => {
    db = new Database(file)
    db.pragma("journal_mode = WAL")
    db.pragma("busy_timeout = 0")
    db.exec("CREATE TABLE t (n INTEGER)")
  })
  afterAll(() => db.close())
  const insert = () => db.prepare("INSERT INTO t (n) VALUES (1)").run().changes
  const count = () => (db.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n

  it("waits for the lock with the event loop free, then runs", async () => {
    const lock = holdLock(file)
    try {
      const before = count()
      setTimeout(lock.release, 300)
      const { value, ticks, ms } = await ticking(() => whenUnlocked(db, insert))
      expect(value).toBe(1)
      expect(ms).toBeGreaterThanOrEqual(290)
      expect(ticks).toBeGreaterThan(20)
      expect(count()).toBe(before + 1)
    } finally {
      lock.close()
    }
  })

  it("gives up at the deadline with SQLITE_BUSY, having tried more than once and run nothing", async () => {
    const lock = holdLock(file)
    try {
      const before = count()
      let tries = 0
      const started = performance.now()
      const error = await whenUnlocked(db, () => (tries++, insert()), Date.now() + 200).then(() => undefined, (e) => e)
      expect(isLocked(error)).toBe(true)
      expect(performance.now() - started).toBeGreaterThanOrEqual(190)
      expect(tries).toBeGreaterThan(3)
      lock.release()
      expect(count()).toBe(before)
    } finally {
      lock.close()
    }
  })

  it("an aborted signal stops the waiting: nothing runs once the lock goes", async () => {
    const lock = holdLock(file)
    try {
      const before = count()
      const busy = (() => {
        try {
          insert()
        } catch (e) {
          return e
        }
      })()
      expect(isLocked(busy)).toBe(true)
      const abort = new AbortController()
      const pending = retryWhenUnlocked(db, insert, busy, undefined, abort.signal).then(() => "ran", () => "stopped")
      await new Promise((r) => setTimeout(r, 30))
      abort.abort()
      lock.release()
      expect(await pending).toBe("stopped")
      await new Promise((r) => setTimeout(r, 100))
      expect(count()).toBe(before)
    } finally {
      lock.close()
    }
  })

  it("a retry does not join a transaction another caller opened on the connection meanwhile: it waits for it to end", async () => {
    const lock = holdLock(file)
    try {
      const before = count()
      const pending = whenUnlocked(db, insert)
      await new Promise((r) => setTimeout(r, 30))
      // The lock goes, and another caller of this connection opens a transaction that it will roll back.
      lock.release()
      db.exec("BEGIN IMMEDIATE")
      db.prepare("INSERT INTO t (n) VALUES (2)").run()
      await new Promise((r) => setTimeout(r, 100))
      db.exec("ROLLBACK")
      expect(await pending).toBe(1)
      // The waiting insert ran after the rollback, so it stays.
      expect(count()).toBe(before + 1)
    } finally {
      if (db.inTransaction) db.exec("ROLLBACK")
      lock.close()
    }
  })

  it("other failures, and a lock met inside a transaction, are answered at once", async () => {
    let tries = 0
    const wrong = await whenUnlocked(db, () => (tries++, db.prepare("SELECT * FROM missing").get())).then(() => undefined, (e) => e)
    expect(String(wrong)).toMatch(/no such table/)
    expect(tries).toBe(1)
    const lock = holdLock(file)
    db.exec("BEGIN")
    try {
      tries = 0
      const started = performance.now()
      const busy = await whenUnlocked(db, () => (tries++, insert())).then(() => undefined, (e) => e)
      expect(isLocked(busy)).toBe(true)
      expect(tries).toBe(1)
      expect(performance.now() - started).toBeLessThan(100)
    } finally {
      db.exec("ROLLBACK")
      lock.close()
    }
  })
})

describe("the gateway's SQLite connection while another process holds the lock", () => {
  const file = path.join(dir, "gateway.sqlite")
  let runtime: ManagedRuntime.ManagedRuntime<Stores.Stores | SqlClient.SqlClient, unknown>
  beforeAll(async () => {
    runtime = ManagedRuntime.make(Stores.layerSql.pipe(Layer.provideMerge(Db.layer(`sqlite:${file}`))))
    await runtime.runPromise(Effect.void)
  })
  afterAll(() => runtime?.dispose())

  /** `test` with the metering service and a fresh avatar while another process holds the lock (closed after). */
  const underLock = async (test: (metering: MeteringService, avatarId: string, lock: ReturnType<typeof holdLock>) => Promise<void>) => {
    const metering = await runtime.runPromise(Metering)
    const avatarId = crypto.randomUUID()
    const lock = holdLock(file)
    try {
      await test(metering, avatarId, lock)
    } finally {
      lock.close()
    }
    return { metering, avatarId }
  }

  it("the metering path's writes of one turn wait together and are answered in order once it goes", async () => {
    const day = "2026-11-29"
    await underLock(async (metering, avatarId, lock) => {
      setTimeout(lock.release, 300)
      const { value, ticks } = await ticking(() =>
        Promise.all([metering.admit(avatarId, day, 3, 1), metering.admit(avatarId, day, 3, 2), metering.admit(avatarId, day, 3, 1)]))
      expect(value).toEqual([1, 3, undefined])
      expect(ticks).toBeGreaterThan(20)
      expect(await metering.callsOn(avatarId, day)).toBe(3)
    })
  })

  it("an admission whose caller left while it waited for the lock is not made: CallerGone, nothing counted", async () => {
    const day = "2026-11-29"
    await underLock(async (metering, avatarId, lock) => {
      let left = false
      const staying = metering.admit(avatarId, day, 5, 1, () => false)
      const leaving = metering.admit(avatarId, day, 5, 2, () => left).then(() => "admitted", (e) => e)
      await new Promise((r) => setTimeout(r, 50))
      left = true
      lock.release()
      expect(await staying).toBe(1)
      expect(await leaving).toBeInstanceOf(CallerGone)
      expect(await metering.callsOn(avatarId, day)).toBe(1)
    })
  })

  it("an admission whose caller left is told CallerGone, not SQLITE_BUSY, when the wait ends with the lock still held", async () => {
    const { avatarId, metering } = await underLock(async (metering, avatarId) => {
      let left = false
      const leaving = metering.admit(avatarId, "2026-11-29", 5, 1, () => left).then(() => "admitted", (e) => e)
      const staying = metering.admit(avatarId, "2026-11-29", 5, 1, () => false).then(() => "admitted", (e) => e)
      // Leaves after the batch began waiting; the lock outlasts the wait.
      await new Promise((r) => setTimeout(r, 100))
      left = true
      expect(await leaving).toBeInstanceOf(CallerGone)
      expect(isLocked(await staying)).toBe(true)
    })
    expect(await metering.callsOn(avatarId, "2026-11-29")).toBe(0)
  })

  it("the SqlClient's transactions wait for it the same way; past the wait one fails with SQLITE_BUSY (a 503); an interrupted one writes nothing and leaves nothing open", async () => {
    const count = () =>
      runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*) AS n FROM aigw_schema_probe`))
        .then((r) => r[0]!.n)
    await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE aigw_schema_probe (n INTEGER)`))
    const insert = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(sql`INSERT INTO aigw_schema_probe (n) VALUES (1)`))

    const lock = holdLock(file)
    try {
      setTimeout(lock.release, 300)
      const { ticks } = await ticking(() => runtime.runPromise(insert))
      expect(ticks).toBeGreaterThan(20)
      expect(await count()).toBe(1)
    } finally {
      lock.close()
    }

    // Past the wait, a transaction that never began fails with the SQLITE_BUSY itself (the 503 to retry),
    // not with the "no transaction is active" of the rollback @effect/sql then runs (a 500).
    const locked = holdLock(file)
    try {
      const exit = await runtime.runPromiseExit(insert)
      expect(Exit.isFailure(exit)).toBe(true)
      const failure = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      expect(isLocked((failure as { cause?: unknown }).cause)).toBe(true)
      expect(defectParts("gateway", failure).status).toBe(503)
      expect(await count()).toBe(1)
    } finally {
      locked.close()
    }

    // @effect/sql begins a transaction uninterruptibly: the interruption waits for the BEGIN, which
    // gets the lock once it goes, and then rolls the transaction back. Nothing is written, nothing left open.
    const again = holdLock(file)
    try {
      const fiber = runtime.runFork(insert)
      await new Promise((r) => setTimeout(r, 50))
      const interrupted = runtime.runPromise(Fiber.interrupt(fiber))
      setTimeout(again.release, 100)
      const exit = await interrupted
      expect(Exit.isInterrupted(exit)).toBe(true)
      // The gateway's connection holds no lock: another takes it at once.
      const probe = new Database(file, { timeout: 0 })
      probe.exec("BEGIN IMMEDIATE")
      probe.exec("ROLLBACK")
      probe.close()
      expect(await count()).toBe(1)
    } finally {
      again.close()
    }
  })
})
