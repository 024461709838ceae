/**
 * The shared store suite: the same assertions against every backend (memory, SQLite,
 * PostgreSQL), the Metering port included. Backends differ only in the layer that provides the stores.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, layer as layerOf } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import { type JobRecord, JobStore } from "../../src/Jobs/JobStore.ts"
import { ApiKeyStore, LAST_USED_GRANULARITY_MS } from "../../src/Storage/ApiKeyStore.ts"
import { DocumentStore, modify } from "../../src/Storage/DocumentStore.ts"
import { MemoryStore } from "../../src/Storage/MemoryStore.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import { MailOutboxStore } from "../../src/Storage/MailOutboxStore.ts"
import { OneTimeTokenStore } from "../../src/Storage/OneTimeTokenStore.ts"
import { PRUNE_EVERY, SendLimitStore } from "../../src/Storage/SendLimitStore.ts"
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

/**
 * The suite on one backend. Each call builds its layer in a memo map of its own (`layer`, not `it.layer`:
 * @effect/vitest's `it.layer` replaces the shared `it`'s own `layer` with one that reuses the first call's
 * built layers, so a second backend's suite ran on the first's stores). A SQL backend names its dialect,
 * which the suite checks its stores run on.
 */
export const storeSuite = (name: string, layer: Layer.Layer<Stores, unknown> | Layer.Layer<Stores | SqlClient.SqlClient, unknown>, dialect?: "sqlite" | "pg") =>
  describe(`stores on ${name}`, () => {
    layerOf(layer as Layer.Layer<Stores, unknown>, { timeout: 60_000 })((it) => {
      if (dialect !== undefined) {
        it.effect(`runs on ${dialect}`, () =>
          Effect.gen(function*() {
            const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
            assert.strictEqual(Option.map(sql, (s) => s.onDialectOrElse({ sqlite: () => "sqlite", pg: () => "pg", orElse: () => "other" })).pipe(Option.getOrElse(() => "none")), dialect)
          }))
      }

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
          // A deleted Admin administers nothing: it is not counted.
          yield* store.update(admin.id, { isActive: false, deletedAt: 9 })
          assert.strictEqual(yield* store.countAdmins(), before)
        }))

      it.effect("avatars: revokeTokens applies its patch and raises the token generation strictly, atomically", () =>
        Effect.gen(function*() {
          const store = yield* AvatarStore
          const metering = yield* Metering
          const a = avatar({ emailVerified: false, tokensValidAfter: 0 })
          yield* store.insert(a)
          assert.strictEqual((yield* Effect.promise(() => metering.activeAvatar(a.id)))?.tokensValidAfter, 0)
          const reset = Option.getOrThrow(yield* store.revokeTokens(a.id, { passwordHash: "$argon2id$new", emailVerified: true, updatedAt: 5 }, 1_000))
          assert.deepStrictEqual(reset, { ...a, passwordHash: "$argon2id$new", emailVerified: true, updatedAt: 5, tokensValidAfter: 1_000 })
          assert.deepStrictEqual(Option.getOrThrow(yield* store.findById(a.id)), reset)
          assert.strictEqual((yield* Effect.promise(() => metering.activeAvatar(a.id)))?.tokensValidAfter, 1_000, "the metering port reads the new generation")
          const generation = (at: number) => Effect.map(store.revokeTokens(a.id, {}, at), (r) => Option.getOrThrow(r).tokensValidAfter)
          assert.strictEqual(yield* generation(900), 1_001, "a clock behind still raises it")
          assert.strictEqual(yield* generation(1_001), 1_002, "the same instant too")
          assert.strictEqual(yield* generation(5_000), 5_000)
          // Concurrent revocations at one instant each get their own, greater generation.
          const together = yield* Effect.all(Array.from({ length: 8 }, () => generation(5_000)), { concurrency: "unbounded" })
          assert.deepStrictEqual([...together].sort((x, y) => x - y), [5_001, 5_002, 5_003, 5_004, 5_005, 5_006, 5_007, 5_008])
          const gone = Option.getOrThrow(yield* store.revokeTokens(a.id, { isActive: false, deletedAt: 9, updatedAt: 9 }, 6_000))
          assert.deepStrictEqual([gone.isActive, gone.deletedAt, gone.tokensValidAfter, gone.passwordHash], [false, 9, 6_000, "$argon2id$new"])
          assert.isTrue(Option.isNone(yield* store.revokeTokens(crypto.randomUUID(), {}, 1)), "no such avatar")
        }))

      it.effect("avatars: replacePasswordHash only over the expected hash", () =>
        Effect.gen(function*() {
          const store = yield* AvatarStore
          const a = avatar({ passwordHash: "$argon2id$old" })
          yield* store.insert(a)
          assert.isTrue(yield* store.replacePasswordHash(a.id, "$argon2id$old", "$argon2id$rehashed"))
          assert.isFalse(yield* store.replacePasswordHash(a.id, "$argon2id$old", "$argon2id$other"), "the hash changed meanwhile")
          assert.isFalse(yield* store.replacePasswordHash(crypto.randomUUID(), "$argon2id$old", "$argon2id$other"), "no such avatar")
          assert.deepStrictEqual(Option.getOrThrow(yield* store.findById(a.id)), { ...a, passwordHash: "$argon2id$rehashed" })
        }))

      it.effect("avatars: confirmPendingEmail swaps the address in only while it is still the pending one", () =>
        Effect.gen(function*() {
          const store = yield* AvatarStore
          const pending = `new_${unique()}@example.com`
          const a = avatar({ emailVerified: true, pendingEmail: pending })
          yield* store.insert(a)
          assert.isTrue(Option.isNone(yield* store.confirmPendingEmail(a.id, `other_${unique()}@example.com`, 5)), "another address")
          yield* store.update(a.id, { pendingEmail: null })
          assert.isTrue(Option.isNone(yield* store.confirmPendingEmail(a.id, pending, 5)), "cleared meanwhile (a reset, a cancel)")
          assert.deepStrictEqual(Option.getOrThrow(yield* store.findById(a.id)), { ...a, pendingEmail: null })
          yield* store.update(a.id, { pendingEmail: pending })
          const confirmed = Option.getOrThrow(yield* store.confirmPendingEmail(a.id, pending, 7))
          assert.deepStrictEqual(confirmed, { ...a, email: pending, pendingEmail: null, emailVerified: true, updatedAt: 7 })
          assert.strictEqual(Option.getOrThrow(yield* store.findByEmail(pending.toUpperCase())).id, a.id)
          // An address another avatar registered meanwhile.
          const taken = `taken_${unique()}@example.com`
          const b = avatar({ pendingEmail: taken })
          yield* store.insert(b)
          yield* store.insert(avatar({ email: taken }))
          const clash = yield* Effect.flip(store.confirmPendingEmail(b.id, taken, 9))
          assert.strictEqual(clash._tag, "Conflict")
          assert.isTrue(Option.isNone(yield* store.confirmPendingEmail(crypto.randomUUID(), taken, 9)), "no such avatar")
        }))

      it.effect("one-time tokens: revokeAll of one purpose leaves the other", () =>
        Effect.gen(function*() {
          const tokens = yield* OneTimeTokenStore
          const avatarId = crypto.randomUUID()
          const now = Date.now()
          const verify = { hash: `v_${unique()}`, avatarId, purpose: "verify" as const, email: "a@b.co", expiresAt: now + 1000, createdAt: now }
          const reset = { ...verify, hash: `r_${unique()}`, purpose: "reset" as const, email: null }
          const otherAvatar = { ...reset, hash: `o_${unique()}`, avatarId: crypto.randomUUID() }
          for (const t of [verify, reset, otherAvatar]) yield* tokens.issue(t)
          yield* tokens.revokeAll(avatarId, "reset")
          assert.isTrue(Option.isNone(yield* tokens.consume(reset.hash, "reset", now)), "revoked")
          assert.isTrue(Option.isSome(yield* tokens.consume(otherAvatar.hash, "reset", now)), "another avatar's")
          assert.isTrue(Option.isSome(yield* tokens.consume(verify.hash, "verify", now)), "the other purpose")
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
          assert.deepStrictEqual(
            [yield* tokens.usable(t1.hash, "verify", now), yield* tokens.usable(t2.hash, "reset", now), yield* tokens.usable(t2.hash, "verify", now + 1000)],
            [false, false, false],
            "usable: superseded, wrong purpose, expired"
          )
          assert.isTrue(yield* tokens.usable(t2.hash, "verify", now), "usable, and left so")
          const used = yield* tokens.consume(t2.hash, "verify", now)
          assert.isFalse(yield* tokens.usable(t2.hash, "verify", now), "used")
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

      it.effect("mail outbox: a due mail is leased to one claimer with its attempt counted; only the lease holder settles it", () =>
        Effect.gen(function*() {
          const outbox = yield* MailOutboxStore
          const now = Date.now()
          const entry = (nextAttemptAt: number) => ({
            id: crypto.randomUUID(),
            mail: { to: `o_${unique()}@example.com`, subject: "Verify", text: "link ✓", html: "<p>link</p>" },
            createdAt: now - 1000,
            expiresAt: now + 3_600_000,
            attempts: 1,
            nextAttemptAt,
            lockedUntil: null,
            lastError: "451 try later"
          })
          const due = entry(now - 10)
          const notYet = entry(now + 60_000)
          yield* outbox.add(due)
          yield* outbox.add(notYet)
          const mine = <E extends { readonly id: string }>(list: ReadonlyArray<E>) => list.filter((e) => e.id === due.id || e.id === notYet.id)
          const [claimed] = mine(yield* outbox.claim(now, 100, 30_000))
          assert.deepStrictEqual(claimed, { ...due, attempts: 2, lockedUntil: now + 30_000 })
          assert.deepStrictEqual(mine(yield* outbox.claim(now + 1, 100, 30_000)), [], "held by its lease; the other not due")
          // Another lease (a claim after this one expired) is not this one's to settle.
          yield* outbox.remove(due.id, now + 1)
          yield* outbox.later(due.id, now + 1, now, "x")
          yield* outbox.later(due.id, now + 30_000, now + 5_000, "421 closing")
          const [again] = mine(yield* outbox.claim(now + 5_000, 100, 30_000))
          assert.deepStrictEqual([again?.id, again?.attempts, again?.lastError], [due.id, 3, "421 closing"])
          yield* outbox.remove(due.id, now + 35_000)
          assert.deepStrictEqual(mine(yield* outbox.claim(now + 120_000, 100, 30_000)).map((e) => e.id), [notYet.id], "sent and removed; the other due now")
        }))

      it.effect("mail outbox: the mails to an address are discarded, held or not, in any case; others stay", () =>
        Effect.gen(function*() {
          const outbox = yield* MailOutboxStore
          const now = Date.now()
          // Letters past ASCII too (a twins review: SQLite's lower() folds ASCII only, and Ü kept its mails).
          const gone = `Ünal_Gone_${unique()}@Example.com`
          const kept = `k_${unique()}@example.com`
          const entry = (to: string) => ({
            id: crypto.randomUUID(),
            mail: { to, subject: "Reset", text: "link", html: "<p>link</p>" },
            createdAt: now,
            expiresAt: now + 3_600_000,
            attempts: 1,
            nextAttemptAt: now - 10,
            lockedUntil: null,
            lastError: "451"
          })
          const held = entry(gone)
          for (const e of [held, entry(gone.toLowerCase()), entry(kept)]) yield* outbox.add(e)
          yield* outbox.claim(now, 100, 30_000)
          assert.strictEqual(yield* outbox.discardTo(gone.toUpperCase()), 2)
          assert.strictEqual(yield* outbox.discardTo(gone), 0)
          const left = (yield* outbox.claim(now + 60_000, 100, 30_000)).map((e) => e.mail.to)
          assert.include(left, kept)
          assert.notInclude(left.map((to) => to.toLowerCase()), gone.toLowerCase())
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

      it.effect("send limit: an event taken back does not count, wherever it is among the three", () =>
        Effect.gen(function*() {
          const limits = yield* SendLimitStore
          const hour = 3_600_000
          const t0 = 1_000_000_000_000
          for (const position of [0, 1, 2]) {
            const key = `u_${unique()}`
            const times = [t0, t0 + 10, t0 + 20]
            for (const t of times) assert.isTrue(yield* limits.tryRecord(key, t, hour))
            assert.isFalse(yield* limits.tryRecord(key, t0 + 30, hour))
            yield* limits.unrecord(key, times[position]!)
            assert.isTrue(yield* limits.tryRecord(key, t0 + 40, hour), `taken back at ${position}: its place is free`)
            assert.isFalse(yield* limits.tryRecord(key, t0 + 50, hour), "and only its place")
            yield* limits.unrecord(key, t0 + 1)
            assert.isFalse(yield* limits.tryRecord(key, t0 + 60, hour), "an instant never recorded frees nothing")
          }
          // An instant left outside the window still counts for nothing after a taking back.
          const key = `w_${unique()}`
          for (const t of [t0, t0 + hour, t0 + hour + 10]) assert.isTrue(yield* limits.tryRecord(key, t, hour))
          yield* limits.unrecord(key, t0 + hour + 10)
          assert.isTrue(yield* limits.tryRecord(key, t0 + hour + 20, hour))
          assert.isTrue(yield* limits.tryRecord(key, t0 + hour + 30, hour), "two in the window")
          assert.isFalse(yield* limits.tryRecord(key, t0 + hour + 40, hour))
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

      it.effect("send limit: forgets the keys whose last event left the window, which admit as new ones", () =>
        Effect.gen(function*() {
          const limits = yield* SendLimitStore
          const hour = 3_600_000
          const t0 = Date.now()
          const old = Array.from({ length: 3 }, () => `old_${unique()}`)
          for (const key of old) for (let i = 0; i < 3; i++) assert.isTrue(yield* limits.tryRecord(key, t0 + i, hour))
          const recent = `recent_${unique()}`
          for (let i = 0; i < 3; i++) assert.isTrue(yield* limits.tryRecord(recent, t0 + 2 * hour, hour))
          // Enough calls for one pruning round, an hour after the old keys' last event.
          for (let i = 0; i < PRUNE_EVERY; i++) yield* limits.tryRecord(`fresh_${unique()}`, t0 + 2 * hour + 1, hour)
          const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
          if (Option.isSome(sql)) {
            const rows = yield* sql.value<{ key: string }>`SELECT key FROM send_limits WHERE key IN ${sql.value.in([...old, recent])}`
            assert.deepStrictEqual(rows.map((r) => r.key), [recent], "only the key inside its window is kept")
          }
          for (const key of old) assert.isTrue(yield* limits.tryRecord(key, t0 + 2 * hour + 2, hour))
          assert.isFalse(yield* limits.tryRecord(recent, t0 + 2 * hour + 2, hour), "a key inside its window still counts")
        }))

      it.effect("counted limit: up to the limit per window, taking back only within that window", () =>
        Effect.gen(function*() {
          const limits = yield* SendLimitStore
          const key = `n_${unique()}`
          const window = 900_000
          const t0 = 1_000_000_000_000
          const first = yield* limits.tryCount(key, t0, window, 3)
          assert.deepStrictEqual(first, { admitted: true, expiresAt: t0 + window })
          assert.isTrue((yield* limits.tryCount(key, t0 + 10, window, 3)).admitted)
          const third = yield* limits.tryCount(key, t0 + 20, window, 3)
          assert.deepStrictEqual(third, { admitted: true, expiresAt: t0 + window }, "the window opened at the first event")
          assert.deepStrictEqual(yield* limits.tryCount(key, t0 + 30, window, 3), { admitted: false, expiresAt: t0 + window })
          yield* limits.uncount(key, third.expiresAt)
          assert.isTrue((yield* limits.tryCount(key, t0 + 40, window, 3)).admitted, "a taken-back event frees its slot")
          assert.isFalse((yield* limits.tryCount(key, t0 + window - 1, window, 3)).admitted)
          const next = yield* limits.tryCount(key, t0 + window, window, 3)
          assert.deepStrictEqual(next, { admitted: true, expiresAt: t0 + 2 * window }, "a new window starts at 1")
          yield* limits.uncount(key, first.expiresAt)
          assert.isTrue((yield* limits.tryCount(key, t0 + window + 1, window, 2)).admitted)
          assert.isFalse((yield* limits.tryCount(key, t0 + window + 2, window, 2)).admitted, "taking back an old window's event frees nothing")
          assert.isTrue((yield* limits.tryCount(`other_${unique()}`, t0, window, 1)).admitted)
        }))

      it.effect("counted limit: concurrent attempts admit exactly the limit", () =>
        Effect.gen(function*() {
          const limits = yield* SendLimitStore
          const key = `cn_${unique()}`
          const now = Date.now()
          const results = yield* Effect.all(
            Array.from({ length: 30 }, () => limits.tryCount(key, now, 900_000, 10)),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r.admitted).length, 10)
        }))

      it.effect("api keys: lookup by hash, list, revoke only own", () =>
        Effect.gen(function*() {
          const keys = yield* ApiKeyStore
          const avatarId = crypto.randomUUID()
          const key = { id: crypto.randomUUID(), avatarId, name: "ci", prefix: "aigw_ab", hash: `hash_${unique()}`, createdAt: Date.now(), lastUsedAt: null, revokedAt: null, jobsStoppedAt: null }
          yield* keys.insert(key)
          assert.deepStrictEqual(Option.getOrThrow(yield* keys.findByHash(key.hash)), key)
          assert.strictEqual((yield* keys.listByAvatar(avatarId)).length, 1)
          assert.isFalse(yield* keys.revoke(crypto.randomUUID(), key.id, 1), "not the owner")
          assert.isTrue(yield* keys.revoke(avatarId, key.id, 7))
          assert.isFalse(yield* keys.revoke(avatarId, key.id, 8), "already revoked")
          assert.strictEqual(Option.getOrThrow(yield* keys.findByHash(key.hash)).revokedAt, 7)
          // Its jobs stopped later (a leak found after a rotation): once; the revocation keeps its time.
          assert.isFalse(yield* keys.revoke(crypto.randomUUID(), key.id, 9, true), "not the owner")
          assert.isTrue(yield* keys.revoke(avatarId, key.id, 9, true))
          assert.isFalse(yield* keys.revoke(avatarId, key.id, 10, true), "its jobs stopped already")
          const stopped = Option.getOrThrow(yield* keys.findByHash(key.hash))
          assert.deepStrictEqual([stopped.revokedAt, stopped.jobsStoppedAt], [7, 9])
          // Revoked with its jobs at once.
          const other = { ...key, id: crypto.randomUUID(), hash: `hash_${unique()}` }
          yield* keys.insert(other)
          assert.isTrue(yield* keys.revoke(avatarId, other.id, 11, true))
          const both = Option.getOrThrow(yield* keys.findByHash(other.hash))
          assert.deepStrictEqual([both.revokedAt, both.jobsStoppedAt], [11, 11])
        }))

      it.effect("api keys: markUsed writes a key's last use at most once per hour, only for active keys", () =>
        Effect.gen(function*() {
          const keys = yield* ApiKeyStore
          const hour = LAST_USED_GRANULARITY_MS
          const t0 = 1_000_000_000_000
          const key = { id: crypto.randomUUID(), avatarId: crypto.randomUUID(), name: "k", prefix: "aigw_lu", hash: `hash_${unique()}`, createdAt: 1, lastUsedAt: null, revokedAt: null }
          yield* keys.insert(key)
          assert.strictEqual(yield* keys.markUsed(key.hash, t0), t0, "the first use")
          assert.strictEqual(yield* keys.markUsed(key.hash, t0 + hour - 1), t0, "within the hour: the stored use stays")
          assert.strictEqual(Option.getOrThrow(yield* keys.findByHash(key.hash)).lastUsedAt, t0)
          assert.strictEqual(yield* keys.markUsed(key.hash, t0 + hour), t0 + hour)
          assert.strictEqual(yield* keys.markUsed(key.hash, t0 + 10), t0 + hour, "never backwards")
          assert.strictEqual((yield* keys.listByAvatar(key.avatarId))[0]!.lastUsedAt, t0 + hour)
          yield* keys.revoke(key.avatarId, key.id, t0 + hour + 1)
          assert.isNull(yield* keys.markUsed(key.hash, t0 + 3 * hour), "a revoked key")
          assert.strictEqual(Option.getOrThrow(yield* keys.findByHash(key.hash)).lastUsedAt, t0 + hour)
          assert.isNull(yield* keys.markUsed(`unknown_${unique()}`, t0), "an unknown key")
        }))

      it.effect("api keys: revoke all of one avatar", () =>
        Effect.gen(function*() {
          const keys = yield* ApiKeyStore
          const avatarId = crypto.randomUUID()
          const make = (owner: string) => ({ id: crypto.randomUUID(), avatarId: owner, name: "k", prefix: "aigw_x", hash: `hash_${unique()}`, createdAt: 1, lastUsedAt: null, revokedAt: null })
          const [a, b, other] = [make(avatarId), make(avatarId), make(crypto.randomUUID())]
          for (const k of [a, b, other]) yield* keys.insert(k)
          yield* keys.revoke(avatarId, a.id, 5)
          assert.strictEqual(yield* keys.revokeAll(avatarId, 9), 1, "only the active one")
          assert.deepStrictEqual((yield* keys.listByAvatar(avatarId)).map((k) => k.revokedAt).sort(), [5, 9])
          assert.strictEqual(Option.getOrThrow(yield* keys.findByHash(other.hash)).revokedAt, null, "other avatars keep theirs")
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

      // A twins review: PostgreSQL's gate took its limits as INTEGER, so a plan's limit past 2^31 − 1 (any safe integer is
      // accepted, times the karma multiplier) failed every call of its avatar, and every admission batched with it.
      it.effect("usage and metering: a daily limit past 2^31 admits, beside another avatar's admission in the same turn", () =>
        Effect.gen(function*() {
          const metering = yield* Metering
          const usage = yield* UsageStore
          const day = "2026-11-23"
          const [large, small] = [crypto.randomUUID(), crypto.randomUUID()]
          const both = yield* Effect.promise(() => Promise.all([metering.admit(large, day, 3_000_000_000, 2), metering.admit(small, day, 100, 1)]))
          assert.deepStrictEqual(both, [2, 1])
          assert.strictEqual(Option.getOrThrow(yield* usage.admit(large, day, 2 ** 53 - 1)), 3)
          assert.strictEqual(yield* usage.callsOn(large, day), 3)
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

      it.effect("metering: an API key's active avatar; unknown or revoked keys and inactive avatars give none", () =>
        Effect.gen(function*() {
          const metering = yield* Metering
          const keys = yield* ApiKeyStore
          const avatars = yield* AvatarStore
          const owner = avatar({ plan: "Gold", karmaTotal: 250 })
          yield* avatars.insert(owner)
          const key = (avatarId: string) => ({ id: crypto.randomUUID(), avatarId, name: "k", prefix: "aigw_ab", hash: `hash_${unique()}`, createdAt: 1, lastUsedAt: null, revokedAt: null })
          const good = key(owner.id)
          yield* keys.insert(good)
          assert.deepStrictEqual(yield* Effect.promise(() => metering.avatarOfKey(good.hash)), owner)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(`hash_${unique()}`)), "unknown key")
          const orphan = key(crypto.randomUUID())
          yield* keys.insert(orphan)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(orphan.hash)), "no such avatar")
          yield* keys.revoke(owner.id, good.id, 5)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(good.hash)), "revoked")
          const gone = avatar({ isActive: false })
          yield* avatars.insert(gone)
          const goneKey = key(gone.id)
          yield* keys.insert(goneKey)
          assert.isUndefined(yield* Effect.promise(() => metering.avatarOfKey(goneKey.hash)), "inactive avatar")
        }))

      it.effect("metering: a token's avatar only while it exists and is active", () =>
        Effect.gen(function*() {
          const metering = yield* Metering
          const avatars = yield* AvatarStore
          const active = avatar({ plan: "Gold", karmaTotal: 250, tokensValidAfter: 42 })
          yield* avatars.insert(active)
          assert.deepStrictEqual(yield* Effect.promise(() => metering.activeAvatar(active.id)), active)
          assert.isUndefined(yield* Effect.promise(() => metering.activeAvatar(crypto.randomUUID())), "no such avatar")
          yield* avatars.update(active.id, { isActive: false, deletedAt: 7 })
          assert.isUndefined(yield* Effect.promise(() => metering.activeAvatar(active.id)), "deactivated")
        }))

      it.effect("metering: admission and recording count with the usage store, exactly at the limit", () =>
        Effect.gen(function*() {
          const metering = yield* Metering
          const usage = yield* UsageStore
          const avatarId = crypto.randomUUID()
          const day = "2026-11-22"
          // Both paths at once against one counter: 120 attempts, limit 50.
          const results = yield* Effect.all(
            Array.from({ length: 120 }, (_, i) =>
              i % 2 === 0
                ? Effect.map(usage.admit(avatarId, day, 50), Option.isSome)
                : Effect.map(Effect.promise(() => metering.admit(avatarId, day, 50, 1)), (n) => n !== undefined)),
            { concurrency: 40 }
          )
          assert.strictEqual(results.filter(Boolean).length, 50)
          assert.strictEqual(yield* Effect.promise(() => metering.callsOn(avatarId, day)), 50)
          assert.strictEqual(yield* Effect.promise(() => metering.callsOn(crypto.randomUUID(), day)), 0, "no calls yet")
          assert.isUndefined(yield* Effect.promise(() => metering.admit(avatarId, day, 52, 3)), "all or none")
          assert.strictEqual(yield* Effect.promise(() => metering.admit(avatarId, day, 52, 2)), 52)
          assert.isUndefined(yield* Effect.promise(() => metering.admit(crypto.randomUUID(), day, 2, 3)), "more than the limit")
          const event = {
            avatarId, day, provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens: 7, completionTokens: 5,
            costUSD: 0.125, latencyMs: 3.4, estimated: true, ok: false, at: Date.now()
          }
          yield* Effect.promise(() => metering.record(event))
          yield* usage.record(event)
          const totals = yield* usage.totals(avatarId, day)
          assert.deepStrictEqual(totals, { callsToday: 52, tokensToday: 24, spendMonthUSD: 0.25 })
        }))

      it.effect("metering: admissions made together (one group commit) are each answered as if made one after another", () =>
        Effect.gen(function*() {
          const metering = yield* Metering
          const usage = yield* UsageStore
          const [a, b, c] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
          const day = "2026-11-28"
          const admissions: Array<readonly [string, number, number]> = [[a, 3, 1], [b, 5, 3], [a, 3, 2], [b, 5, 3], [a, 3, 1], [c, 1, 2], [b, 5, 2], [a, 4, 1]]
          const outcomes = yield* Effect.promise(() => Promise.all(admissions.map(([avatarId, limit, count]) => metering.admit(avatarId, day, limit, count))))
          // a: 1, 3, refused (4 > 3), then 4 under a raised limit; b: 3, refused (6 > 5), 5; c: more than its limit.
          assert.deepStrictEqual(outcomes, [1, 3, 3, undefined, undefined, undefined, 5, 4])
          assert.deepStrictEqual([(yield* usage.totals(a, day)).callsToday, (yield* usage.totals(b, day)).callsToday, (yield* usage.totals(c, day)).callsToday], [4, 5, 0])
          // Alone in its turn, an admission and a refusal answer the same way.
          assert.strictEqual(yield* Effect.promise(() => metering.admit(a, day, 5, 1)), 5)
          assert.isUndefined(yield* Effect.promise(() => metering.admit(a, day, 5, 1)))
        }))

      it.effect("usage: pruning deletes the records made before the cutoff, the oldest first and at most a batch at a time; the daily totals stay", () =>
        Effect.gen(function*() {
          const usage = yield* UsageStore
          const avatarId = crypto.randomUUID()
          // Times far before any other test's records (theirs are made now), so the counts below are this test's.
          const record = (at: number) =>
            usage.record({
              avatarId, day: "1970-01-01", provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens: 10,
              completionTokens: 5, costUSD: 0.5, latencyMs: 3, estimated: false, ok: true, at
            })
          for (const at of [1_002, 4_999, 1_000, 5_000, 1_001, 6_000]) yield* record(at)
          assert.strictEqual(yield* usage.pruneEvents(-1_000_000_000_000, 10), 0, "a cutoff before 1970 (a century's retention)")
          assert.strictEqual(yield* usage.pruneEvents(5_000, 1), 1)
          assert.strictEqual(yield* usage.pruneEvents(1_001, 10), 0, "the oldest went first")
          assert.strictEqual(yield* usage.pruneEvents(5_000, 2), 2)
          assert.strictEqual(yield* usage.pruneEvents(5_000, 2), 1, "the one a millisecond before the cutoff")
          assert.strictEqual(yield* usage.pruneEvents(5_000, 2), 0, "the one made at the cutoff stays")
          assert.strictEqual(yield* usage.pruneEvents(6_001, 10), 2)
          // Ids of these times hold "aa" (00000000-aa00-7…), which a collation with contractions sorts after "ab".
          for (const at of [0xaa00, 0xaa05]) yield* record(at)
          assert.strictEqual(yield* usage.pruneEvents(0xab00, 10), 2, "ids compared byte by byte")
          const totals = yield* usage.totals(avatarId, "1970-01-01")
          assert.strictEqual(totals.tokensToday, 8 * 15)
          assert.closeTo(totals.spendMonthUSD, 4, 1e-9)
        }))

      it.effect("metering: records made together (one group commit) all count, summed per avatar and day", () =>
        Effect.gen(function*() {
          const metering = yield* Metering
          const usage = yield* UsageStore
          const [a, b] = [crypto.randomUUID(), crypto.randomUUID()]
          const event = (avatarId: string, day: string, i: number) => ({
            avatarId, day, provider: "openai", model: "gpt-4o-mini", capability: "chat", promptTokens: i, completionTokens: 1,
            costUSD: 0.5, latencyMs: i, estimated: false, ok: true, at: Date.now()
          })
          // Started in one turn: the SQL backends commit them as one batch.
          const events = Array.from({ length: 30 }, (_, i) => event(i % 3 === 0 ? b : a, i % 5 === 0 ? "2026-11-21" : "2026-11-22", i))
          yield* Effect.promise(() => Promise.all(events.map((e) => metering.record(e))))
          for (const avatarId of [a, b]) {
            for (const day of ["2026-11-21", "2026-11-22"]) {
              const mine = events.filter((e) => e.avatarId === avatarId && e.day === day)
              const totals = yield* usage.totals(avatarId, day)
              assert.strictEqual(totals.tokensToday, mine.reduce((n, e) => n + e.promptTokens + e.completionTokens, 0), `${avatarId} ${day}`)
            }
            assert.strictEqual((yield* usage.totals(avatarId, "2026-11-22")).spendMonthUSD, events.filter((e) => e.avatarId === avatarId).length * 0.5)
          }
        }))

      it.effect("jobs: claim with a lease, progress, finish with its webhook in one step; only the lease holder writes", () =>
        Effect.gen(function*() {
          const jobs = yield* JobStore
          const now = 2_000_000_000_000 + Math.floor(Math.random() * 1e9)
          const job = jobRecord({ nextRunAt: now - 1, createdAt: now, updatedAt: now, submittedWithKey: "sha256-of-the-key" })
          yield* jobs.insert(job)
          const leaseOf = (claimed: ReadonlyArray<JobRecord>) => claimed.find((j) => j.id === job.id)?.lockedUntil
          const claimed = yield* jobs.claimDue(now, 100, 1000)
          const first = leaseOf(claimed)
          assert.strictEqual(first, now + 1000)
          // The key that submitted it comes with the claimed job (the worker stops it once that key is revoked).
          assert.strictEqual(claimed.find((j) => j.id === job.id)?.submittedWithKey, "sha256-of-the-key")
          // Picked up: running while its first step is under way (a gateway batch's items), not queued.
          assert.strictEqual(Option.getOrThrow(yield* jobs.get(job.id)).status, "running")
          assert.isUndefined(leaseOf(yield* jobs.claimDue(now + 10, 100, 1000)), "leased")
          assert.isTrue(yield* jobs.progress(job.id, first!, { status: "running", upstreamId: "up_1", provider: "luma", state: { step: 2 }, nextRunAt: now + 50 }, now))
          const saved = Option.getOrThrow(yield* jobs.get(job.id))
          assert.deepStrictEqual([saved.status, saved.upstreamId, saved.provider, saved.state, saved.lockedUntil], ["running", "up_1", "luma", { step: 2 }, null])
          assert.isUndefined(leaseOf(yield* jobs.claimDue(now + 10, 100, 1000)), "not due yet")
          const second = leaseOf(yield* jobs.claimDue(now + 60, 100, 1000))
          assert.strictEqual(second, now + 1060, "due again")
          const third = leaseOf(yield* jobs.claimDue(now + 2000, 100, 1000))
          assert.strictEqual(third, now + 3000, "lease expired: claimable again")
          // The second claim's step outlived its lease: its progress and its outcome are not written.
          assert.isFalse(yield* jobs.progress(job.id, second!, { upstreamId: "up_stale", nextRunAt: now + 70 }, now + 2100))
          assert.isFalse(yield* jobs.finish(job.id, second!, { status: "failed", result: null, error: "stale", completedAt: now + 2100 }, Option.none()))
          const held = Option.getOrThrow(yield* jobs.get(job.id))
          assert.deepStrictEqual([held.status, held.upstreamId, held.lockedUntil], ["running", "up_1", third])
          const delivery = {
            id: crypto.randomUUID(), jobId: job.id, url: "https://example.com/hook", event: "video", body: "{\"a\":1}",
            status: "pending" as const, attempts: 0, nextAttemptAt: now, lockedUntil: null, createdAt: now, deliveredAt: null, lastError: null
          }
          assert.isTrue(yield* jobs.finish(job.id, third!, { status: "completed", result: { url: "x" }, error: null, completedAt: now + 5 }, Option.some(delivery)))
          assert.isFalse(yield* jobs.finish(job.id, third!, { status: "failed", result: null, error: "late", completedAt: now + 6 }, Option.some({ ...delivery, id: crypto.randomUUID() })), "finished once")
          const done = Option.getOrThrow(yield* jobs.get(job.id))
          assert.deepStrictEqual([done.status, done.result, done.completedAt, done.submittedWithKey], ["completed", { url: "x" }, now + 5, "sha256-of-the-key"])
          assert.strictEqual((yield* jobs.deliveriesOf(job.id)).length, 1)
          assert.isFalse((yield* jobs.claimDue(now + 5000, 100, 1000)).some((j) => j.id === job.id), "finished jobs are not claimed")
        }))

      it.effect("deliveries: claim, attempts recorded, delivered rows stop", () =>
        Effect.gen(function*() {
          const jobs = yield* JobStore
          const now = 3_000_000_000_000 + Math.floor(Math.random() * 1e9)
          const job = jobRecord({ nextRunAt: now, createdAt: now, updatedAt: now })
          yield* jobs.insert(job)
          const lease = (yield* jobs.claimDue(now, 100, 1000)).find((j) => j.id === job.id)!.lockedUntil!
          const id = crypto.randomUUID()
          yield* jobs.finish(job.id, lease, { status: "failed", result: null, error: "boom", completedAt: now }, Option.some({
            id, jobId: job.id, url: "https://example.com/h", event: "batch", body: "{}", status: "pending", attempts: 0,
            nextAttemptAt: now, lockedUntil: null, createdAt: now, deliveredAt: null, lastError: null
          }))
          const first = (yield* jobs.claimDeliveries(now, 10, 1000)).find((d) => d.id === id)!
          assert.strictEqual(first.lockedUntil, now + 1000)
          assert.isFalse((yield* jobs.claimDeliveries(now, 10, 1000)).some((d) => d.id === id), "leased")
          assert.isTrue(yield* jobs.recordAttempt({ deliveryId: id, at: now, statusCode: 500, error: "HTTP 500", durationMs: 12 }, first.lockedUntil!, { status: "pending", nextAttemptAt: now + 100, lastError: "HTTP 500" }))
          const second = (yield* jobs.claimDeliveries(now + 100, 10, 1000)).find((d) => d.id === id)!
          assert.isTrue(yield* jobs.recordAttempt({ deliveryId: id, at: now + 100, statusCode: 204, error: null, durationMs: 3 }, second.lockedUntil!, { status: "delivered", nextAttemptAt: now + 100, lastError: null }))
          const [d] = yield* jobs.deliveriesOf(job.id)
          assert.deepStrictEqual([d!.status, d!.attempts, d!.deliveredAt], ["delivered", 2, now + 100])
          assert.deepStrictEqual((yield* jobs.attemptsOf(id)).map((a) => a.statusCode), [500, 204])
          assert.isFalse((yield* jobs.claimDeliveries(now + 10_000, 10, 1000)).some((x) => x.id === id))
        }))

      it.effect("deliveries: one put back unsent takes its attempt back, writes no history and is due again; only under its lease", () =>
        Effect.gen(function*() {
          const jobs = yield* JobStore
          const { job, id, now } = yield* completedWithDelivery(3_200_000_000_000)
          const claimed = (yield* jobs.claimDeliveries(now, 10, 1000)).find((d) => d.id === id)!
          assert.strictEqual(claimed.attempts, 1)
          assert.isFalse(yield* jobs.putBack(id, claimed.lockedUntil! + 1, now + 500), "not under another lease")
          assert.isTrue(yield* jobs.putBack(id, claimed.lockedUntil!, now + 500))
          const [d] = yield* jobs.deliveriesOf(job.id)
          assert.deepStrictEqual([d!.status, d!.attempts, d!.nextAttemptAt, d!.lockedUntil], ["pending", 0, now + 500, null])
          assert.deepStrictEqual(yield* jobs.attemptsOf(id), [])
          assert.isFalse((yield* jobs.claimDeliveries(now + 499, 10, 1000)).some((x) => x.id === id), "not due before its time")
          assert.strictEqual((yield* jobs.claimDeliveries(now + 500, 10, 1000)).find((x) => x.id === id)!.attempts, 1, "the next claim is attempt 1 again")
        }))

      it.effect("deliveries: an attempt that outlived its lease is kept in the history but does not write the state", () =>
        Effect.gen(function*() {
          const jobs = yield* JobStore
          const { job, id, now } = yield* completedWithDelivery(3_100_000_000_000)
          // The first claim's lease runs out; another process claims the delivery and delivers it.
          const stale = (yield* jobs.claimDeliveries(now, 10, 1000)).find((d) => d.id === id)!
          const fresh = (yield* jobs.claimDeliveries(now + 2000, 10, 1000)).find((d) => d.id === id)!
          assert.deepStrictEqual([stale.attempts, fresh.attempts], [1, 2])
          assert.isTrue(yield* jobs.recordAttempt({ deliveryId: id, at: now + 2000, statusCode: 204, error: null, durationMs: 3 }, fresh.lockedUntil!, { status: "delivered", nextAttemptAt: now + 2000, lastError: null }))
          // The stale attempt's late failure: in the history, but the delivery stays delivered.
          assert.isFalse(yield* jobs.recordAttempt({ deliveryId: id, at: now, statusCode: null, error: "no answer", durationMs: 9000 }, stale.lockedUntil!, { status: "pending", nextAttemptAt: now + 9000, lastError: "no answer" }))
          const [d] = yield* jobs.deliveriesOf(job.id)
          assert.deepStrictEqual([d!.status, d!.deliveredAt, d!.lastError, d!.lockedUntil], ["delivered", now + 2000, null, null])
          assert.deepStrictEqual((yield* jobs.attemptsOf(id)).map((a) => a.statusCode), [null, 204])
          assert.isFalse((yield* jobs.claimDeliveries(now + 100_000, 10, 1000)).some((x) => x.id === id), "never sent again")
        }))

      it.effect("memories: stored with vectors, listed per avatar and user, newest first", () =>
        Effect.gen(function*() {
          const memories = yield* MemoryStore
          const avatarId = crypto.randomUUID()
          const base = { avatarId, userId: "u1", embedder: "local:hash-256", vector: [0.5, -0.25, 0] }
          yield* memories.insert({ ...base, id: crypto.randomUUID(), content: "older", createdAt: 1000 })
          yield* memories.insert({ ...base, id: crypto.randomUUID(), content: "newer", createdAt: 2000 })
          yield* memories.insert({ ...base, id: crypto.randomUUID(), content: "other user", userId: "u2", createdAt: 3000 })
          yield* memories.insert({ ...base, id: crypto.randomUUID(), content: "other avatar", avatarId: crypto.randomUUID(), createdAt: 4000 })
          const list = yield* memories.list(avatarId, "u1", 10)
          assert.deepStrictEqual(list.map((m) => m.content), ["newer", "older"])
          assert.deepStrictEqual(list[0]!.vector, [0.5, -0.25, 0])
          assert.strictEqual((yield* memories.list(avatarId, "u1", 1)).length, 1)
        }))

      it.effect("documents: insert, get, list by owner and key, compare-and-set updates", () =>
        Effect.gen(function*() {
          const docs = yield* DocumentStore
          const kind = `k_${unique()}`
          const owner = crypto.randomUUID()
          const base = { kind, owner, version: 0, updatedAt: 0 }
          yield* docs.insert({ ...base, id: "a", key: "code", data: { n: 1 }, createdAt: 1 })
          yield* docs.insert({ ...base, id: "b", key: "math", data: { n: 2 }, createdAt: 2 })
          yield* docs.insert({ ...base, id: "c", key: "code", owner: null, data: { n: 3 }, createdAt: 3 })
          assert.deepStrictEqual(Option.getOrThrow(yield* docs.get(kind, "a")).data, { n: 1 })
          assert.deepStrictEqual((yield* docs.list(kind)).map((d) => d.id), ["c", "b", "a"])
          assert.deepStrictEqual((yield* docs.list(kind, { owner })).map((d) => d.id), ["b", "a"])
          assert.deepStrictEqual((yield* docs.list(kind, { owner: null })).map((d) => d.id), ["c"])
          // An id taken is refused alike (memory overwrote it, the SQL stores failed: a twins review); insertIfAbsent says so.
          assert.isTrue(Exit.isFailure(yield* Effect.exit(docs.insert({ ...base, id: "a", key: "code", data: { n: 9 }, createdAt: 9 }))))
          assert.isFalse(yield* docs.insertIfAbsent({ ...base, id: "a", key: "code", data: { n: 9 }, createdAt: 9 }))
          assert.deepStrictEqual(Option.getOrThrow(yield* docs.get(kind, "a")).data, { n: 1 })
          assert.deepStrictEqual((yield* docs.list(kind, { key: "code" })).map((d) => d.id), ["c", "a"])
          assert.deepStrictEqual([yield* docs.count(kind), yield* docs.count(kind, { owner }), yield* docs.count(kind, { key: "code" }), yield* docs.count(kind, { owner: null, key: "math" })], [3, 2, 2, 0])
          // Pages: after a document, the ones after it in the list's order, a tie on createdAt broken by id.
          yield* docs.insert({ ...base, id: "d", key: "code", data: {}, createdAt: 2 })
          assert.deepStrictEqual((yield* docs.list(kind)).map((d) => d.id), ["c", "d", "b", "a"])
          const first = yield* docs.list(kind, { limit: 2 })
          assert.deepStrictEqual(first.map((d) => d.id), ["c", "d"])
          assert.deepStrictEqual((yield* docs.list(kind, { limit: 2, after: first[1] })).map((d) => d.id), ["b", "a"])
          assert.deepStrictEqual((yield* docs.list(kind, { key: "code", after: first[1] })).map((d) => d.id), ["a"])
          assert.isTrue(yield* docs.update(kind, "a", 0, { n: 10 }, 5))
          assert.isFalse(yield* docs.update(kind, "a", 0, { n: 11 }, 6), "stale version")
          const doc = Option.getOrThrow(yield* docs.get(kind, "a"))
          assert.deepStrictEqual([doc.data, doc.version, doc.updatedAt], [{ n: 10 }, 1, 5])
          // 25 concurrent increments through compare-and-set: none lost.
          yield* Effect.all(Array.from({ length: 25 }, () => modify<{ n: number }>(docs, kind, "b", (d) => ({ n: d.n + 1 }))), { concurrency: "unbounded" })
          assert.deepStrictEqual(Option.getOrThrow(yield* docs.get(kind, "b")).data, { n: 27 })
        }))

      it.effect("jobs: concurrent claimers never share a job", () =>
        Effect.gen(function*() {
          const jobs = yield* JobStore
          const now = 4_000_000_000_000 + Math.floor(Math.random() * 1e9)
          const ids: Array<string> = Array.from({ length: 30 }, () => crypto.randomUUID())
          for (const id of ids) yield* jobs.insert(jobRecord({ id, nextRunAt: now - 1, createdAt: now, updatedAt: now }))
          const batches = yield* Effect.all(Array.from({ length: 6 }, () => jobs.claimDue(now, 10, 60_000)), { concurrency: "unbounded" })
          const mine = batches.flat().map((j) => j.id).filter((id) => ids.includes(id))
          assert.strictEqual(new Set(mine).size, mine.length, "no job claimed twice")
          assert.strictEqual(mine.length, 30)
        }))
    })
  })

const jobRecord = (overrides: Partial<JobRecord> = {}): JobRecord => ({
  id: crypto.randomUUID(),
  type: "video",
  avatarId: crypto.randomUUID(),
  provider: "replicate",
  upstreamId: null,
  status: "queued",
  input: { prompt: "a cat" },
  state: null,
  result: null,
  error: null,
  callbackUrl: "https://example.com/hook",
  attempts: 0,
  nextRunAt: 0,
  lockedUntil: null,
  createdAt: 0,
  updatedAt: 0,
  completedAt: null,
  ...overrides
})

/** A job completed at a time of its own after `base`, with its pending delivery (to https://example.com/h). */
const completedWithDelivery = (base: number) =>
  Effect.gen(function*() {
    const jobs = yield* JobStore
    const now = base + Math.floor(Math.random() * 1e9)
    const job = jobRecord({ nextRunAt: now, createdAt: now, updatedAt: now })
    yield* jobs.insert(job)
    const lease = (yield* jobs.claimDue(now, 100, 1000)).find((j) => j.id === job.id)!.lockedUntil!
    const id = crypto.randomUUID()
    yield* jobs.finish(job.id, lease, { status: "completed", result: null, error: null, completedAt: now }, Option.some({
      id, jobId: job.id, url: "https://example.com/h", event: "batch", body: "{}", status: "pending", attempts: 0,
      nextAttemptAt: now, lockedUntil: null, createdAt: now, deliveredAt: null, lastError: null
    }))
    return { job, id, now }
  })
