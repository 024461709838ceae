/**
 * Work a request starts but does not wait for: what would make an answer's time tell an outsider
 * something, such as the mail of forgot-password and resend (an answer that waited for it would take
 * longer exactly when the address has an account). Long-lived hosts run it after the answer, in the
 * layer's scope: a graceful stop waits up to 10 s for what is under way. The Lambda host runs it
 * inline (a function's process may be frozen once it answered), as does a composition without this
 * service (tests on memory layers).
 */
import { Context, Effect, FiberSet, Layer } from "effect"

export interface AfterAnswerService {
  /** Runs `work`; after the answer, its failure is logged (there is no request left to fail). */
  readonly run: <E>(work: Effect.Effect<void, E>) => Effect.Effect<void, E>
}

export class AfterAnswer extends Context.Tag("aigw/AfterAnswer")<AfterAnswer, AfterAnswerService>() {}

/** Work after the answer, in this layer's scope: released before the services the work uses (the mailer) when built above them. */
export const layerForked = Layer.scoped(
  AfterAnswer,
  Effect.gen(function*() {
    const fibers = yield* FiberSet.make<void, never>()
    // Added after the set's own finalizer, so it runs first: what is under way finishes, up to 10 s, before the rest is interrupted.
    yield* Effect.addFinalizer(() => FiberSet.awaitEmpty(fibers).pipe(Effect.timeout("10 seconds"), Effect.ignore))
    return AfterAnswer.of({
      run: (work) => Effect.asVoid(FiberSet.run(fibers, Effect.catchAllCause(work, (cause) => Effect.logError("work after the answer failed", cause))))
    })
  })
)

/** Work inline, before the answer. */
export const inline: AfterAnswerService = { run: (work) => work }

export const layerInline = Layer.succeed(AfterAnswer, inline)
