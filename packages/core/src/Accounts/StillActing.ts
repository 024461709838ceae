/**
 * Whether a request may go on acting for its avatar. The credentials are checked once, when the
 * request arrives; a request that makes many model calls (a conversation of up to 100 rounds, a
 * dispatch, a crew) checks before each further call that the avatar was not deleted, did not revoke
 * its sessions and keys since (a password reset moves `tokensValidAfter`), and that the API key the
 * request came with (if it came with one) was not revoked since, so that a thief holding the
 * connection open does not go on calling models for up to hours after the owner took the account or
 * the key back. The background worker applies the same rule to jobs (Jobs/Worker.ts), with the key
 * that submitted each job.
 */
import { Effect, FiberRef, Option } from "effect"
import { Unauthorized } from "../Errors.ts"
import * as RequestId from "../RequestId.ts"
import { ApiKeyStore, type ApiKeyStoreService } from "../Storage/ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore, type AvatarStoreService } from "../Storage/AvatarStore.ts"
import { sha256 } from "./Secrets.ts"

export const REVOKED_MID_REQUEST =
  "The avatar was deleted, its password reset or the API key that made this request revoked while the request ran: the request was stopped before its next model call."

/** The stores a standing check reads. */
export interface StandingStores {
  readonly avatars: AvatarStoreService
  readonly keys: ApiKeyStoreService
}

/** The stores, from the context (for a service's constructor). */
export const standingStores: Effect.Effect<StandingStores, never, AvatarStore | ApiKeyStore> = Effect.all({ avatars: AvatarStore, keys: ApiKeyStore })

/** What revoked credentials that were good: the avatar's deletion, a password reset, or the API key used (revoked, or its jobs stopped). */
export type Revocation = "deleted" | "reset" | "keyRevoked"

/**
 * What revoked, if anything, credentials checked at token generation `generation` for an avatar now
 * stored as `current`, given whether the API key they were (if one) still stands (`keyStands`).
 */
export const revocationOf = (current: Option.Option<AvatarRecord>, generation: number, keyStands: boolean): Revocation | undefined =>
  Option.isNone(current) || !current.value.isActive
    ? "deleted"
    : current.value.tokensValidAfter > generation
    ? "reset"
    : keyStands
    ? undefined
    : "keyRevoked"

/** The hash of the API key the request in flight presented (RequestId.RequestInfo `apiKey`); undefined for a session or outside a request. */
export const requestKeyHash: Effect.Effect<string | undefined> = Effect.map(
  FiberRef.get(RequestId.CurrentRequest),
  (info) => (info?.apiKey === undefined ? undefined : sha256(info.apiKey))
)

/**
 * What a key must still be for the work it set going: a request's further calls need the key itself (stored,
 * not revoked, its avatar active, as at sign-in: an Admin's key acting for another avatar too); a job needs
 * only that the key's jobs were not stopped (`DELETE /v1/keys/{id}?stopJobs=true`): revoking a key alone, as
 * a rotation does, leaves the jobs it submitted running.
 */
export type KeyUse = "request" | "job"

/** Whether the API key of hash `hash` still stands for `use`; credentials that were no key (null or undefined) do. */
export const keyStands = (stores: StandingStores, hash: string | null | undefined, use: KeyUse): Effect.Effect<boolean> => {
  if (hash === null || hash === undefined) return Effect.succeed(true)
  return Effect.flatMap(stores.keys.findByHash(hash), (found) => {
    if (Option.isNone(found)) return Effect.succeed(false)
    const key = found.value
    if (use === "job") return Effect.succeed((key.jobsStoppedAt ?? null) === null)
    if (key.revokedAt !== null) return Effect.succeed(false)
    return Effect.map(stores.avatars.findById(key.avatarId), (owner) => Option.isSome(owner) && owner.value.isActive)
  })
}

/** The avatar `id` as stored now, and whether the key of hash `keyHash` stands for `use`: what `revocationOf` reads. */
export const standingNow = (stores: StandingStores, id: string, keyHash: string | null | undefined, use: KeyUse) =>
  Effect.zip(stores.avatars.findById(id), keyStands(stores, keyHash, use))

/**
 * Fails Unauthorized when the avatar `id` was deleted, revoked its credentials after `generation`, or the
 * API key of hash `keyHash` (credentials that were a key) no longer stands for `use`.
 */
export const standingSince = (stores: StandingStores, id: string, generation: number, keyHash: string | null | undefined, use: KeyUse) =>
  Effect.flatMap(standingNow(stores, id, keyHash, use), ([current, stands]) =>
    revocationOf(current, generation, stands) === undefined ? Effect.void : Effect.fail(new Unauthorized({ message: REVOKED_MID_REQUEST })))

/**
 * Fails Unauthorized when `avatar`, as the request's credentials found it, was deleted or revoked its
 * credentials since, or the API key the request came with was revoked since.
 */
export const stillActing = (stores: StandingStores, avatar: AvatarRecord) =>
  Effect.flatMap(requestKeyHash, (keyHash) => standingSince(stores, avatar.id, avatar.tokensValidAfter, keyHash, "request"))
