/** The SMTP mailer (nodemailer): one attempt per send, bounded in time; the outbox (Outbox.ts) keeps a failed mail and tries again. */
import { Duration, Effect, Layer, Redacted } from "effect"
import { MailFailed, Mailer } from "./Mailer.ts"

/** How long one attempt may take: a mail server that accepts the connection and never answers must not hold the request that sends. */
export const ATTEMPT_TIMEOUT_MS = 15_000

export const layer = (options: { readonly url: Redacted.Redacted; readonly from: string }) =>
  Layer.scoped(
    Mailer,
    Effect.gen(function*() {
      const transport = yield* Effect.acquireRelease(
        // nodemailer is imported only where SMTP is configured: memory the other mailers do not carry.
        Effect.promise(() => import("nodemailer")).pipe(
          Effect.map((nodemailer) => nodemailer.default.createTransport(Redacted.value(options.url)))
        ),
        (t) => Effect.sync(() => t.close())
      )
      return Mailer.of({
        send: (mail) =>
          Effect.tryPromise({
            try: () => transport.sendMail({ from: options.from, ...mail }),
            catch: (error) => new MailFailed({ message: String((error as Error)?.message ?? error) })
          }).pipe(
            Effect.timeoutFail({ duration: Duration.millis(ATTEMPT_TIMEOUT_MS), onTimeout: () => new MailFailed({ message: `no answer within ${ATTEMPT_TIMEOUT_MS} ms` }) }),
            Effect.tap(() => Effect.logDebug(`mail sent to ${mail.to}: ${mail.subject}`)),
            Effect.asVoid
          )
      })
    })
  )
