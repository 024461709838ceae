/** API keys for an avatar: created with the secret shown once, listed without it, revoked. */
import { Context, Effect, Layer, Option } from "effect"
import { NotFound, Unauthorized } from "../Errors.ts"
import { type ApiKeyRecord, ApiKeyStore } from "../Storage/ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "../Storage/AvatarStore.ts"
// A cycle (Auth imports Http/Edge, which imports KEY_PREFIX from here): Auth's values are read only when a call runs.
import { INVALID, type Proof, requireSession } from "./Auth.ts"
import { randomToken, sha256 } from "./Secrets.ts"

export const KEY_PREFIX = "aigw_"

export interface ApiKeyView {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
  readonly revokedAt: string | null
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

export const view = (k: ApiKeyRecord): ApiKeyView => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  createdAt: iso(k.createdAt)!,
  lastUsedAt: iso(k.lastUsedAt),
  revokedAt: iso(k.revokedAt)
})

const makeService = Effect.gen(function*() {
  const store = yield* ApiKeyStore
  const avatars = yield* AvatarStore
  return {
    /**
     * A new key for `owner`, the avatar record the caller's credentials were checked against (Auth).
     * A revocation (password reset, deletion) can commit between that check and the key's insert, and
     * its revokeAll run before the insert: so the avatar is read again (from the store, not a cache)
     * once the key is stored, and if a revocation committed since the check (its token generation
     * moved, AvatarStore.revokeTokens) or the avatar is gone, the key is revoked and the call refused.
     * Otherwise every later revocation writes its generation after that read, then revokes every key,
     * this one included.
     *
     * `proof` is how the caller signed in: a key makes no key (one made with a leaked key would
     * outlive its revocation), only a signed-in session does (Auth.requireSession).
     */
    create: Effect.fn("ApiKeys.create")(function*(owner: AvatarRecord, name: string, proof: Proof) {
      yield* requireSession(proof, "Creating an API key")
      const secret = `${KEY_PREFIX}${randomToken()}`
      const avatarId = owner.id
      const record: ApiKeyRecord = {
        id: crypto.randomUUID(),
        avatarId,
        name,
        prefix: secret.slice(0, KEY_PREFIX.length + 6),
        hash: sha256(secret),
        createdAt: Date.now(),
        lastUsedAt: null,
        revokedAt: null
      }
      yield* store.insert(record)
      const current = yield* avatars.findById(avatarId)
      if (Option.isNone(current) || !current.value.isActive || current.value.tokensValidAfter !== owner.tokensValidAfter) {
        yield* store.revoke(avatarId, record.id, Date.now())
        return yield* Effect.fail(new Unauthorized({ message: INVALID }))
      }
      return { ...view(record), key: secret }
    }),
    list: (avatarId: string) => Effect.map(store.listByAvatar(avatarId), (keys) => keys.map(view)),
    /**
     * Revokes the avatar's key `id`; with `stopJobs`, also stops the jobs that key submitted (cancelled at
     * their vendors, no webhooks: Jobs/Worker.ts), for a key that leaked. Without it they run on, as a key
     * rotation needs. Stopping jobs needs a signed-in session (`proof`): a leaked key must not end its owner's work.
     */
    revoke: Effect.fn("ApiKeys.revoke")(function*(avatarId: string, id: string, proof: Proof, stopJobs: boolean) {
      if (stopJobs) yield* requireSession(proof, "Stopping the jobs of an API key")
      const revoked = yield* store.revoke(avatarId, id, Date.now(), stopJobs)
      if (!revoked) {
        return yield* Effect.fail(new NotFound({ message: stopJobs ? `No API key ${id} of this avatar whose jobs run on.` : `No active API key ${id} for this avatar.` }))
      }
    }),
    /** The owning avatar id of an active key. */
    resolve: (secret: string) => store.findByHash(sha256(secret))
  }
})

export class ApiKeys extends Context.Tag("aigw/ApiKeys")<ApiKeys, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(ApiKeys, makeService)
