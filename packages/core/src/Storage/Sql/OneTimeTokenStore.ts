import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { OneTimeTokenStore, type TokenPurpose } from "../OneTimeTokenStore.ts"
import { num } from "./util.ts"

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  /** The token `consume` takes: unused, unexpired, of the purpose. */
  const live = (hash: string, purpose: TokenPurpose, now: number) =>
    sql`hash = ${hash} AND purpose = ${purpose} AND used_at IS NULL AND expires_at > ${now}`
  return OneTimeTokenStore.of({
    issue: (token) =>
      sql.withTransaction(
        Effect.zipRight(
          sql`DELETE FROM one_time_tokens WHERE avatar_id = ${token.avatarId} AND purpose = ${token.purpose}`,
          sql`INSERT INTO one_time_tokens ${
            sql.insert({
              hash: token.hash,
              avatar_id: token.avatarId,
              purpose: token.purpose,
              email: token.email,
              expires_at: token.expiresAt,
              created_at: token.createdAt
            })
          }`
        )
      ).pipe(Effect.asVoid, Effect.orDie),
    // One conditional UPDATE: two concurrent consumers cannot both succeed.
    consume: (hash, purpose, now) =>
      sql`UPDATE one_time_tokens SET used_at = ${now} WHERE ${live(hash, purpose, now)} RETURNING *`.pipe(
        Effect.map((rows) =>
          Option.map(Option.fromNullable(rows[0] as any), (r) => ({
            hash: r.hash,
            avatarId: r.avatar_id,
            purpose: r.purpose as TokenPurpose,
            email: r.email ?? null,
            expiresAt: num(r.expires_at),
            createdAt: num(r.created_at)
          }))
        ),
        Effect.orDie
      ),
    usable: (hash, purpose, now) =>
      sql`SELECT 1 AS ok FROM one_time_tokens WHERE ${live(hash, purpose, now)}`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
    revokeAll: (avatarId, purpose) =>
      (purpose === undefined
        ? sql`DELETE FROM one_time_tokens WHERE avatar_id = ${avatarId}`
        : sql`DELETE FROM one_time_tokens WHERE avatar_id = ${avatarId} AND purpose = ${purpose}`).pipe(Effect.asVoid, Effect.orDie)
  })
})

export const layer = Layer.effect(OneTimeTokenStore, make)
