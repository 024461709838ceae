/** The SMTP mailer (nodemailer). A failed send is logged and retried a few times, never lost silently. */
import { Effect, Layer, Redacted, Schedule } from "effect"
import { Mailer } from "./Mailer.ts"

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
          Effect.tryPromise(() => transport.sendMail({ from: options.from, ...mail })).pipe(
            Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.compose(Schedule.recurs(3)))),
            Effect.tap(() => Effect.logDebug(`mail sent to ${mail.to}: ${mail.subject}`)),
            Effect.catchAll((error) => Effect.logError(`mail to ${mail.to} failed: ${String(error.error)}`))
          )
      })
    })
  )
