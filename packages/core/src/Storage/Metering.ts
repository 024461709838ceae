/**
 * The storage side of a metered call, as plain promises for the HTTP fast lane
 * (Http/FastLane.ts): who an API key belongs to, quota admission, and usage recording. Same
 * semantics as Auth's API-key check and UsageStore's admit / callsOn / record, which the shared
 * store suite checks on every backend.
 *
 * On SQLite the statements run synchronously on the store's own connection (better-sqlite3):
 * a few microseconds each instead of @effect/sql's per-statement scope, span and fiber work.
 * While an Effect transaction holds that connection (`inTransaction`), the call goes through the
 * Effect stores instead, which wait for it. Elsewhere (memory, PostgreSQL) every call runs the
 * Effect stores.
 */
import type BetterSqlite from "better-sqlite3"
import { Context, Effect, Layer, Option, Runtime } from "effect"
import { ApiKeyStore } from "./ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "./AvatarStore.ts"
import { fromRow as avatarFromRow } from "./Sql/AvatarStore.ts"
import { PgPool } from "./Sql/Postgres.ts"
import { SqliteDatabase, type SqliteHandle } from "./Sql/Sqlite.ts"
import { uuidv7 } from "./Sql/ids.ts"
import { num } from "./Sql/util.ts"
import { type UsageEvent, UsageStore } from "./UsageStore.ts"

export interface MeteringService {
  /** The active avatar owning the unrevoked API key with this SHA-256, if any. */
  readonly avatarOfKey: (hash: string) => Promise<AvatarRecord | undefined>
  /** UsageStore.admit: the new count, or undefined when `count` calls do not fit in `limit`. */
  readonly admit: (avatarId: string, day: string, limit: number, count: number) => Promise<number | undefined>
  /** UsageStore.callsOn. */
  readonly callsOn: (avatarId: string, day: string) => Promise<number>
  /** UsageStore.record. */
  readonly record: (event: UsageEvent) => Promise<void>
}

type PgPoolHandle = Context.Tag.Service<typeof PgPool>

export class Metering extends Context.Tag("aigw/Metering")<Metering, MeteringService>() {}

/** The values of a usage_events row, in the column order of the INSERTs below. */
const eventRow = (e: UsageEvent): Array<unknown> => [
  uuidv7(e.at),
  e.avatarId,
  e.day,
  e.provider,
  e.model,
  e.capability,
  e.promptTokens,
  e.completionTokens,
  e.costUSD,
  Math.round(e.latencyMs),
  e.estimated ? 1 : 0,
  e.ok ? 1 : 0,
  e.at
]

/** Through the Effect stores (any backend). */
const viaStores = Effect.gen(function*() {
  const keys = yield* ApiKeyStore
  const avatars = yield* AvatarStore
  const usage = yield* UsageStore
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const active = (a: Option.Option<AvatarRecord>) => (Option.isSome(a) && a.value.isActive ? a.value : undefined)
  return Metering.of({
    avatarOfKey: (hash) =>
      run(
        keys.findByHashWithAvatar
          ? Effect.map(keys.findByHashWithAvatar(hash), (found) =>
            Option.isSome(found) && found.value.key.revokedAt === null ? active(found.value.avatar) : undefined)
          : Effect.flatMap(keys.findByHash(hash), (key) =>
            Option.isSome(key) && key.value.revokedAt === null
              ? Effect.map(avatars.findById(key.value.avatarId), active)
              : Effect.succeed(undefined))
      ),
    admit: (avatarId, day, limit, count) => run(Effect.map(usage.admit(avatarId, day, limit, count), Option.getOrUndefined)),
    callsOn: (avatarId, day) => run(usage.callsOn(avatarId, day)),
    record: (event) => run(usage.record(event))
  })
})

/** The statements of Sql/ApiKeyStore.ts and Sql/UsageStore.ts, run directly on the connection. */
const direct = (db: SqliteHandle, fallback: MeteringService): MeteringService => {
  // Prepared on first use: the layer may be built before migrations ran.
  const prepared = (sql: string) => {
    let statement: BetterSqlite.Statement<Array<unknown>> | undefined
    return () => (statement ??= db.prepare<Array<unknown>>(sql))
  }
  const keyWithAvatar = prepared(
    `SELECT k.revoked_at AS k_revoked_at, a.* FROM api_keys k LEFT JOIN avatars a ON a.id = k.avatar_id WHERE k.hash = ?`
  )
  const admit = prepared(
    `INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES (?, ?, ?, 0, 0)
     ON CONFLICT (avatar_id, day) DO UPDATE SET calls = daily_usage.calls + excluded.calls
     WHERE daily_usage.calls + excluded.calls <= ? RETURNING calls`
  )
  const callsOn = prepared(`SELECT calls FROM daily_usage WHERE avatar_id = ? AND day = ?`)
  const insertEvent = prepared(
    `INSERT INTO usage_events (id, avatar_id, day, provider, model, capability, prompt_tokens, completion_tokens, cost_usd, latency_ms, estimated, ok, at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
  )
  const addTotals = prepared(
    `INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES (?, ?, 0, ?, ?)
     ON CONFLICT (avatar_id, day) DO UPDATE SET tokens = daily_usage.tokens + excluded.tokens, spend_usd = daily_usage.spend_usd + excluded.spend_usd`
  )
  const record = db.transaction((e: UsageEvent): void => {
    insertEvent().run(...eventRow(e))
    addTotals().run(e.avatarId, e.day, e.promptTokens + e.completionTokens, e.costUSD)
  })
  // Sync work as a promise; a thrown driver error becomes a rejection like the Effect stores' defects.
  const now = <A>(f: () => A): Promise<A> => {
    try {
      return Promise.resolve(f())
    } catch (e) {
      return Promise.reject(e)
    }
  }

  // Group commit: the writes (admissions, usage records) arriving in one turn of the event loop
  // run in one transaction at its end. Each is still atomic and answered only once committed, an
  // admission still sees every earlier one, and the WAL receives the pages of a batch once instead
  // of once per call (fewer bytes, fewer checkpoints).
  interface Write {
    readonly run: () => unknown
    readonly fallback: () => Promise<unknown>
    readonly resolve: (a: any) => void
    readonly reject: (e: unknown) => void
  }
  let queue: Array<Write> = []
  const begin = prepared("BEGIN")
  const commit = prepared("COMMIT")
  const flush = () => {
    const writes = queue
    queue = []
    if (db.inTransaction) {
      // An Effect transaction holds the connection across a yield: queue behind it.
      for (const w of writes) w.fallback().then(w.resolve, w.reject)
      return
    }
    if (writes.length === 1) {
      // Alone in its turn (light load): its own statement(s) are already atomic, no BEGIN/COMMIT around.
      const w = writes[0]!
      try {
        return w.resolve(w.run())
      } catch (error) {
        return w.reject(error)
      }
    }
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = []
    try {
      begin().run()
      for (const w of writes) {
        try {
          outcomes.push({ ok: true, value: w.run() })
        } catch (error) {
          outcomes.push({ ok: false, error })
        }
      }
      commit().run()
    } catch (error) {
      if (db.inTransaction) db.exec("ROLLBACK")
      for (const w of writes) w.reject(error)
      return
    }
    writes.forEach((w, i) => {
      const o = outcomes[i]!
      if (o.ok) w.resolve(o.value)
      else w.reject(o.error)
    })
  }
  const write = <A>(run: () => A, fallback: () => Promise<A>): Promise<A> =>
    new Promise<A>((resolve, reject) => {
      if (queue.length === 0) setImmediate(flush)
      queue.push({ run, fallback, resolve, reject })
    })

  return {
    avatarOfKey: (hash) =>
      db.inTransaction ? fallback.avatarOfKey(hash) : now(() => {
        const row = keyWithAvatar().get(hash) as any
        if (row === undefined || row.k_revoked_at !== null || row.id === null) return undefined
        const avatar = avatarFromRow(row)
        return avatar.isActive ? avatar : undefined
      }),
    admit: (avatarId, day, limit, count) =>
      count > limit ? Promise.resolve(undefined) : write(() => {
        const row = admit().get(avatarId, day, count, limit) as { calls: unknown } | undefined
        return row === undefined ? undefined : num(row.calls)
      }, () => fallback.admit(avatarId, day, limit, count)),
    callsOn: (avatarId, day) =>
      db.inTransaction ? fallback.callsOn(avatarId, day) : now(() => num((callsOn().get(avatarId, day) as any)?.calls)),
    record: (event) => write(() => void record(event), () => fallback.record(event))
  }
}

/**
 * The same statements on PostgreSQL, sent on the pool directly as named prepared statements
 * (parsed and planned once per connection). Usage recording is the Effect store's single
 * statement (a data-modifying CTE), so it is atomic on its own.
 */
const directPg = (pool: PgPoolHandle): MeteringService => {
  const query = (name: string, text: string, values: Array<unknown>) => pool.query({ name, text, values }).then((r) => r.rows)
  return {
    avatarOfKey: (hash) =>
      query(
        "aigw_key_avatar",
        "SELECT k.revoked_at AS k_revoked_at, a.* FROM api_keys k LEFT JOIN avatars a ON a.id = k.avatar_id WHERE k.hash = $1",
        [hash]
      ).then((rows: Array<any>) => {
        const row = rows[0]
        if (row === undefined || row.k_revoked_at !== null || row.id === null) return undefined
        const avatar = avatarFromRow(row)
        return avatar.isActive ? avatar : undefined
      }),
    admit: (avatarId, day, limit, count) =>
      count > limit ? Promise.resolve(undefined) : query(
        "aigw_admit",
        `INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES ($1, $2, $3, 0, 0)
         ON CONFLICT (avatar_id, day) DO UPDATE SET calls = daily_usage.calls + excluded.calls
         WHERE daily_usage.calls + excluded.calls <= $4 RETURNING calls`,
        [avatarId, day, count, limit]
      ).then((rows: Array<any>) => (rows[0] === undefined ? undefined : num(rows[0].calls))),
    callsOn: (avatarId, day) =>
      query("aigw_calls_on", "SELECT calls FROM daily_usage WHERE avatar_id = $1 AND day = $2", [avatarId, day])
        .then((rows: Array<any>) => num(rows[0]?.calls)),
    record: (e) =>
      query(
        "aigw_record",
        `WITH event AS (
           INSERT INTO usage_events (id, avatar_id, day, provider, model, capability, prompt_tokens, completion_tokens, cost_usd, latency_ms, estimated, ok, at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13))
         INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES ($2, $3, 0, $14, $9)
         ON CONFLICT (avatar_id, day) DO UPDATE
         SET tokens = daily_usage.tokens + excluded.tokens, spend_usd = daily_usage.spend_usd + excluded.spend_usd`,
        [...eventRow(e), e.promptTokens + e.completionTokens]
      ).then(() => undefined)
  }
}

/** Direct statements on SQLite and PostgreSQL (from the connection or pool in the context), the Effect stores otherwise. */
export const make = Effect.gen(function*() {
  const stores = yield* viaStores
  const db = yield* Effect.serviceOption(SqliteDatabase)
  if (Option.isSome(db)) return direct(db.value, stores)
  const pool = yield* Effect.serviceOption(PgPool)
  return Option.isSome(pool) ? directPg(pool.value) : stores
})

export const layer = Layer.effect(Metering, make)
