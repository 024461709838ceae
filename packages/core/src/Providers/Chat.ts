/**
 * The provider-neutral chat model: what the gateway sends to any adapter and what it gets
 * back. Adapters translate this to and from their wire format.
 */
import type { ConfiguredProvider, ModelEntry } from "../Catalog/Catalog.ts"
import type { SseEvent } from "./internal/sse.ts"
import type { UpstreamError } from "./UpstreamError.ts"

export interface ToolCall {
  readonly id: string
  readonly name: string
  /** JSON text of the arguments, as OpenAI sends it. */
  readonly arguments: string
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly content: string
  /** Assistant messages that called tools. */
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  /** Tool results: the id of the call they answer. */
  readonly toolCallId?: string | undefined
  /** Tool results: the tool's name (needed by Gemini, which has no call ids). */
  readonly name?: string | undefined
}

export interface ToolDefinition {
  readonly name: string
  readonly description?: string | undefined
  /** JSON Schema of the arguments. */
  readonly parameters: Record<string, unknown>
}

export interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools?: ReadonlyArray<ToolDefinition> | undefined
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error"

export interface TokenUsage {
  readonly promptTokens: number
  readonly completionTokens: number
}

export interface ChatResult {
  readonly content: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly finishReason: FinishReason
  /** None when the upstream reported no usage (the gateway then estimates). */
  readonly usage: TokenUsage | undefined
}

/** Events of a streamed answer, already normalised. */
export type StreamEvent =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "ToolCallDelta"; readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string }
  | { readonly _tag: "Finish"; readonly reason: FinishReason }
  | { readonly _tag: "Usage"; readonly usage: Partial<TokenUsage> }

/** A call target: the provider (with credentials) and the catalogue model. */
export interface Target {
  readonly provider: ConfiguredProvider
  readonly model: ModelEntry
}

/** The upstream HTTP request of a call: POSTed as JSON. */
export interface WireRequest {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: unknown
}

/**
 * A wire-protocol family as data and pure functions: how a call becomes an upstream request and
 * how answers and stream events come back. The engine (Engine/ProviderCalls.ts) runs every family
 * over the one transport.
 */
export interface ChatWire {
  readonly request: (target: Target, request: ChatRequest, stream: boolean) => WireRequest
  /** A 2xx JSON answer -> the result, or a protocol error. */
  readonly result: (provider: string, body: any) => ChatResult | UpstreamError
  /**
   * A decoder for one stream (it may keep state across events): an SSE event -> stream events,
   * an UpstreamError (the stream fails after what came before), or null (the stream is complete).
   */
  readonly events: (provider: string) => (event: SseEvent) => ReadonlyArray<StreamEvent> | UpstreamError | null
}
