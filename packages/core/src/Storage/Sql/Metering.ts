/**
 * The metering statements (API key -> avatar, a token's active avatar, quota admission, today's
 * count, usage recording), each written once here, and the SQL layer of the Metering port that
 * runs them.
 *
 * The same text runs three ways:
 * - through the SqlClient (`viaClient`): what Sql/UsageStore.ts and Sql/ApiKeyStore.ts use, so
 *   inside an Effect transaction a statement joins it;
 * - on SQLite, synchronously on the store's own better-sqlite3 connection, writes group-committed,
 *   the key and avatar lookups behind the credential cache (KeyCache.ts) when the Database layer
 *   made one, without @effect/sql's per-statement scope, span and fiber work. While an Effect transaction
 *   holds that connection (`inTransaction`) a call goes through the SqlClient instead, which waits
 *   for the transaction to end rather than joining it;
 * - on PostgreSQL, as named prepared statements on the pool (parsed and planned once per connection),
 *   the key and avatar lookups behind the credential cache (KeyCache.ts) when the Database layer made one.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type BetterSqlite from "better-sqlite3"
import { Context, Effect, Layer, Option, Runtime } from "effect"
import type { AvatarRecord } from "../AvatarStore.ts"
import { CallerGone, Metering, type MeteringService, unlessGone } from "../Metering.ts"
import type { UsageEvent } from "../UsageStore.ts"
import { fromRow as avatarFromRow, recordColumns as avatarColumns } from "./AvatarStore.ts"
import { uuidv7 } from "./ids.ts"
import { avatarEntry, KeyCache, keyEntry, type KeyCacheService } from "./KeyCache.ts"
import { PgPool } from "./Postgres.ts"
import { SqliteDatabase, type SqliteHandle } from "./Sqlite.ts"
import { LOCK_WAIT_MS, mayRetry, whenUnlocked } from "./SqliteLock.ts"
import { num } from "./util.ts"

/** A statement's text for each dialect (`?` placeholders on SQLite, `$1`, `$2`… on PostgreSQL) and its prepared-statement name. */
interface Statement {
  readonly name: string
  readonly sqlite: string
  readonly pg: string
}

/** Written with `?` placeholders, each parameter once and in order, so numbering them gives the PostgreSQL text. */
const statement = (name: string, text: string): Statement => {
  let n = 0
  return { name: `aigw_${name}`, sqlite: text, pg: text.replace(/\?/g, () => `$${++n}`) }
}

const INSERT_EVENTS =
  `INSERT INTO usage_events (id, avatar_id, day, provider, model, capability, prompt_tokens, completion_tokens, cost_usd, latency_ms, estimated, ok, at)`
const INSERT_EVENT = `${INSERT_EVENTS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
const INSERT_TOTALS = `INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd)`
const ADD_TO_TOTALS = `ON CONFLICT (avatar_id, day) DO UPDATE
   SET tokens = daily_usage.tokens + excluded.tokens, spend_usd = daily_usage.spend_usd + excluded.spend_usd`
const ADD_TOTALS = `${INSERT_TOTALS} VALUES (?, ?, 0, ?, ?) ${ADD_TO_TOTALS}`

export const statements = {
  /** The key (its columns as k_*) and its owner's row (all null without an owner). */
  keyWithAvatar: statement(
    "key_avatar",
    `SELECT k.id AS k_id, k.avatar_id AS k_avatar_id, k.name AS k_name, k.prefix AS k_prefix, k.hash AS k_hash,
            k.created_at AS k_created_at, k.last_used_at AS k_last_used_at, k.revoked_at AS k_revoked_at, k.jobs_stopped_at AS k_jobs_stopped_at,
            ${avatarColumns.map((c) => `a.${c}`).join(", ")}
     FROM api_keys k LEFT JOIN avatars a ON a.id = k.avatar_id WHERE k.hash = ?`
  ),
  /** An avatar's row (a token's subject). */
  avatarById: statement("avatar_by_id", `SELECT ${avatarColumns.join(", ")} FROM avatars WHERE id = ?`),
  /**
   * The quota gate on SQLite: one conditional upsert. When the calls do not fit, the WHERE fails and
   * no row is returned. PostgreSQL runs the same upsert per element in `aigw_admit_many` (`admitMany`).
   */
  admit: statement(
    "admit",
    `INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES (?, ?, ?, 0, 0)
     ON CONFLICT (avatar_id, day) DO UPDATE SET calls = daily_usage.calls + excluded.calls
     WHERE daily_usage.calls + excluded.calls <= ? RETURNING calls`
  ),
  callsOn: statement("calls_on", `SELECT calls FROM daily_usage WHERE avatar_id = ? AND day = ?`),
  /** Recording on SQLite: these two in one transaction. */
  insertEvent: statement("insert_event", INSERT_EVENT),
  addTotals: statement("add_totals", ADD_TOTALS),
  /** Recording on PostgreSQL: the same two as one statement (a data-modifying CTE), atomic on its own and one round trip. */
  record: statement("record", `WITH event AS (${INSERT_EVENT}) ${ADD_TOTALS}`)
} as const

/**
 * Recording a batch on PostgreSQL (group commit), one atomic statement: the events from one array
 * per column ($1…$13, in `eventRow`'s order), the totals summed per avatar and day (tokens in $14)
 * so that no row is updated twice.
 */
const recordMany = {
  name: "aigw_record_many",
  text: `WITH event AS (${INSERT_EVENTS}
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::integer[],
                          $9::float8[], $10::integer[], $11::integer[], $12::integer[], $13::bigint[]))
   ${INSERT_TOTALS}
   SELECT avatar_id, day, 0, sum(tokens), sum(spend_usd)
   FROM unnest($2::text[], $3::text[], $14::bigint[], $9::float8[]) AS t(avatar_id, day, tokens, spend_usd)
   GROUP BY avatar_id, day
   ORDER BY avatar_id COLLATE "C", day COLLATE "C"
   ${ADD_TO_TOTALS}`
}

/**
 * The quota gate on PostgreSQL: admissions in one round trip through the function of migration
 * 0008, in the order given; it re-evaluates each condition under the row lock. Its result has the
 * day's calls after each admitted request, null for a refused one.
 */
const admitMany = {
  name: "aigw_admit_many",
  text: `SELECT aigw_admit_many($1::text[], $2::text[], $3::integer[], $4::integer[]) AS calls`
}
interface Admission {
  readonly avatarId: string
  readonly day: string
  readonly count: number
  readonly limit: number
}
/** A batch statement's parameters: its rows (all of one width, at least one) as one array per column. */
const columnsOf = (rows: ReadonlyArray<ReadonlyArray<unknown>>): Array<Array<unknown>> => {
  const columns: Array<Array<unknown>> = rows[0]!.map(() => [])
  for (const row of rows) row.forEach((value, i) => columns[i]!.push(value))
  return columns
}
/**
 * The most calls a day's count holds on PostgreSQL (`integer`): a limit above it admits exactly as it does, and is
 * sent as it. A plan's limit may be any safe integer (times the karma multiplier), which the gate's `integer[]`
 * refused, failing every call of its avatar and every admission batched with it. (Widening the column instead
 * would change the statements' result types under processes of the previous release still running.)
 */
const MAX_CALLS = 2_147_483_647
/** `admitMany`'s parameters. */
const admissionColumns = (batch: ReadonlyArray<Admission>) =>
  columnsOf(batch.map((a) => [a.avatarId, a.day, a.count, Math.min(a.limit, MAX_CALLS)]))
/**
 * The order rows are locked in by batches (admissions, and records through their ORDER BY): by
 * avatar and day, so two batches of different processes never wait for each other's rows in a cycle.
 */
const byRow = (a: { readonly avatarId: string; readonly day: string }, b: { readonly avatarId: string; readonly day: string }) =>
  a.avatarId < b.avatarId ? -1 : a.avatarId > b.avatarId ? 1 : a.day < b.day ? -1 : a.day > b.day ? 1 : 0

/** The parameters of `insertEvent`. */
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
/** The parameters of `addTotals`. */
const totalsRow = (e: UsageEvent): Array<unknown> => [e.avatarId, e.day, e.promptTokens + e.completionTokens, e.costUSD]

/** The avatar of a row holding an `avatars` row's columns, if there is one and it is active. */
const activeIn = (row: any): AvatarRecord | undefined => {
  if (row === undefined || row.id === null || row.id === undefined) return undefined
  const avatar = avatarFromRow(row)
  return avatar.isActive ? avatar : undefined
}
/** A valid key is one that exists and is not revoked, owned by an active avatar: that avatar, else undefined. */
const activeOwner = (row: any): AvatarRecord | undefined => (row === undefined || row.k_revoked_at !== null ? undefined : activeIn(row))
/** The day's calls after an admission (a returned row's or an element of `admitMany`'s result), undefined for a refusal. */
const admitted = (calls: unknown): number | undefined => (calls === undefined || calls === null ? undefined : num(calls))

/**
 * Group commit's queue: the calls made in one turn of the event loop, handed to `flush` together
 * at its end (setImmediate). Each call's promise is settled by `flush` through its item.
 *
 * A `flush` that returns a promise (a statement on a server) has at most `inFlight` batches out at
 * once: while they are, the calls of the following turns wait and go together as the next batch
 * when one settles. So a database that answers slower than the event loop turns gets fewer, larger
 * statements rather than a growing line of small ones (which cost it more per call just when it has
 * the least to spare).
 */
export interface Pending<W> {
  readonly work: W
  readonly resolve: (a: any) => void
  readonly reject: (e: unknown) => void
}
export const perTurn = <W>(flush: (batch: Array<Pending<W>>) => Promise<unknown> | void, inFlight = Infinity) => {
  let queue: Array<Pending<W>> = []
  let out = 0
  let scheduled = false
  const schedule = () => {
    if (scheduled || queue.length === 0 || out >= inFlight) return
    scheduled = true
    setImmediate(run)
  }
  const settled = () => {
    out--
    schedule()
  }
  // Scheduled only with a place free, and only `run` takes one: the place is still free here.
  const run = () => {
    scheduled = false
    const batch = queue
    queue = []
    const done = flush(batch)
    if (done !== undefined) {
      out++
      done.then(settled, settled)
    }
  }
  return <A>(work: W): Promise<A> =>
    new Promise<A>((resolve, reject) => {
      queue.push({ work, resolve, reject })
      schedule()
    })
}

/** A batch's items whose caller is still there; the others are answered `CallerGone`, nothing done for them. */
const present = <W extends { readonly gone?: (() => boolean) | undefined }>(batch: Array<Pending<W>>): Array<Pending<W>> => {
  let i = 0
  while (i < batch.length && !batch[i]!.work.gone?.()) i++
  // The batch itself when nobody left (the usual case: no new array); each caller is asked once.
  if (i === batch.length) return batch
  const kept = batch.slice(0, i)
  batch[i]!.reject(new CallerGone())
  for (const p of batch.slice(i + 1)) {
    if (p.work.gone?.()) p.reject(new CallerGone())
    else kept.push(p)
  }
  return kept
}

/** A lookup by id through the cache, if there is one. */
const cached = (
  cache: Option.Option<KeyCacheService>,
  entry: (id: string) => string,
  load: (id: string) => Promise<AvatarRecord | undefined>
) => Option.isSome(cache) ? (id: string) => cache.value.lookup(entry(id), () => load(id)) : load

/** The statements through the SqlClient, as Effects (defects on driver errors, like the other SQL stores). */
export const viaClient = (sql: SqlClient.SqlClient) => {
  const textOf = sql.onDialectOrElse({ pg: () => (s: Statement) => s.pg, orElse: () => (s: Statement) => s.sqlite })
  const rows = (s: Statement, params: ReadonlyArray<unknown>) => Effect.orDie(sql.unsafe<any>(textOf(s), params))
  const keyRow = (hash: string): Effect.Effect<any> => Effect.map(rows(statements.keyWithAvatar, [hash]), (r) => r[0])
  return {
    /** The row of `keyWithAvatar`, or undefined for an unknown key. */
    keyRow,
    avatarOfKey: (hash: string) => Effect.map(keyRow(hash), activeOwner),
    activeAvatar: (id: string) => Effect.map(rows(statements.avatarById, [id]), (r) => activeIn(r[0])),
    admit: (avatarId: string, day: string, limit: number, count: number): Effect.Effect<number | undefined> =>
      count > limit
        ? Effect.succeed(undefined)
        : sql.onDialectOrElse({
          pg: () =>
            Effect.map(
              Effect.orDie(sql.unsafe<any>(admitMany.text, admissionColumns([{ avatarId, day, count, limit }]))),
              (r) => admitted(r[0].calls[0])
            ),
          orElse: () => Effect.map(rows(statements.admit, [avatarId, day, count, limit]), (r) => admitted(r[0]?.calls))
        }),
    callsOn: (avatarId: string, day: string) => Effect.map(rows(statements.callsOn, [avatarId, day]), (r) => num(r[0]?.calls)),
    record: (e: UsageEvent): Effect.Effect<void> =>
      sql.onDialectOrElse({
        pg: () => rows(statements.record, [...eventRow(e), ...totalsRow(e)]),
        orElse: () => sql.withTransaction(Effect.zipRight(rows(statements.insertEvent, eventRow(e)), rows(statements.addTotals, totalsRow(e))))
      }).pipe(Effect.asVoid, Effect.orDie)
  }
}

/**
 * The statements run directly on the SQLite connection, the key and avatar lookups behind the
 * cache if there is one; `fallback` while an Effect transaction holds the connection.
 */
const onSqlite = (db: SqliteHandle, fallback: MeteringService, cache: Option.Option<KeyCacheService>): MeteringService => {
  // Prepared on first use: the layer may be built before migrations ran.
  const prepared = (sql: string) => {
    let cached: BetterSqlite.Statement<Array<unknown>> | undefined
    return () => (cached ??= db.prepare<Array<unknown>>(sql))
  }
  const keyWithAvatar = prepared(statements.keyWithAvatar.sqlite)
  const avatarById = prepared(statements.avatarById.sqlite)
  const admit = prepared(statements.admit.sqlite)
  const callsOn = prepared(statements.callsOn.sqlite)
  const insertEvent = prepared(statements.insertEvent.sqlite)
  const addTotals = prepared(statements.addTotals.sqlite)
  const record = db.transaction((e: UsageEvent): void => {
    insertEvent().run(...eventRow(e))
    addTotals().run(...totalsRow(e))
  })
  // Group commit: the writes (admissions, usage records) arriving in one turn of the event loop
  // run in one transaction at its end. Each is still atomic and answered only once committed, an
  // admission still sees every earlier one, and the WAL receives the pages of a batch once instead
  // of once per call (fewer bytes, fewer checkpoints). While another process holds the write lock
  // the batch waits for it off the event loop (SqliteLock.ts), and the turns after it wait behind
  // it and go together as the next batch.
  interface Write {
    readonly run: () => unknown
    readonly fallback: () => Promise<unknown>
    /** When the write was queued: a batch stops waiting for the lock `LOCK_WAIT_MS` after its oldest write. */
    readonly since: number
    /** An admission's caller that may have left meanwhile (MeteringService.admit). */
    readonly gone: (() => boolean) | undefined
  }
  // IMMEDIATE: the lock is taken here or not at all, so a lock held elsewhere fails the BEGIN
  // (nothing ran, to be tried again) rather than one of the batch's writes.
  const begin = prepared("BEGIN IMMEDIATE")
  const commit = prepared("COMMIT")
  /** The batch, committed; throws only when another process's lock kept it from starting (nothing ran). */
  const commitBatch = (all: Array<Pending<Write>>): void => {
    const writes = present(all)
    if (writes.length === 0) return
    if (db.inTransaction) {
      // An Effect transaction holds the connection across a yield: queue behind it.
      for (const w of writes) w.work.fallback().then(w.resolve, w.reject)
      return
    }
    if (writes.length === 1) {
      // Alone in its turn (light load): its own statement(s) are already atomic, no BEGIN/COMMIT around.
      const w = writes[0]!
      let value: unknown
      try {
        value = w.work.run()
      } catch (error) {
        if (mayRetry(db, error)) throw error
        return w.reject(error)
      }
      return w.resolve(value)
    }
    begin().run()
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = []
    try {
      for (const w of writes) {
        try {
          outcomes.push({ ok: true, value: w.work.run() })
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
  // One batch out at a time: only a batch waiting for the lock is out past its turn.
  const enqueue = perTurn<Write>((writes) =>
    whenUnlocked(db, () => commitBatch(writes), writes[0]!.work.since + LOCK_WAIT_MS).catch((error) => {
      // Nothing was written: a caller that left meanwhile is told so, not that the database was locked.
      for (const w of writes) w.reject(w.work.gone?.() ? new CallerGone() : error)
    }), 1)
  const write = <A>(run: () => A, fallback: () => Promise<A>, gone?: () => boolean): Promise<A> =>
    enqueue<A>({ run, fallback, since: Date.now(), gone })
  /** A read on the connection (a lock held elsewhere is waited for as by the writes). */
  const read = <A>(f: () => A): Promise<A> => whenUnlocked(db, f)

  const avatarOfKey = cached(cache, keyEntry, (hash) => read(() => activeOwner(keyWithAvatar().get(hash))))
  const activeAvatar = cached(cache, avatarEntry, (id) => read(() => activeIn(avatarById().get(id))))
  return {
    avatarOfKey: (hash) => db.inTransaction ? fallback.avatarOfKey(hash) : avatarOfKey(hash),
    activeAvatar: (id) => db.inTransaction ? fallback.activeAvatar(id) : activeAvatar(id),
    admit: (avatarId, day, limit, count, gone) =>
      count > limit
        ? Promise.resolve(undefined)
        : write(() => admitted((admit().get(avatarId, day, count, limit) as any)?.calls), () => fallback.admit(avatarId, day, limit, count, gone), gone),
    callsOn: (avatarId, day) =>
      db.inTransaction ? fallback.callsOn(avatarId, day) : read(() => num((callsOn().get(avatarId, day) as any)?.calls)),
    record: (event) => write(() => void record(event), () => fallback.record(event))
  }
}

/**
 * The statements on the PostgreSQL pool as named prepared statements; key and avatar lookups
 * through the cache if there is one. Admissions and usage records are group-committed like SQLite's writes:
 * those of one turn of the event loop go as one statement (`admitMany`, `recordMany`), each
 * answered once it committed. If a record batch fails, each record is retried alone with the same
 * event ids, so one bad record fails only itself and a batch that did commit after all is not
 * counted twice (the ids collide).
 */
const onPg = (pool: Context.Tag.Service<typeof PgPool>, cache: Option.Option<KeyCacheService>): MeteringService => {
  const query = (s: Statement, values: Array<unknown>): Promise<Array<any>> =>
    pool.query({ name: s.name, text: s.pg, values }).then((r) => r.rows)
  interface Recording {
    readonly event: Array<unknown>
    readonly totals: Array<unknown>
  }
  const recordOne = (r: Recording) => query(statements.record, [...r.event, ...r.totals]).then(() => undefined)
  // One batch of each kind on the server at a time (perTurn's `inFlight`): the next collects meanwhile.
  const enqueueRecord = perTurn<Recording>((batch) => {
    if (batch.length === 1) return recordOne(batch[0]!.work).then(batch[0]!.resolve, batch[0]!.reject)
    // `recordMany`'s parameters: the event's columns, then its tokens.
    const columns = columnsOf(batch.map(({ work }) => [...work.event, work.totals[2]]))
    return pool.query({ name: recordMany.name, text: recordMany.text, values: columns }).then(
      () => batch.forEach((p) => p.resolve(undefined)),
      () => batch.forEach((p) => recordOne(p.work).then(p.resolve, p.reject))
    )
  }, 1)
  // A failed batch is not retried: unlike a record's id, nothing would tell a retry that the batch
  // had committed after all, and its calls would be counted twice. Each caller gets the error, as a
  // lone admission's would.
  const enqueueAdmission = perTurn<Admission & { readonly gone: (() => boolean) | undefined }>((all) => {
    const batch = present(all)
    if (batch.length === 0) return
    const ordered = batch.slice().sort((a, b) => byRow(a.work, b.work))
    return pool.query({ name: admitMany.name, text: admitMany.text, values: admissionColumns(ordered.map((p) => p.work)) }).then(
      (r) => ordered.forEach((p, i) => p.resolve(admitted(r.rows[0].calls[i]))),
      (error) => batch.forEach((p) => p.reject(error))
    )
  }, 1)
  return {
    avatarOfKey: cached(cache, keyEntry, (hash) => query(statements.keyWithAvatar, [hash]).then((rows) => activeOwner(rows[0]))),
    activeAvatar: cached(cache, avatarEntry, (id) => query(statements.avatarById, [id]).then((rows) => activeIn(rows[0]))),
    admit: (avatarId, day, limit, count, gone) =>
      count > limit ? Promise.resolve(undefined) : enqueueAdmission<number | undefined>({ avatarId, day, count, limit, gone }),
    callsOn: (avatarId, day) => query(statements.callsOn, [avatarId, day]).then((rows) => num(rows[0]?.calls)),
    record: (e) => enqueueRecord<void>({ event: eventRow(e), totals: totalsRow(e) })
  }
}

/**
 * Direct statements on the SQLite connection or the PostgreSQL pool found in the context (the
 * Database layer provides one of them); through the SqlClient for any other client.
 */
export const make = Effect.gen(function*() {
  const client = viaClient(yield* SqlClient.SqlClient)
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const throughClient: MeteringService = {
    avatarOfKey: (hash) => run(client.avatarOfKey(hash)),
    activeAvatar: (id) => run(client.activeAvatar(id)),
    admit: (avatarId, day, limit, count, gone) => unlessGone(gone, () => run(client.admit(avatarId, day, limit, count))),
    callsOn: (avatarId, day) => run(client.callsOn(avatarId, day)),
    record: (event) => run(client.record(event))
  }
  const cache = yield* Effect.serviceOption(KeyCache)
  const db = yield* Effect.serviceOption(SqliteDatabase)
  if (Option.isSome(db)) return onSqlite(db.value, throughClient, cache)
  const pool = yield* Effect.serviceOption(PgPool)
  return Option.isSome(pool) ? onPg(pool.value, cache) : throughClient
})

export const layer = Layer.effect(Metering, make)
