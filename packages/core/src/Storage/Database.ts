/**
 * Picks the SQL driver from a `DATABASE_URL`: `postgres://…` (or `postgresql://…`) for
 * PostgreSQL, `sqlite:PATH` for SQLite. Applies migrations once the client is up.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { migrate } from "./Sql/Migrations.ts"
import * as Postgres from "./Sql/Postgres.ts"
import * as Sqlite from "./Sql/Sqlite.ts"
import { reasonOf, redactUrls, startupError } from "../StartupError.ts"
import { makeDirectory } from "../Directories.ts"

export type DatabaseKind = "sqlite" | "pg"

export const kindOf = (url: string): DatabaseKind => {
  if (/^postgres(ql)?:\/\//.test(url)) return "pg"
  // better-sqlite3 takes an empty file name as a temporary database, gone at the next start: never what a URL means.
  if (url.startsWith("sqlite:") && url.slice("sqlite:".length).replace(/^\/\//, "") === "") {
    throw startupError("DATABASE_URL sqlite: names no file", "give a path, e.g. sqlite:./data/aigw.sqlite, or sqlite::memory: for a database that lasts one run")
  }
  if (url.startsWith("sqlite:")) return "sqlite"
  throw startupError(
    `unsupported database URL "${url.split(":")[0]}:…"`,
    "DATABASE_URL must start with postgres://, postgresql:// or sqlite:"
  )
}

/** How long the credential cache keeps an API key's owner or a token's avatar (Sql/KeyCache.ts); 0 turns it off. */
export const DEFAULT_KEY_CACHE_SECONDS = 60

export interface DatabaseOptions {
  readonly maxConnections?: number
  /** The credential cache's entry lifetime, DEFAULT_KEY_CACHE_SECONDS if unset, 0 for none. */
  readonly keyCacheSeconds?: number
}

/**
 * The SqlClient for a URL, without migrations. On SQLite the context also holds the connection
 * as `Sqlite.SqliteDatabase`, on PostgreSQL the pool as `Postgres.PgPool`, and on both the
 * credential cache as `KeyCache.KeyCache` (used by the metered hot path, Storage/Sql/Metering.ts).
 */
export const layerClient = (url: string, options: DatabaseOptions = {}): Layer.Layer<SqlClient.SqlClient> => {
  // A failed connection names the URL (without its password) and the variable to fix.
  const unavailable = (what: string) => <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, unknown, R> =>
    Layer.catchAllCause(layer, (cause) =>
      Cause.isInterruptedOnly(cause)
        ? Layer.failCause(cause as Cause.Cause<unknown>)
        : Layer.fail<unknown>(startupError(`${what} ${redactUrls(url)}: ${reasonOf(Cause.squash(cause))}`, "check DATABASE_URL")))
  const keyCacheMs = (options.keyCacheSeconds ?? DEFAULT_KEY_CACHE_SECONDS) * 1000
  if (kindOf(url) === "pg") {
    return Postgres.layer(url, options.maxConnections ?? 10, keyCacheMs).pipe(unavailable("cannot reach the database at"), Layer.orDie)
  }
  const filename = url.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "")
  return Layer.unwrapEffect(
    Effect.sync(() => {
      if (filename !== ":memory:") {
        makeDirectory(path.dirname(path.resolve(filename)))
        createPrivately(filename)
      }
      return Sqlite.layer(filename, keyCacheMs) as Layer.Layer<SqlClient.SqlClient>
    })
  ).pipe(unavailable("cannot open the database at"), Layer.orDie)
}

/**
 * A new database file is made readable by its owner only (password hashes and one-time token hashes
 * live there); SQLite gives its -wal and -shm files the database file's permissions. An existing file
 * keeps the permissions its operator chose.
 */
const createPrivately = (filename: string) => {
  try {
    fs.writeFileSync(filename, "", { flag: "wx", mode: 0o600 })
  } catch (e) {
    // There already (or made meanwhile by another worker): opened as it is.
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  }
}

/** A migration layer: apply pending migrations when built. */
export const layerMigrate = Layer.effectDiscard(migrate.pipe(Effect.orDie))

/** SqlClient for the URL with every pending migration applied. */
export const layer = (url: string, options: DatabaseOptions & { readonly migrate?: boolean } = {}) => {
  const client = layerClient(url, options)
  return options.migrate === false ? client : Layer.provideMerge(layerMigrate, client)
}
