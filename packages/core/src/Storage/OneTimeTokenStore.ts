/**
 * Single-use tokens for e-mail verification and password reset. Only SHA-256 hashes are
 * stored; issuing a token supersedes every earlier one of the same purpose for the avatar.
 */
import { Context, Effect, Layer, Option } from "effect"

export type TokenPurpose = "verify" | "reset"

export interface OneTimeToken {
  readonly hash: string
  readonly avatarId: string
  readonly purpose: TokenPurpose
  /** The address being verified (the new one for an e-mail change); null for reset tokens. */
  readonly email: string | null
  readonly expiresAt: number
  readonly createdAt: number
}

export interface OneTimeTokenStoreService {
  /** Stores the token and deletes older tokens of the same avatar and purpose, atomically. */
  readonly issue: (token: OneTimeToken) => Effect.Effect<void>
  /** Marks the token used if it exists, is unused and unexpired; returns it, else None. */
  readonly consume: (hash: string, purpose: TokenPurpose, now: number) => Effect.Effect<Option.Option<OneTimeToken>>
  /** Whether `consume` would take the token now, without taking it (a page shows why a link is dead before its form is filled). */
  readonly usable: (hash: string, purpose: TokenPurpose, now: number) => Effect.Effect<boolean>
  /**
   * Removes every token of the avatar (soft delete, password reset), or only those of `purpose`
   * (the verification link of a cancelled e-mail change, the reset links of a replaced address).
   */
  readonly revokeAll: (avatarId: string, purpose?: TokenPurpose) => Effect.Effect<void>
}

export class OneTimeTokenStore extends Context.Tag("aigw/OneTimeTokenStore")<
  OneTimeTokenStore,
  OneTimeTokenStoreService
>() {}

export const makeMemory = Effect.sync((): OneTimeTokenStoreService => {
  const tokens = new Map<string, OneTimeToken & { used: boolean }>()
  const live = (hash: string, purpose: TokenPurpose, now: number) => {
    const t = tokens.get(hash)
    return t === undefined || t.used || t.purpose !== purpose || t.expiresAt <= now ? undefined : t
  }
  return {
    issue: (token) =>
      Effect.sync(() => {
        for (const [hash, t] of tokens) {
          if (t.avatarId === token.avatarId && t.purpose === token.purpose) tokens.delete(hash)
        }
        tokens.set(token.hash, { ...token, used: false })
      }),
    consume: (hash, purpose, now) =>
      Effect.sync(() => {
        const t = live(hash, purpose, now)
        if (t === undefined) return Option.none()
        t.used = true
        const { used: _, ...token } = t
        return Option.some(token)
      }),
    usable: (hash, purpose, now) => Effect.sync(() => live(hash, purpose, now) !== undefined),
    revokeAll: (avatarId, purpose) =>
      Effect.sync(() => {
        for (const [hash, t] of tokens) if (t.avatarId === avatarId && (purpose === undefined || t.purpose === purpose)) tokens.delete(hash)
      })
  }
})

export const layerMemory = Layer.effect(OneTimeTokenStore, makeMemory)
