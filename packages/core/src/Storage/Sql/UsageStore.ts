import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { UsageStore } from "../UsageStore.ts"
import { uuidv7Floor } from "./ids.ts"
import { viaClient } from "./Metering.ts"
import { num } from "./util.ts"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Admission, counts and recording are the Metering statements, run through the SqlClient.
  const metering = viaClient(sql)
  return UsageStore.of({
    admit: (avatarId, day, limit, count = 1) => Effect.map(metering.admit(avatarId, day, limit, count), Option.fromNullable),
    callsOn: metering.callsOn,
    record: metering.record,
    totals: (avatarId, day) =>
      sql`SELECT
            COALESCE(SUM(CASE WHEN day = ${day} THEN calls ELSE 0 END), 0) AS calls,
            COALESCE(SUM(CASE WHEN day = ${day} THEN tokens ELSE 0 END), 0) AS tokens,
            COALESCE(SUM(spend_usd), 0) AS spend
          FROM daily_usage WHERE avatar_id = ${avatarId} AND day >= ${day.slice(0, 7) + "-01"} AND day <= ${day}`
        .pipe(
          Effect.map((rows) => ({
            callsToday: num(rows[0]?.calls),
            tokensToday: num(rows[0]?.tokens),
            spendMonthUSD: num(rows[0]?.spend)
          })),
          Effect.orDie
        ),
    // The ids are UUIDv7s of each record's `at` (Metering.ts): the id bound makes the oldest records a range
    // of the primary key, so a batch reads only what it deletes, also the last one, which finds fewer.
    pruneEvents: (before, atMost) =>
      sql`DELETE FROM usage_events WHERE id IN (
            SELECT id FROM usage_events WHERE id < ${uuidv7Floor(before)} AND at < ${before} ORDER BY id LIMIT ${atMost}
          ) RETURNING id`.pipe(Effect.map((rows) => rows.length), Effect.orDie)
  })
})

export const layer = Layer.effect(UsageStore, make)
