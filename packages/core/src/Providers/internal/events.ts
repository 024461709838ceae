/**
 * Upstream SSE on the hot path. `nodeSseEvents`: a node stream's bytes -> SSE events in one stage
 * (parse and idle timeout included). `decodeEach`: events -> adapter events, one pass per chunk.
 * Both replace chains of Effect stream stages whose per-stream and per-event costs dominated a
 * streamed completion (docs/performance.md).
 */
import type { Readable } from "node:stream"
import { Chunk, Effect, HashSet, Option, Stream } from "effect"
import { UpstreamError } from "../UpstreamError.ts"
import { makeSseParser, type SseEvent } from "./sse.ts"

/**
 * The SSE events of a node byte stream, as `parseSse(bytes) |> Stream.timeoutFail(onIdle, idleMs)`
 * did with a web stream: fails with `onIdle()` when no event completes for `idleMs` (comments and
 * partial lines do not count), with `onError(e)` when the stream breaks. Ending the stream
 * destroys `body`.
 */
export const nodeSseEvents = <E>(
  body: Readable,
  idleMs: number,
  onIdle: () => E,
  onError: (e: unknown) => E
): Stream.Stream<SseEvent, E> =>
  Stream.suspend(() => {
    // Events wait in `ready` until pulled; a pull with nothing ready parks in `waiting`. A pull-based
    // source rather than Stream.async: no queue, no fiber per emitted chunk, no acquireRelease.
    const parser = makeSseParser()
    const ready: Array<Array<SseEvent>> = []
    let ended = false
    let failure: E | undefined
    let waiting: ((effect: Effect.Effect<Chunk.Chunk<SseEvent>, Option.Option<E>>) => void) | undefined
    let timer: ReturnType<typeof setTimeout> | undefined
    const next = (): Effect.Effect<Chunk.Chunk<SseEvent>, Option.Option<E>> | undefined => {
      if (ready.length > 0) return Effect.succeed(Chunk.unsafeFromArray(ready.shift()!))
      if (failure !== undefined) return Effect.fail(Option.some(failure))
      if (ended) return Effect.fail(Option.none())
      return undefined
    }
    const wake = () => {
      const resume = waiting
      const effect = resume && next()
      if (resume && effect) {
        waiting = undefined
        resume(effect)
      }
    }
    const stop = () => {
      clearTimeout(timer)
      body.off("data", onData)
      body.off("end", onEnd)
      body.off("error", onFail)
    }
    const arm = () => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        stop()
        failure = onIdle()
        wake()
      }, idleMs)
    }
    const onData = (bytes: Uint8Array) => {
      const events = parser.push(bytes)
      if (events.length === 0) return
      arm()
      ready.push(events)
      wake()
    }
    const onEnd = () => {
      stop()
      const events = parser.end()
      if (events.length > 0) ready.push(events)
      ended = true
      wake()
    }
    const onFail = (e: unknown) => {
      stop()
      failure = onError(e)
      wake()
    }
    arm()
    body.on("data", onData)
    body.once("end", onEnd)
    body.once("error", onFail)
    // A body that failed before anyone listened keeps its error (nodeFetch's `bounded`).
    if (body.errored) onFail(body.errored)
    const pull = Effect.async<Chunk.Chunk<SseEvent>, Option.Option<E>>((resume) => {
      const effect = next()
      if (effect) return resume(effect)
      waiting = resume
      return Effect.sync(() => {
        waiting = undefined
      })
    })
    return Stream.repeatEffectChunkOption(pull).pipe(
      // A consumer that simply stopped (its last event read) lets the connection go back to the
      // pool; an interrupted (client gone) or failed stream cuts it.
      Stream.ensuring(Effect.descriptorWith((fiber) =>
        Effect.sync(() => {
          stop()
          if (HashSet.size(fiber.interruptors) > 0 || failure !== undefined) body.destroy()
          else release(body)
        })
      ))
    )
  })

/** How long a finished stream's remaining bytes may take before its connection is dropped. */
const DRAIN_MS = 5_000

/**
 * Lets a stream that is complete for its reader (its last event read) finish on the wire, so its
 * keep-alive connection goes back to the pool instead of being closed (and re-opened by the next
 * call); one that does not end soon is destroyed.
 */
export const release = (body: Readable) => {
  if (body.readableEnded || body.destroyed) return
  const timer = setTimeout(() => body.destroy(), DRAIN_MS)
  body.once("end", () => clearTimeout(timer))
  body.once("close", () => clearTimeout(timer))
  body.resume()
}

/**
 * Decoding of an upstream SSE stream into adapter events, one pass per chunk of events: `decode`
 * turns one event into stream events, or returns an UpstreamError, which ends the stream after the
 * events decoded before it, or null, which completes it (as `Stream.mapEffect` + `Stream.flatMap`
 * + `Stream.takeWhile` did, at the cost of an Effect and an inner stream per event: about 0.2 ms
 * of CPU per event; docs/performance.md).
 */

const stop: unique symbol = Symbol("stop")

export const decodeEach = <A, E>(
  events: Stream.Stream<SseEvent, E>,
  decode: (event: SseEvent) => ReadonlyArray<A> | UpstreamError | null
): Stream.Stream<A, E | UpstreamError> =>
  Stream.suspend(() => {
    let failure: UpstreamError | undefined
    return events.pipe(
      Stream.mapChunks((chunk) => {
        const out: Array<A | typeof stop> = []
        for (const event of chunk) {
          const decoded = decode(event)
          if (decoded === null || decoded instanceof UpstreamError) {
            if (decoded !== null) failure = decoded
            out.push(stop)
            break
          }
          for (const a of decoded) out.push(a)
        }
        return Chunk.unsafeFromArray(out)
      }),
      Stream.takeWhile((a): a is A => a !== stop),
      Stream.concat(Stream.suspend(() => (failure ? Stream.fail(failure) : Stream.empty)))
    )
  })
