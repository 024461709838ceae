/**
 * Several processes starting at once on a fresh PostgreSQL database all migrate it without error
 * (the Migrator alone raced on creating its table: duplicate `pg_type` entry, about 1 start in 40).
 * Each migrator here has its own pool, as separate processes would.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as Database from "../../src/Storage/Database.ts"
import { migrate, migrations } from "../../src/Storage/Sql/Migrations.ts"
import { freshPgDatabase, hasPg } from "../support/databases.ts"

const MIGRATORS = 6
const ROUNDS = 20

/** One migrator on its own pool: the migration applied, then the migrations table's count. */
const migrateOnce = (url: string) =>
  Effect.gen(function*() {
    yield* migrate
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ n: string }>`SELECT count(*) AS n FROM aigw_migrations`
    return Number(rows[0]!.n)
  }).pipe(Effect.provide(Database.layerClient(url, { maxConnections: 2 })), Effect.scoped)

describe.skipIf(!hasPg)("migrations on PostgreSQL", () => {
  it(`${MIGRATORS} migrators started together on a fresh database all succeed, ${ROUNDS} times`, async () => {
    const failures: Array<string> = []
    for (let round = 0; round < ROUNDS; round++) {
      const url = await freshPgDatabase()
      const results = await Promise.allSettled(
        Array.from({ length: MIGRATORS }, () => Effect.runPromise(migrateOnce(url) as Effect.Effect<number, unknown>))
      )
      for (const r of results) {
        if (r.status === "rejected") failures.push(String(r.reason).split("\n")[0]!)
        else expect(r.value).toBe(Object.keys(migrations).length)
      }
    }
    expect(failures).toEqual([])
  }, 120_000)
})
