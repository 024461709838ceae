/**
 * Resolves request credentials to the calling avatar: `Authorization: Bearer <JWT or API key>`
 * or `X-Api-Key`. Deleted avatars, revoked keys and tokens from before the avatar's last
 * revocation (its tokensValidAfter) are refused.
 */
import { Context, Effect, Layer, Option, Runtime } from "effect"
import { Forbidden, NotFound, Unauthorized } from "../Errors.ts"
import { ApiKeyStore, lastUseDue } from "../Storage/ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "../Storage/AvatarStore.ts"
import { Metering } from "../Storage/Metering.ts"
import { type Presented, presented } from "../Http/Edge.ts"
import { storedId } from "./Schemas.ts"
import { sha256 } from "./Secrets.ts"
import { Jwt, type JwtClaims } from "./Jwt.ts"

export interface Credentials {
  readonly authorization?: string | undefined
  readonly apiKey?: string | undefined
}

/** Credentials that name a caller (what `presented` makes of a well-formed key or token). */
export type KeyOrToken = Extract<Presented, { readonly _tag: "ApiKey" | "Jwt" }>

/**
 * Whether a revoking change (password reset, deletion) came after the credential check a token was
 * issued for. The token carries the avatar's tokensValidAfter read in the same row read as the
 * password hash it was checked against (`tva`), and every revoking change raises the stored value
 * atomically and strictly (AvatarStore.revokeTokens): so the stored value exceeds the token's exactly
 * when a revocation committed after that read, however long the check and the signing took, on
 * whatever clock. Tokens without the claim (made before it existed) compare their issue instant.
 */
export const revoked = (claims: JwtClaims, avatar: AvatarRecord): boolean =>
  claims.tva !== undefined ? claims.tva < avatar.tokensValidAfter : claims.aat < avatar.tokensValidAfter

/** How a caller proved who it is: a signed-in session (a JWT from authenticate) or an API key. */
export type Proof = "session" | "apiKey"

/** The proof of credentials that named a caller (an API key wins over a token, as in `presented`). */
export const proofOf = (c: Credentials): Proof => (presented(c)._tag === "Jwt" ? "session" : "apiKey")

/**
 * API keys are gateway credentials. What would let a leaked key take the account over (a new e-mail
 * address or login name, a new key that outlives the leaked one) needs a signed-in session: 403 otherwise.
 */
export const requireSession = (proof: Proof, action: string): Effect.Effect<void, Forbidden> =>
  proof === "session"
    ? Effect.void
    : Effect.fail(new Forbidden({ message: `${action} needs a signed-in session (JWT): send Authorization: Bearer <JWT> from POST /api/avatar/authenticate; an API key is not enough.` }))

/** At most this many keys' last stored use are remembered per process (least recently written dropped first). */
const MAX_REMEMBERED_USES = 10_000

export const MISSING = "Authentication required: send Authorization: Bearer <JWT> or X-Api-Key: <API key>."
export const INVALID = "Invalid or expired credentials."

const makeService = Effect.gen(function*() {
  const jwt = yield* Jwt
  const avatars = yield* AvatarStore
  const metering = yield* Metering
  const keys = yield* ApiKeyStore
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const invalid = new Unauthorized({ message: INVALID })

  /** Each key's last use as stored, as far as this process knows (only keys that named an active avatar). */
  const storedUses = new Map<string, number>()
  const remember = (hash: string, at: number) => {
    storedUses.delete(hash)
    if (storedUses.size >= MAX_REMEMBERED_USES) storedUses.delete(storedUses.keys().next().value!)
    storedUses.set(hash, at)
  }
  /**
   * A key's `lastUsedAt`, kept to the hour without a write per call: the row is written only when the
   * use it holds (as this process last knew it) is an hour old, by a conditional write that other
   * processes' writes of the same hour make a no-op. Not awaited: the call does not wait for it.
   */
  const noteUse = (hash: string) => {
    const now = Date.now()
    if (!lastUseDue(storedUses.get(hash) ?? null, now)) return
    // At once, so the calls made while the write is out do not write too.
    remember(hash, now)
    // A failed write is not retried before the hour is out: the field is a hint, the call goes on.
    run(keys.markUsed(hash, now)).then((stored) => remember(hash, stored ?? now), () => {})
  }

  // Metering holds the one definition of a valid key (exists, not revoked, owner active) and of a
  // token's avatar (exists, active), and runs them on the database directly (or its cache) where it can.
  /**
   * The avatar of a token, or undefined when it does not hold: not ours, expired, its avatar gone or
   * inactive, or revoked (`revoked`).
   */
  const ownerOfToken = async (token: string): Promise<AvatarRecord | undefined> => {
    const claims = await jwt.claimsOf(token)
    if (claims === undefined) return undefined
    const avatar = await metering.activeAvatar(claims.sub)
    return avatar === undefined || revoked(claims, avatar) ? undefined : avatar
  }

  /** The avatar of an API key, or undefined when it does not hold (unknown, revoked, its avatar gone or inactive). */
  const ownerOfKey = (secret: string): Promise<AvatarRecord | undefined> => {
    const hash = sha256(secret)
    const found = metering.avatarOfKey(hash)
    // Beside the answer, not before it: the call does not wait a turn for the note.
    found.then((avatar) => avatar !== undefined && noteUse(hash), () => {})
    return found
  }

  /** The caller an API key or a token names, or undefined when it does not hold (a promise: the fast lane's too). */
  const ownerOf = (credentials: KeyOrToken): Promise<AvatarRecord | undefined> =>
    credentials._tag === "ApiKey" ? ownerOfKey(credentials.secret) : ownerOfToken(credentials.token)

  /** The caller, or None when no credentials were sent; fails on bad credentials. */
  const resolve = (c: Credentials): Effect.Effect<Option.Option<AvatarRecord>, Unauthorized> => {
    const p = presented(c)
    switch (p._tag) {
      case "None":
        return Effect.succeed(Option.none())
      case "Malformed":
        return Effect.fail(invalid)
      case "ApiKey":
      case "Jwt":
        return Effect.flatMap(Effect.promise(() => ownerOf(p)), (avatar) => (avatar === undefined ? Effect.fail(invalid) : Effect.succeed(Option.some(avatar))))
    }
  }

  const require = (c: Credentials) =>
    Effect.flatMap(resolve(c), Option.match({
      onNone: () => Effect.fail(new Unauthorized({ message: MISSING })),
      onSome: Effect.succeed
    }))

  /**
   * The avatar a call acts for: the caller itself, or (Admins only) the avatar named by a
   * request's `avatarId`. Others naming a foreign avatar get 403.
   */
  const actingAs = (caller: AvatarRecord, sent: string | undefined) => {
    const avatarId = sent === undefined ? undefined : storedId(sent)
    if (avatarId === undefined || avatarId === caller.id) return Effect.succeed(caller)
    if (caller.avatarType !== "Admin") {
      return Effect.fail(new Forbidden({ message: "avatarId must be your own avatar unless you are an Admin." }))
    }
    return avatars.findById(avatarId).pipe(
      Effect.flatMap((a) =>
        Option.isSome(a) && a.value.isActive
          ? Effect.succeed(a.value)
          : Effect.fail(new NotFound({ message: `No active avatar with id ${sent}.` }))
      )
    )
  }

  return { resolve, require, actingAs, ownerOf }
})

export class Auth extends Context.Tag("aigw/Auth")<Auth, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Auth, makeService)
