/**
 * Metering (the storage side of the fast lane) on every backend: the same checks as Auth's API-key
 * path and UsageStore's admit / callsOn / record, mixed with the Effect stores on one database.
 * Each backend gets its own runtime, built here rather than with it.layer (whose builds of shared
 * layer values leak between suites of one file); plus SQLite's open-transaction rule.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert } from "@effect/vitest"
import { describe, it } from "vitest"
import { Effect, Fiber, Layer, ManagedRuntime, Option } from "effect"
import { afterAll, beforeAll } from "vitest"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Database from "../../src/Storage/Database.ts"
import * as Metering from "../../src/Storage/Metering.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { UsageStore } from "../../src/Storage/UsageStore.ts"
import { freshPgDatabase, freshSqliteUrl, hasPg } from "../support/databases.ts"
import { avatar } from "./stores.suite.ts"

const unique = () => Math.random().toString(36).slice(2, 10)
const { Metering: MeteringTag } = Metering

type Env = Stores.Stores | Metering.Metering | SqlClient.SqlClient

const cases: ReadonlyArray<readonly [string, () => Effect.Effect<void, unknown, Env>]> = [
  ["metering: an API key's active avatar; unknown or revoked keys and inactive avatars give none", () =>
        Effect.gen(function*() {
          const metering = yield* MeteringTag
          const keys = yield* ApiKeyStore
          const avatars = yield* AvatarStore
          const owner = avatar({ plan: "Gold", karmaTotal: 250 })
          yield* avatars.insert(owner)
          const key = (avatarId: string) => ({ id: crypto.randomUUID(), avatarId, name: "k", prefix: "aigw_ab", hash: `hash_${unique()}`, createdAt: 1, lastUsedAt: null, revokedAt: null })
          const good = key(owner.id)
          yield* keys.insert(good)
          assert.deepStrictEqual(yield* Effect.promise(() => metering.avatarOfKey(good.hash)), owner)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(`hash_${unique()}`)), "unknown key")
          const orphan = key(crypto.randomUUID())
          yield* keys.insert(orphan)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(orphan.hash)), "no such avatar")
          yield* keys.revoke(owner.id, good.id, 5)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(good.hash)), "revoked")
          const gone = avatar({ isActive: false })
          yield* avatars.insert(gone)
          const goneKey = key(gone.id)
          yield* keys.insert(goneKey)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(goneKey.hash)), "inactive avatar")
        })],
  ["metering: admission and recording count with the usage store, exactly at the limit", () =>
        Effect.gen(function*() {
          const metering = yield* MeteringTag
          const usage = yield* UsageStore
          const avatarId = crypto.randomUUID()
          const day = "2026-11-22"
          // Both paths at once against one counter: 120 attempts, limit 50.
          const results = yield* Effect.all(
            Array.from({ length: 120 }, (_, i) =>
              i % 2 === 0
                ? Effect.map(usage.admit(avatarId, day, 50), Option.isSome)
                : Effect.map(Effect.promise(() => metering.admit(avatarId, day, 50, 1)), (n) => n !== undefined)),
            { concurrency: 40 }
          )
          assert.strictEqual(results.filter(Boolean).length, 50)
          assert.strictEqual(yield* Effect.promise(() => metering.callsOn(avatarId, day)), 50)
          assert.isUndefined(yield* Effect.promise(() => metering.admit(avatarId, day, 52, 3)), "all or none")
          assert.strictEqual(yield* Effect.promise(() => metering.admit(avatarId, day, 52, 2)), 52)
          assert.isUndefined(yield* Effect.promise(() => metering.admit(crypto.randomUUID(), day, 2, 3)), "more than the limit")
          const event = {
            avatarId, day, provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens: 7, completionTokens: 5,
            costUSD: 0.125, latencyMs: 3.4, estimated: true, ok: false, at: Date.now()
          }
          yield* Effect.promise(() => metering.record(event))
          yield* usage.record(event)
          const totals = yield* usage.totals(avatarId, day)
          assert.deepStrictEqual(totals, { callsToday: 52, tokensToday: 24, spendMonthUSD: 0.25 })
        })],
]

const backends: Array<readonly [string, boolean, () => Promise<Layer.Layer<Env, unknown>>]> = [
  // (no SqlClient in memory; the shared cases do not use it)
  ["memory", true, async () => Layer.effect(MeteringTag, Metering.make).pipe(Layer.provideMerge(Stores.layerMemory)) as Layer.Layer<Env>],
  ["sqlite", true, async () => Layer.effect(MeteringTag, Metering.make).pipe(Layer.provideMerge(Stores.layerSql), Layer.provideMerge(Database.layer(freshSqliteUrl())))],
  ["postgres", hasPg, async () => Layer.effect(MeteringTag, Metering.make).pipe(Layer.provideMerge(Stores.layerSql), Layer.provideMerge(Database.layer(await freshPgDatabase())))]
]

for (const [name, enabled, layerOf] of backends) {
  describe.skipIf(!enabled)(`metering on ${name}`, () => {
    let runtime: ManagedRuntime.ManagedRuntime<Env, unknown>
    beforeAll(async () => {
      runtime = ManagedRuntime.make(await layerOf())
      await runtime.runPromise(Effect.void)
    }, 60_000)
    afterAll(() => runtime?.dispose())
    for (const [title, test] of cases) it(title, () => runtime.runPromise(test()))
  })
}

describe("metering on sqlite, inside transactions", () => {
  let runtime: ManagedRuntime.ManagedRuntime<Env, unknown>
  beforeAll(async () => {
    runtime = ManagedRuntime.make(await backends[1]![2]())
    await runtime.runPromise(Effect.void)
  })
  afterAll(() => runtime?.dispose())

  it("waits for an open transaction instead of joining it (a rollback keeps the metered call)", () =>
    runtime.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const usage = yield* UsageStore
      const metering = yield* MeteringTag
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
