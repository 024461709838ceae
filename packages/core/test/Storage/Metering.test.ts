/** SQLite specifics of the metering fast path: it never writes into an open Effect transaction. */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import * as Database from "../../src/Storage/Database.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import * as MeteringLayer from "../../src/Storage/Metering.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { UsageStore } from "../../src/Storage/UsageStore.ts"
import { freshSqliteUrl } from "../support/databases.ts"

const layer = Layer.unwrapEffect(
  Effect.sync(() => MeteringLayer.layer.pipe(Layer.provideMerge(Stores.layerSql), Layer.provideMerge(Database.layer(freshSqliteUrl()))))
)

describe("Metering on SQLite", () => {
  it.layer(layer)((it) => {
    it.effect("waits for an open transaction instead of joining it (a rollback keeps the metered call)", () =>
      Effect.gen(function*() {
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
        const admitted = Effect.promise(() => metering.admit(avatarId, day, 10, 1)).pipe(Effect.fork)
        const pending = yield* admitted
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        assert.isNull(pending.unsafePoll(), "the metered call waits while the transaction is open")
        yield* release.open
        assert.strictEqual(yield* Fiber.join(rolledBack), "roll back")
        assert.strictEqual(yield* Fiber.join(pending), 1, "counted once the transaction rolled back")
        assert.strictEqual(yield* usage.callsOn(avatarId, day), 1)
      }))
  })
})
