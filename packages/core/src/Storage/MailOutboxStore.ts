/**
 * Mails the mail server did not take at once (Mail/Outbox.ts), kept until they are sent or their
 * links have expired, so a mail server that is down for a while, or a restart meanwhile, loses no
 * verification or reset mail. A row leaves the store when it is settled: its text holds a live link.
 */
import { Context, Effect, Layer } from "effect"
import type { Mail } from "../Mail/Mailer.ts"

/**
 * Whether two addresses are one, as the avatar store matches them: case folded by JavaScript over all of
 * Unicode (SQL's `lower()` folds only ASCII on SQLite, and `Ömer@…` stayed queued for a deleted avatar).
 */
export const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

export interface OutboxEntry {
  readonly id: string
  readonly mail: Mail
  readonly createdAt: number
  /** Past this the mail is not sent any more: the link it carries has expired. */
  readonly expiresAt: number
  /** Attempts made so far, counted when the entry is claimed (the first one, made before it was kept, included). */
  readonly attempts: number
  readonly nextAttemptAt: number
  /** Set while a process holds the entry (`claim`); it settles the entry only while it still holds it. */
  readonly lockedUntil: number | null
  readonly lastError: string | null
}

export interface MailOutboxStoreService {
  readonly add: (entry: OutboxEntry) => Effect.Effect<void>
  /** Up to `limit` entries due at `now` and held by no process, each leased until `now + leaseMs` and its attempt counted. */
  readonly claim: (now: number, limit: number, leaseMs: number) => Effect.Effect<ReadonlyArray<OutboxEntry>>
  /** Removes the entry (sent, or given up) if the lease `lockedUntil` is still its own. */
  readonly remove: (id: string, lockedUntil: number) => Effect.Effect<void>
  /** Puts the entry back for a later attempt, if the lease `lockedUntil` is still its own. */
  readonly later: (id: string, lockedUntil: number, nextAttemptAt: number, lastError: string) => Effect.Effect<void>
  /**
   * Removes every entry addressed to `address` (`sameAddress`), held or not: the mails of an avatar
   * deleted meanwhile, whose links died with it. How many were removed.
   */
  readonly discardTo: (address: string) => Effect.Effect<number>
  /** How many entries wait (metrics, tests). */
  readonly size: () => Effect.Effect<number>
}

export class MailOutboxStore extends Context.Tag("aigw/MailOutboxStore")<MailOutboxStore, MailOutboxStoreService>() {}

export const makeMemory = Effect.sync((): MailOutboxStoreService => {
  const entries = new Map<string, OutboxEntry>()
  const held = (id: string, lockedUntil: number) => entries.get(id)?.lockedUntil === lockedUntil
  return {
    add: (entry) => Effect.sync(() => void entries.set(entry.id, entry)),
    claim: (now, limit, leaseMs) =>
      Effect.sync(() => {
        const due = [...entries.values()]
          .filter((e) => e.nextAttemptAt <= now && (e.lockedUntil === null || e.lockedUntil < now))
          .sort((a, b) => a.nextAttemptAt - b.nextAttemptAt)
          .slice(0, limit)
          .map((e) => ({ ...e, lockedUntil: now + leaseMs, attempts: e.attempts + 1 }))
        for (const e of due) entries.set(e.id, e)
        return due
      }),
    remove: (id, lockedUntil) => Effect.sync(() => void (held(id, lockedUntil) && entries.delete(id))),
    later: (id, lockedUntil, nextAttemptAt, lastError) =>
      Effect.sync(() => void (held(id, lockedUntil) && entries.set(id, { ...entries.get(id)!, nextAttemptAt, lastError, lockedUntil: null }))),
    discardTo: (address) =>
      Effect.sync(() => {
        const gone = [...entries.values()].filter((e) => sameAddress(e.mail.to, address))
        for (const e of gone) entries.delete(e.id)
        return gone.length
      }),
    size: () => Effect.sync(() => entries.size)
  }
})

export const layerMemory = Layer.effect(MailOutboxStore, makeMemory)
