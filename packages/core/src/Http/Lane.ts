/**
 * What a route declares to be served on the node host's fast lane (FastLane.ts) as well: plain
 * functions over the engine instead of the Effect HTTP pipeline, for the hottest metered calls.
 * The route keeps its contract (body schema, envelope, check, answer shapes); the lane plans the
 * call synchronously and serves it with promises over the engine, or (`onLane`) runs the route's own
 * check and handler Effects on the app's runtime.
 */
import type * as HttpRouter from "@effect/platform/HttpRouter"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Cause, type Effect, Exit, FiberId, Option, Runtime, type Schema, type Scope } from "effect"
import { type CompletionInput, type Completions, needsPreparation, type PlannedCall } from "../Capabilities/Completions.ts"
import type { Catalog } from "../Catalog/Catalog.ts"
import type { Embeddings } from "../Capabilities/Embeddings.ts"
import type { Call, ChatStream, ProviderCalls, StreamChunk } from "../Engine/ProviderCalls.ts"
import type { GatewayError } from "../Errors.ts"
import type { Target } from "../Providers/Chat.ts"
import type { Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"

/** The services lane plans use (built once by the fast lane). */
export interface LaneServices {
  readonly calls: ProviderCalls["Type"]
  readonly catalog: Catalog["Type"]
  readonly completions: Completions["Type"]
  readonly embeddings: Embeddings["Type"]
  readonly routing: Routing["Type"]
  /**
   * Runs an Effect over the app's services at once, when it completes without waiting: its exit;
   * undefined when it would have to wait (it is interrupted then).
   */
  readonly runNow: <A, E>(effect: Effect.Effect<A, E, any>) => Exit.Exit<A, E> | undefined
}

/** Marks an answer the lane already wrote as a stream. */
export const STREAMED: unique symbol = Symbol("streamed")

/** An admitted call on the lane: the engine call (aborted when the client goes away), and the SSE writer. */
export interface LaneCall {
  /** The engine call for these targets: the caller, the request id, the client's abort. */
  readonly call: (targets: ReadonlyArray<Target>) => Call
  /** Answers with an SSE stream: `opening` first, the frames of each batch of chunks, `trailer` last. */
  readonly stream: (stream: ChatStream, frames: (chunk: StreamChunk) => string, opening?: string, trailer?: string) => Promise<typeof STREAMED>
  /**
   * Runs an Effect over the app's services as this call (its request id, on its log lines too),
   * interrupted when the client goes away: its value, or a rejection with its GatewayError.
   */
  readonly run: <A>(effect: Effect.Effect<A, GatewayError, any>) => Promise<A>
}

/** Serves an admitted call: the route's answer (enveloped like the route's), or STREAMED. */
export type Serve = (call: LaneCall) => Promise<unknown>

export interface Lane<B> {
  /**
   * Plans the call before admission, synchronously: its refusal (answered with the day's
   * rate-limit headers and never counted), `undefined` to leave the request to the Effect route (a
   * step that needs Effect services), or how to serve it once admitted.
   */
  readonly plan: (
    services: LaneServices,
    avatar: AvatarRecord,
    body: B,
    headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  ) => GatewayError | undefined | Serve
}

/**
 * The lane plan of a routed chat call (the chat routes, the chat surfaces, the chat-model tasks):
 * the route's (undefined) when the input asks for steps that need Effect services (avatar context,
 * FAHRN, the braid: `needsPreparation`), the routing refusal, or `serve` over the planned call.
 */
export const chatPlan = (
  { completions, routing }: LaneServices,
  avatar: AvatarRecord,
  input: CompletionInput,
  serve: (planned: PlannedCall) => Serve
): GatewayError | undefined | Serve => {
  if (needsPreparation(input)) return undefined
  // A prompt that needs the tokenizer before it has loaded: the route loads it.
  const promptTokens = routing.promptTokensNow(input.messages, input.maxTokens)
  if (promptTokens === undefined) return undefined
  const { messages, request, targets } = completions.plan(avatar, input, input.messages, promptTokens)
  // Array.isArray does not narrow a readonly array's union.
  return Array.isArray(targets) ? serve({ messages, request, targets }) : (targets as Exclude<typeof targets, ReadonlyArray<Target>>)
}

/** `LaneServices.runNow` over a runtime: the exit of an Effect that completes at once; one that has to wait is interrupted. */
export const runNowOn = <R>(runtime: Runtime.Runtime<R>) => {
  const runSyncExit = Runtime.runSyncExit(runtime)
  return <A, E>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined => {
    const exit = runSyncExit(effect)
    const defect = Exit.isFailure(exit) ? Cause.dieOption(exit.cause) : Option.none()
    if (Option.isNone(defect) || !Runtime.isAsyncFiberException(defect.value)) return exit
    defect.value.fiber.unsafeInterruptAsFork(FiberId.none)
    return undefined
  }
}

/** What the check and the handler of a route on `onLane` see: the avatar the call acts for, and the body. */
export interface Given<B> {
  readonly avatar: AvatarRecord
  readonly body: B
}

/**
 * Refuses (at compile time) a check or handler that needs what only the HTTP pipeline provides: the
 * request, its route or its scope. The lane runs them with the app's services alone.
 */
type AppServicesOnly<R> = [Extract<R, HttpServerRequest.HttpServerRequest | HttpRouter.RouteContext | Scope.Scope>] extends [never] ? unknown
  : { readonly "a lane runs the route's Effects with the app's services only": never }

/** The refusal in a check's exit (undefined when it passed); a defect is thrown, as the route's last resort answers it. */
const refusalOf = (exit: Exit.Exit<void, GatewayError>): GatewayError | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return failure.value
  throw Cause.squash(exit.cause)
}

/**
 * The body, check and handler of a route whose check and handler need only the avatar and the
 * body, with a lane that runs those same two Effects on the app's runtime: the route's code,
 * without the HTTP pipeline around it. A check that has to wait (I/O) leaves the request to the
 * route. For handlers that answer JSON (the lane writes the route's envelope around what they return).
 */
export const onLane = <B, RC = never, R = never>(body: Schema.Schema<B, any, never>, parts: {
  readonly check?: (given: Given<B>) => Effect.Effect<void, GatewayError, RC>
  readonly handle: (given: Given<B>) => Effect.Effect<unknown, GatewayError, R>
} & AppServicesOnly<R | RC>) => {
  const lane: Lane<B> = {
    plan: ({ runNow }, avatar, body) => {
      const given = { avatar, body }
      if (parts.check !== undefined) {
        const checked = runNow(parts.check(given))
        if (checked === undefined) return undefined
        const refusal = refusalOf(checked)
        if (refusal !== undefined) return refusal
      }
      return (call) => call.run(parts.handle(given))
    }
  }
  return { body, ...parts, lane }
}
