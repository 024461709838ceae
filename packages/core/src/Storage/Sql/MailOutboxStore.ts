import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer } from "effect"
import { MailOutboxStore, type OutboxEntry, sameAddress } from "../MailOutboxStore.ts"
import { claimAttempts, num, numOrNull } from "./util.ts"

const entryFromRow = (r: any): OutboxEntry => ({
  id: r.id,
  mail: { to: r.to_address, subject: r.subject, text: r.text_body, html: r.html_body },
  createdAt: num(r.created_at),
  expiresAt: num(r.expires_at),
  attempts: Number(r.attempts),
  nextAttemptAt: num(r.next_attempt_at),
  lockedUntil: numOrNull(r.locked_until),
  lastError: r.last_error ?? null
})

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return MailOutboxStore.of({
    add: (e) =>
      sql`INSERT INTO mail_outbox ${
        sql.insert({
          id: e.id,
          to_address: e.mail.to,
          subject: e.mail.subject,
          text_body: e.mail.text,
          html_body: e.mail.html,
          created_at: e.createdAt,
          expires_at: e.expiresAt,
          attempts: e.attempts,
          next_attempt_at: e.nextAttemptAt,
          locked_until: e.lockedUntil,
          last_error: e.lastError
        })
      }`.pipe(Effect.asVoid, Effect.orDie),
    claim: (now, limit, leaseMs) =>
      claimAttempts(sql, "mail_outbox", sql`1 = 1`, now, limit, leaseMs).pipe(Effect.map((rows) => rows.map(entryFromRow)), Effect.orDie),
    remove: (id, lockedUntil) => sql`DELETE FROM mail_outbox WHERE id = ${id} AND locked_until = ${lockedUntil}`.pipe(Effect.asVoid, Effect.orDie),
    later: (id, lockedUntil, nextAttemptAt, lastError) =>
      sql`UPDATE mail_outbox SET next_attempt_at = ${nextAttemptAt}, last_error = ${lastError}, locked_until = NULL
          WHERE id = ${id} AND locked_until = ${lockedUntil}`.pipe(Effect.asVoid, Effect.orDie),
    // Matched in JavaScript (`sameAddress`): the outbox holds only mails not yet taken by the mail server.
    discardTo: (address) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ id: string; to_address: string }>`SELECT id, to_address FROM mail_outbox`
        const ids = rows.filter((r) => sameAddress(r.to_address, address)).map((r) => r.id)
        if (ids.length === 0) return 0
        return (yield* sql`DELETE FROM mail_outbox WHERE ${sql.in("id", ids)} RETURNING id`).length
      }).pipe(Effect.orDie),
    size: () => sql`SELECT COUNT(*) AS n FROM mail_outbox`.pipe(Effect.map((rows) => Number((rows[0] as any).n)), Effect.orDie)
  })
})

export const layer = Layer.effect(MailOutboxStore, make)
