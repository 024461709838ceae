/**
 * A wire's exchanges with one target over the real transport, without routing, fallback or usage
 * (those are the engine's, tested through the HTTP routes): what the adapter conformance tests need.
 * Results come as Either-like values so a test can assert on failures without try/catch.
 */
import type { Either } from "effect"
import { Either as E } from "effect"
import type { ChatRequest, ChatResult, StreamEvent, Target } from "../../src/Providers/Chat.ts"
import type { EmbeddingResult } from "../../src/Providers/Embeddings.ts"
import { postJsonNow, postSseNow, streamBroke } from "../../src/Providers/internal/http.ts"
import { makeSseParser } from "../../src/Providers/internal/sse.ts"
import { authorize, servedBy } from "../../src/Providers/Registry.ts"
import { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

const settle = <A>(run: () => Promise<A | UpstreamError>): Promise<Either.Either<A, UpstreamError>> =>
  run().then(
    (a) => (a instanceof UpstreamError ? E.left(a) : E.right(a)),
    (e) => {
      if (e instanceof UpstreamError) return E.left(e)
      throw e
    }
  )

/** One plain chat exchange through the target family's wire. */
export const complete = (target: Target, request: ChatRequest): Promise<Either.Either<ChatResult, UpstreamError>> =>
  settle(async () => {
    const wire = servedBy(target.provider).chat!
    const { body, headers, url } = await authorize(target.provider, wire.request(target, request, false), new Cancel())
    return wire.result(target.provider.id, await postJsonNow(target.provider.id, url, headers, body, new Cancel()))
  })

/** A streamed chat exchange: every decoded event until the stream completes, or its failure. */
export const collect = (target: Target, request: ChatRequest): Promise<Either.Either<ReadonlyArray<StreamEvent>, UpstreamError>> =>
  settle(async () => {
    const provider = target.provider.id
    const wire = servedBy(target.provider).chat!
    const { body, headers, url } = await authorize(target.provider, wire.request(target, request, true), new Cancel())
    const stream = await postSseNow(provider, url, headers, body, new Cancel())
    const parser = wire.framing?.() ?? makeSseParser()
    const decode = wire.events(provider)
    const events: Array<StreamEvent> = []
    const take = (chunk: Uint8Array | undefined): "done" | UpstreamError | undefined => {
      for (const event of chunk === undefined ? parser.end() : parser.push(chunk)) {
        const decoded = decode(event)
        if (decoded === null) return "done"
        if (decoded instanceof UpstreamError) return decoded
        events.push(...decoded)
      }
      return undefined
    }
    try {
      for await (const chunk of stream) {
        const stop = take(chunk)
        if (stop instanceof UpstreamError) return stop
        if (stop === "done") return events
      }
    } catch (e) {
      return streamBroke(provider)(e)
    } finally {
      stream.destroy()
    }
    const last = take(undefined)
    return last instanceof UpstreamError ? last : events
  })

/** One embeddings exchange through the target's embedding wire. */
export const embed = (target: Target, texts: ReadonlyArray<string>): Promise<Either.Either<EmbeddingResult, UpstreamError>> =>
  settle(async () => {
    const wire = servedBy(target.provider).embeddings!
    const { body, headers, url } = await authorize(target.provider, wire.request(target, texts), new Cancel())
    return wire.result(target.provider.id, await postJsonNow(target.provider.id, url, headers, body, new Cancel()), texts.length)
  })
