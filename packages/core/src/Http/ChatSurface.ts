/**
 * A chat API in a vendor's format (Anthropic Messages; OpenAI Chat Completions has the same shape)
 * served over the gateway's one chat call: the surface only says how its body becomes the neutral
 * input and how the answer and the stream's chunks are written back. The check before admission,
 * the Effect handler and the fast-lane plan (Lane.ts) are built here once from those, so both paths
 * answer alike.
 */
import { Effect } from "effect"
import { type CompletionInput, type CompletionResult, Completions, type StreamChunk } from "../Capabilities/Completions.ts"
import { BadRequest, type GatewayError, isGatewayError } from "../Errors.ts"
import type { ChatStream } from "../Engine/ProviderCalls.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { streamAnswer } from "./CompletionRoutes.ts"
import { chatPlan, type Lane } from "./Lane.ts"

/**
 * One streamed answer: the first event (sent as soon as the upstream accepted the call), the events
 * of each chunk, how an event is framed, and the last frame.
 */
export interface SurfaceStream<E> {
  readonly opening?: E
  readonly convert: (chunk: StreamChunk) => ReadonlyArray<E>
  readonly frame: (event: E) => string
  readonly trailer?: string
}

/** A stream's text, as both paths write it: the opening's frame, the frames of each chunk, the trailer. */
export interface StreamText {
  readonly frames: (chunk: StreamChunk) => string
  readonly opening: string
  readonly trailer: string
}

export const streamText = <E>({ convert, frame, opening, trailer = "" }: SurfaceStream<E>): StreamText => ({
  frames: (chunk) => convert(chunk).map(frame).join(""),
  opening: opening === undefined ? "" : frame(opening),
  trailer
})

/** A request's headers (lower-case names), as node and the Effect platform give them. */
export type RequestHeaders = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** A header's value, repeated values joined with commas (as HTTP allows), or undefined. */
export const headerOf = (headers: RequestHeaders, name: string): string | undefined => {
  const value = headers[name]
  return value === undefined ? undefined : typeof value === "string" ? value : value.join(",")
}

export interface ChatSurface<B, E> {
  /** The body (and the request's headers) -> the call's input, or the 400 naming what it cannot carry. */
  readonly inputOf: (body: B, headers: RequestHeaders) => CompletionInput | BadRequest
  readonly streamed: (body: B) => boolean
  readonly newId: () => string
  /** The answer in the surface's format, or the error of an answer it cannot express. */
  readonly answer: (id: string, result: CompletionResult) => unknown
  /** A fresh converter for one stream, of the stream the call opened (its target's model is an `auto` call's too). */
  readonly stream: (id: string, body: B, opened: ChatStream) => SurfaceStream<E>
}

const failOn = <A>(value: A) => (isGatewayError(value) ? Effect.fail(value as GatewayError) : Effect.succeed(value))

interface Surfaced<B> {
  readonly avatar: AvatarRecord
  readonly body: B
  readonly request: { readonly headers: RequestHeaders }
}

/** The route parts of a chat surface: `check`, `handle` and `lane` of its `authed` declaration. */
export const chatSurface = <B, E>(s: ChatSurface<B, E>) => {
  // The input is made before the effects are built, so that their closures hold the input and not
  // the platform request. On the Effect path a finished handler's generator survives the young
  // generation's collections (what keeps it was not found), and through the request it took the
  // whole exchange into the old generation (docs/performance.md, "Issue 18, eighteenth session").
  const check = ({ avatar, body, request }: Surfaced<B>) => {
    const input = s.inputOf(body, request.headers)
    return input instanceof BadRequest ? Effect.fail(input) : Effect.flatMap(Completions, (c) => c.check(avatar, input))
  }

  const handle = ({ avatar, body, request }: Surfaced<B>) => {
    const input = s.inputOf(body, request.headers)
    if (input instanceof BadRequest) return Effect.fail(input)
    return Effect.gen(function*() {
      const completions = yield* Completions
      const id = s.newId()
      if (!s.streamed(body)) return yield* failOn(s.answer(id, yield* completions.complete(avatar, input)))
      return yield* streamAnswer(completions.stream(avatar, input), (opened) => streamText(s.stream(id, body, opened)))
    })
  }

  /** The fast-lane plan: the same input, routing and answer shapes as `handle`. */
  const lane: Lane<B> = {
    plan: (services, avatar, body, headers) => {
      const input = s.inputOf(body, headers)
      if (input instanceof BadRequest) return input
      const { calls } = services
      return chatPlan(services, avatar, input, ({ messages, request, targets }) => {
        const id = s.newId()
        if (!s.streamed(body)) {
          return async (lane) => {
            const answer = s.answer(id, await calls.complete({ ...lane.call(targets), messages, request }))
            if (isGatewayError(answer)) throw answer
            return answer
          }
        }
        return async (lane) => {
          const opened = await calls.openStream({ ...lane.call(targets), messages, request })
          const text = streamText(s.stream(id, body, opened))
          return lane.stream(opened, text.frames, text.opening, text.trailer)
        }
      })
    }
  }

  return { check, handle, lane }
}
