import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { type ApiKeyRecord, ApiKeyStore, LAST_USED_GRANULARITY_MS } from "../ApiKeyStore.ts"
import { invalidating, KeyCache } from "./KeyCache.ts"
import { viaClient } from "./Metering.ts"
import { num, numOrNull } from "./util.ts"

/** A key from its columns, each named `alias` + column (Metering's key lookup names them k_*). */
const fromRow = (r: any, alias = ""): ApiKeyRecord => ({
  id: r[`${alias}id`],
  avatarId: r[`${alias}avatar_id`],
  name: r[`${alias}name`],
  prefix: r[`${alias}prefix`],
  hash: r[`${alias}hash`],
  createdAt: num(r[`${alias}created_at`]),
  lastUsedAt: numOrNull(r[`${alias}last_used_at`]),
  revokedAt: numOrNull(r[`${alias}revoked_at`]),
  jobsStoppedAt: numOrNull(r[`${alias}jobs_stopped_at`])
})

const toRow = (key: ApiKeyRecord) => ({
  id: key.id,
  avatar_id: key.avatarId,
  name: key.name,
  prefix: key.prefix,
  hash: key.hash,
  created_at: key.createdAt,
  last_used_at: key.lastUsedAt,
  revoked_at: key.revokedAt,
  jobs_stopped_at: key.jobsStoppedAt ?? null
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const metering = viaClient(sql)
  // Revocations drop the owner's cached keys (the credential cache; on SQLite its triggers did already).
  const invalidate = invalidating(yield* Effect.serviceOption(KeyCache))
  return ApiKeyStore.of({
    insert: (key) => sql`INSERT INTO api_keys ${sql.insert(toRow(key))}`.pipe(Effect.asVoid, Effect.orDie),
    // The lookup by hash is Metering's (one statement for every key check).
    findByHash: (hash) => Effect.map(metering.keyRow(hash), (row) => Option.map(Option.fromNullable(row), (r) => fromRow(r, "k_"))),
    listByAvatar: (avatarId) =>
      sql`SELECT * FROM api_keys WHERE avatar_id = ${avatarId} ORDER BY created_at, id`.pipe(
        Effect.map((rows) => rows.map((r) => fromRow(r))),
        Effect.orDie
      ),
    revoke: (avatarId, id, now, stopJobs = false) =>
      (stopJobs
        ? sql`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${now}), jobs_stopped_at = ${now}
              WHERE id = ${id} AND avatar_id = ${avatarId} AND jobs_stopped_at IS NULL RETURNING id`
        : sql`UPDATE api_keys SET revoked_at = ${now}
              WHERE id = ${id} AND avatar_id = ${avatarId} AND revoked_at IS NULL RETURNING id`).pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie,
        invalidate(avatarId)
      ),
    revokeAll: (avatarId, now) =>
      sql`UPDATE api_keys SET revoked_at = ${now} WHERE avatar_id = ${avatarId} AND revoked_at IS NULL RETURNING id`.pipe(
        Effect.map((rows) => rows.length),
        Effect.orDie,
        invalidate(avatarId)
      ),
    // Not dropped from the credential cache here: the key's owner and validity did not change. The
    // row's triggers still count it as a key change (SQLite) or notify its avatar (PostgreSQL), which
    // is why this writes at most once an hour. An UPDATE that matches no row fires neither.
    markUsed: (hash, at) =>
      Effect.gen(function*() {
        const written = yield* sql`UPDATE api_keys SET last_used_at = ${at}
          WHERE hash = ${hash} AND revoked_at IS NULL AND (last_used_at IS NULL OR last_used_at <= ${at - LAST_USED_GRANULARITY_MS})
          RETURNING id`
        if (written.length > 0) return at
        const stored = yield* sql`SELECT last_used_at FROM api_keys WHERE hash = ${hash} AND revoked_at IS NULL`
        return numOrNull(stored[0]?.last_used_at)
      }).pipe(Effect.orDie)
  })
})

export const layer = Layer.effect(ApiKeyStore, make)
