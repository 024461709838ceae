/**
 * Outgoing mail. Three layers: `layerMemory` (unit tests read `sent`), `layerFile` (the
 * embedded default: logs each mail and writes it to `<dataDir>/mail/`), and the SMTP layer in
 * `Smtp.ts` (nodemailer). A mail one of them did not take is kept and retried by the outbox (Outbox.ts).
 */
import { Context, Data, Effect, FiberRef, HashSet, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { makeDirectory } from "../Directories.ts"

export interface Mail {
  readonly to: string
  readonly subject: string
  readonly text: string
  readonly html: string
}

/** A mail the mail server did not take: the outbox (Outbox.ts) keeps it and tries again. */
export class MailFailed extends Data.TaggedError("MailFailed")<{ readonly message: string }> {}

export interface MailerService {
  /** One attempt to hand the mail over; callers send through the outbox (Outbox.ts), which keeps a failed one. */
  readonly send: (mail: Mail) => Effect.Effect<void, MailFailed>
}

export class Mailer extends Context.Tag("aigw/Mailer")<Mailer, MailerService>() {}

/** The memory mailer, with its outbox exposed for assertions. */
export class MemoryMailbox extends Context.Tag("aigw/MemoryMailbox")<MemoryMailbox, { readonly sent: Array<Mail> }>() {}

export const layerMemory = Layer.effectContext(
  Effect.sync(() => {
    const sent: Array<Mail> = []
    return Context.make(Mailer, { send: (mail) => Effect.sync(() => void sent.push(mail)) }).pipe(
      Context.add(MemoryMailbox, { sent })
    )
  })
)

export const layerFile = (dataDir: string) =>
  Layer.succeed(Mailer, {
    send: (mail) =>
      Effect.gen(function*() {
        const dir = path.join(dataDir, "mail")
        const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, "-")}-${crypto.randomUUID().slice(0, 8)}.eml`)
        yield* Effect.sync(() => {
          // Owner only: each mail holds a live verification or reset link.
          makeDirectory(dir, 0o700)
          fs.writeFileSync(file, `To: ${mail.to}\nSubject: ${mail.subject}\n\n${mail.text}\n`, { mode: 0o600 })
        })
        // The log, not a trace: the text holds one-time links, and a log line in a span is exported with it.
        yield* Effect.logInfo(`mail to ${mail.to}: ${mail.subject} (saved to ${file})\n${mail.text}`).pipe(
          Effect.locallyWith(FiberRef.currentLoggers, HashSet.remove(Logger.tracerLogger))
        )
      })
  })
