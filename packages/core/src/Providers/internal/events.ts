/**
 * Upstream SSE on the hot path. `nodeSseEvents`: a node stream's bytes -> SSE events in one stage
 * (parse and idle timeout included). `decodeEach`: events -> adapter events, one pass per chunk.
 * Both replace chains of Effect stream stages whose per-stream and per-event costs dominated a
 * streamed completion (docs/performance.md).
 */
import type { Readable } from "node:stream"
import { Chunk, Effect, Stream } from "effect"
import { protocolError, UpstreamError } from "../UpstreamError.ts"
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
  Stream.async<SseEvent, E>((emit) => {
    const parser = makeSseParser()
    let timer: ReturnType<typeof setTimeout> | undefined
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
        void emit.fail(onIdle())
      }, idleMs)
    }
    const onData = (bytes: Uint8Array) => {
      const events = parser.push(bytes)
      if (events.length === 0) return
      arm()
      void emit.chunk(Chunk.unsafeFromArray(events))
    }
    const onEnd = () => {
      stop()
      const events = parser.end()
      if (events.length > 0) void emit.chunk(Chunk.unsafeFromArray(events))
      void emit.end()
    }
    const onFail = (e: unknown) => {
      stop()
      void emit.fail(onError(e))
    }
    arm()
    body.on("data", onData)
    body.once("end", onEnd)
    body.once("error", onFail)
    return Effect.sync(() => {
      stop()
      body.destroy()
    })
  }, "unbounded")

/**
 * Decoding of an upstream SSE stream into adapter events, one pass per chunk of events: `decode`
 * turns one event's JSON payload into stream events, or returns an UpstreamError, which ends the
 * stream after the events decoded before it (as a failing element of `Stream.mapEffect` +
 * `Stream.flatMap` did, at the cost of an Effect and an inner stream per event: about 0.2 ms of CPU
 * per event; docs/performance.md).
 */

const stop: unique symbol = Symbol("stop")

export const decodeEach = <A, E>(
  provider: string,
  events: Stream.Stream<SseEvent, E>,
  decode: (data: any, event: SseEvent) => ReadonlyArray<A> | UpstreamError
): Stream.Stream<A, E | UpstreamError> =>
  Stream.suspend(() => {
    let failure: UpstreamError | undefined
    return events.pipe(
      Stream.mapChunks((chunk) => {
        const out: Array<A | typeof stop> = []
        for (const event of chunk) {
          let data: unknown
          try {
            data = JSON.parse(event.data)
          } catch {
            failure = protocolError(provider, `bad JSON in stream: ${event.data.slice(0, 100)}`)
            out.push(stop)
            break
          }
          const decoded = decode(data, event)
          if (decoded instanceof UpstreamError) {
            failure = decoded
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
