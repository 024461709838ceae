/**
 * Account protections of the avatar service on memory stores: no e-mail enumeration through
 * register, login throttling per account and per client address, API keys revoked by a password
 * reset, e-mail changes limited like resends, and revocations that hold against logins and key
 * creations whose credential check ran before them (interleaved deterministically: the password
 * check can be held until the revocation has answered).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { type Context, Deferred, Effect, Either, Fiber, Layer, Option, Redacted } from "effect"
import * as ApiKeys from "../../src/Accounts/ApiKeys.ts"
import * as Auth from "../../src/Accounts/Auth.ts"
import { type AuthResult, Avatars, INVALID_CREDENTIALS, layer as avatarsLayer, TOO_MANY_LOGINS, VERIFICATION_PENDING } from "../../src/Accounts/Avatars.ts"
import { clientAddress, limitKey } from "../../src/Accounts/ClientAddress.ts"
import * as Jwt from "../../src/Accounts/Jwt.ts"
import * as Passwords from "../../src/Accounts/Passwords.ts"
import { defaultLimits, GatewayConfig, layer as configLayer } from "../../src/Config.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import * as MailOutbox from "../../src/Mail/Outbox.ts"
import { AvatarStore } from "../../src/Storage/AvatarStore.ts"
import * as Stores from "../../src/Storage/Stores.ts"

const limits = { ...defaultLimits, loginMaxFailuresPerAccount: 3, loginMaxFailuresPerAddress: 5, loginWindowSeconds: 900 }

/** While set, the next password check waits, once argon2 has answered, until `release` (see `loginHeldAcross`). */
let held: { readonly checked: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> } | undefined
/** While true, every stored hash counts as made with old parameters, so a login rehashes it. */
let rehashAll = false
const heldPasswords = Layer.effect(
  Passwords.Passwords,
  Effect.map(Passwords.make(), (real) =>
    Passwords.Passwords.of({
      ...real,
      verify: (hash, password) =>
        Effect.suspend(() => {
          const hold = held
          held = undefined
          return hold === undefined
            ? real.verify(hash, password)
            : real.verify(hash, password).pipe(Effect.tap(() => Deferred.succeed(hold.checked, undefined)), Effect.tap(() => Deferred.await(hold.release)))
        }),
      needsRehash: (hash) => rehashAll || real.needsRehash(hash)
    })
  )
)

const TestLayer = Layer.mergeAll(avatarsLayer, ApiKeys.layer, Auth.layer).pipe(
  Layer.provideMerge(Layer.mergeAll(Jwt.layer, heldPasswords, MailOutbox.layer)),
  Layer.provideMerge(Stores.layerMemory),
  Layer.provideMerge(Mailer.layerMemory),
  Layer.provideMerge(configLayer({ publicUrl: "https://gw.example.test", jwtSecret: Option.some(Redacted.make("x".repeat(40))), limits }))
)

const unique = () => Math.random().toString(36).slice(2, 9)
const noAddress = Option.none<string>()

/** Registers and verifies an avatar through the service, following the mailed link. */
const verifiedAvatar = Effect.gen(function*() {
  const avatars = yield* Avatars
  const { sent } = yield* Mailer.MemoryMailbox
  const u = `u_${unique()}`
  const input = { username: u, email: `${u}@example.com`, password: "password 123" }
  const registered = yield* avatars.register(input)
  yield* avatars.verifyEmail(tokenIn(lastMail(sent, (m) => m.to === input.email).text))
  return { ...input, id: registered.id }
})

/** The newest mail matching `p`. */
const lastMail = (sent: ReadonlyArray<Mailer.Mail>, p: (m: Mailer.Mail) => boolean) => [...sent].reverse().find(p)!

const tokenIn = (text: string) => decodeURIComponent(/token=([^\s&]+)/.exec(text)![1]!)

/** The outcome of a login as a short label. */
const attempt = (login: string, password: string, address = noAddress) =>
  Effect.flatMap(Avatars, (a) => a.authenticate(login, password, address)).pipe(
    Effect.either,
    Effect.map((r): string =>
      Either.isRight(r) ? "ok" : r.left._tag === "TooManyRequests" ? "429" : r.left.message === INVALID_CREDENTIALS ? "invalid" : r.left.message)
  )

/**
 * A login whose avatar read and password check are done before `revocation` starts, and whose token
 * is signed only after `revocation` has answered: the interleaving of a login racing a reset.
 */
const loginHeldAcross = <A, E, R>(login: string, password: string, revocation: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const checked = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    held = { checked, release }
    const fiber = yield* Effect.fork(Effect.either(Effect.flatMap(Avatars, (a) => a.authenticate(login, password, noAddress))))
    yield* Deferred.await(checked)
    yield* revocation
    yield* Deferred.succeed(release, undefined)
    return yield* Fiber.join(fiber)
  })

/** "accepted" or the error's tag, for a bearer token or an API key presented to Auth (what every authed route runs first, POST /v1/keys included). */
const presented = (credentials: Auth.Credentials) =>
  Effect.flatMap(Auth.Auth, (auth) => auth.require(credentials)).pipe(Effect.as("accepted"), Effect.catchAll((e) => Effect.succeed(e._tag)))
const bearer = (jwt: string) => presented({ authorization: `Bearer ${jwt}` })

/** Asks for a reset link and returns its token. */
const resetToken = (email: string) =>
  Effect.gen(function*() {
    const { sent } = yield* Mailer.MemoryMailbox
    yield* Effect.flatMap(Avatars, (a) => a.forgotPassword(email))
    return tokenIn(lastMail(sent, (m) => m.to === email && /reset/i.test(m.subject)).text)
  })

/** The stored record of an avatar: the caller Auth would resolve for its credentials. */
const recordOf = (id: string) => Effect.flatMap(AvatarStore, (s) => s.findById(id)).pipe(Effect.map(Option.getOrThrow))

/** The outcome of a PUT as a label: "ok" or the error's tag. */
const put = (id: string, input: Parameters<Context.Tag.Service<typeof Avatars>["update"]>[2], proof: Auth.Proof = "session") =>
  Effect.gen(function*() {
    const avatars = yield* Avatars
    return yield* avatars.update(yield* recordOf(id), id, input, proof).pipe(Effect.as("ok"), Effect.catchAll((e) => Effect.succeed(e._tag)))
  })

/** The outcome of following a verification link: "ok" or the error's tag. */
const follow = (token: string) =>
  Effect.flatMap(Avatars, (a) => a.verifyEmail(token)).pipe(Effect.as("ok"), Effect.catchAll((e) => Effect.succeed(e._tag)))

/** The token of the newest verification mail sent to `address`. */
const verificationTokenFor = (address: string) =>
  Effect.map(Mailer.MemoryMailbox, ({ sent }) => tokenIn(lastMail(sent, (m) => m.to === address && /verify/i.test(m.subject)).text))

describe("Avatars", () => {
  layer(TestLayer, { timeout: 60_000 })((it) => {
    it.effect("register with a taken e-mail: the answer and its avatar behave like a fresh registration's", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const { sent } = yield* Mailer.MemoryMailbox
        const owner = yield* verifiedAvatar
        const viewer = yield* Effect.flatMap(AvatarStore, (s) => s.findById(owner.id)).pipe(Effect.map(Option.getOrThrow))
        const probe = (email: string) =>
          Effect.gen(function*() {
            const u = `p_${unique()}`
            const reg = yield* avatars.register({ username: u, email, password: "probe password" })
            return {
              result: Object.keys(reg).sort().join(),
              email: reg.email,
              isVerified: reg.isVerified,
              byId: yield* avatars.get(viewer, reg.id).pipe(Effect.map((v) => Object.keys(v).sort().join()), Effect.orElseSucceed(() => "404")),
              byUsername: yield* attempt(u, "probe password"),
              byEmail: yield* attempt(email, "probe password"),
              usernameTaken: yield* avatars.register({ username: u, email: `o_${unique()}@example.com`, password: "x".repeat(8) }).pipe(
                Effect.as("free"),
                Effect.orElseSucceed(() => "taken")
              )
            }
          })
        const fresh = `fresh_${unique()}@example.com`
        const taken = yield* probe(owner.email)
        const free = yield* probe(fresh)
        assert.deepStrictEqual(taken, { ...free, email: owner.email })
        assert.deepStrictEqual([free.byId === "404", free.byUsername, free.byEmail, free.usernameTaken], [false, VERIFICATION_PENDING, "invalid", "taken"])
        // The owner got a notice, the probe's password does not open the owner's account.
        assert.match(lastMail(sent, (m) => m.to === owner.email).subject, /already have an account/)
        assert.strictEqual(yield* attempt(owner.email, "probe password"), "invalid")
        assert.strictEqual(yield* attempt(owner.email, owner.password), "ok")
      }))

    it.effect("login throttling per account: over the limit even the right password answers 429; unknown logins lock alike", () =>
      Effect.gen(function*() {
        const a = yield* verifiedAvatar
        const wrong = yield* Effect.all(Array.from({ length: 3 }, () => attempt(a.username, "wrong password")))
        assert.deepStrictEqual(wrong, ["invalid", "invalid", "invalid"])
        assert.strictEqual(yield* attempt(a.email, a.password), "429", "username and e-mail share the account's count")
        const failure = yield* Effect.flip(Effect.flatMap(Avatars, (s) => s.authenticate(a.username, a.password, noAddress)))
        assert.deepStrictEqual([failure._tag, failure.message], ["TooManyRequests", TOO_MANY_LOGINS])
        assert.isAbove((failure as any).retryAfterSeconds, 800)
        const ghost = `nobody_${unique()}`
        const unknown = yield* Effect.all(Array.from({ length: 4 }, () => attempt(ghost, "wrong password")))
        assert.deepStrictEqual(unknown, ["invalid", "invalid", "invalid", "429"])
        const other = yield* verifiedAvatar
        assert.strictEqual(yield* attempt(other.username, other.password), "ok", "other accounts are not affected")
      }))

    it.effect("login throttling: successes give back only their own slot, so they never reset failures", () =>
      Effect.gen(function*() {
        const a = yield* verifiedAvatar
        for (let i = 0; i < 5; i++) assert.strictEqual(yield* attempt(a.username, a.password), "ok")
        const b = yield* verifiedAvatar
        assert.strictEqual(yield* attempt(b.username, "wrong"), "invalid")
        assert.strictEqual(yield* attempt(b.username, b.password), "ok")
        assert.strictEqual(yield* attempt(b.username, "wrong"), "invalid")
        assert.strictEqual(yield* attempt(b.username, "wrong"), "invalid")
        assert.strictEqual(yield* attempt(b.username, b.password), "429", "three failures, however interleaved")
      }))

    it.effect("login throttling per address: spraying many accounts from one address stops at its limit; own logins in between do not help", () =>
      Effect.gen(function*() {
        const mine = yield* verifiedAvatar
        const address = Option.some(`203.0.113.${Math.floor(Math.random() * 250)}`)
        const outcomes: Array<string> = []
        for (let i = 0; i < 7; i++) {
          outcomes.push(yield* attempt(`victim_${unique()}`, "guess", address))
          assert.notStrictEqual(yield* attempt(mine.username, mine.password, address), "invalid")
        }
        assert.deepStrictEqual(outcomes, ["invalid", "invalid", "invalid", "invalid", "invalid", "429", "429"])
        assert.strictEqual(yield* attempt(mine.username, mine.password, address), "429", "the whole address waits")
        assert.strictEqual(yield* attempt(mine.username, mine.password, Option.some("198.51.100.7")), "ok")
      }))

    it.effect("login throttling holds under concurrency: at most the limit of password checks", () =>
      Effect.gen(function*() {
        const a = yield* verifiedAvatar
        const results = yield* Effect.all(Array.from({ length: 20 }, () => attempt(a.username, "wrong password")), { concurrency: "unbounded" })
        assert.strictEqual(results.filter((r) => r === "invalid").length, 3)
        assert.strictEqual(results.filter((r) => r === "429").length, 17)
      }))

    it.effect("password reset revokes the avatar's API keys and says so", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const keys = yield* ApiKeys.ApiKeys
        const { sent } = yield* Mailer.MemoryMailbox
        const a = yield* verifiedAvatar
        const key = yield* keys.create(Option.getOrThrow(yield* Effect.flatMap(AvatarStore, (s) => s.findById(a.id))), "ci", "session")
        assert.isTrue(Option.isSome(yield* keys.resolve(key.key)))
        yield* avatars.forgotPassword(a.email)
        const token = tokenIn(lastMail(sent, (m) => m.to === a.email && /reset/i.test(m.subject)).text)
        yield* avatars.resetPassword(token, "new password 1", "new password 1")
        assert.isNotNull(Option.getOrThrow(yield* keys.resolve(key.key)).revokedAt)
        assert.match(sent[sent.length - 1]!.text, /every API key of your avatar was revoked/)
        const login = (yield* Effect.flatMap(Avatars, (s) => s.authenticate(a.username, "new password 1", noAddress))) as AuthResult
        assert.strictEqual(login.id, a.id)
      }))

    it.effect("a login that checked the old password before a reset answered gets a token refused from then on", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const a = yield* verifiedAvatar
        const before = (yield* avatars.authenticate(a.username, a.password, noAddress)).jwtToken
        assert.strictEqual(yield* bearer(before), "accepted")
        const token = yield* resetToken(a.email)
        // The login reads the avatar (old hash) and checks the old password; the reset runs and answers; then the login signs.
        const raced = yield* loginHeldAcross(a.username, a.password, avatars.resetPassword(token, "new password 1", "new password 1"))
        assert.isTrue(Either.isRight(raced), "the check itself passed: it read the avatar before the reset")
        const racedJwt = Either.getOrThrow(raced).jwtToken
        // Auth refuses it, so POST /v1/keys (an authed route) can make no key with it; the earlier token is refused too.
        assert.deepStrictEqual([yield* bearer(racedJwt), yield* bearer(before)], ["Unauthorized", "Unauthorized"])
        assert.strictEqual(yield* attempt(a.username, a.password), "invalid")
        // A login after the reset, with the new password, is not caught by it.
        const after = (yield* avatars.authenticate(a.username, "new password 1", noAddress)).jwtToken
        assert.strictEqual(yield* bearer(after), "accepted")
      }))

    it.effect("a login that checked the password before its avatar was deleted gets a token refused from then on", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const store = yield* AvatarStore
        const a = yield* verifiedAvatar
        const admin = { ...Option.getOrThrow(yield* store.findById(a.id)), avatarType: "Admin" as const }
        const raced = yield* loginHeldAcross(a.username, a.password, avatars.delete(admin, a.id))
        assert.strictEqual(yield* bearer(Either.getOrThrow(raced).jwtToken), "Unauthorized")
        assert.isAbove(Option.getOrThrow(yield* store.findById(a.id)).tokensValidAfter, 0)
      }))

    it.effect("an API key requested with credentials checked before a reset answered is refused and never outlives it", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const keys = yield* ApiKeys.ApiKeys
        const auth = yield* Auth.Auth
        const a = yield* verifiedAvatar
        const jwt = (yield* avatars.authenticate(a.username, a.password, noAddress)).jwtToken
        const byJwt = yield* auth.require({ authorization: `Bearer ${jwt}` })
        const key = yield* keys.create(byJwt, "before", "session")
        const byKey = yield* auth.require({ apiKey: key.key })
        // Both callers were checked (POST /v1/keys's Auth step) before the reset; their handlers run after it answered.
        yield* avatars.resetPassword(yield* resetToken(a.email), "new password 2", "new password 2")
        const raced = yield* Effect.either(keys.create(byJwt, "raced", "session"))
        assert.isTrue(Either.isLeft(raced) && raced.left._tag === "Unauthorized", "refused")
        // A key makes no key at all, before or after a reset.
        const byKeyMade = yield* Effect.either(keys.create(byKey, "raced", "apiKey"))
        assert.isTrue(Either.isLeft(byKeyMade) && byKeyMade.left._tag === "Forbidden", "a key cannot make keys")
        const listed = yield* keys.list(a.id)
        assert.deepStrictEqual([listed.length, listed.filter((k) => k.revokedAt === null).length], [2, 0], "the key stored meanwhile is revoked")
        assert.strictEqual(yield* presented({ apiKey: key.key }), "Unauthorized")
        // A caller checked after the reset makes keys as usual.
        const fresh = yield* auth.require({ authorization: `Bearer ${(yield* avatars.authenticate(a.username, "new password 2", noAddress)).jwtToken}` })
        const made = yield* keys.create(fresh, "after", "session")
        assert.strictEqual(yield* presented({ apiKey: made.key }), "accepted")
      }))

    it.effect("a rehash at login never writes the old password back over a reset made during the check", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const a = yield* verifiedAvatar
        const token = yield* resetToken(a.email)
        rehashAll = true
        const raced = yield* loginHeldAcross(a.username, a.password, avatars.resetPassword(token, "new password 3", "new password 3")).pipe(
          Effect.ensuring(Effect.sync(() => (rehashAll = false)))
        )
        assert.deepStrictEqual([yield* attempt(a.username, a.password), yield* attempt(a.username, "new password 3")], ["invalid", "ok"])
        assert.strictEqual(yield* bearer(Either.getOrThrow(raced).jwtToken), "Unauthorized")
      }))

    it.effect("PUT with a new e-mail is limited like resend: 3 per hour per avatar and per target address", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const store = yield* AvatarStore
        const { sent } = yield* Mailer.MemoryMailbox
        const a = yield* verifiedAvatar
        const caller = Option.getOrThrow(yield* store.findById(a.id))
        const victim = `victim_${unique()}@example.com`
        const tries = yield* Effect.all(Array.from({ length: 5 }, (_, i) =>
          avatars.update(caller, a.id, { email: i % 2 === 0 ? victim : victim.toUpperCase() }, "session").pipe(Effect.as("ok"), Effect.catchAll((e) => Effect.succeed(e._tag)))
        ))
        assert.deepStrictEqual(tries, ["ok", "ok", "ok", "TooManyRequests", "TooManyRequests"])
        assert.strictEqual(sent.filter((m) => m.to.toLowerCase() === victim).length, 3)
        // The target address's budget is shared with resend and with other avatars.
        const b = yield* verifiedAvatar
        const other = Option.getOrThrow(yield* store.findById(b.id))
        const third = yield* avatars.update(other, b.id, { email: victim }, "session").pipe(Effect.as("ok"), Effect.catchAll((e) => Effect.succeed(e._tag)))
        assert.strictEqual(third, "TooManyRequests")
      }))

    it.effect("a password reset cancels a pending e-mail change: its link no longer changes the address", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const { sent } = yield* Mailer.MemoryMailbox
        const a = yield* verifiedAvatar
        // An intruder with a session asks for their own address; the owner then resets the password.
        const thief = `thief_${unique()}@example.com`
        assert.strictEqual(yield* put(a.id, { email: thief }), "ok")
        const link = yield* verificationTokenFor(thief)
        yield* avatars.resetPassword(yield* resetToken(a.email), "owner password 9", "owner password 9")
        assert.match(lastMail(sent, (m) => m.to === a.email).text, /change of your e-mail address to t\*\*\*@example\.com .* was cancelled/)
        assert.strictEqual(yield* follow(link), "Rejected")
        const after = yield* recordOf(a.id)
        assert.deepStrictEqual([after.email, after.pendingEmail], [a.email, null])
        assert.strictEqual(yield* attempt(thief, "owner password 9"), "invalid")
      }))

    it.effect("a PUT with the current address cancels the pending change and its link", () =>
      Effect.gen(function*() {
        const a = yield* verifiedAvatar
        const thief = `thief_${unique()}@example.com`
        assert.strictEqual(yield* put(a.id, { email: thief }), "ok")
        const link = yield* verificationTokenFor(thief)
        assert.strictEqual(yield* put(a.id, { email: a.email.toUpperCase() }), "ok")
        assert.strictEqual((yield* recordOf(a.id)).pendingEmail, null)
        assert.strictEqual(yield* follow(link), "Rejected")
        assert.strictEqual((yield* recordOf(a.id)).email, a.email)
      }))

    it.effect("a change confirmed after its change was replaced or cleared does not swap the address in", () =>
      Effect.gen(function*() {
        const store = yield* AvatarStore
        const a = yield* verifiedAvatar
        const first = `first_${unique()}@example.com`
        assert.strictEqual(yield* put(a.id, { email: first }), "ok")
        // What a reset writes, landing between the link's check and its swap.
        yield* store.update(a.id, { pendingEmail: null })
        assert.isTrue(Option.isNone(yield* store.confirmPendingEmail(a.id, first, Date.now())))
        assert.strictEqual((yield* recordOf(a.id)).email, a.email)
      }))

    it.effect("an API key cannot change the e-mail address or username, nor make keys; other fields it can", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys.ApiKeys
        const { sent } = yield* Mailer.MemoryMailbox
        const a = yield* verifiedAvatar
        const thief = `thief_${unique()}@example.com`
        assert.deepStrictEqual(
          [yield* put(a.id, { email: thief }, "apiKey"), yield* put(a.id, { username: `x_${unique()}` }, "apiKey")],
          ["Forbidden", "Forbidden"]
        )
        const message = yield* Effect.flip(Effect.flatMap(Avatars, (s) => Effect.flatMap(recordOf(a.id), (caller) => s.update(caller, a.id, { email: thief }, "apiKey"))))
        assert.match(message.message, /signed-in session \(JWT\)/)
        assert.isFalse(sent.some((m) => m.to === thief), "nothing mailed")
        const unchanged = yield* recordOf(a.id)
        assert.deepStrictEqual([unchanged.email, unchanged.pendingEmail], [a.email, null])
        // The profile's other fields, and the current username and address sent back unchanged, are fine with a key.
        assert.strictEqual(yield* put(a.id, { title: "t", dob: "1990-04-23", username: a.username, email: a.email }, "apiKey"), "ok")
        const made = yield* Effect.either(keys.create(yield* recordOf(a.id), "from a key", "apiKey"))
        assert.isTrue(Either.isLeft(made) && made.left._tag === "Forbidden")
        assert.strictEqual((yield* keys.list(a.id)).length, 0, "nothing stored")
        assert.isTrue(Either.isRight(yield* Effect.either(keys.create(yield* recordOf(a.id), "from a session", "session"))))
      }))

    it.effect("an e-mail change is announced to the current address, and its completion to the old one, without secrets", () =>
      Effect.gen(function*() {
        const { sent } = yield* Mailer.MemoryMailbox
        const a = yield* verifiedAvatar
        const next = `next_${unique()}@example.org`
        assert.strictEqual(yield* put(a.id, { email: next }), "ok")
        const requested = lastMail(sent, (m) => m.to === a.email)
        assert.match(requested.subject, /change of your e-mail address was requested/)
        assert.include(requested.text, "n***@example.org")
        assert.notInclude(requested.text, next)
        assert.notMatch(requested.text + requested.html, /token=|https?:/)
        // To an address another avatar has: answered alike, and the current address is told alike.
        const other = yield* verifiedAvatar
        const before = sent.length
        assert.strictEqual(yield* put(a.id, { email: other.email }), "ok")
        assert.deepStrictEqual(sent.slice(before).map((m) => m.to).sort(), [a.email, other.email].sort())
        assert.strictEqual(yield* put(a.id, { email: next }), "ok")
        assert.strictEqual(yield* follow(yield* verificationTokenFor(next)), "ok")
        const changed = lastMail(sent, (m) => m.to === a.email)
        assert.match(changed.subject, /e-mail address was changed/)
        assert.include(changed.text, "n***@example.org")
        assert.notMatch(changed.text, /token=|https?:/)
      }))

    it.effect("confirming an e-mail change voids the reset links mailed to the old address", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const { sent } = yield* Mailer.MemoryMailbox
        const a = yield* verifiedAvatar
        const forgotLink = yield* resetToken(a.email)
        const next = `next_${unique()}@example.com`
        assert.strictEqual(yield* put(a.id, { email: next }), "ok")
        assert.strictEqual(yield* follow(yield* verificationTokenFor(next)), "ok")
        const used = yield* Effect.either(avatars.resetPassword(forgotLink, "taken over 1", "taken over 1"))
        assert.isTrue(Either.isLeft(used) && used.left._tag === "Rejected", "the forgot-password link")
        // The link of an "already have an account" mail too.
        yield* avatars.register({ username: `p_${unique()}`, email: next, password: "probe password" })
        const alreadyLink = tokenIn(lastMail(sent, (m) => m.to === next && /already have an account/.test(m.subject)).text)
        const last = `last_${unique()}@example.com`
        assert.strictEqual(yield* put(a.id, { email: last }), "ok")
        assert.strictEqual(yield* follow(yield* verificationTokenFor(last)), "ok")
        const again = yield* Effect.either(avatars.resetPassword(alreadyLink, "taken over 2", "taken over 2"))
        assert.isTrue(Either.isLeft(again) && again.left._tag === "Rejected", "the already-registered link")
        assert.strictEqual(yield* attempt(a.username, a.password), "ok", "the password is unchanged")
      }))

    it.effect("a refused e-mail change does not use up one of the avatar's changes", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const a = yield* verifiedAvatar
        // The target address's budget is spent (resends count for any address).
        const spent = `spent_${unique()}@example.com`
        for (let i = 0; i < 3; i++) yield* avatars.resendVerification(spent)
        const refused = yield* Effect.all(Array.from({ length: 3 }, () => put(a.id, { email: spent })))
        assert.deepStrictEqual(refused, ["TooManyRequests", "TooManyRequests", "TooManyRequests"])
        const fresh = yield* Effect.all(Array.from({ length: 3 }, () => put(a.id, { email: `fresh_${unique()}@example.com` })))
        assert.deepStrictEqual(fresh, ["ok", "ok", "ok"], "the avatar's three changes are all still there")
        // Refused by the avatar's limit: the new address's budget is not spent either.
        const untouched = `untouched_${unique()}@example.com`
        assert.strictEqual(yield* put(a.id, { email: untouched }), "TooManyRequests")
        for (let i = 0; i < 3; i++) yield* avatars.resendVerification(untouched)
        // A PUT refused after the limits (a taken username) gives both back.
        const b = yield* verifiedAvatar
        const target = `target_${unique()}@example.com`
        assert.strictEqual(yield* put(b.id, { email: target, username: a.username }), "Conflict")
        assert.strictEqual((yield* recordOf(b.id)).pendingEmail, null)
        for (let i = 0; i < 3; i++) yield* avatars.resendVerification(target)
      }))

    it.effect("an API key's lastUsedAt is set at its first use and then at most once an hour", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys.ApiKeys
        const auth = yield* Auth.Auth
        const a = yield* verifiedAvatar
        const key = yield* keys.create(yield* recordOf(a.id), "ci", "session")
        assert.isNull((yield* keys.list(a.id))[0]!.lastUsedAt)
        const before = Date.now()
        yield* auth.require({ apiKey: key.key })
        // The write is not awaited by the call: give it its turn.
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        const first = (yield* keys.list(a.id))[0]!.lastUsedAt
        assert.isNotNull(first)
        assert.isAtLeast(Date.parse(first!), before - 1)
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
        yield* auth.require({ apiKey: key.key })
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        assert.strictEqual((yield* keys.list(a.id))[0]!.lastUsedAt, first, "not written again within the hour")
      }))

    it.effect("the configured limits are the ones used", () =>
      Effect.map(GatewayConfig, (c) => assert.strictEqual(c.limits.loginMaxFailuresPerAccount, 3)))
  })
})

describe("clientAddress", () => {
  const peer = Option.some("10.0.0.5")
  it("uses the socket peer unless proxies are trusted, then the entry the nearest proxy wrote", () => {
    assert.deepStrictEqual(clientAddress(peer, "1.2.3.4", 0), Option.some("10.0.0.5"))
    assert.deepStrictEqual(clientAddress(peer, "6.6.6.6, 1.2.3.4", 1), Option.some("1.2.3.4"), "forged left entries are ignored")
    assert.deepStrictEqual(clientAddress(peer, "6.6.6.6, 1.2.3.4, 10.0.0.9", 2), Option.some("1.2.3.4"))
    assert.deepStrictEqual(clientAddress(peer, undefined, 1), Option.some("10.0.0.5"))
    assert.deepStrictEqual(clientAddress(peer, "1.2.3.4", 2), Option.some("10.0.0.5"), "fewer entries than proxies")
    assert.deepStrictEqual(clientAddress(Option.none(), undefined, 0), Option.none())
  })
  it("keys IPv4 (also mapped) as is and IPv6 by /64; garbage is no address", () => {
    assert.deepStrictEqual(limitKey("::ffff:127.0.0.1"), Option.some("127.0.0.1"))
    assert.deepStrictEqual(limitKey("2001:db8:1:2:aaaa::1"), Option.some("2001:db8:1:2::/64"))
    assert.deepStrictEqual(limitKey("2001:DB8:1:2:bbbb:cccc:dddd:eeee"), Option.some("2001:db8:1:2::/64"))
    assert.deepStrictEqual(limitKey("2001:db8::1"), Option.some("2001:db8:0:0::/64"))
    assert.deepStrictEqual(limitKey("::1"), Option.some("0:0:0:0::/64"))
    assert.deepStrictEqual(limitKey("not an ip"), Option.none())
  })
})

describe("Admins", () => {
  layer(TestLayer, { timeout: 60_000 })((it) => {
    it.effect("the last active Admin can be neither made a User nor deleted; with a second Admin it can, and a deleted Admin is not counted", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const store = yield* AvatarStore
        const admin = (id: string) => Effect.flatMap(store.update(id, { avatarType: "Admin" }), (a) => Effect.sync(() => Option.getOrThrow(a)))
        const outcome = <A, E extends { readonly _tag: string; readonly message: string }>(effect: Effect.Effect<A, E>) =>
          Effect.match(effect, { onFailure: (e) => `${e._tag}: ${e.message}`, onSuccess: () => "ok" })
        assert.strictEqual(yield* store.countAdmins(), 0)
        const first = yield* admin((yield* verifiedAvatar).id)
        const last = "The last Admin avatar cannot be"
        assert.strictEqual(yield* outcome(avatars.update(first, first.id, { AvatarType: "User" }, "session")), `Conflict: ${last} made a User: make another avatar Admin first.`)
        assert.strictEqual(yield* outcome(avatars.delete(first, first.id)), `Conflict: ${last} deleted: make another avatar Admin first.`)
        // Sending its own type back changes nothing and is taken.
        assert.strictEqual(yield* outcome(avatars.update(first, first.id, { AvatarType: "Admin", title: "root" }, "session")), "ok")
        const second = yield* admin((yield* verifiedAvatar).id)
        assert.strictEqual(yield* outcome(avatars.delete(second, first.id)), "ok")
        assert.strictEqual(yield* store.countAdmins(), 1)
        assert.strictEqual(yield* outcome(avatars.update(second, second.id, { AvatarType: "User" }, "session")), `Conflict: ${last} made a User: make another avatar Admin first.`)
      }))

    it.effect("an Admin's API key may not grant or take the Admin role (it would outlive the key's revocation); its other changes are taken", () =>
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const store = yield* AvatarStore
        const admin = Option.getOrThrow(yield* store.update((yield* verifiedAvatar).id, { avatarType: "Admin" }))
        const user = yield* verifiedAvatar
        const outcome = <A, E extends { readonly _tag: string; readonly message: string }>(effect: Effect.Effect<A, E>) =>
          Effect.match(effect, { onFailure: (e) => `${e._tag}: ${e.message}`, onSuccess: () => "ok" })
        const refused = "Forbidden: Changing AvatarType needs a signed-in session \\(JWT\\)"
        assert.match(yield* outcome(avatars.update(admin, user.id, { AvatarType: "Admin" }, "apiKey")), new RegExp(`^${refused}`))
        assert.strictEqual(Option.getOrThrow(yield* store.findById(user.id)).avatarType, "User")
        assert.strictEqual(yield* outcome(avatars.update(admin, user.id, { plan: "Silver", karmaTotal: 5, AvatarType: "User" }, "apiKey")), "ok")
        assert.strictEqual(Option.getOrThrow(yield* store.findById(user.id)).plan, "Silver")
        assert.strictEqual(yield* outcome(avatars.update(admin, user.id, { AvatarType: "Admin" }, "session")), "ok")
        assert.match(yield* outcome(avatars.update(admin, user.id, { AvatarType: "User" }, "apiKey")), new RegExp(`^${refused}`))
      }))
  })
})

describe("the Admin bootstrap", () => {
  const admin = { username: `root_${unique()}`, email: `root_${unique()}@example.com`, password: Redacted.make("admin password 1") }
  const WithAdmin = Layer.mergeAll(avatarsLayer, ApiKeys.layer, Auth.layer).pipe(
    Layer.provideMerge(Layer.mergeAll(Jwt.layer, Passwords.layer, MailOutbox.layer)),
    Layer.provideMerge(Stores.layerMemory),
    Layer.provideMerge(Mailer.layerMemory),
    Layer.provideMerge(configLayer({ publicUrl: "https://gw.example.test", jwtSecret: Option.some(Redacted.make("x".repeat(40))), admin: Option.some(admin) }))
  )

  // Its own runtime: the file's `layer` blocks are built with no Admin configured.
  it("takes the Admin's address from an unverified registration that held it (anyone could register it before the first start)", () =>
    Effect.runPromise(Effect.provide(
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const store = yield* AvatarStore
        const squatter = yield* avatars.register({ username: `sq_${unique()}`, email: admin.email, password: "password 123" })
        yield* avatars.bootstrapAdmin
        const made = Option.getOrThrow(yield* store.findByEmail(admin.email))
        assert.deepStrictEqual([made.username, made.avatarType, made.emailVerified], [admin.username, "Admin", true])
        // The squatter goes on under an address nobody can verify, as a registration of a taken address does.
        assert.match(Option.getOrThrow(yield* store.findById(squatter.id)).email, /^unregistered-.+@aigw\.invalid$/)
        assert.strictEqual(yield* store.countAdmins(), 1)
      }),
      WithAdmin
    )), 60_000)

  it("takes a bootstrapped Admin's own values back unchanged with PUT, ones registration refuses too; checks new ones", () => {
    const odd = { username: `root.admin-${unique()}`, email: `root_${unique()}@example.com`, password: Redacted.make("admin password 1") }
    return Effect.runPromise(Effect.provide(
      Effect.gen(function*() {
        const avatars = yield* Avatars
        const store = yield* AvatarStore
        yield* avatars.bootstrapAdmin
        const made = Option.getOrThrow(yield* store.findByEmail(odd.email))
        const outcome = <A, E extends { readonly _tag: string; readonly message: string }>(effect: Effect.Effect<A, E>) =>
          Effect.match(effect, { onFailure: (e) => `${e._tag}: ${e.message}`, onSuccess: () => "ok" })
        // A GET's body edited and sent back: its username (with a dot and a dash) used to fail registration's check.
        const profile = yield* avatars.get(made, made.id)
        assert.strictEqual(yield* outcome(avatars.update(made, made.id, { ...profile, title: "Root" } as never, "session")), "ok")
        assert.strictEqual(yield* outcome(avatars.update(made, made.id, { email: ` ${odd.email.toUpperCase()} ` }, "session")), "ok")
        const after = Option.getOrThrow(yield* store.findById(made.id))
        assert.deepStrictEqual([after.username, after.email, after.title, after.pendingEmail], [odd.username, odd.email, "Root", null])
        // A new value is checked as registration checks it.
        assert.strictEqual(
          yield* outcome(avatars.update(made, made.id, { username: "another.name" }, "session")),
          "BadRequest: Invalid request body: username: username must be 3 to 32 characters of letters, digits and underscores"
        )
        assert.strictEqual(yield* outcome(avatars.update(made, made.id, { email: "not an address" }, "session")), "BadRequest: Invalid request body: email: email must be a valid e-mail address")
        assert.strictEqual(Option.getOrThrow(yield* store.findById(made.id)).username, odd.username)
      }),
      Layer.mergeAll(avatarsLayer, ApiKeys.layer, Auth.layer).pipe(
        Layer.provideMerge(Layer.mergeAll(Jwt.layer, Passwords.layer, MailOutbox.layer)),
        Layer.provideMerge(Stores.layerMemory),
        Layer.provideMerge(Mailer.layerMemory),
        Layer.provideMerge(configLayer({ publicUrl: "https://gw.example.test", jwtSecret: Option.some(Redacted.make("x".repeat(40))), admin: Option.some(odd) }))
      )
    ))
  }, 60_000)
})
