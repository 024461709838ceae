/**
 * Whether a request may go on acting for its avatar. The credentials are checked once, when the
 * request arrives; a request that makes many model calls (a conversation of up to 100 rounds, a
 * dispatch, a crew) checks before each further call that the avatar was not deleted and did not
 * revoke its sessions and keys since (a password reset moves `tokensValidAfter`), so that a thief
 * holding the connection open does not go on calling models for up to hours after the owner took
 * the account back. The background worker applies the same rule to jobs (Jobs/Worker.ts).
 */
import { Effect, Option } from "effect"
import { Unauthorized } from "../Errors.ts"
import type { AvatarRecord, AvatarStoreService } from "../Storage/AvatarStore.ts"

export const REVOKED_MID_REQUEST =
  "The avatar was deleted or its password reset while this request ran, revoking the credentials that made it: the request was stopped before its next model call."

/** `current` (the avatar as stored now) no longer stands behind credentials checked at token generation `generation`. */
export const revokedSince = (current: Option.Option<AvatarRecord>, generation: number): boolean =>
  Option.isNone(current) || !current.value.isActive || current.value.tokensValidAfter > generation

/** Fails Unauthorized when the avatar `id` was deleted, or revoked its credentials after `generation`. */
export const standingSince = (avatars: AvatarStoreService, id: string, generation: number) =>
  Effect.flatMap(avatars.findById(id), (current) =>
    revokedSince(current, generation) ? Effect.fail(new Unauthorized({ message: REVOKED_MID_REQUEST })) : Effect.void)

/** Fails Unauthorized when `avatar`, as the request's credentials found it, was deleted or revoked its credentials since. */
export const stillActing = (avatars: AvatarStoreService, avatar: AvatarRecord) => standingSince(avatars, avatar.id, avatar.tokensValidAfter)
