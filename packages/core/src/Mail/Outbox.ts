/**
 * Every mail goes out through here: handed to the Mailer at once, and when the mail server does not
 * take it (down, refusing, silent), kept in storage (MailOutboxStore) and tried again with growing
 * waits until it is taken or the link it carries has expired. A mail server that is down for a while,
 * or a restart meanwhile, loses no verification or reset mail, and the request that sent it answers
 * as it would have (a mail on its way). Sending processes share the store: any of them retries.
 */
import { Context, Effect, Layer } from "effect"
import { claimedRound } from "../Jobs/ClaimedRound.ts"
import { type OutboxEntry, MailOutboxStore } from "../Storage/MailOutboxStore.ts"
import { backoffMs } from "../Webhooks/Delivery.ts"
import { type Mail, Mailer } from "./Mailer.ts"

/** The first retry's wait; each later one three times longer (at most an hour), as webhook deliveries wait. */
export const RETRY_BASE_MS = 5_000

/** Mails retried at once by one process. */
export const MAILS_AT_ONCE = 2

/** A claimed mail's lease: longer than an attempt may take (Smtp.ts ATTEMPT_TIMEOUT_MS). */
const LEASE_MS = 60_000

const makeService = Effect.gen(function*() {
  const mailer = yield* Mailer
  const store = yield* MailOutboxStore

  /**
   * Sends `mail` now, or keeps it for a retry when the mail server did not take it; never fails.
   * `keepMs`: how long it is worth sending (its link's lifetime).
   */
  const send = (mail: Mail, keepMs: number) =>
    Effect.catchTag(mailer.send(mail), "MailFailed", (failed) =>
      Effect.gen(function*() {
        const now = Date.now()
        yield* store.add({
          id: crypto.randomUUID(),
          mail,
          createdAt: now,
          expiresAt: now + keepMs,
          attempts: 1,
          nextAttemptAt: now + backoffMs(1, RETRY_BASE_MS),
          lockedUntil: null,
          lastError: failed.message
        })
        yield* Effect.logWarning(`mail to ${mail.to} (${mail.subject}) not taken by the mail server: ${failed.message}; kept in the outbox and retried`)
      }))

  const claim = (n: number) => store.claim(Date.now(), n, LEASE_MS)

  /** One more attempt for a claimed mail: sent and removed, given up once expired, or put back for later. */
  const retry = (entry: OutboxEntry) =>
    Effect.gen(function*() {
      const lease = entry.lockedUntil!
      const outcome = yield* Effect.either(mailer.send(entry.mail))
      if (outcome._tag === "Right") {
        yield* store.remove(entry.id, lease)
        return yield* Effect.logInfo(`mail to ${entry.mail.to} (${entry.mail.subject}) sent at attempt ${entry.attempts}`)
      }
      const next = Date.now() + backoffMs(entry.attempts, RETRY_BASE_MS)
      if (next >= entry.expiresAt) {
        yield* store.remove(entry.id, lease)
        return yield* Effect.logError(
          `mail to ${entry.mail.to} (${entry.mail.subject}) given up after ${entry.attempts} attempts: its link expires before the next; last error: ${outcome.left.message}`
        )
      }
      yield* store.later(entry.id, lease, next, outcome.left.message)
    })

  /** The mails due now, retried; how many (the Lambda host's scheduled rounds). */
  const drain = claimedRound(claim, retry, MAILS_AT_ONCE)

  /** Drops the mails kept for `addresses` (an avatar deleted: every link they carry died with it). */
  const discardTo = (addresses: ReadonlyArray<string>) =>
    Effect.forEach(addresses, (address) =>
      Effect.flatMap(store.discardTo(address), (n) =>
        n === 0 ? Effect.void : Effect.logInfo(`${n} mail(s) to ${address} dropped from the outbox: their avatar was deleted`)), { discard: true })

  return { send, claim, retry, drain, discardTo }
})

export class MailOutbox extends Context.Tag("aigw/MailOutbox")<MailOutbox, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(MailOutbox, makeService)
