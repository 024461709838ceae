/**
 * What a route declares to be served on the node host's fast lane (FastLane.ts) as well: plain
 * functions over the engine instead of the Effect HTTP pipeline, for the hottest metered calls.
 * The route keeps its contract (body schema, envelope, check, answer shapes); the lane only plans
 * the call synchronously and serves it with promises.
 */
import type { Completions } from "../Capabilities/Completions.ts"
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
}

/** Marks an answer the lane already wrote as a stream. */
export const STREAMED: unique symbol = Symbol("streamed")

/** An admitted call on the lane: the engine call (aborted when the client goes away), and the SSE writer. */
export interface LaneCall {
  /** The engine call for these targets: the caller, the request id, the client's abort. */
  readonly call: (targets: ReadonlyArray<Target>) => Call
  /** Answers with an SSE stream: `opening` first, the frames of each batch of chunks, `trailer` last. */
  readonly stream: (stream: ChatStream, frames: (chunk: StreamChunk) => string, opening?: string, trailer?: string) => Promise<typeof STREAMED>
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
