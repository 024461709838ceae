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
  /**
   * An opaque signature the upstream gave with the call and wants back with it in the history
   * (Gemini's `thoughtSignature`, required by Gemini 3 during tool use). Only the Gemini wire sends
   * it back: it means nothing to another model.
   */
  readonly signature?: string | undefined
}

/**
 * A part of a message that is more than text: an image (an https or `data:` URL), or a part of a
 * type aigw does not translate (`raw`, e.g. OpenAI's `input_audio` or `file`), which
 * OpenAI-compatible wires forward unchanged and other wires refuse by name.
 */
export type ContentPart =
  | { readonly type: "text"; readonly text: string; readonly cache?: CacheHint | undefined }
  | { readonly type: "image"; readonly url: string; readonly detail?: string | undefined; readonly cache?: CacheHint | undefined }
  | { readonly type: "raw"; readonly part: Readonly<Record<string, unknown>> }

/**
 * A message's text parts as the one text the gateway carries: back to back, as Anthropic defines
 * adjacent text blocks (one text, split: `"Hi "` and `"there"`) and its SDKs join them. Words of two
 * parts run together unless a part ends or starts with a space or line break, as they would in one block.
 */
export const joinedText = (texts: ReadonlyArray<string>): string => texts.join("")

/**
 * A prompt-caching breakpoint: the prompt up to here may be cached (Anthropic's `cache_control`).
 * It never changes the answer: wires of upstreams with explicit breakpoints send it, the others
 * (OpenAI caches prompts by itself, Gemini only through explicit caches) honour it by sending nothing.
 */
export interface CacheHint {
  readonly ttl?: "5m" | "1h" | undefined
}

/**
 * A model's reasoning as the upstream returned it, kept so it can go back in a later assistant
 * turn: text with its opaque signature, or a redacted block's opaque data (Anthropic's `thinking`
 * and `redacted_thinking` blocks). Only the wire that produced the signature can carry it back.
 */
export type ReasoningPart =
  | { readonly type: "thinking"; readonly text: string; readonly signature: string }
  | { readonly type: "redacted_thinking"; readonly data: string }

/** Extended reasoning before the answer: off, a token budget, or the model's own choice (`adaptive`). */
export interface ReasoningOption {
  readonly mode: "enabled" | "disabled" | "adaptive"
  /** With mode "enabled": the most tokens the reasoning may use. */
  readonly budgetTokens?: number | undefined
}

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "tool"
  /** The message's text (its text parts joined): what token counts, classifiers and text-only wires use. */
  readonly content: string
  /** The message in parts, in order, when it holds more than text (images, raw parts). */
  readonly parts?: ReadonlyArray<ContentPart> | undefined
  /** Assistant messages that called tools. */
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  /** Tool results: the id of the call they answer. */
  readonly toolCallId?: string | undefined
  /** Tool results: the tool's name (needed by Gemini, which has no call ids). */
  readonly name?: string | undefined
  /** Message fields of the OpenAI format that aigw does not map: forwarded by OpenAI-compatible wires, refused by others. */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
  /** A cache breakpoint after the message's last block (tool results and assistant turns). */
  readonly cache?: CacheHint | undefined
  /** Assistant messages: the reasoning that preceded them, returned as it came. */
  readonly reasoning?: ReadonlyArray<ReasoningPart> | undefined
  /** Tool results: the tool failed (Anthropic's `is_error`); sent by wires that carry it (`carries.toolErrors`), refused by the others. */
  readonly toolError?: true | undefined
}

export interface ToolDefinition {
  readonly name: string
  readonly description?: string | undefined
  /** JSON Schema of the arguments. */
  readonly parameters: Record<string, unknown>
  /** Fields of an OpenAI tool's `function` beyond these (e.g. `strict`): OpenAI-compatible wires send them, others refuse them by name. */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
  /** A cache breakpoint after this tool's definition. */
  readonly cache?: CacheHint | undefined
}

/** The answer's format: free text, any JSON object, or JSON that follows a schema. */
export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | {
    readonly type: "json_schema"
    readonly name: string
    readonly schema: Readonly<Record<string, unknown>>
    readonly description?: string | undefined
    readonly strict?: boolean | undefined
  }

/** Whether and which tool the model must call. */
export type ToolChoice = "auto" | "none" | "required" | { readonly name: string }

export interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools?: ReadonlyArray<ToolDefinition> | undefined
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  readonly topP?: number | undefined
  readonly stop?: ReadonlyArray<string> | undefined
  readonly seed?: number | undefined
  readonly frequencyPenalty?: number | undefined
  readonly presencePenalty?: number | undefined
  readonly responseFormat?: ResponseFormat | undefined
  readonly toolChoice?: ToolChoice | undefined
  readonly parallelToolCalls?: boolean | undefined
  /** Sample from the k most likely tokens only (Anthropic, Gemini). */
  readonly topK?: number | undefined
  readonly reasoning?: ReasoningOption | undefined
  /** Anthropic beta features (the `anthropic-beta` header): sent to Anthropic upstreams only, being about their features. */
  readonly anthropicBeta?: string | undefined
  /**
   * Request fields of the OpenAI format that aigw does not map (logprobs, logit_bias,
   * reasoning_effort, metadata, ...): OpenAI-compatible wires forward them unchanged, other wires
   * refuse the call naming the field (`ChatWire.unsupported`).
   */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
}

/** The request options beyond model, messages, tools, temperature and max tokens. */
export type ChatOptions = Omit<ChatRequest, "model" | "messages" | "tools" | "temperature" | "maxTokens">

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error"

export interface TokenUsage {
  readonly promptTokens: number
  readonly completionTokens: number
  /** Prompt tokens written to / read from the upstream's prompt cache (not part of promptTokens), when it reports them. */
  readonly cacheCreationTokens?: number | undefined
  readonly cacheReadTokens?: number | undefined
  /** Of the cache writes, those kept for an hour (Anthropic's `ephemeral_1h_input_tokens`), which cost more than the 5-minute ones. */
  readonly cacheCreation1hTokens?: number | undefined
  /** Of the completion tokens, those the model spent reasoning, when the upstream reports them. */
  readonly reasoningTokens?: number | undefined
  /** The upstream's other counts of the prompt and completion, passed on as reported (`TokenDetails`). */
  readonly tokenDetails?: TokenDetails | undefined
}

/**
 * Counts an OpenAI-format upstream reports beside those the gateway models, by name: the other
 * fields of `prompt_tokens_details` (`audio_tokens`) and `completion_tokens_details`
 * (`audio_tokens`, `accepted_prediction_tokens`, `rejected_prediction_tokens`). Parts of the prompt
 * and completion counts, never counted again: the OpenAI surface answers them where they came from.
 */
export interface TokenDetails {
  readonly prompt?: Readonly<Record<string, number>> | undefined
  readonly completion?: Readonly<Record<string, number>> | undefined
}

/** Above any model's context: a larger count for one call is not believed. */
const MAX_TOKENS_PER_CALL = 1_000_000_000

/**
 * A count an upstream reported, when it can be one: a whole number from 0 to MAX_TOKENS_PER_CALL.
 * Anything else (negative, fractional, huge, not a number) is an upstream's mistake that must not
 * reach quota, cost or usage: the gateway counts with its tokenizer instead, as for a count the
 * upstream did not report (docs/quota.md). Adapters that do arithmetic on counts take only these.
 */
export const reportedCount = (n: unknown): number | undefined =>
  typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= MAX_TOKENS_PER_CALL ? n : undefined

/**
 * An upstream's text field: the string as it came, absent or null as "". Anything else (an object,
 * a number) is no text: undefined, for the adapter to answer with a protocol error naming the
 * field, never `"[object Object]"` relayed as a success.
 */
export const wireText = (value: unknown): string | undefined =>
  typeof value === "string" ? value : value === undefined || value === null ? "" : undefined

/**
 * A tool call's arguments as JSON text: text as it came, an object as its JSON text (some upstreams
 * send one, and Anthropic, Gemini and Bedrock always do: `objectOnly` for them, whose wire has no
 * text there), absent or null as `absent`; anything else undefined (a protocol error).
 */
export const wireArguments = (args: unknown, absent: string, objectOnly = false): string | undefined =>
  args === undefined || args === null
    ? absent
    : typeof args === "string" && !objectOnly ? args : typeof args === "object" && !Array.isArray(args) ? JSON.stringify(args) : undefined

/**
 * A whole tool call of an upstream's answer, or why it is none: a non-empty name, arguments as
 * `wireArguments` reads them (`{}` when absent), and the upstream's id, or `fallbackId` when it gave
 * none (some compatible servers).
 */
/** An index as a message shows it: a short JSON text (an upstream's object could be megabytes). */
const shownIndex = (index: unknown) => {
  const text = JSON.stringify(index) ?? String(index)
  return text.length > 40 ? `${text.slice(0, 40)}…` : text
}

export const wireToolCall = (id: unknown, name: unknown, args: unknown, fallbackId: string, objectOnly = false): ToolCall | string => {
  if (typeof name !== "string" || name === "") return "a tool call without a name"
  const text = wireArguments(args, "{}", objectOnly)
  if (text === undefined) return `tool call ${name}: its arguments are ${objectOnly ? "not an object" : "neither JSON text nor an object"}`
  if (id !== undefined && id !== null && typeof id !== "string") return `tool call ${name}: its id is not a string`
  return { id: typeof id === "string" && id !== "" ? id : fallbackId, name, arguments: text }
}

/**
 * A tool call's arguments (JSON text, "" for none) as the object the wires that take an object want
 * (Anthropic's `input`, Gemini's `args`, Bedrock's `input`), or undefined when they are no JSON object.
 */
export const argumentsObject = (args: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(args === "" ? "{}" : args)
    return value !== null && typeof value === "object" && !Array.isArray(value) ? value as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

/** More parallel calls than any model makes in one answer: an index past it is no call's. */
const MAX_STREAMED_TOOL_CALLS = 1_024

/**
 * A piece of a streamed tool call, or why it is none: its index one of 0 to 1023, the id and name
 * strings when given, and the call's `first` piece must name it; the arguments are text (or an
 * object, taken whole) or absent.
 */
export const wireToolCallDelta = (index: unknown, id: unknown, name: unknown, args: unknown, first: boolean): ToolCallDelta | string => {
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= MAX_STREAMED_TOOL_CALLS) {
    return `a streamed tool call's index ${shownIndex(index)} is not one of 0 to ${MAX_STREAMED_TOOL_CALLS - 1}`
  }
  if (id !== undefined && id !== null && typeof id !== "string") return `tool call ${index}: its id is not a string`
  if (name !== undefined && name !== null && typeof name !== "string") return `tool call ${index}: its name is not a string`
  if (first && (typeof name !== "string" || name === "")) return `streamed tool call ${index} begins without a name`
  const text = wireArguments(args, "")
  if (text === undefined) return `tool call ${index}: its arguments are neither JSON text nor an object`
  return {
    _tag: "ToolCallDelta",
    index,
    // A call whose first piece has no id gets one by its index, as a whole answer's call by its position (`wireToolCall`):
    // a client answers the call by its id on the next turn.
    ...(typeof id === "string" && id !== "" ? { id } : first ? { id: `call_${index}` } : {}),
    ...(typeof name === "string" && name !== "" ? { name } : {}),
    arguments: text
  }
}

export interface ChatResult {
  readonly content: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly finishReason: FinishReason
  /** The counts the upstream reported; the gateway counts the rest, and any that is no count, itself (ProviderCalls.reportedCount). */
  readonly usage: Partial<TokenUsage> | undefined
  /** The reasoning that came before the answer, when the upstream returns it with a signature. */
  readonly reasoning?: ReadonlyArray<ReasoningPart> | undefined
  /** The stop sequence that ended the answer, when the upstream says which (Anthropic); the finish reason is then `stop`. */
  readonly stopSequence?: string | undefined
  /**
   * Fields of an OpenAI-format answer that the neutral result does not model, kept so the OpenAI
   * surface returns them: the choice's (`logprobs`), the message's (`refusal`, `annotations`,
   * `reasoning_content`, ...) and the body's (`system_fingerprint`, `service_tier`, ...).
   */
  readonly extra?: {
    readonly body?: Readonly<Record<string, unknown>>
    readonly choice?: Readonly<Record<string, unknown>>
    readonly message?: Readonly<Record<string, unknown>>
  } | undefined
}

/** A piece of a streamed tool call: its id and name come on the first. */
export type ToolCallDelta = Extract<StreamEvent, { readonly _tag: "ToolCallDelta" }>

/** Events of a streamed answer, already normalised. */
export type StreamEvent =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "ToolCallDelta"; readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string; readonly signature?: string }
  | { readonly _tag: "Finish"; readonly reason: FinishReason; readonly stopSequence?: string }
  | { readonly _tag: "Usage"; readonly usage: Partial<TokenUsage> }
  /** Reasoning: a piece of its text, its signature (at the block's end), or a redacted block's data; `index` tells blocks apart. */
  | { readonly _tag: "Reasoning"; readonly index: number; readonly text?: string; readonly signature?: string; readonly redacted?: string }
  /**
   * Fields of an OpenAI-format chunk that the events above do not model: its delta's and choice's
   * (`reasoning_content`, `logprobs`) and its own (`system_fingerprint`, `service_tier`, `obfuscation`).
   * They ride on the chunk the gateway makes of the same upstream event (ProviderCalls' stream
   * account), as the chunk's `extra` itself.
   */
  | { readonly _tag: "Extra"; readonly extra: ChunkExtra }

/** What an upstream chunk carries beyond the neutral events, by where it sits in an OpenAI chunk. */
export interface ChunkExtra {
  readonly delta?: Readonly<Record<string, unknown>>
  readonly choice?: Readonly<Record<string, unknown>>
  readonly body?: Readonly<Record<string, unknown>>
}

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

/** An incremental decoder of a stream's bytes into events (SSE by default; see `ChatWire.framing`). */
export interface EventParser {
  readonly push: (bytes: Uint8Array) => Array<SseEvent>
  readonly end: () => Array<SseEvent>
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
  /**
   * Why this wire cannot honour a request (a field or part it has no translation for), naming
   * the field, or undefined. Routing skips such targets; when none is left the call is a 400.
   */
  readonly unsupported?: (request: ChatRequest) => string | undefined
  /** The neutral options beyond the common ones that this wire carries; the others are refused by name (`reasoningRefusal`). */
  readonly carries?: ReasoningSupport
  /** The stream's framing when it is not SSE (e.g. Bedrock's binary event stream): a parser per stream. */
  readonly framing?: () => EventParser
}

/** The first extra request or message field, part type or option a wire family cannot carry, as a refusal naming it. */
export const refusal = (family: string, field: string) => `${field} is not supported by the ${family} wire format`

/**
 * The request field a wire's refusal names first (`logprobs`, `response_format json_object`,
 * `tools[].function.strict`, `image_url.detail "low"`), for the 400's `param`; undefined when it begins
 * with prose instead (`an empty user or system message`).
 */
export const refusedParam = (problem: string): string | undefined => {
  const first = /^[a-z][a-z0-9_]*(?:\[\]|\.[a-z0-9_]+)*(?=[\s:=]|$)/.exec(problem)?.[0]
  return first === undefined || first === "a" || first === "an" ? undefined : first
}

export interface ReasoningSupport {
  readonly topK?: boolean
  readonly reasoning?: boolean
  readonly reasoningHistory?: boolean
  /** Tool results marked as failed (`ChatMessage.toolError`). */
  readonly toolErrors?: boolean
}

/**
 * The first neutral option a wire cannot carry, named as the Anthropic surface names it: top_k,
 * thinking (a reasoning budget), reasoning blocks in the history (their signatures are only
 * valid at the upstream that made them), and tool results marked as failed.
 */
export const reasoningRefusal = (r: ChatRequest, supports: ReasoningSupport): string | undefined => {
  if (!supports.topK && r.topK !== undefined) return "top_k"
  if (!supports.reasoning && r.reasoning !== undefined) return "thinking"
  if (!supports.reasoningHistory && r.messages.some((m) => (m.reasoning?.length ?? 0) > 0)) return "thinking blocks in assistant messages"
  if (!supports.toolErrors && r.messages.some((m) => m.toolError === true)) return "is_error: true on a tool_result"
  return undefined
}

/** The OpenAI fields a request carries that no neutral field models (`extra`), named for a refusal. */
export const extraFieldOf = (request: ChatRequest): string | undefined => {
  const top = Object.keys(request.extra ?? {})[0]
  if (top !== undefined) return top
  for (const t of request.tools ?? []) {
    const key = Object.keys(t.extra ?? {})[0]
    if (key !== undefined) return `tools[].function.${key}`
  }
  for (const m of request.messages) {
    const key = Object.keys(m.extra ?? {})[0]
    if (key !== undefined) return `messages[].${key}`
    const raw = m.parts?.find((p) => p.type === "raw")
    if (raw !== undefined) return `content part type ${String((raw as { part: { type?: unknown } }).part.type)}`
  }
  return undefined
}
