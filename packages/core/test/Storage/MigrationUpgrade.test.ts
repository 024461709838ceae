/**
 * An upgrade keeps what a database holds: a database left at any earlier migration, holding an
 * avatar, an API key, a day's usage, a job and its webhook delivery, is migrated to the latest
 * schema at the next start, and the current stores read and write those rows. Later migrations
 * (triggers, functions, new columns) run on tables that already hold data, as they do in production.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import { JobStore } from "../../src/Jobs/JobStore.ts"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Database from "../../src/Storage/Database.ts"
import { migrations } from "../../src/Storage/Sql/Migrations.ts"
import * as Stores from "../../src/Storage/Stores.ts"
import { UsageStore } from "../../src/Storage/UsageStore.ts"
import { freshDatabaseUrl, hasPg } from "../support/databases.ts"

const NAMES = Object.keys(migrations).sort()
const DAY = "2026-11-30"
const AT = Date.UTC(2026, 10, 30, 12)

/** The rows an installation at `0002_jobs_webhooks` or later wrote, in that schema's columns. */
const FIXTURE = [
  `INSERT INTO avatars (id, username, username_lower, email, email_lower, password_hash, title, description, image, dob,
     karma_total, avatar_type, provider_type, plan, email_verified, pending_email, is_active, created_at, updated_at, deleted_at, tokens_valid_after)
   VALUES ('av-1', 'Ada', 'ada', 'ada@example.com', 'ada@example.com', '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA', 'Dr', 'kept', '', '1990-01-02',
     0, 'User', 'Default', 'Gold', 1, NULL, 1, ${AT}, ${AT}, NULL, 0)`,
  `INSERT INTO api_keys (id, avatar_id, name, prefix, hash, created_at, last_used_at, revoked_at)
   VALUES ('key-1', 'av-1', 'ci', 'aigw_abcd', 'hash-1', ${AT}, NULL, NULL)`,
  `INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES ('av-1', '${DAY}', 7, 1234, 0.5)`,
  `INSERT INTO usage_events (id, avatar_id, day, provider, model, capability, prompt_tokens, completion_tokens, cost_usd, latency_ms, estimated, ok, at)
   VALUES ('ev-1', 'av-1', '${DAY}', 'openai', 'gpt-4o-mini', 'chat', 1000, 234, 0.5, 120, 0, 1, ${AT})`,
  `INSERT INTO jobs (id, type, avatar_id, provider, upstream_id, status, input, state, result, error, callback_url, attempts, next_run_at, locked_until, created_at, updated_at, completed_at)
   VALUES ('job-1', 'batch', 'av-1', 'openai', NULL, 'completed', '{"requests":[]}', NULL, '{"ok":true}', NULL, 'https://hooks.example.com/x', 1, ${AT}, NULL, ${AT}, ${AT}, ${AT})`,
  `INSERT INTO webhook_deliveries (id, job_id, url, event, body, status, attempts, next_attempt_at, locked_until, created_at, delivered_at, last_error)
   VALUES ('del-1', 'job-1', 'https://hooks.example.com/x', 'job.completed', '{}', 'pending', 0, ${AT}, NULL, ${AT}, NULL, NULL)`
]

/** The migrations up to and including `last`, as an installation of that release applied them. */
const migrateUpTo = (last: string) =>
  Migrator.make({})({
    loader: Migrator.fromRecord(Object.fromEntries(NAMES.filter((n) => n <= last).map((n) => [n, migrations[n]!]))),
    table: "aigw_migrations"
  })

const seeded = (url: string, last: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* migrateUpTo(last)
    for (const statement of FIXTURE) yield* sql.unsafe(statement)
  }).pipe(Effect.provide(Database.layerClient(url)), Effect.scoped)

/** What the current code reads and writes on the upgraded database. */
const checked = (url: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const applied = yield* sql<{ n: string | number }>`SELECT count(*) AS n FROM aigw_migrations`
    const avatar = Option.getOrThrow(yield* Effect.flatMap(AvatarStore, (s) => s.findById("av-1")))
    const keys = yield* ApiKeyStore
    const key = Option.getOrThrow(yield* keys.findByHash("hash-1"))
    const usage = yield* UsageStore
    const before = yield* usage.totals("av-1", DAY)
    const admitted = yield* usage.admit("av-1", DAY, 8)
    const refused = yield* usage.admit("av-1", DAY, 8)
    const jobs = yield* JobStore
    const job = Option.getOrThrow(yield* jobs.get("job-1"))
    const deliveries = yield* jobs.claimDeliveries(AT + 1, 10, 30_000)
    yield* keys.markUsed("hash-1", AT + 2)
    const revoked = yield* keys.revoke("av-1", "key-1", AT + 3)
    const after = Option.getOrThrow(yield* keys.findByHash("hash-1"))
    return { applied: Number(applied[0]!.n), avatar, key, before, admitted, refused, job, deliveries, revoked, after }
  }).pipe(Effect.provide(Stores.layerSql.pipe(Layer.provideMerge(Database.layer(url)))), Effect.scoped)

const upgrade = async (kind: "sqlite" | "pg", last: string) => {
  const url = await freshDatabaseUrl(kind)
  await Effect.runPromise(seeded(url, last))
  return Effect.runPromise(checked(url))
}

// An installation is at least at 0002 when it holds jobs; each later release's schema is a starting point.
const STARTS = NAMES.filter((n) => n >= "0002" && n !== NAMES[NAMES.length - 1])

for (const kind of ["sqlite", "pg"] as const) {
  describe.skipIf(kind === "pg" && !hasPg)(`upgrading a ${kind} database`, () => {
    it.each(STARTS)(`from %s keeps its avatars, keys, usage, jobs and deliveries`, async (last) => {
      const r = await upgrade(kind, last)
      expect(r.applied).toBe(NAMES.length)
      expect(r.avatar).toMatchObject({ username: "Ada", email: "ada@example.com", description: "kept", dob: "1990-01-02", plan: "Gold", emailVerified: true, isActive: true })
      expect(r.key).toMatchObject({ id: "key-1", avatarId: "av-1", name: "ci", revokedAt: null })
      expect(r.before).toMatchObject({ callsToday: 7, tokensToday: 1234 })
      expect(r.admitted).toEqual(Option.some(8))
      expect(r.refused).toEqual(Option.none())
      expect(r.job).toMatchObject({ id: "job-1", status: "completed", result: { ok: true } })
      expect(r.deliveries.map((d) => d.id)).toEqual(["del-1"])
      expect(r.revoked).toBe(true)
      expect(r.after).toMatchObject({ lastUsedAt: AT + 2, revokedAt: AT + 3 })
    }, 60_000)
  })
}
