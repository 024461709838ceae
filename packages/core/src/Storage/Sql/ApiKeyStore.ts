import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { type ApiKeyRecord, ApiKeyStore } from "../ApiKeyStore.ts"
import { fromRow as avatarFromRow } from "./AvatarStore.ts"
import { num, numOrNull } from "./util.ts"

const fromRow = (r: any): ApiKeyRecord => ({
  id: r.id,
  avatarId: r.avatar_id,
  name: r.name,
  prefix: r.prefix,
  hash: r.hash,
  createdAt: num(r.created_at),
  lastUsedAt: numOrNull(r.last_used_at),
  revokedAt: numOrNull(r.revoked_at)
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return ApiKeyStore.of({
    insert: (key) =>
      sql`INSERT INTO api_keys ${
        sql.insert({
          id: key.id,
          avatar_id: key.avatarId,
          name: key.name,
          prefix: key.prefix,
          hash: key.hash,
          created_at: key.createdAt,
          last_used_at: key.lastUsedAt,
          revoked_at: key.revokedAt
        })
      }`.pipe(Effect.asVoid, Effect.orDie),
    findByHash: (hash) =>
      sql`SELECT * FROM api_keys WHERE hash = ${hash}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), fromRow)),
        Effect.orDie
      ),
    findByHashWithAvatar: (hash) =>
      sql`SELECT k.id AS k_id, k.avatar_id AS k_avatar_id, k.name AS k_name, k.prefix AS k_prefix, k.hash AS k_hash,
                 k.created_at AS k_created_at, k.last_used_at AS k_last_used_at, k.revoked_at AS k_revoked_at, a.*
          FROM api_keys k LEFT JOIN avatars a ON a.id = k.avatar_id WHERE k.hash = ${hash}`.pipe(
        Effect.map((rows) =>
          Option.map(Option.fromNullable(rows[0]), (r: any) => ({
            key: fromRow({
              id: r.k_id,
              avatar_id: r.k_avatar_id,
              name: r.k_name,
              prefix: r.k_prefix,
              hash: r.k_hash,
              created_at: r.k_created_at,
              last_used_at: r.k_last_used_at,
              revoked_at: r.k_revoked_at
            }),
            avatar: r.id === null || r.id === undefined ? Option.none() : Option.some(avatarFromRow(r))
          }))
        ),
        Effect.orDie
      ),
    listByAvatar: (avatarId) =>
      sql`SELECT * FROM api_keys WHERE avatar_id = ${avatarId} ORDER BY created_at, id`.pipe(
        Effect.map((rows) => rows.map(fromRow)),
        Effect.orDie
      ),
    revoke: (avatarId, id, now) =>
      sql`UPDATE api_keys SET revoked_at = ${now}
          WHERE id = ${id} AND avatar_id = ${avatarId} AND revoked_at IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      ),
    revokeAll: (avatarId, now) =>
      sql`UPDATE api_keys SET revoked_at = ${now} WHERE avatar_id = ${avatarId} AND revoked_at IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.length),
        Effect.orDie
      )
  })
})

export const layer = Layer.effect(ApiKeyStore, make)
