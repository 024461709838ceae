import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { PRUNE_EVERY, SendLimitStore } from "../SendLimitStore.ts"
import { num } from "./util.ts"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  let recorded = 0
  let counted = 0
  // A row whose newest instant left the window admits as a missing row does.
  const pruneRecords = (now: number, windowMs: number) => sql`DELETE FROM send_limits WHERE t3 IS NULL OR t3 <= ${now - windowMs}`
  const pruneWindows = (now: number) => sql`DELETE FROM limit_windows WHERE expires_at <= ${now}`
  return SendLimitStore.of({
    // t1..t3 are the last three instants, oldest first. The upsert shifts them only when the
    // oldest is outside the window; PostgreSQL re-checks the WHERE under the row lock.
    tryRecord: (key, now, windowMs) =>
      Effect.gen(function*() {
        if (++recorded % PRUNE_EVERY === 0) yield* pruneRecords(now, windowMs)
        const rows = yield* sql`INSERT INTO send_limits (key, t1, t2, t3) VALUES (${key}, NULL, NULL, ${now})
          ON CONFLICT (key) DO UPDATE SET t1 = send_limits.t2, t2 = send_limits.t3, t3 = excluded.t3
          WHERE send_limits.t1 IS NULL OR send_limits.t1 <= ${now - windowMs}
          RETURNING key`
        return rows.length > 0
      }).pipe(Effect.orDie),
    // The instant leaves its place and the older ones move up into it (every right-hand side reads
    // the row as it was); the oldest place is left empty.
    unrecord: (key, at) =>
      sql`UPDATE send_limits SET
            t3 = CASE WHEN t3 = ${at} THEN t2 ELSE t3 END,
            t2 = CASE WHEN t3 = ${at} OR t2 = ${at} THEN t1 ELSE t2 END,
            t1 = CASE WHEN t3 = ${at} OR t2 = ${at} OR t1 = ${at} THEN NULL ELSE t1 END
          WHERE key = ${key} AND (t1 = ${at} OR t2 = ${at} OR t3 = ${at})`.pipe(Effect.asVoid, Effect.orDie),
    // One upsert: a new or ended window restarts at 1, a running one counts up while below the
    // limit (the WHERE is re-checked under the row lock, as above). No row back = refused.
    tryCount: (key, now, windowMs, limit) =>
      Effect.gen(function*() {
        if (++counted % PRUNE_EVERY === 0) yield* pruneWindows(now)
        const rows = yield* sql`INSERT INTO limit_windows (key, hits, expires_at) VALUES (${key}, 1, ${now + windowMs})
          ON CONFLICT (key) DO UPDATE SET
            hits = CASE WHEN limit_windows.expires_at <= ${now} THEN 1 ELSE limit_windows.hits + 1 END,
            expires_at = CASE WHEN limit_windows.expires_at <= ${now} THEN excluded.expires_at ELSE limit_windows.expires_at END
          WHERE limit_windows.expires_at <= ${now} OR limit_windows.hits < ${limit}
          RETURNING expires_at`
        if (rows.length > 0) return { admitted: true, expiresAt: num(rows[0]!.expires_at) }
        const full = yield* sql`SELECT expires_at FROM limit_windows WHERE key = ${key}`
        return { admitted: false, expiresAt: full.length > 0 ? num(full[0]!.expires_at) : now + windowMs }
      }).pipe(Effect.orDie),
    uncount: (key, expiresAt) =>
      sql`UPDATE limit_windows SET hits = hits - 1 WHERE key = ${key} AND expires_at = ${expiresAt} AND hits > 0`.pipe(
        Effect.asVoid,
        Effect.orDie
      )
  })
})

export const layer = Layer.effect(SendLimitStore, make)
