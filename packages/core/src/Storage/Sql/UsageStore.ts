import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { UsageStore } from "../UsageStore.ts"
import { uuidv7 } from "./ids.ts"
import { num } from "./util.ts"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return UsageStore.of({
    // The quota gate: one conditional upsert. When the row is full the WHERE fails and no
    // row is returned; PostgreSQL re-evaluates the WHERE under the row lock.
    admit: (avatarId, day, limit, count = 1) =>
      count > limit
        ? Effect.succeed(Option.none())
        : sql`INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES (${avatarId}, ${day}, ${count}, 0, 0)
              ON CONFLICT (avatar_id, day) DO UPDATE SET calls = daily_usage.calls + ${count}
              WHERE daily_usage.calls + ${count} <= ${limit}
              RETURNING calls`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r) => num(r.calls))),
          Effect.orDie
        ),
    callsOn: (avatarId, day) =>
      sql`SELECT calls FROM daily_usage WHERE avatar_id = ${avatarId} AND day = ${day}`.pipe(
        Effect.map((rows) => num(rows[0]?.calls)),
        Effect.orDie
      ),
    record: (e) => {
      const tokens = e.promptTokens + e.completionTokens
      const event = sql.insert({
        id: uuidv7(e.at),
        avatar_id: e.avatarId,
        day: e.day,
        provider: e.provider,
        model: e.model,
        capability: e.capability,
        prompt_tokens: e.promptTokens,
        completion_tokens: e.completionTokens,
        cost_usd: e.costUSD,
        latency_ms: Math.round(e.latencyMs),
        estimated: e.estimated ? 1 : 0,
        ok: e.ok ? 1 : 0,
        at: e.at
      })
      return sql.onDialectOrElse({
        // One statement (a data-modifying CTE): atomic like the transaction below, one round trip instead of four.
        pg: () =>
          sql`WITH event AS (INSERT INTO usage_events ${event})
              INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd)
              VALUES (${e.avatarId}, ${e.day}, 0, ${tokens}, ${e.costUSD})
              ON CONFLICT (avatar_id, day) DO UPDATE
              SET tokens = daily_usage.tokens + ${tokens}, spend_usd = daily_usage.spend_usd + ${e.costUSD}`,
        orElse: () =>
          sql.withTransaction(
            Effect.zipRight(
              sql`INSERT INTO usage_events ${event}`,
              sql`INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd)
                  VALUES (${e.avatarId}, ${e.day}, 0, ${tokens}, ${e.costUSD})
                  ON CONFLICT (avatar_id, day) DO UPDATE
                  SET tokens = daily_usage.tokens + ${tokens}, spend_usd = daily_usage.spend_usd + ${e.costUSD}`
            )
          )
      }).pipe(Effect.asVoid, Effect.orDie)
    },
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
        )
  })
})

export const layer = Layer.effect(UsageStore, make)
