/**
 * Metering on SQLite while an Effect transaction holds the connection: the direct statements wait
 * for it instead of joining it; on PostgreSQL, the group commit of admissions and usage records (the
 * statements the pool receives, answers in the callers' order, a failed batch, two processes'
 * batches over the same rows), and its prepared statements surviving a newer release's migration.
 * (The Metering cases every backend shares are in stores.suite.ts.)
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert } from "@effect/vitest"
import { Effect, Fiber, Layer, ManagedRuntime } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, it } from "vitest"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Database from "../../src/Storage/Database.ts"
import { CallerGone, Metering } from "../../src/Storage/Metering.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { UsageStore } from "../../src/Storage/UsageStore.ts"
import { PgPool } from "../../src/Storage/Sql/Postgres.ts"
import * as SqlMetering from "../../src/Storage/Sql/Metering.ts"
import * as SqlUsageStore from "../../src/Storage/Sql/UsageStore.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { avatar } from "./stores.suite.ts"

describe("metering on sqlite, inside transactions", () => {
  let runtime: ManagedRuntime.ManagedRuntime<Stores.Stores | SqlClient.SqlClient, unknown>
  beforeAll(async () => {
    runtime = ManagedRuntime.make(Stores.layerSql.pipe(Layer.provideMerge(Database.layer(freshSqliteUrl()))))
    await runtime.runPromise(Effect.void)
  })
  afterAll(() => runtime?.dispose())

  it("waits for an open transaction instead of joining it (a rollback keeps the metered call)", () =>
    runtime.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const usage = yield* UsageStore
      const metering = yield* Metering
      const avatarId = crypto.randomUUID()
      const day = "2026-11-21"
      const opened = yield* Effect.makeLatch(false)
      const release = yield* Effect.makeLatch(false)
      // A transaction that counts a call, yields while open, then rolls back.
      const rolledBack = yield* sql.withTransaction(
        Effect.gen(function*() {
          yield* usage.admit(avatarId, day, 10)
          yield* opened.open
          yield* release.await
          return yield* Effect.fail("roll back" as const)
        })
      ).pipe(Effect.flip, Effect.fork)
      yield* opened.await
      const pending = yield* Effect.fork(Effect.promise(() => metering.admit(avatarId, day, 10, 1)))
      yield* Effect.sleep("20 millis")
      assert.isNull(pending.unsafePoll(), "the metered call waits while the transaction is open")
      yield* release.open
      assert.strictEqual(yield* Fiber.join(rolledBack), "roll back")
      assert.strictEqual(yield* Fiber.join(pending), 1, "counted once the transaction rolled back")
      assert.strictEqual(yield* usage.callsOn(avatarId, day), 1)
    })))
})

describe.skipIf(!hasPg)("metering on postgresql, group commit", () => {
  // The names of the statements the pool was asked for.
  const sent: Array<string> = []
  // Milliseconds the next statement takes longer (a busy database), then 0 again.
  let slowNext = 0
  let url: string
  let runtime: ManagedRuntime.ManagedRuntime<Metering | UsageStore, unknown>
  beforeAll(async () => {
    url = await freshPgDatabase()
    // The layer's type names only the SqlClient; on PostgreSQL it provides the pool too.
    const database = Database.layer(url) as Layer.Layer<SqlClient.SqlClient | PgPool>
    const spyPool = Layer.effect(
      PgPool,
      Effect.map(PgPool, (pool) => {
        const spy = Object.create(pool)
        spy.query = (config: any, values?: any) => {
          sent.push(config?.name ?? "unnamed")
          const delay = slowNext
          slowNext = 0
          return delay > 0 ? new Promise((r) => setTimeout(r, delay)).then(() => pool.query(config, values)) : pool.query(config, values)
        }
        return spy
      })
    )
    const stores = Layer.merge(SqlMetering.layer.pipe(Layer.provide(spyPool)), SqlUsageStore.layer)
    runtime = ManagedRuntime.make(stores.pipe(Layer.provide(database)))
    await runtime.runPromise(Effect.void)
  }, 30_000)
  afterAll(() => runtime?.dispose())

  const event = (avatarId: string, promptTokens: number) => ({
    avatarId, day: "2026-11-24", provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens, completionTokens: 2,
    costUSD: 0.25, latencyMs: 1, estimated: false, ok: true, at: Date.now()
  })
  const record = (events: Array<ReturnType<typeof event>>, on: ManagedRuntime.ManagedRuntime<Metering, unknown> = runtime) =>
    on.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => Promise.allSettled(events.map((e) => m.record(e))))))
  const totals = (avatarId: string) => runtime.runPromise(Effect.flatMap(UsageStore, (u) => u.totals(avatarId, "2026-11-24")))

  it("the records of one turn reach the database as one statement", async () => {
    const avatarId = crypto.randomUUID()
    sent.length = 0
    const outcomes = await record(Array.from({ length: 20 }, (_, i) => event(avatarId, i)))
    assert.deepStrictEqual(outcomes.map((o) => o.status), Array(20).fill("fulfilled"))
    assert.deepStrictEqual(sent, ["aigw_record_many"])
    assert.deepStrictEqual(await totals(avatarId), { callsToday: 0, tokensToday: 190 + 40, spendMonthUSD: 5 })
  })

  it("a record the database refuses fails alone: the rest of its batch is retried one by one and counted once", async () => {
    const avatarId = crypto.randomUUID()
    sent.length = 0
    // 1.5 tokens: not an integer, refused by the prompt_tokens column.
    const outcomes = await record([event(avatarId, 1), event(avatarId, 1.5), event(avatarId, 3)])
    assert.deepStrictEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "fulfilled"])
    assert.deepStrictEqual(sent, ["aigw_record_many", "aigw_record", "aigw_record", "aigw_record"])
    assert.deepStrictEqual(await totals(avatarId), { callsToday: 0, tokensToday: 3 + 5, spendMonthUSD: 0.5 })
  })

  const admit = (admissions: Array<readonly [avatarId: string, limit: number, count: number]>, on: ManagedRuntime.ManagedRuntime<Metering, unknown> = runtime) =>
    on.runPromise(Effect.flatMap(Metering, (m) =>
      Effect.promise(() => Promise.allSettled(admissions.map(([avatarId, limit, count]) => m.admit(avatarId, "2026-11-24", limit, count))))))
  const values = (outcomes: Array<PromiseSettledResult<unknown>>) => outcomes.map((o) => (o.status === "fulfilled" ? o.value : "rejected"))

  it("the admissions of one turn reach the database as one statement, each answered as if made one after another", async () => {
    const [a, b, c] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
    sent.length = 0
    const outcomes = await admit([[a, 3, 1], [b, 5, 3], [a, 3, 2], [b, 5, 3], [a, 3, 1], [c, 1, 2], [b, 5, 2], [a, 4, 1]])
    // a: 1, 3, refused (4 > 3), then 4 under a raised limit; b: 3, refused (6 > 5), 5; c: more than its limit, never sent.
    assert.deepStrictEqual(values(outcomes), [1, 3, 3, undefined, undefined, undefined, 5, 4])
    assert.deepStrictEqual(sent, ["aigw_admit_many"])
    assert.deepStrictEqual((await totals(a)).callsToday, 4)
    assert.deepStrictEqual((await totals(b)).callsToday, 5)
    assert.deepStrictEqual((await totals(c)).callsToday, 0)
  })

  it("while a batch is on the server, the calls of the following turns wait and go as one statement", async () => {
    const avatarId = crypto.randomUUID()
    sent.length = 0
    slowNext = 150
    const outcomes = await runtime.runPromise(Effect.flatMap(Metering, (m) =>
      Effect.promise(async () => {
        const calls: Array<Promise<unknown>> = [m.admit(avatarId, "2026-11-24", 10, 1)]
        // Five more, each in a later turn of the event loop, while the first statement is out.
        for (let i = 0; i < 5; i++) {
          await new Promise((r) => setImmediate(r))
          calls.push(m.admit(avatarId, "2026-11-24", 10, 1))
        }
        return Promise.all(calls)
      })))
    assert.deepStrictEqual(outcomes, [1, 2, 3, 4, 5, 6])
    assert.deepStrictEqual(sent, ["aigw_admit_many", "aigw_admit_many"])
    assert.deepStrictEqual((await totals(avatarId)).callsToday, 6)
  })

  it("an admission whose caller left while it waited behind a batch on the server is not made (CallerGone)", async () => {
    const avatarId = crypto.randomUUID()
    sent.length = 0
    slowNext = 150
    let left = false
    const outcomes = await runtime.runPromise(Effect.flatMap(Metering, (m) =>
      Effect.promise(async () => {
        const first = m.admit(avatarId, "2026-11-24", 10, 1)
        await new Promise((r) => setImmediate(r))
        // Queued while the first statement is out; its caller leaves before the next batch goes.
        const leaving = m.admit(avatarId, "2026-11-24", 10, 3, () => left).then(() => "admitted", (e) => e)
        const staying = m.admit(avatarId, "2026-11-24", 10, 1, () => false)
        left = true
        return Promise.all([first, leaving, staying])
      })))
    assert.strictEqual(outcomes[0], 1)
    assert.instanceOf(outcomes[1], CallerGone)
    assert.strictEqual(outcomes[2], 2)
    assert.deepStrictEqual(sent, ["aigw_admit_many", "aigw_admit_many"])
    assert.strictEqual((await totals(avatarId)).callsToday, 2)
  })

  it("a batch the database refuses fails for each of its callers, is not retried and counts nothing", async () => {
    const avatarId = crypto.randomUUID()
    sent.length = 0
    // A count beyond PostgreSQL's integer (no caller asks for one; a limit beyond it is sent as its largest): the
    // statement fails as a whole.
    const outcomes = await admit([[avatarId, 10, 1], [avatarId, 2 ** 31, 2 ** 31], [avatarId, 10, 1]])
    assert.deepStrictEqual(values(outcomes), ["rejected", "rejected", "rejected"])
    assert.deepStrictEqual(sent, ["aigw_admit_many"])
    assert.strictEqual((await totals(avatarId)).callsToday, 0)
  })

  it("two processes' batches (admissions and records) over the same rows, made in opposite orders, never deadlock and count exactly", async () => {
    const other = ManagedRuntime.make(SqlMetering.layer.pipe(Layer.provide(Database.layer(url))))
    try {
      await other.runPromise(Effect.void)
      const avatars = Array.from({ length: 6 }, () => crypto.randomUUID())
      const reversed = avatars.slice().reverse()
      // Each round: one batch per process at the same time, each going over every row 20 times.
      const many = (ids: Array<string>) => Array.from({ length: 20 }, () => ids.map((id) => [id, 10_000, 1] as const)).flat()
      const outcomes: Array<PromiseSettledResult<unknown>> = []
      for (let round = 0; round < 10; round++) {
        const [mine, theirs, recorded] = await Promise.all([
          admit(many(avatars)),
          admit(many(reversed), other),
          // and records, which update the same rows' totals
          record(many(reversed).map(([id]) => event(id, 1)), other)
        ])
        outcomes.push(...mine, ...theirs, ...recorded)
      }
      assert.deepStrictEqual(outcomes.filter((o) => o.status === "rejected"), [])
      for (const id of avatars) assert.deepStrictEqual(await totals(id), { callsToday: 400, tokensToday: 10 * 20 * 3, spendMonthUSD: 10 * 20 * 0.25 })
    } finally {
      await other.dispose()
    }
  }, 30_000)
})

describe.skipIf(!hasPg)("metering on postgresql, while a newer process migrates", () => {
  it("the key and token lookups keep working on a connection that prepared them before a column was added", async () => {
    const url = await freshPgDatabase()
    // One connection, no cache: every lookup runs the prepared statements on the same connection.
    const runtime = ManagedRuntime.make(
      Stores.layerSql.pipe(Layer.provideMerge(Database.layer(url, { keyCacheSeconds: 0, maxConnections: 1 }))) as Layer.Layer<Stores.Stores>
    )
    const admin = new pg.Client({ connectionString: url })
    try {
      await admin.connect()
      const owner = avatar()
      const key = { id: crypto.randomUUID(), avatarId: owner.id, name: "k", prefix: "aigw_mg", hash: `hash_${crypto.randomUUID()}`, createdAt: 1, lastUsedAt: null, revokedAt: null }
      await runtime.runPromise(Effect.gen(function*() {
        yield* (yield* AvatarStore).insert(owner)
        yield* (yield* ApiKeyStore).insert(key)
      }))
      const lookups = () =>
        runtime.runPromise(Effect.flatMap(Metering, (m) => Effect.promise(() => Promise.all([m.avatarOfKey(key.hash), m.activeAvatar(owner.id)]))))
      assert.deepStrictEqual((await lookups()).map((a) => a?.id), [owner.id, owner.id])
      await admin.query("ALTER TABLE avatars ADD COLUMN added_by_a_newer_release TEXT")
      assert.deepStrictEqual((await lookups()).map((a) => a?.id), [owner.id, owner.id])
    } finally {
      await admin.end()
      await runtime.dispose()
    }
  })
})
