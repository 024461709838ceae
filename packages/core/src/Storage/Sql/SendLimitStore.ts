import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { SendLimitStore } from "../SendLimitStore.ts"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return SendLimitStore.of({
    // t1..t3 are the last three instants, oldest first. The upsert shifts them only when the
    // oldest is outside the window; PostgreSQL re-checks the WHERE under the row lock.
    tryRecord: (key, now, windowMs) =>
      sql`INSERT INTO send_limits (key, t1, t2, t3) VALUES (${key}, NULL, NULL, ${now})
          ON CONFLICT (key) DO UPDATE SET t1 = send_limits.t2, t2 = send_limits.t3, t3 = excluded.t3
          WHERE send_limits.t1 IS NULL OR send_limits.t1 <= ${now - windowMs}
          RETURNING key`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
  })
})

export const layer = Layer.effect(SendLimitStore, make)
