/**
 * Avatar (user account) records. Uniqueness of username and e-mail is case-insensitive and
 * enforced by the store itself (a unique index in SQL, the same rule in memory).
 * Infrastructure failures are defects (logged, answered with a generic 500); only domain
 * outcomes are typed.
 */
import { Context, Effect, Layer, Option } from "effect"
import { Conflict } from "../Errors.ts"
import type { Plan } from "../Plans.ts"

export type AvatarType = "User" | "Admin"

export interface AvatarRecord {
  readonly id: string
  readonly username: string
  readonly email: string
  readonly passwordHash: string
  readonly title: string
  readonly description: string
  readonly image: string
  readonly dob: string | null
  readonly karmaTotal: number
  readonly avatarType: AvatarType
  readonly providerType: string
  readonly plan: Plan
  readonly emailVerified: boolean
  /** A new address waiting for confirmation; the verified `email` stays in force until then. */
  readonly pendingEmail: string | null
  readonly isActive: boolean
  readonly createdAt: number
  readonly updatedAt: number
  readonly deletedAt: number | null
  /**
   * The avatar's token generation: an epoch-millisecond instant that only ever grows, and grows
   * (`revokeTokens`) with every change that revokes the avatar's sessions. A JWT records the value it
   * was read with, together with the password hash it was checked against, and is refused once the
   * avatar's value is greater (Auth.ts); tokens made before that claim existed compare their `aat`.
   */
  readonly tokensValidAfter: number
}

export type AvatarPatch = Partial<Omit<AvatarRecord, "id" | "createdAt">>

/** What a revoking change may set besides the token generation (never a unique column: it cannot conflict). */
export type RevokingPatch = Omit<AvatarPatch, "tokensValidAfter" | "username" | "email">

/** The generation a revoking change stores: `at`, unless that does not exceed the current one (a clock behind), then current + 1. */
export const nextGeneration = (current: number, at: number) => (at > current ? at : current + 1)

/** A page of a list: at most `limit` items, after the first `offset`. */
export interface AvatarPage {
  readonly limit: number
  readonly offset: number
}

export interface AvatarStoreService {
  /** Fails with Conflict when the username or e-mail is taken (case-insensitive). */
  readonly insert: (avatar: AvatarRecord) => Effect.Effect<void, Conflict>
  readonly findById: (id: string) => Effect.Effect<Option.Option<AvatarRecord>>
  /** Looks up by username or e-mail, case-insensitive. */
  readonly findByLogin: (login: string) => Effect.Effect<Option.Option<AvatarRecord>>
  readonly findByEmail: (email: string) => Effect.Effect<Option.Option<AvatarRecord>>
  /** Every avatar, oldest first; or the page of `page.limit` avatars after the first `page.offset`. */
  readonly list: (page?: AvatarPage) => Effect.Effect<ReadonlyArray<AvatarRecord>>
  /** Fails with Conflict when a changed username or e-mail is taken. Returns the updated record. */
  readonly update: (
    id: string,
    patch: AvatarPatch
  ) => Effect.Effect<Option.Option<AvatarRecord>, Conflict>
  /** The active (not deleted) Admin avatars. */
  readonly countAdmins: () => Effect.Effect<number>
  /**
   * Applies `patch` and raises `tokensValidAfter` to `nextGeneration(current, at)` in one atomic
   * write, so the stored value is strictly greater than any a read before this write returned
   * (password reset, deletion). None when the avatar does not exist.
   */
  readonly revokeTokens: (id: string, patch: RevokingPatch, at: number) => Effect.Effect<Option.Option<AvatarRecord>>
  /**
   * Makes `pending` the avatar's verified e-mail and clears `pendingEmail`, only while `pendingEmail`
   * is still exactly `pending`: a password reset or a cancel that cleared or replaced it meanwhile
   * wins. None when it is not (or the avatar does not exist); Conflict when another avatar has the address.
   */
  readonly confirmPendingEmail: (id: string, pending: string, updatedAt: number) => Effect.Effect<Option.Option<AvatarRecord>, Conflict>
  /** Sets the password hash only while it is still `expected` (a rehash at login); false when it changed meanwhile. */
  readonly replacePasswordHash: (id: string, expected: string, passwordHash: string) => Effect.Effect<boolean>
}

export class AvatarStore extends Context.Tag("aigw/AvatarStore")<AvatarStore, AvatarStoreService>() {}

/** The ids among `ids` of active avatars (that also pass `where`), each read once: whose stored work still counts. */
export const activeAmong = (store: AvatarStoreService, ids: Iterable<string>, where: (avatar: AvatarRecord) => boolean = () => true) =>
  Effect.map(
    Effect.forEach(new Set(ids), (id) => store.findById(id)),
    (found): ReadonlySet<string> => new Set(found.flatMap((a) => (Option.isSome(a) && a.value.isActive && where(a.value) ? [a.value.id] : [])))
  )

/** What confirming a pending address writes (`confirmPendingEmail`). */
export const confirmedEmail = (pending: string, updatedAt: number) =>
  ({ email: pending, pendingEmail: null, emailVerified: true, updatedAt }) satisfies AvatarPatch

export const usernameTaken = new Conflict({ message: "That username is already taken." })
export const emailTaken = new Conflict({ message: "That e-mail address is already registered." })

export const makeMemory = Effect.sync((): AvatarStoreService => {
  const byId = new Map<string, AvatarRecord>()
  const lower = (s: string) => s.toLowerCase()
  const clash = (candidate: AvatarRecord): Option.Option<Conflict> => {
    for (const other of byId.values()) {
      if (other.id === candidate.id) continue
      if (lower(other.username) === lower(candidate.username)) return Option.some(usernameTaken)
      if (lower(other.email) === lower(candidate.email)) return Option.some(emailTaken)
    }
    return Option.none()
  }
  /** Keeps `next` in place of the record of its id, unless its username or e-mail is another avatar's. */
  const store = (next: AvatarRecord): Effect.Effect<Option.Option<AvatarRecord>, Conflict> =>
    Option.match(clash(next), {
      onSome: Effect.fail,
      onNone: () =>
        Effect.sync(() => {
          byId.set(next.id, next)
          return Option.some(next)
        })
    })
  return {
    insert: (avatar) =>
      Option.match(clash(avatar), {
        onSome: Effect.fail,
        onNone: () => Effect.sync(() => void byId.set(avatar.id, avatar))
      }),
    findById: (id) => Effect.sync(() => Option.fromNullable(byId.get(id))),
    findByLogin: (login) =>
      Effect.sync(() => {
        const l = lower(login)
        for (const a of byId.values()) if (lower(a.username) === l || lower(a.email) === l) return Option.some(a)
        return Option.none()
      }),
    findByEmail: (email) =>
      Effect.sync(() => {
        const l = lower(email)
        for (const a of byId.values()) if (lower(a.email) === l) return Option.some(a)
        return Option.none()
      }),
    list: (page) =>
      Effect.sync(() => {
        const all = [...byId.values()].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        return page === undefined ? all : all.slice(page.offset, page.offset + page.limit)
      }),
    update: (id, patch) =>
      Effect.suspend(() => {
        const current = byId.get(id)
        return current ? store({ ...current, ...patch }) : Effect.succeed(Option.none())
      }),
    countAdmins: () => Effect.sync(() => [...byId.values()].filter((a) => a.avatarType === "Admin" && a.isActive).length),
    revokeTokens: (id, patch, at) =>
      Effect.sync(() => {
        const current = byId.get(id)
        if (!current) return Option.none()
        const next = { ...current, ...patch, tokensValidAfter: nextGeneration(current.tokensValidAfter, at) }
        byId.set(id, next)
        return Option.some(next)
      }),
    confirmPendingEmail: (id, pending, updatedAt) =>
      Effect.suspend(() => {
        const current = byId.get(id)
        if (!current || current.pendingEmail !== pending) return Effect.succeed(Option.none())
        return store({ ...current, ...confirmedEmail(pending, updatedAt) })
      }),
    replacePasswordHash: (id, expected, passwordHash) =>
      Effect.sync(() => {
        const current = byId.get(id)
        if (!current || current.passwordHash !== expected) return false
        byId.set(id, { ...current, passwordHash })
        return true
      })
  }
})

export const layerMemory = Layer.effect(AvatarStore, makeMemory)
