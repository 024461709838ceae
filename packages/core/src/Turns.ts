/** The event loop's turns, for work that must let the network in between its pieces. */
import { Effect } from "effect"

/** Resumes in the next turn of the event loop (after its I/O: other requests, health probes, stream chunks). */
export const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
})

/**
 * Does `work` for the items from `i` on whose `size` adds up to `perTurn` (at least one), into `out`:
 * the index after them.
 */
const oneTurn = <A, B>(items: ReadonlyArray<A>, size: (item: A) => number, perTurn: number, work: (item: A) => B, out: Array<B>, i: number): number => {
  let done = 0
  while (i < items.length && (done === 0 || done + size(items[i]!) <= perTurn)) {
    done += size(items[i]!)
    out.push(work(items[i]!))
    i++
  }
  return i
}

/**
 * `work` over `items`, in order, a turn of the event loop for each run of items whose `size` adds up to
 * `perTurn` (the first run at once): a large batch of in-process work does not hold every other request.
 */
export const inTurns = <A, B>(items: ReadonlyArray<A>, size: (item: A) => number, perTurn: number, work: (item: A) => B): Effect.Effect<Array<B>> =>
  Effect.suspend(() => {
    const out: Array<B> = []
    let i = 0
    const run: Effect.Effect<Array<B>> = Effect.suspend(() => {
      i = oneTurn(items, size, perTurn, work, out, i)
      return i < items.length ? Effect.zipRight(nextTurn, run) : Effect.succeed(out)
    })
    return run
  })

/** `inTurns` as a promise, for the fast lane's handlers (which run no fiber): settled at once when the items fit in one turn. */
export const inTurnsPromise = async <A, B>(items: ReadonlyArray<A>, size: (item: A) => number, perTurn: number, work: (item: A) => B): Promise<Array<B>> => {
  const out: Array<B> = []
  let i = oneTurn(items, size, perTurn, work, out, 0)
  while (i < items.length) {
    await new Promise<void>((resume) => setImmediate(resume))
    i = oneTurn(items, size, perTurn, work, out, i)
  }
  return out
}
