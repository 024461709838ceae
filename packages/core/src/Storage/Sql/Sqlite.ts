/**
 * The SQLite SqlClient: @effect/sql over one better-sqlite3 connection (WAL,
 * `synchronous = NORMAL`), like @effect/sql-sqlite-node's, plus the connection itself as
 * `SqliteDatabase`, so the metered hot path can run its few statements synchronously on the same
 * connection (Storage/Sql/Metering.ts) instead of paying @effect/sql's per-statement scope and span,
 * and, when its lifetime is positive, the credential cache of that path (KeyCache.ts).
 *
 * One connection serves everything; a semaphore gives transactions exclusive use of it. Because
 * better-sqlite3 is synchronous, a caller outside Effect that finds `db.inTransaction` false owns
 * the connection until it returns.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Database from "better-sqlite3"
import { Context, Effect, Layer, Scope } from "effect"
import * as KeyCache from "./KeyCache.ts"
import * as SqliteFile from "./SqliteFile.ts"
import { mayRetry, retryWhenUnlocked } from "./SqliteLock.ts"

/** A better-sqlite3 connection. */
export interface SqliteHandle extends Database.Database {}

export class SqliteDatabase extends Context.Tag("aigw/SqliteDatabase")<SqliteDatabase, SqliteHandle>() {}

const PREPARED_LIMIT = 500

/** Prepared statements by SQL text (the SQL of the stores is a small fixed set). */
const preparer = (db: Database.Database) => {
  const cache = new Map<string, Database.Statement>()
  return (sql: string) => {
    let statement = cache.get(sql)
    if (statement === undefined) {
      statement = db.prepare(sql)
      if (cache.size >= PREPARED_LIMIT) cache.delete(cache.keys().next().value!)
      cache.set(sql, statement)
    }
    return statement
  }
}

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

/** @effect/sql's rollback statement (its default, which `Client.make` below keeps). */
const ROLLBACK = "ROLLBACK"

const makeConnection = (db: Database.Database): Connection => {
  const prepare = preparer(db)
  /**
   * `f` now, or, while another process holds the lock, once it is free (SqliteLock.ts; an
   * interrupted fiber stops the wait). A plain statement holds the connection's semaphore only
   * while it starts, so a retry must not join a transaction another fiber opened meanwhile:
   * `retryWhenUnlocked` waits for that too.
   */
  const unlocked = <A>(f: () => A): Effect.Effect<A, SqlError> =>
    Effect.suspend(() => {
      try {
        return Effect.succeed(f())
      } catch (error) {
        if (!mayRetry(db, error)) return Effect.fail(failed(error))
        return Effect.tryPromise({ try: (signal) => retryWhenUnlocked(db, f, error, undefined, signal), catch: failed })
      }
    })
  /** A statement's rows (a writer's: none, or its result when `raw`); prepared and run under one wait for the lock. */
  const rowsOf = (statement: Database.Statement, params: ReadonlyArray<unknown>, raw: boolean): ReadonlyArray<any> => {
    if (statement.reader) return statement.all(...params)
    const result = statement.run(...params)
    return raw ? (result as any) : []
  }
  return {
    execute: (sql, params, transformRows) => {
      const rows = unlocked(() => rowsOf(prepare(sql), params, false))
      return transformRows ? Effect.map(rows, transformRows) : rows
    },
    executeRaw: (sql, params) => unlocked(() => rowsOf(prepare(sql), params, true)),
    executeValues: (sql, params) =>
      unlocked(() => {
        const statement = prepare(sql)
        if (!statement.reader) {
          statement.run(...params)
          return []
        }
        try {
          return statement.raw(true).all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
        } finally {
          statement.raw(false)
        }
      }),
    executeUnprepared: (sql, params, transformRows) => {
      // @effect/sql rolls back a transaction whose BEGIN failed: with the lock still taken past the
      // wait there is none, and SQLite's "no transaction is active" would hide the SQLITE_BUSY (a 503) behind a 500.
      if (sql === ROLLBACK && !db.inTransaction) return Effect.succeed([])
      const rows = unlocked(() => rowsOf(db.prepare(sql), params, false))
      return transformRows ? Effect.map(rows, transformRows) : rows
    },
    executeStream: () => Effect.dieMessage("executeStream is not supported on SQLite") as never
  }
}

const make = (filename: string) =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.try({ try: () => new Database(filename), catch: (cause) => new SqlError({ cause, message: `Cannot open SQLite database ${filename}` }) }),
      (db) => Effect.sync(() => db.close())
    )
    db.pragma("journal_mode = WAL")
    // With WAL, NORMAL is SQLite's documented safe setting: a commit survives a process crash and
    // the file never corrupts; only an OS crash or power loss can roll back the last commits. It
    // saves an fsync per commit (two per metered call; docs/performance.md).
    db.pragma("synchronous = NORMAL")
    // SQLite's own default page cache (2 MB) instead of the 16 MB better-sqlite3 builds in: the
    // gateway's hot pages (keys, avatars, quota counters, the tail of the usage table) fit in it and
    // the operating system's file cache keeps the rest; the larger cache was resident memory under load
    // (docs/performance.md).
    db.pragma("cache_size = -2000")
    // No busy timeout from here on: the driver's wait for another connection's lock would hold the
    // event loop. A statement that meets the lock fails at once and is tried again after a pause
    // (SqliteLock.ts). The pragmas above kept the driver's wait: two processes may open the file together.
    db.pragma("busy_timeout = 0")
    const connection = makeConnection(db)
    const semaphore = yield* Effect.makeSemaphore(1)
    const client = yield* Client.make({
      acquirer: semaphore.withPermits(1)(Effect.succeed(connection)),
      transactionAcquirer: Effect.uninterruptibleMask((restore) =>
        Effect.as(
          Effect.zipRight(
            restore(semaphore.take(1)),
            Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
          ),
          connection
        )
      ),
      // Take the write lock at BEGIN: a deferred transaction that reads and then writes fails with
      // SQLITE_BUSY when another process wrote in between (migrations of two processes at start);
      // an immediate one waits for the lock (SqliteLock.ts) instead.
      beginTransaction: "BEGIN IMMEDIATE",
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    return Context.make(SqliteDatabase, db).pipe(
      Context.add(Client.SqlClient, client),
      Context.add(SqliteFile.SqliteFile, db.memory ? { moved: () => undefined } : SqliteFile.watching(filename))
    )
  })

/**
 * SqlClient and SqliteDatabase for a database file (":memory:" for a private in-memory one), and
 * the KeyCache on that connection when `keyCacheMs` > 0.
 */
export const layer = (filename: string, keyCacheMs = 0): Layer.Layer<Client.SqlClient | SqliteDatabase | SqliteFile.SqliteFile, SqlError> => {
  const client = Layer.scopedContext(make(filename)).pipe(Layer.provide(Reactivity.layer))
  if (keyCacheMs <= 0) return client
  const cache = Layer.effect(KeyCache.KeyCache, Effect.map(SqliteDatabase, (db) => KeyCache.forSqlite(db, keyCacheMs)))
  return cache.pipe(Layer.provideMerge(client))
}
