/**
 * The health object (GET /v1/health and the gateway_health MCP tool). It is a readiness check:
 * `ok` only while the database answers, so a load balancer stops sending calls that would fail.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Option, Schema } from "effect"
import { GatewayConfig } from "./Config.ts"

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

// One cached probe per database client (a process normally has one).
const probes = new WeakMap<SqlClient.SqlClient, Effect.Effect<boolean>>()

const probeOf = (sql: SqlClient.SqlClient): Effect.Effect<boolean> => {
  let probe = probes.get(sql)
  if (probe === undefined) {
    const once = sql`SELECT 1`.pipe(
      Effect.timeoutFail({ duration: PROBE_TIMEOUT, onTimeout: () => new Error(`no answer within ${Duration.format(PROBE_TIMEOUT)}`) }),
      Effect.as(true),
      Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("health: the database does not answer", cause), false))
    )
    // Concurrent callers share one probe in flight and its answer for PROBE_TTL.
    probe = Effect.runSync(Effect.cachedWithTTL(once, PROBE_TTL))
    probes.set(sql, probe)
  }
  return probe
}

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
