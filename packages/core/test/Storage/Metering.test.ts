/**
 * Metering on SQLite while an Effect transaction holds the connection: the direct statements wait
 * for it instead of joining it. (The Metering cases every backend shares are in stores.suite.ts.)
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert } from "@effect/vitest"
import { Effect, Fiber, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, it } from "vitest"
import * as Database from "../../src/Storage/Database.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { UsageStore } from "../../src/Storage/UsageStore.ts"
import { freshSqliteUrl } from "../support/databases.ts"

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
