/**
 * The PostgreSQL SqlClient: @effect/sql-pg over a `pg` pool that this module owns, plus the pool
 * itself as `PgPool`, so the metered hot path can send its few statements directly
 * (Storage/Sql/Metering.ts) instead of through @effect/sql's per-statement fiber work, and, when
 * its lifetime is positive, the API key cache of that path (KeyCache.ts).
 */
import { PgClient } from "@effect/sql-pg"
import * as Client from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Context, Duration, Effect, Layer } from "effect"
import Pg from "pg"
import * as KeyCache from "./KeyCache.ts"

export class PgPool extends Context.Tag("aigw/PgPool")<PgPool, Pg.Pool>() {}

const CONNECT_TIMEOUT = Duration.seconds(5)

const make = (url: string, maxConnections: number) =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({ connectionString: url, max: maxConnections, application_name: "aigw" })
        // Errors of idle clients (a restarted server) must not crash the process; the next query reconnects.
        pool.on("error", () => {})
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1000))
    )
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.timeoutFail({
        duration: CONNECT_TIMEOUT,
        onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
      })
    )
    const client = yield* PgClient.fromPool({ acquire: Effect.succeed(pool), applicationName: "aigw" })
    return Context.make(PgPool, pool).pipe(Context.add(PgClient.PgClient, client), Context.add(Client.SqlClient, client))
  })

/** SqlClient, PgClient and PgPool for a postgres:// URL, and the KeyCache when `keyCacheMs` > 0. */
export const layer = (
  url: string,
  maxConnections: number,
  keyCacheMs = 0
): Layer.Layer<Client.SqlClient | PgClient.PgClient | PgPool, SqlError> => {
  const client = Layer.scopedContext(make(url, maxConnections)).pipe(Layer.provide(Reactivity.layer))
  // Built after the pool answered, so a database that cannot be reached fails the start first.
  return keyCacheMs > 0 ? KeyCache.layer(url, keyCacheMs).pipe(Layer.provideMerge(client)) : client
}
