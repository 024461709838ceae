/**
 * The shared store suite: the same assertions against every backend (memory, SQLite,
 * PostgreSQL). Backends differ only in the layer that provides the stores.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import { OneTimeTokenStore } from "../../src/Storage/OneTimeTokenStore.ts"
import { SendLimitStore } from "../../src/Storage/SendLimitStore.ts"
import type { Stores } from "../../src/Storage/Stores.ts"
import { UsageStore } from "../../src/Storage/UsageStore.ts"

const unique = () => Math.random().toString(36).slice(2, 10)

export const avatar = (overrides: Partial<AvatarRecord> = {}): AvatarRecord => {
  const id = crypto.randomUUID()
  const u = unique()
  return {
    id,
    username: `user_${u}`,
    email: `user_${u}@example.com`,
    passwordHash: "$argon2id$fake",
    title: "",
    description: "",
    image: "",
    dob: null,
    karmaTotal: 0,
    avatarType: "User",
    providerType: "Default",
    plan: "Free",
    emailVerified: false,
    pendingEmail: null,
    isActive: true,
    createdAt: Date.now(),
    updatedAt: Date.now(),
    deletedAt: null,
    tokensValidAfter: 0,
    ...overrides
  }
}

export const storeSuite = (name: string, layer: Layer.Layer<Stores, unknown>) =>
  describe(`stores on ${name}`, () => {
    it.layer(layer, { timeout: 60_000 })((it) => {
      it.effect("avatars: insert, find by id / login / e-mail, case-insensitive", () =>
        Effect.gen(function*() {
          const store = yield* AvatarStore
          const a = avatar({ username: `Mixed_${unique()}`, karmaTotal: 12.5, emailVerified: true })
          yield* store.insert(a)
          const byId = yield* store.findById(a.id)
          assert.deepStrictEqual(Option.getOrThrow(byId), a)
          assert.strictEqual(Option.getOrThrow(yield* store.findByLogin(a.username.toUpperCase())).id, a.id)
          assert.strictEqual(Option.getOrThrow(yield* store.findByLogin(a.email.toUpperCase())).id, a.id)
          assert.strictEqual(Option.getOrThrow(yield* store.findByEmail(a.email.toUpperCase())).id, a.id)
          assert.isTrue(Option.isNone(yield* store.findById(crypto.randomUUID())))
        }))

      it.effect("avatars: unique username and e-mail regardless of case", () =>
        Effect.gen(function*() {
          const store = yield* AvatarStore
          const a = avatar()
          yield* store.insert(a)
          const sameName = yield* Effect.flip(store.insert(avatar({ username: a.username.toUpperCase() })))
          assert.strictEqual(sameName._tag, "Conflict")
          assert.include(sameName.message, "username")
          const sameMail = yield* Effect.flip(store.insert(avatar({ email: a.email.toUpperCase() })))
          assert.include(sameMail.message, "e-mail")
          const b = avatar()
          yield* store.insert(b)
          const clash = yield* Effect.flip(store.update(b.id, { username: a.username }))
          assert.include(clash.message, "username")
          const clashMail = yield* Effect.flip(store.update(b.id, { email: a.email.toUpperCase() }))
          assert.include(clashMail.message, "e-mail")
          const updated = yield* store.update(b.id, { title: "Dr", emailVerified: true, plan: "Gold", deletedAt: 5 })
          assert.strictEqual(Option.getOrThrow(updated).title, "Dr")
          assert.strictEqual(Option.getOrThrow(updated).plan, "Gold")
          assert.isTrue(Option.getOrThrow(updated).emailVerified)
          assert.strictEqual(Option.getOrThrow(updated).deletedAt, 5)
          assert.isTrue(Option.isNone(yield* store.update(crypto.randomUUID(), { title: "x" })))
        }))

      it.effect("avatars: list and count admins", () =>
        Effect.gen(function*() {
          const store = yield* AvatarStore
          const before = yield* store.countAdmins()
          const admin = avatar({ avatarType: "Admin" })
          yield* store.insert(admin)
          assert.strictEqual(yield* store.countAdmins(), before + 1)
          assert.isTrue((yield* store.list()).some((x) => x.id === admin.id))
        }))

      it.effect("one-time tokens: single use, expiry, superseded by a newer one", () =>
        Effect.gen(function*() {
          const tokens = yield* OneTimeTokenStore
          const avatarId = crypto.randomUUID()
          const now = Date.now()
          const t1 = { hash: `h1_${unique()}`, avatarId, purpose: "verify" as const, email: "a@b.co", expiresAt: now + 1000, createdAt: now }
          yield* tokens.issue(t1)
          const t2 = { ...t1, hash: `h2_${unique()}` }
          yield* tokens.issue(t2)
          assert.isTrue(Option.isNone(yield* tokens.consume(t1.hash, "verify", now)), "superseded")
          assert.isTrue(Option.isNone(yield* tokens.consume(t2.hash, "reset", now)), "wrong purpose")
          const used = yield* tokens.consume(t2.hash, "verify", now)
          assert.strictEqual(Option.getOrThrow(used).email, "a@b.co")
          assert.isTrue(Option.isNone(yield* tokens.consume(t2.hash, "verify", now)), "single use")
          const t3 = { ...t1, hash: `h3_${unique()}`, purpose: "reset" as const, email: null }
          yield* tokens.issue(t3)
          assert.isTrue(Option.isNone(yield* tokens.consume(t3.hash, "reset", now + 1000)), "expired")
          const t4 = { ...t3, hash: `h4_${unique()}` }
          yield* tokens.issue(t4)
          yield* tokens.revokeAll(avatarId)
          assert.isTrue(Option.isNone(yield* tokens.consume(t4.hash, "reset", now)), "revoked")
        }))

      it.effect("send limit: three per sliding window", () =>
        Effect.gen(function*() {
          const limits = yield* SendLimitStore
          const key = `k_${unique()}`
          const hour = 3_600_000
          const t0 = 1_000_000_000_000
          assert.isTrue(yield* limits.tryRecord(key, t0, hour))
          assert.isTrue(yield* limits.tryRecord(key, t0 + 10, hour))
          assert.isTrue(yield* limits.tryRecord(key, t0 + 20, hour))
          assert.isFalse(yield* limits.tryRecord(key, t0 + 30, hour))
          assert.isFalse(yield* limits.tryRecord(key, t0 + hour - 1, hour))
          assert.isTrue(yield* limits.tryRecord(key, t0 + hour, hour), "oldest left the window")
          assert.isFalse(yield* limits.tryRecord(key, t0 + hour + 5, hour))
          assert.isTrue(yield* limits.tryRecord(`other_${unique()}`, t0, hour))
        }))

      it.effect("send limit: concurrent attempts admit exactly three", () =>
        Effect.gen(function*() {
          const limits = yield* SendLimitStore
          const key = `c_${unique()}`
          const results = yield* Effect.all(
            Array.from({ length: 20 }, () => limits.tryRecord(key, Date.now(), 3_600_000)),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter(Boolean).length, 3)
        }))

      it.effect("api keys: lookup by hash, list, revoke only own", () =>
        Effect.gen(function*() {
          const keys = yield* ApiKeyStore
          const avatarId = crypto.randomUUID()
          const key = { id: crypto.randomUUID(), avatarId, name: "ci", prefix: "aigw_ab", hash: `hash_${unique()}`, createdAt: Date.now(), lastUsedAt: null, revokedAt: null }
          yield* keys.insert(key)
          assert.deepStrictEqual(Option.getOrThrow(yield* keys.findByHash(key.hash)), key)
          assert.strictEqual((yield* keys.listByAvatar(avatarId)).length, 1)
          assert.isFalse(yield* keys.revoke(crypto.randomUUID(), key.id, 1), "not the owner")
          assert.isTrue(yield* keys.revoke(avatarId, key.id, 7))
          assert.isFalse(yield* keys.revoke(avatarId, key.id, 8), "already revoked")
          assert.strictEqual(Option.getOrThrow(yield* keys.findByHash(key.hash)).revokedAt, 7)
        }))

      it.effect("usage: admission stops exactly at the limit, also under concurrency", () =>
        Effect.gen(function*() {
          const usage = yield* UsageStore
          const avatarId = crypto.randomUUID()
          const day = "2026-11-21"
          const results = yield* Effect.all(
            Array.from({ length: 120 }, () => usage.admit(avatarId, day, 50)),
            { concurrency: 40 }
          )
          assert.strictEqual(results.filter(Option.isSome).length, 50)
          assert.strictEqual(yield* usage.callsOn(avatarId, day), 50)
          assert.isTrue(Option.isNone(yield* usage.admit(avatarId, day, 50)))
          assert.strictEqual(Option.getOrThrow(yield* usage.admit(avatarId, day, 51)), 51, "a raised limit admits again")
          assert.isTrue(Option.isNone(yield* usage.admit(crypto.randomUUID(), day, 0)), "limit 0 admits nothing")
        }))

      it.effect("usage: records tokens and monthly spend", () =>
        Effect.gen(function*() {
          const usage = yield* UsageStore
          const avatarId = crypto.randomUUID()
          const event = {
            avatarId,
            day: "2026-11-20",
            provider: "openai",
            model: "gpt-4o-mini",
            capability: "chat",
            promptTokens: 100,
            completionTokens: 20,
            costUSD: 0.25,
            latencyMs: 12.7,
            estimated: false,
            ok: true,
            at: Date.now()
          }
          yield* usage.record(event)
          yield* usage.record({ ...event, day: "2026-11-21", costUSD: 0.5 })
          yield* usage.record({ ...event, day: "2026-10-31", costUSD: 9 })
          yield* usage.admit(avatarId, "2026-11-21", 10)
          const totals = yield* usage.totals(avatarId, "2026-11-21")
          assert.strictEqual(totals.callsToday, 1)
          assert.strictEqual(totals.tokensToday, 120)
          assert.closeTo(totals.spendMonthUSD, 0.75, 1e-9)
        }))
    })
  })
