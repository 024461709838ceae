/**
 * The Metering port: the storage side of a metered call as plain promises, for the HTTP fast lane
 * and the provider calls (no Effect runtime per step): who an API key belongs to, which active avatar
 * a token names, quota admission, today's count and usage recording. Auth's credential checks and
 * Quota go through it too.
 *
 * Layers: `layerMemory` here, on the memory stores; Sql/Metering.ts for SQLite and PostgreSQL,
 * where each of these statements is written once (Sql/UsageStore.ts and Sql/ApiKeyStore.ts run
 * the same text through the SqlClient). Stores.ts provides it with the other stores.
 */
import { Context, Effect, Layer, Option, Runtime } from "effect"
import { ApiKeyStore } from "./ApiKeyStore.ts"
import { type AvatarRecord, AvatarStore } from "./AvatarStore.ts"
import { type UsageEvent, UsageStore } from "./UsageStore.ts"

export interface MeteringService {
  /** The active avatar owning the unrevoked API key with this SHA-256, if any. */
  readonly avatarOfKey: (hash: string) => Promise<AvatarRecord | undefined>
  /** The avatar with this id if it is active (a token's subject). */
  readonly activeAvatar: (id: string) => Promise<AvatarRecord | undefined>
  /**
   * Adds `count` calls to the avatar's count of `day` if the result stays within `limit`, in one
   * atomic step: the new count, or undefined when they do not fit (nothing is added then). `gone`
   * is asked when the admission's batch is written (SQL; when the call starts elsewhere): an
   * admission that had to wait (a batch out, SQLite's lock held elsewhere) for a caller that has
   * left since is not made, and the promise rejects with `CallerGone`.
   */
  readonly admit: (avatarId: string, day: string, limit: number, count: number, gone?: () => boolean) => Promise<number | undefined>
  /** The calls admitted on `day`. */
  readonly callsOn: (avatarId: string, day: string) => Promise<number>
  /** Stores the call's usage event and adds its tokens and cost to the day's totals, atomically. */
  readonly record: (event: UsageEvent) => Promise<void>
}

export class Metering extends Context.Tag("aigw/Metering")<Metering, MeteringService>() {}

/** An admission not made because its caller left before it could be (`MeteringService.admit`'s `gone`): nothing was counted. */
export class CallerGone extends Error {
  constructor() {
    super("the caller left before its call was admitted; nothing was counted")
  }
}

/** `admit` for a caller that may be gone: the step, unless `gone` says the caller has left. */
export const unlessGone = <A>(gone: (() => boolean) | undefined, step: () => Promise<A>): Promise<A> =>
  gone?.() ? Promise.reject(new CallerGone()) : step()

/**
 * On memory the keys, avatars and daily counters live in the memory stores, so Metering reads and
 * writes them there. Each memory store step is synchronous, so admission stays one atomic step.
 */
export const makeMemory = Effect.gen(function*() {
  const keys = yield* ApiKeyStore
  const avatars = yield* AvatarStore
  const usage = yield* UsageStore
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const activeAvatar = (id: string) => Effect.map(avatars.findById(id), (a) => (Option.isSome(a) && a.value.isActive ? a.value : undefined))
  const avatarOfKey = (hash: string) =>
    Effect.flatMap(keys.findByHash(hash), (key) =>
      Option.isNone(key) || key.value.revokedAt !== null ? Effect.succeed(undefined) : activeAvatar(key.value.avatarId))
  return Metering.of({
    avatarOfKey: (hash) => run(avatarOfKey(hash)),
    activeAvatar: (id) => run(activeAvatar(id)),
    admit: (avatarId, day, limit, count, gone) => unlessGone(gone, () => run(Effect.map(usage.admit(avatarId, day, limit, count), Option.getOrUndefined))),
    callsOn: (avatarId, day) => run(usage.callsOn(avatarId, day)),
    record: (event) => run(usage.record(event))
  })
})

export const layerMemory = Layer.effect(Metering, makeMemory)
