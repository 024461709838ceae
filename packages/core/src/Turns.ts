/** The event loop's turns, for work that must let the network in between its pieces. */
import { Effect } from "effect"

/** Resumes in the next turn of the event loop (after its I/O: other requests, health probes, stream chunks). */
export const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
})

/**
 * `work` over `items`, in order, a turn of the event loop for each run of items whose `size` adds up to
 * `perTurn` (the first run at once): a large batch of in-process work does not hold every other request.
 */
export const inTurns = <A, B>(items: ReadonlyArray<A>, size: (item: A) => number, perTurn: number, work: (item: A) => B): Effect.Effect<Array<B>> =>
  Effect.suspend(() => {
    const out: Array<B> = []
    let i = 0
    const run: Effect.Effect<Array<B>> = Effect.suspend(() => {
      let done = 0
      while (i < items.length && (done === 0 || done + size(items[i]!) <= perTurn)) {
        done += size(items[i]!)
        out.push(work(items[i]!))
        i++
      }
      return i < items.length ? Effect.zipRight(nextTurn, run) : Effect.succeed(out)
    })
    return run
  })
