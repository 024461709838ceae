/**
 * API keys: random secrets shown once, stored as SHA-256 hashes and looked up by hash
 * (a unique index), owned by an avatar and revocable.
 */
import { Context, Effect, Layer, Option } from "effect"

export interface ApiKeyRecord {
  readonly id: string
  readonly avatarId: string
  readonly name: string
  /** The first characters of the secret, so owners can tell keys apart. */
  readonly prefix: string
  readonly hash: string
  readonly createdAt: number
  readonly lastUsedAt: number | null
  readonly revokedAt: number | null
  /** When the key's revocation also stopped the jobs it submitted (`revoke` with `stopJobs`); null: they run on. */
  readonly jobsStoppedAt?: number | null
}

/** A key's `lastUsedAt` moves in steps of at least this much (an hour): see `markUsed`. */
export const LAST_USED_GRANULARITY_MS = 60 * 60 * 1000

/** Whether a stored last use is due to be replaced by a use at `at`. */
export const lastUseDue = (stored: number | null, at: number) => stored === null || stored <= at - LAST_USED_GRANULARITY_MS

export interface ApiKeyStoreService {
  readonly insert: (key: ApiKeyRecord) => Effect.Effect<void>
  /** The key with this hash, revoked or not (authentication asks Metering.avatarOfKey instead). */
  readonly findByHash: (hash: string) => Effect.Effect<Option.Option<ApiKeyRecord>>
  readonly listByAvatar: (avatarId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>>
  /**
   * Revokes the avatar's key, and with `stopJobs` stops the jobs it submitted (a key revoked before may
   * still have them stopped); false when it does not exist, belongs to another avatar, or there is nothing
   * left to do (revoked already, and its jobs stopped or not asked to be).
   */
  readonly revoke: (avatarId: string, id: string, now: number, stopJobs?: boolean) => Effect.Effect<boolean>
  /** Revokes every active key of the avatar (password reset); returns how many. */
  readonly revokeAll: (avatarId: string, now: number) => Effect.Effect<number>
  /**
   * Stores `at` as the active key's last use if the stored one is at least LAST_USED_GRANULARITY_MS
   * older (or none), in one conditional write, so processes sharing the database write a key at most
   * once per period between them. Returns the stored last use afterwards (null: no such active key, or never used).
   */
  readonly markUsed: (hash: string, at: number) => Effect.Effect<number | null>
}

export class ApiKeyStore extends Context.Tag("aigw/ApiKeyStore")<ApiKeyStore, ApiKeyStoreService>() {}

export const makeMemory = Effect.sync((): ApiKeyStoreService => {
  const byId = new Map<string, ApiKeyRecord>()
  const byHash = new Map<string, string>()
  return {
    insert: (key) =>
      Effect.sync(() => {
        byId.set(key.id, key)
        byHash.set(key.hash, key.id)
      }),
    findByHash: (hash) => Effect.sync(() => Option.fromNullable(byId.get(byHash.get(hash) ?? ""))),
    listByAvatar: (avatarId) =>
      Effect.sync(() =>
        [...byId.values()].filter((k) => k.avatarId === avatarId).sort((a, b) => a.createdAt - b.createdAt)
      ),
    revoke: (avatarId, id, now, stopJobs = false) =>
      Effect.sync(() => {
        const key = byId.get(id)
        const stopsNow = stopJobs && (key?.jobsStoppedAt ?? null) === null
        if (!key || key.avatarId !== avatarId || (key.revokedAt !== null && !stopsNow)) return false
        byId.set(id, { ...key, revokedAt: key.revokedAt ?? now, ...(stopsNow ? { jobsStoppedAt: now } : {}) })
        return true
      }),
    revokeAll: (avatarId, now) =>
      Effect.sync(() => {
        let n = 0
        for (const key of byId.values()) {
          if (key.avatarId !== avatarId || key.revokedAt !== null) continue
          byId.set(key.id, { ...key, revokedAt: now })
          n++
        }
        return n
      }),
    markUsed: (hash, at) =>
      Effect.sync(() => {
        const key = byId.get(byHash.get(hash) ?? "")
        if (!key || key.revokedAt !== null) return null
        if (!lastUseDue(key.lastUsedAt, at)) return key.lastUsedAt
        byId.set(key.id, { ...key, lastUsedAt: at })
        return at
      })
  }
})

export const layerMemory = Layer.effect(ApiKeyStore, makeMemory)
