import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer, Option } from "effect"
import type { Plan } from "../../Plans.ts"
import type { Conflict } from "../../Errors.ts"
import {
  type AvatarPatch,
  type AvatarRecord,
  AvatarStore,
  type AvatarStoreService,
  type AvatarType,
  confirmedEmail,
  emailTaken,
  usernameTaken
} from "../AvatarStore.ts"
import { invalidating, KeyCache } from "./KeyCache.ts"
import { bool, isUniqueViolation, num, numOrNull } from "./util.ts"

const columns: Record<keyof AvatarPatch, string> = {
  username: "username",
  email: "email",
  passwordHash: "password_hash",
  title: "title",
  description: "description",
  image: "image",
  dob: "dob",
  karmaTotal: "karma_total",
  avatarType: "avatar_type",
  providerType: "provider_type",
  plan: "plan",
  emailVerified: "email_verified",
  pendingEmail: "pending_email",
  isActive: "is_active",
  updatedAt: "updated_at",
  deletedAt: "deleted_at",
  tokensValidAfter: "tokens_valid_after"
}

/** Turns a record patch into column values (booleans as 0/1, lower-case shadows of unique columns). */
const toColumns = (patch: AvatarPatch): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue
    const column = columns[key as keyof AvatarPatch]
    out[column] = typeof value === "boolean" ? (value ? 1 : 0) : value
  }
  if (patch.username !== undefined) out.username_lower = patch.username.toLowerCase()
  if (patch.email !== undefined) out.email_lower = patch.email.toLowerCase()
  return out
}

/**
 * The columns `fromRow` reads, for statements that name them instead of `*`: PostgreSQL refuses a
 * prepared statement whose result changed shape ("cached plan must not change result type"), so a
 * process still running while a newer one's migration adds a column would fail every lookup.
 */
export const recordColumns: ReadonlyArray<string> = ["id", "created_at", ...Object.values(columns)]

/** An `avatars` row -> AvatarRecord (also used for rows joined by the API key lookup). */
export const fromRow = (r: any): AvatarRecord => ({
  id: r.id,
  username: r.username,
  email: r.email,
  passwordHash: r.password_hash,
  title: r.title,
  description: r.description,
  image: r.image,
  dob: r.dob ?? null,
  karmaTotal: num(r.karma_total),
  avatarType: r.avatar_type as AvatarType,
  providerType: r.provider_type,
  plan: r.plan as Plan,
  emailVerified: bool(r.email_verified),
  pendingEmail: r.pending_email ?? null,
  isActive: bool(r.is_active),
  createdAt: num(r.created_at),
  updatedAt: num(r.updated_at),
  deletedAt: numOrNull(r.deleted_at),
  tokensValidAfter: num(r.tokens_valid_after)
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const one = (rows: ReadonlyArray<any>) => Option.map(Option.fromNullable(rows[0]), fromRow)
  // An updated avatar (plan, deactivation, deletion…) is dropped from the credential cache (on SQLite its triggers did already).
  const invalidate = invalidating(yield* Effect.serviceOption(KeyCache))

  const conflictFor = (avatar: Pick<AvatarRecord, "id" | "username" | "email">) =>
    sql`SELECT id FROM avatars WHERE username_lower = ${avatar.username.toLowerCase()} AND id <> ${avatar.id}`.pipe(
      Effect.map((rows) => (rows.length > 0 ? usernameTaken : emailTaken))
    )

  /** A write's unique violations as the Conflicts they mean; any other failure is a defect. */
  const conflicts = <A>(write: Effect.Effect<A, SqlError>): Effect.Effect<A, Conflict> =>
    Effect.catchAll(write, (error) =>
      isUniqueViolation(error, "username")
        ? Effect.fail(usernameTaken)
        : isUniqueViolation(error, "email")
        ? Effect.fail(emailTaken)
        : Effect.die(error))

  const service: AvatarStoreService = {
    insert: (avatar) =>
      Effect.gen(function*() {
        const { createdAt, id, ...rest } = avatar
        const row = { id, created_at: createdAt, ...toColumns(rest) }
        const inserted = yield* sql`INSERT INTO avatars ${sql.insert(row)} ON CONFLICT DO NOTHING RETURNING id`
        if (inserted.length === 0) return yield* Effect.flatMap(conflictFor(avatar), Effect.fail)
      }).pipe(Effect.catchTag("SqlError", Effect.die)),
    findById: (id) => sql`SELECT * FROM avatars WHERE id = ${id}`.pipe(Effect.map(one), Effect.orDie),
    findByLogin: (login) =>
      sql`SELECT * FROM avatars WHERE username_lower = ${login.toLowerCase()} OR email_lower = ${login.toLowerCase()}`
        .pipe(Effect.map(one), Effect.orDie),
    findByEmail: (email) =>
      sql`SELECT * FROM avatars WHERE email_lower = ${email.toLowerCase()}`.pipe(Effect.map(one), Effect.orDie),
    list: (page) =>
      (page === undefined
        ? sql`SELECT * FROM avatars ORDER BY created_at, id`
        : sql`SELECT * FROM avatars ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`).pipe(Effect.map((rows) => rows.map(fromRow)), Effect.orDie),
    update: (id, patch) => {
      const values = toColumns(patch)
      if (Object.keys(values).length === 0) return service.findById(id)
      return sql`UPDATE avatars SET ${sql.update(values)} WHERE id = ${id} RETURNING *`.pipe(Effect.map(one), conflicts, invalidate(id))
    },
    confirmPendingEmail: (id, pending, updatedAt) =>
      sql`UPDATE avatars SET ${sql.update(toColumns(confirmedEmail(pending, updatedAt)))}
          WHERE id = ${id} AND pending_email = ${pending} RETURNING *`.pipe(Effect.map(one), conflicts, invalidate(id)),
    countAdmins: () =>
      sql`SELECT COUNT(*) AS n FROM avatars WHERE avatar_type = 'Admin' AND is_active = 1`.pipe(
        Effect.map((rows) => num(rows[0]?.n)),
        Effect.orDie
      ),
    revokeTokens: (id, patch, at) => {
      // nextGeneration (AvatarStore.ts) computed on the row the UPDATE locks, not on an earlier read.
      const generation = sql`tokens_valid_after = CASE WHEN tokens_valid_after < ${at} THEN ${at} ELSE tokens_valid_after + 1 END`
      const values = toColumns(patch)
      const statement = Object.keys(values).length === 0
        ? sql`UPDATE avatars SET ${generation} WHERE id = ${id} RETURNING *`
        : sql`UPDATE avatars SET ${sql.update(values)}, ${generation} WHERE id = ${id} RETURNING *`
      return statement.pipe(Effect.map(one), Effect.orDie, invalidate(id))
    },
    replacePasswordHash: (id, expected, passwordHash) =>
      sql`UPDATE avatars SET password_hash = ${passwordHash} WHERE id = ${id} AND password_hash = ${expected} RETURNING id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie,
        invalidate(id)
      )
  }
  return service
})

export const layer = Layer.effect(AvatarStore, make)
