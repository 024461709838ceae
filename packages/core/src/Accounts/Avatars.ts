/**
 * The avatar (user account) service: register, verify e-mail, authenticate, read, update,
 * soft delete, password reset. HTTP and MCP edges call this; it never sees a request.
 */
import { Context, Duration, Effect, Either, Layer, Option, ParseResult, Redacted, Schema } from "effect"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, Conflict, Forbidden, NotFound, Rejected, TooManyRequests } from "../Errors.ts"
import * as Templates from "../Mail/Templates.ts"
import { MailOutbox } from "../Mail/Outbox.ts"
import type { Plan } from "../Plans.ts"
import { ApiKeyStore } from "../Storage/ApiKeyStore.ts"
import { type AvatarPage, type AvatarRecord, AvatarStore, type AvatarType } from "../Storage/AvatarStore.ts"
import { OneTimeTokenStore, type TokenPurpose } from "../Storage/OneTimeTokenStore.ts"
import { SendLimitStore } from "../Storage/SendLimitStore.ts"
import { type Proof, requireSession } from "./Auth.ts"
import { Jwt } from "./Jwt.ts"
import { Passwords } from "./Passwords.ts"
import { randomToken, sha256 } from "./Secrets.ts"
import { Email, Password, storedId, Username } from "./Schemas.ts"
import { problemsOf } from "../Http/DecodeProblems.ts"

export const VERIFY_TTL_MS = 24 * 60 * 60 * 1000
export const RESET_TTL_MS = 60 * 60 * 1000
export const SEND_WINDOW_MS = 60 * 60 * 1000
/** How long a notice (a changed password, a claimed address) is worth retrying when the mail server did not take it. */
const NOTICE_KEEP_MS = 24 * 60 * 60 * 1000

/** The profile as the API shows it: never a password or token hash. */
export interface AvatarView {
  readonly id: string
  readonly username: string
  readonly email: string
  readonly title: string
  readonly description: string
  readonly image: string
  readonly dob: string | null
  readonly karmaTotal: number
  readonly AvatarType: AvatarType
  readonly providerType: string
  readonly plan: Plan
  readonly isVerified: boolean
  readonly pendingEmail: string | null
  readonly isActive: boolean
  readonly createdDate: string
  readonly modifiedDate: string
  readonly deletedDate: string | null
}

export const view = (a: AvatarRecord): AvatarView => ({
  id: a.id,
  username: a.username,
  email: a.email,
  title: a.title,
  description: a.description,
  image: a.image,
  dob: a.dob,
  karmaTotal: a.karmaTotal,
  AvatarType: a.avatarType,
  providerType: a.providerType,
  plan: a.plan,
  isVerified: a.emailVerified,
  pendingEmail: a.pendingEmail,
  isActive: a.isActive,
  createdDate: new Date(a.createdAt).toISOString(),
  modifiedDate: new Date(a.updatedAt).toISOString(),
  deletedDate: a.deletedAt === null ? null : new Date(a.deletedAt).toISOString()
})

/** What another (non-admin) avatar may see of a profile. */
export const publicView = (a: AvatarRecord) => ({
  id: a.id,
  username: a.username,
  title: a.title,
  description: a.description,
  image: a.image,
  karmaTotal: a.karmaTotal,
  AvatarType: a.avatarType,
  isActive: a.isActive,
  createdDate: new Date(a.createdAt).toISOString()
})

/** A new active avatar with an empty profile: registration and the Admin bootstrap differ only in `chosen`. */
const newAvatar = (
  chosen: Pick<
    AvatarRecord,
    "username" | "email" | "passwordHash" | "title" | "avatarType" | "providerType" | "plan" | "emailVerified"
  >,
  now: number
): AvatarRecord => ({
  id: crypto.randomUUID(),
  ...chosen,
  description: "",
  image: "",
  dob: null,
  karmaTotal: 0,
  pendingEmail: null,
  isActive: true,
  createdAt: now,
  updatedAt: now,
  deletedAt: null,
  tokensValidAfter: 0
})

export interface RegisterInput {
  readonly username: string
  readonly email: string
  readonly password: string
  /** A registration form's repeat of `password`: when sent, it must match. */
  readonly confirmPassword?: string | undefined
  readonly title?: string | undefined
  readonly providerType?: string | undefined
}

/** Profile fields a PUT cannot change; a client may send them back as a GET answered them. */
export const READ_ONLY_FIELDS = ["id", "providerType", "isVerified", "pendingEmail", "isActive", "createdDate", "modifiedDate", "deletedDate"] as const

/**
 * Whether a read-only field sent back is the stored one: an id in either case (as in a path);
 * `modifiedDate` whatever it says, since every PUT moves it (a client sending back the body it read
 * before its last PUT changes nothing by it).
 */
const sameReadOnly = (field: typeof READ_ONLY_FIELDS[number], sent: unknown, stored: unknown) =>
  field === "modifiedDate" ||
  (field === "id" && typeof sent === "string" && typeof stored === "string" ? storedId(sent) === stored : JSON.stringify(sent) === JSON.stringify(stored))

export interface UpdateInput {
  readonly id?: unknown
  readonly providerType?: unknown
  readonly isVerified?: unknown
  readonly pendingEmail?: unknown
  readonly isActive?: unknown
  readonly createdDate?: unknown
  readonly modifiedDate?: unknown
  readonly deletedDate?: unknown
  readonly title?: string | undefined
  readonly description?: string | undefined
  readonly username?: string | undefined
  readonly email?: string | undefined
  readonly image?: string | undefined
  readonly dob?: string | null | undefined
  /** Admin only. */
  readonly AvatarType?: AvatarType | undefined
  /** Admin only. */
  readonly karmaTotal?: number | undefined
  /** Admin only. */
  readonly plan?: Plan | undefined
}

export interface AuthResult {
  readonly jwtToken: string
  readonly id: string
  readonly username: string
  readonly email: string
  readonly karmaTotal: number
  readonly AvatarType: AvatarType
  readonly expiresAtUtc: string
}

/** A PUT's new value for a field, checked as registration checks it (the 400 a body's decoding gives). */
const checkedField = (field: string, schema: Schema.Schema<string, string>, value: string) =>
  Either.match(Schema.decodeEither(schema)(value), {
    onLeft: (e) => Effect.fail(new BadRequest({ message: `Invalid request body: ${field}: ${problemsOf(e).text}`, param: field })),
    onRight: Effect.succeed
  })

/** The same address, as e-mail addresses are compared here (case-insensitively). */
const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

/**
 * What a PUT's `email` does to an avatar: nothing (absent, or the current address with no change
 * waiting), cancel the change waiting (the current address: the owner's way out), or request a change.
 */
type EmailEffect =
  | { readonly _tag: "None" }
  | { readonly _tag: "Cancel" }
  | { readonly _tag: "Change"; readonly address: string }

const emailEffectOf = (avatar: AvatarRecord, requested: string | undefined): EmailEffect =>
  requested === undefined
    ? { _tag: "None" }
    : !sameAddress(requested, avatar.email)
    ? { _tag: "Change", address: requested }
    : avatar.pendingEmail !== null
    ? { _tag: "Cancel" }
    : { _tag: "None" }

/** A mail-limit event that was recorded, so that it can be taken back. */
interface Recorded {
  readonly key: string
  readonly at: number
}

export const INVALID_CREDENTIALS = "Invalid credentials."
const deadResetLink = () => new Rejected({ message: "This password-reset link is invalid, expired or already used: ask for a new one." })
export const TOO_MANY_LOGINS = "Too many failed sign-ins. Try again later."
export const VERIFICATION_PENDING =
  "Your e-mail address is not verified yet. Follow the link in the verification e-mail (or ask for a new one)."

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const store = yield* AvatarStore
  const tokens = yield* OneTimeTokenStore
  const limits = yield* SendLimitStore
  const apiKeys = yield* ApiKeyStore
  const outbox = yield* MailOutbox
  /**
   * How long registration, forgot-password and resend take when they mail (the link's token written,
   * the mail sent), averaged over the recent ones. A request that mails nothing (no such account, or
   * an address that has one and whose owner was told enough this hour) waits as long, so an
   * answer's time does not tell whether an address has an account: with a mail server that took 150 ms a
   * reply, it took 0.8 s for an account and 6 ms for none. The mail itself still goes out within the
   * request, so it is there when the answer is.
   */
  const mailing = { typicalMs: 0 }
  const timedMailing = <A, E, R>(work: Effect.Effect<A, E, R>) =>
    Effect.map(Effect.timed(work), ([took, value]) => {
      const ms = Duration.toMillis(took)
      mailing.typicalMs = mailing.typicalMs === 0 ? ms : 0.8 * mailing.typicalMs + 0.2 * ms
      return value
    })
  const asLongAsMailing = Effect.suspend(() => Effect.sleep(Duration.millis(mailing.typicalMs)))
  const passwords = yield* Passwords
  const jwt = yield* Jwt

  const link = (route: string, token: string) => `${config.publicUrl}/api/avatar/${route}?token=${encodeURIComponent(token)}`

  const issueToken = (avatarId: string, purpose: TokenPurpose, email: string | null, ttl: number) =>
    Effect.gen(function*() {
      const token = randomToken()
      const now = Date.now()
      yield* tokens.issue({ hash: sha256(token), avatarId, purpose, email, expiresAt: now + ttl, createdAt: now })
      return token
    })

  const sendVerification = (avatar: AvatarRecord, address: string) =>
    Effect.gen(function*() {
      const token = yield* issueToken(avatar.id, "verify", address, VERIFY_TTL_MS)
      yield* outbox.send(Templates.verification(address, avatar.username, link("verify-email", token)), VERIFY_TTL_MS)
    })

  const resetLink = (token: string) => `${config.publicUrl}/api/avatar/reset-password?token=${encodeURIComponent(token)}`

  /** At most three mails of a kind per address (or other key) per hour, counted in storage; the event recorded. */
  const admitSend = (kind: string, address: string, refusal = "Too many e-mails requested for this address: at most 3 per hour. Try again later.") => {
    const recorded: Recorded = { key: `${kind}:${address.toLowerCase()}`, at: Date.now() }
    return limits.tryRecord(recorded.key, recorded.at, SEND_WINDOW_MS).pipe(
      Effect.filterOrFail(
        (ok) => ok,
        () => new TooManyRequests({ message: refusal, retryAfterSeconds: 3600 })
      ),
      Effect.as(recorded)
    )
  }

  /** Takes back mail-limit events whose request was refused after all: a refused request does not count. */
  const giveBack = (events: ReadonlyArray<Recorded>) => Effect.forEach(events, (e) => limits.unrecord(e.key, e.at), { discard: true })

  /**
   * An e-mail change mails the new address, so it is limited like resend: 3 changes per hour per
   * avatar, and the new address's resend budget. Both are recorded, or neither.
   */
  const admitEmailChange = (avatarId: string, address: string) =>
    Effect.gen(function*() {
      const change = yield* admitSend("email-change", avatarId, "Too many e-mail address changes: at most 3 per hour. Try again later.")
      const verify = yield* admitSend("verify", address).pipe(Effect.tapError(() => giveBack([change])))
      return [change, verify]
    })

  const findExisting = (id: string) =>
    store.findById(id).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new NotFound({ message: `No avatar with id ${id}.` })),
        onSome: Effect.succeed
      }))
    )

  /**
   * Registers an avatar. `address` (None when the host does not know it) is limited to
   * AIGW_REGISTER_MAX_PER_ADDRESS registrations an hour: each costs an argon2 hash and a mail.
   */
  const register = Effect.fn("Avatars.register")(function*(input: RegisterInput, address: Option.Option<string> = Option.none()) {
    const now = Date.now()
    if (input.confirmPassword !== undefined && input.confirmPassword !== input.password) {
      return yield* Effect.fail(new BadRequest({ message: "password and confirmPassword do not match." }))
    }
    if (Option.isSome(address)) {
      const counted = yield* limits.tryCount(`register-address:${address.value}`, now, 3_600_000, config.limits.registerMaxPerAddress)
      if (!counted.admitted) {
        return yield* Effect.fail(new TooManyRequests({ message: "Too many registrations from this address: try again later.", retryAfterSeconds: Math.max(1, Math.ceil((counted.expiresAt - now) / 1000)) }))
      }
    }
    const avatar = newAvatar({
      username: input.username,
      email: input.email,
      passwordHash: yield* passwords.hash(input.password),
      title: input.title ?? "",
      avatarType: "User",
      // The spec's default is the configured one; an empty value is no override (as an empty setting is unset).
      providerType: input.providerType === undefined || input.providerType.trim() === "" ? "Default" : input.providerType,
      plan: "Free",
      emailVerified: false
    }, now)
    const outcome = yield* store.insert(avatar).pipe(
      Effect.as("created" as const),
      Effect.catchTag("Conflict", (c) =>
        c.message.includes("e-mail") ? Effect.succeed("emailTaken" as const) : Effect.fail(c))
    )
    if (outcome === "created") {
      yield* timedMailing(sendVerification(avatar, avatar.email))
    } else {
      // No enumeration: the avatar is stored all the same (its id, username and password behave
      // like a fresh one's: visible by id, username reserved, login says "not verified"), but under
      // an unguessable, undeliverable address, so it can never be verified. The owner is told.
      yield* store.insert({ ...avatar, email: `unregistered-${randomToken()}@aigw.invalid` })
      const owner = yield* store.findByEmail(input.email)
      const notify = Option.isSome(owner) && owner.value.isActive &&
        (yield* admitSend("notice", input.email).pipe(Effect.as(true), Effect.orElseSucceed(() => false)))
      // A registration that mails nothing (the owner told thrice this hour, a deleted owner) waits as
      // long as one that mails, so its answer's time does not tell that the address has an account.
      if (notify) {
        const { email, id, username } = owner.value
        yield* timedMailing(Effect.flatMap(issueToken(id, "reset", null, RESET_TTL_MS), (token) =>
          outbox.send(Templates.alreadyRegistered(email, username, resetLink(token)), RESET_TTL_MS)))
      } else yield* asLongAsMailing
    }
    return view(avatar)
  })

  /**
   * Reserves one failed-login slot for `key` before the password is checked, so concurrent
   * attempts cannot overshoot the limit; a correct password gives the slot back.
   */
  const reserveLoginSlot = (key: string, limit: number, now: number) =>
    limits.tryCount(key, now, config.limits.loginWindowSeconds * 1000, limit).pipe(
      Effect.filterOrFail(
        (c) => c.admitted,
        (c) => new TooManyRequests({ message: TOO_MANY_LOGINS, retryAfterSeconds: Math.max(1, Math.ceil((c.expiresAt - now) / 1000)) })
      ),
      Effect.map((c) => ({ key, expiresAt: c.expiresAt }))
    )

  /**
   * Logs in by `login` (a username, or a verified e-mail address). `alsoNamed`, when a client sends
   * both fields, must name the same avatar: else it is a failed sign-in like a wrong password (a wrong
   * e-mail beside a right username used to be ignored). Failed password checks are counted per
   * account and per client address (`address`, None when the host does not know it) in storage; over
   * either limit every attempt, right or wrong, answers 429 without checking the password.
   */
  const authenticate = Effect.fn("Avatars.authenticate")(function*(login: string, password: string, address: Option.Option<string>, alsoNamed?: string) {
    const now = Date.now()
    const name = login.trim().toLowerCase()
    const other = alsoNamed?.trim().toLowerCase()
    const slots: Array<{ key: string; expiresAt: number }> = []
    if (Option.isSome(address)) {
      slots.push(yield* reserveLoginSlot(`login-address:${address.value}`, config.limits.loginMaxFailuresPerAddress, now))
    }
    // An address is a login only once verified: a registration that found its address taken is
    // stored under another one, so an unverified address must look unknown, not "not verified".
    const names = (a: AvatarRecord, n: string) => a.username.toLowerCase() === n || (a.emailVerified && a.email.toLowerCase() === n)
    const found = Option.filter(yield* store.findByLogin(name), (a) => (a.emailVerified || a.username.toLowerCase() === name) && (other === undefined || names(a, other)))
    // Unknown logins are counted under their own name, so they lock exactly like accounts do.
    const accountKey = `login-account:${Option.match(found, { onNone: () => `?${name}`, onSome: (a) => a.id })}`
    const account = yield* reserveLoginSlot(accountKey, config.limits.loginMaxFailuresPerAccount, now).pipe(
      Effect.tapError(() => Effect.forEach(slots, (s) => limits.uncount(s.key, s.expiresAt)))
    )
    slots.push(account)
    // Unknown logins spend the same argon2 time as a real check, so timing does not reveal them.
    const ok = yield* passwords.verify(Option.match(found, { onNone: () => DUMMY_HASH, onSome: (a) => a.passwordHash }), password)
    if (Option.isNone(found) || !ok || !found.value.isActive) return yield* Effect.fail(new Rejected({ message: INVALID_CREDENTIALS }))
    const avatar = found.value
    // Only a wrong password is a failure; successes never touch other attempts' counts.
    yield* Effect.forEach(slots, (s) => limits.uncount(s.key, s.expiresAt))
    if (!avatar.emailVerified) return yield* Effect.fail(new Rejected({ message: VERIFICATION_PENDING }))
    if (passwords.needsRehash(avatar.passwordHash)) {
      // Only over the hash just checked: a reset that committed meanwhile keeps its new password.
      yield* store.replacePasswordHash(avatar.id, avatar.passwordHash, yield* passwords.hash(password))
    }
    // The token carries the generation read in the same row as the hash just checked: if a reset or a
    // deletion committed after that read, the stored generation is greater and Auth refuses the token,
    // however late it is signed (Auth.revoked).
    const { expiresAt, token } = yield* jwt.sign(avatar.id, avatar.tokensValidAfter)
    const result: AuthResult = {
      jwtToken: token,
      id: avatar.id,
      username: avatar.username,
      email: avatar.email,
      karmaTotal: avatar.karmaTotal,
      AvatarType: avatar.avatarType,
      expiresAtUtc: new Date(expiresAt * 1000).toISOString()
    }
    return result
  })

  const get = Effect.fn("Avatars.get")(function*(caller: AvatarRecord, id: string) {
    const avatar = yield* findExisting(id)
    if (caller.avatarType === "Admin" || caller.id === avatar.id) return view(avatar) as AvatarView | ReturnType<typeof publicView>
    if (!avatar.isActive) return yield* Effect.fail(new NotFound({ message: `No avatar with id ${id}.` }))
    return publicView(avatar)
  })

  /** Every avatar (Admins only), oldest first; or one page of them. */
  const list = Effect.fn("Avatars.list")(function*(caller: AvatarRecord, page?: AvatarPage) {
    if (caller.avatarType !== "Admin") return yield* Effect.fail(new Forbidden({ message: "Only an Admin avatar can list avatars." }))
    return (yield* store.list(page)).map(view)
  })

  /**
   * The mails of a requested e-mail change: the link to the new address, or, when that address
   * belongs to another avatar, a notice to its owner instead (no link: the change can never be
   * confirmed, and the answer looks the same). The current address, if verified, is told either way.
   */
  const mailEmailChange = (before: AvatarRecord, after: AvatarRecord, address: string, taken: Option.Option<AvatarRecord>) =>
    Effect.gen(function*() {
      if (Option.isNone(taken)) yield* sendVerification(after, address)
      else if (taken.value.isActive) yield* outbox.send(Templates.addressClaimed(taken.value.email, taken.value.username), NOTICE_KEEP_MS)
      if (before.emailVerified) yield* outbox.send(Templates.emailChangeRequested(before.email, before.username, address), NOTICE_KEEP_MS)
    })

  /**
   * Updates a profile. `proof` is how the caller signed in: changing the username (a login name), the
   * e-mail address or AvatarType (the Admin role) needs a session, not an API key (Auth.requireSession).
   */
  const update = Effect.fn("Avatars.update")(function*(caller: AvatarRecord, id: string, input: UpdateInput, proof: Proof) {
    const isAdmin = caller.avatarType === "Admin"
    if (!isAdmin && caller.id !== id) {
      return yield* Effect.fail(new Forbidden({ message: "Only the owning avatar or an Admin can update this avatar." }))
    }
    const avatar = yield* findExisting(id)
    if (!avatar.isActive) return yield* Effect.fail(new NotFound({ message: `Avatar ${id} is deleted.` }))
    const current = view(avatar)
    const changed = READ_ONLY_FIELDS.find((field) => input[field] !== undefined && !sameReadOnly(field, input[field], current[field]))
    if (changed !== undefined) {
      return yield* Effect.fail(new BadRequest({ message: `Invalid request body: ${changed}: is read-only; PUT changes title, description, username, email, image and dob (and, for an Admin, AvatarType, karmaTotal and plan).` }))
    }
    const changes = (field: "AvatarType" | "karmaTotal" | "plan") => input[field] !== undefined && input[field] !== current[field]
    if (!isAdmin && (changes("AvatarType") || changes("karmaTotal") || changes("plan"))) {
      return yield* Effect.fail(new Forbidden({ message: "Only an Admin can change AvatarType, karmaTotal or plan." }))
    }
    // Granting or taking the Admin role with a leaked Admin key would outlive the key's revocation.
    if (changes("AvatarType")) yield* requireSession(proof, "Changing AvatarType")
    if (input.AvatarType !== undefined && input.AvatarType !== "Admin") yield* keepAnAdmin(avatar, "made a User")
    // A username or address the avatar has is taken back as it is, one registration would refuse too (a
    // bootstrapped Admin's): a GET's body edited and sent back must not fail on a field it did not change.
    const username = input.username === undefined || input.username === avatar.username ? input.username : yield* checkedField("username", Username, input.username)
    const sentEmail = input.email === undefined || sameAddress(input.email.trim(), avatar.email) ? input.email?.trim() : yield* checkedField("email", Email, input.email)
    const email = emailEffectOf(avatar, sentEmail)
    const renamed = username !== undefined && username !== avatar.username
    if (renamed || email._tag !== "None") yield* requireSession(proof, "Changing the username or the e-mail address")
    // Limits first; a taken address is answered like a free one (the answer reveals nothing).
    const recorded = email._tag === "Change" ? yield* admitEmailChange(id, email.address) : []
    const taken = email._tag === "Change" ? yield* store.findByEmail(email.address) : Option.none<AvatarRecord>()
    const updated = yield* store.update(id, {
      ...(input.title !== undefined ? { title: input.title } : {}),
      ...(input.description !== undefined ? { description: input.description } : {}),
      ...(username !== undefined ? { username } : {}),
      ...(input.image !== undefined ? { image: input.image } : {}),
      ...(input.dob !== undefined ? { dob: input.dob } : {}),
      ...(input.AvatarType !== undefined ? { avatarType: input.AvatarType } : {}),
      ...(input.karmaTotal !== undefined ? { karmaTotal: input.karmaTotal } : {}),
      ...(input.plan !== undefined ? { plan: input.plan } : {}),
      ...(email._tag === "Change" ? { pendingEmail: email.address } : email._tag === "Cancel" ? { pendingEmail: null } : {}),
      updatedAt: Date.now()
    }).pipe(Effect.tapError(() => giveBack(recorded)))
    const record = Option.getOrThrow(updated)
    // The link of the change this one replaces or cancels dies with it.
    if (email._tag !== "None") yield* tokens.revokeAll(id, "verify")
    if (email._tag === "Change") yield* mailEmailChange(avatar, record, email.address, taken)
    return view(record)
  })

  /**
   * Refuses to demote or delete the last active Admin: nobody could list, delete or promote avatars
   * after it, and the start's AIGW_ADMIN_* creates an Admin only when none exists.
   */
  const keepAnAdmin = (avatar: AvatarRecord, change: string) =>
    avatar.avatarType === "Admin"
      ? Effect.flatMap(store.countAdmins(), (admins) =>
        admins <= 1
          ? Effect.fail(new Conflict({ message: `The last Admin avatar cannot be ${change}: make another avatar Admin first.` }))
          : Effect.void)
      : Effect.void

  const remove = Effect.fn("Avatars.delete")(function*(caller: AvatarRecord, id: string) {
    if (caller.avatarType !== "Admin") return yield* Effect.fail(new Forbidden({ message: "Only an Admin avatar can delete avatars." }))
    const avatar = yield* findExisting(id)
    if (!avatar.isActive) return view(avatar)
    yield* keepAnAdmin(avatar, "deleted")
    const now = Date.now()
    const updated = yield* store.revokeTokens(id, { isActive: false, deletedAt: now, updatedAt: now }, now)
    yield* tokens.revokeAll(id)
    // Mails still waiting for the mail server carry links that died with the avatar.
    yield* outbox.discardTo([avatar.email, ...(avatar.pendingEmail !== null ? [avatar.pendingEmail] : [])])
    return view(Option.getOrThrow(updated))
  })

  /**
   * Swaps a confirmed change in, only while it is still the one waiting (a reset or a cancel since the
   * link was mailed wins). Reset links went to the old address: they die with it. The old address, if
   * verified, is told.
   */
  const confirmChange = (avatar: AvatarRecord, pending: string, invalid: Rejected) =>
    Effect.gen(function*() {
      const confirmed = yield* store.confirmPendingEmail(avatar.id, pending, Date.now()).pipe(
        Effect.catchTag("Conflict", () => Effect.fail(new Conflict({ message: "That e-mail address was registered by another avatar meanwhile." })))
      )
      if (Option.isNone(confirmed)) return yield* Effect.fail(invalid)
      yield* tokens.revokeAll(avatar.id, "reset")
      if (avatar.emailVerified) yield* outbox.send(Templates.emailChanged(avatar.email, avatar.username, pending), NOTICE_KEEP_MS)
      return confirmed.value
    })

  const verifyEmail = Effect.fn("Avatars.verifyEmail")(function*(token: string) {
    const invalid = new Rejected({ message: "This verification link is invalid, expired or already used." })
    const consumed = yield* tokens.consume(sha256(token), "verify", Date.now())
    if (Option.isNone(consumed)) return yield* Effect.fail(invalid)
    const found = yield* store.findById(consumed.value.avatarId)
    if (Option.isNone(found) || !found.value.isActive) return yield* Effect.fail(invalid)
    const avatar = found.value
    const address = consumed.value.email ?? avatar.email
    if (avatar.pendingEmail !== null && sameAddress(address, avatar.pendingEmail)) return view(yield* confirmChange(avatar, avatar.pendingEmail, invalid))
    if (!sameAddress(address, avatar.email)) return yield* Effect.fail(invalid)
    const updated = yield* store.update(avatar.id, { emailVerified: true, updatedAt: Date.now() })
    return view(Option.getOrThrow(updated))
  })

  const resendVerification = Effect.fn("Avatars.resendVerification")(function*(email: string) {
    yield* admitSend("verify", email)
    const avatar = yield* store.findByEmail(email)
    if (Option.isSome(avatar) && avatar.value.isActive && !avatar.value.emailVerified) {
      yield* timedMailing(sendVerification(avatar.value, avatar.value.email))
    } else yield* asLongAsMailing
  })

  const forgotPassword = Effect.fn("Avatars.forgotPassword")(function*(email: string) {
    yield* admitSend("reset", email)
    const avatar = yield* store.findByEmail(email)
    if (Option.isNone(avatar) || !avatar.value.isActive) return yield* asLongAsMailing
    const found = avatar.value
    yield* timedMailing(Effect.flatMap(issueToken(found.id, "reset", null, RESET_TTL_MS), (token) =>
      outbox.send(Templates.passwordReset(found.email, found.username, resetLink(token)), RESET_TTL_MS)))
  })

  /** Whether a reset link can still be used, without using it: its page shows why not before the form is filled. */
  const checkResetLink = (token: string) =>
    Effect.flatMap(tokens.usable(sha256(token), "reset", Date.now()), (usable) => usable ? Effect.void : Effect.fail(deadResetLink()))

  const resetPassword = Effect.fn("Avatars.resetPassword")(function*(token: string, password: string, confirmPassword: string) {
    if (password !== confirmPassword) return yield* Effect.fail(new BadRequest({ message: "password and confirmPassword do not match." }))
    const consumed = yield* tokens.consume(sha256(token), "reset", Date.now())
    const invalid = deadResetLink()
    if (Option.isNone(consumed)) return yield* Effect.fail(invalid)
    const passwordHash = yield* passwords.hash(password)
    const now = Date.now()
    const before = yield* store.findById(consumed.value.avatarId)
    // One atomic write: the new hash, and a token generation greater than any a login could have
    // read with the old hash, so every JWT from such a login is refused however late it is signed.
    // Following the link proves control of the mailbox, so the address counts as verified. A change
    // of address waiting for confirmation may be an intruder's (made with a stolen session): it goes.
    const updated = yield* store.revokeTokens(consumed.value.avatarId, { passwordHash, updatedAt: now, emailVerified: true, pendingEmail: null }, now)
    if (Option.isNone(updated) || !updated.value.isActive) return yield* Effect.fail(invalid)
    // Whoever knew the old password may have made keys: they go with the sessions. After the write
    // above, so a key made with a credential checked before it is either revoked here or refused at
    // its creation (ApiKeys.create). The links still out go too: the cancelled change's verification
    // link (were it followed, confirmChange would find nothing waiting) and any other reset link.
    yield* apiKeys.revokeAll(updated.value.id, Date.now())
    yield* tokens.revokeAll(updated.value.id)
    const cancelled = Option.flatMapNullable(before, (a) => a.pendingEmail)
    yield* outbox.send(Templates.passwordChanged(updated.value.email, updated.value.username, Option.getOrNull(cancelled)), NOTICE_KEEP_MS)
  })

  /** Creates the configured Admin at start when no Admin exists. */
  const bootstrapAdmin = Effect.gen(function*() {
    if (Option.isNone(config.admin) || (yield* store.countAdmins()) > 0) return
    const admin = config.admin.value
    // The operator's values are taken as given; one registration would refuse is said once, here.
    const refusals = [
      Schema.decodeUnknownEither(Username)(admin.username),
      Schema.decodeUnknownEither(Email)(admin.email),
      Schema.decodeUnknownEither(Password)(Redacted.value(admin.password))
    ].flatMap((checked) => Either.isLeft(checked) ? [ParseResult.TreeFormatter.formatErrorSync(checked.left)] : [])
    if (refusals.length > 0) yield* Effect.logWarning(`AIGW_ADMIN_*: registration would refuse these values (${refusals.join("; ")}); the Admin is created with them`)
    const now = Date.now()
    // An unverified registration of the Admin's address never proved it owns it: it must not keep the
    // Admin out (anyone could register the address before the operator's first start). Like a
    // registration that found its address taken, it goes on under an undeliverable address.
    const squatter = Option.filter(yield* store.findByEmail(admin.email), (a) => a.isActive && !a.emailVerified && a.avatarType !== "Admin")
    if (Option.isSome(squatter)) {
      yield* store.update(squatter.value.id, { email: `unregistered-${randomToken()}@aigw.invalid`, updatedAt: now }).pipe(Effect.ignore)
      yield* tokens.revokeAll(squatter.value.id, "verify")
      yield* Effect.logWarning(`AIGW_ADMIN_*: an unverified registration (${squatter.value.username}) held AIGW_ADMIN_EMAIL; it no longer does, and the Admin is created`)
    }
    yield* store.insert(newAvatar({
      username: admin.username,
      email: admin.email,
      passwordHash: yield* passwords.hash(Redacted.value(admin.password)),
      title: "Administrator",
      avatarType: "Admin",
      providerType: "Default",
      plan: "Enterprise",
      emailVerified: true
    }, now)).pipe(
      Effect.tap(() => Effect.logInfo(`bootstrapped Admin avatar ${admin.username}`)),
      Effect.catchTag("Conflict", (c) =>
        Effect.logWarning(
          `AIGW_ADMIN_*: cannot create the Admin avatar: ${c.message} No active Admin exists: set AIGW_ADMIN_USERNAME and AIGW_ADMIN_EMAIL ` +
            "to a username and an address no avatar has, deleted ones included (a soft delete keeps both reserved)"
        ))
    )
  })

  return {
    register,
    authenticate,
    get,
    list,
    update,
    delete: remove,
    verifyEmail,
    resendVerification,
    forgotPassword,
    resetPassword,
    checkResetLink,
    bootstrapAdmin
  }
})

// A valid argon2id hash of a random string, used to equalise timing for unknown logins.
const DUMMY_HASH =
  "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Jk3GCEOm4rPz8vWwUU6hNZ1kYxZZpdJYW7S6M2mWb0E"

export class Avatars extends Context.Tag("aigw/Avatars")<Avatars, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Avatars, makeService)
