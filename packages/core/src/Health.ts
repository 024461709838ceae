/**
 * The health object (GET /v1/health and the gateway_health MCP tool): liveness plus the database,
 * `ok` only while the database answers, so a load balancer stops sending calls that would fail.
 * Readiness (GET /v1/ready, `ready` below) also checks that the migrations are applied.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Option, Schema } from "effect"
import { GatewayConfig } from "./Config.ts"
import { migrations } from "./Storage/Sql/Migrations.ts"
import { SqliteFile } from "./Storage/Sql/SqliteFile.ts"

export const Health = Schema.Struct({
  /** `ok`, or `unavailable` when a dependency every call needs (the database) fails. */
  status: Schema.String,
  version: Schema.String,
  timestamp: Schema.String,
  /** Each dependency checked: `ok` or `failed`. */
  checks: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Literal("ok", "failed") }))
})
export type Health = typeof Health.Type

/** How long a probe may take before the database counts as failed. */
const PROBE_TIMEOUT = Duration.seconds(2)
/** How long a probe's answer is reused: health stays one cached lookup under load. */
const PROBE_TTL = Duration.seconds(1)

/**
 * A probe of the database, cached per database client (a process normally has one): concurrent
 * callers share one probe in flight and its answer for PROBE_TTL, so an unauthenticated endpoint
 * polled hard costs the database one probe a second.
 */
const cachedProbe = (probe: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>, failure: string) => {
  const probes = new WeakMap<SqlClient.SqlClient, Effect.Effect<boolean>>()
  return (sql: SqlClient.SqlClient): Effect.Effect<boolean> => {
    let cached = probes.get(sql)
    if (cached === undefined) {
      const once = Effect.suspend(() => probe(sql)).pipe(
        Effect.timeoutFail({ duration: PROBE_TIMEOUT, onTimeout: () => new Error(`no answer within ${Duration.format(PROBE_TIMEOUT)}`) }),
        Effect.as(true),
        Effect.catchAllCause((cause) => Effect.as(Effect.logWarning(failure, cause), false))
      )
      cached = Effect.runSync(Effect.cachedWithTTL(once, PROBE_TTL))
      probes.set(sql, cached)
    }
    return cached
  }
}

const probeOf = cachedProbe((sql) => sql`SELECT 1`, "health: the database does not answer")

/** The health object; `status` is `ok` unless the database (when there is one) fails its probe. */
export const check: Effect.Effect<Health, never, GatewayConfig> = Effect.gen(function*() {
  const { version } = yield* GatewayConfig
  const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
  const database = Option.isSome(sql) ? yield* probeOf(sql.value) : true
  return {
    status: database ? "ok" : "unavailable",
    version,
    timestamp: new Date().toISOString(),
    ...(Option.isSome(sql) ? { checks: { database: database ? "ok" as const : "failed" as const } } : {})
  }
})

/** The id of the newest migration this build knows (`0005_…` -> 5). */
export const LATEST_MIGRATION = Math.max(...Object.keys(migrations).map((key) => Number.parseInt(key, 10)))

export const Readiness = Schema.Struct({
  /** `ready`, or `unavailable` naming the failed check in `checks`. */
  status: Schema.Literal("ready", "unavailable"),
  /** `database` (answers `SELECT 1`) and `migrations` (the newest applied is the newest known): `ok` or `failed`. */
  checks: Schema.Record({ key: Schema.String, value: Schema.Literal("ok", "failed") })
})
export type Readiness = typeof Readiness.Type

/**
 * True when the migrations are applied up to the newest this build knows, or further: in a rolling
 * deploy the first new replica migrates, and the older ones must stay ready (migrations only add).
 */
const migrationsApplied = (sql: SqlClient.SqlClient): Effect.Effect<boolean> =>
  sql<{ readonly id: unknown }>`SELECT MAX(migration_id) AS id FROM aigw_migrations`.pipe(
    Effect.timeoutFail({ duration: PROBE_TIMEOUT, onTimeout: () => new Error(`no answer within ${Duration.format(PROBE_TIMEOUT)}`) }),
    Effect.map((rows) => Number(rows[0]?.id) >= LATEST_MIGRATION),
    Effect.tap((ok) => ok ? Effect.void : Effect.logWarning(`ready: migrations are not applied up to ${LATEST_MIGRATION}`)),
    Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("ready: the migrations table cannot be read", cause), false))
  )

/**
 * Whether the database takes a write: one row updated. A database that answers reads but cannot be
 * written (a full disk, a read-only file or replica) would fail every metered call with a 500.
 */
const takesWrites = cachedProbe((sql) => sql`UPDATE aigw_probe SET checked_at = ${Date.now()} WHERE id = 1`, "ready: the database does not take a write")

/** A SQLite file still the one the connection opened (SqliteFile.ts); true without one (PostgreSQL, memory). */
const fileInPlace = Effect.flatMap(Effect.serviceOption(SqliteFile), (file) => {
  const moved = Option.isSome(file) ? file.value.moved() : undefined
  return moved === undefined
    ? Effect.succeed(true)
    : Effect.as(Effect.logWarning(`ready: the SQLite database file was ${moved} under the running server: what it writes is lost at the next start; restart it`), false)
})

/**
 * Readiness (`GET /v1/ready`): the database answers and takes a write, AND its migrations are applied
 * up to the newest this build knows (a process started before its migrations ran must not take
 * traffic). Without a database (memory stores) there is nothing to check.
 */
export const ready: Effect.Effect<Readiness> = Effect.gen(function*() {
  const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
  if (Option.isNone(sql)) return { status: "ready" as const, checks: {} }
  const answers = yield* probeOf(sql.value)
  const migrated = answers && (yield* migrationsApplied(sql.value))
  // The write needs the probe's table: before the migrations, their check is the one that fails.
  const writable = migrated ? yield* takesWrites(sql.value) : answers
  const database = writable && (yield* fileInPlace)
  const checks = { database: database ? "ok" as const : "failed" as const, migrations: migrated ? "ok" as const : "failed" as const }
  return { status: database && migrated ? "ready" as const : "unavailable" as const, checks }
})
