/**
 * Anthropic Messages API adapter: top-level `system`, content blocks (text, image, tool_use,
 * tool_result), `max_tokens` required, `tool_choice`, structured output through
 * `output_config.format`, SSE with typed events. What it refuses, and why, is in
 * docs/providers.md ("Translation across wire formats").
 */
import type { CacheHint, ChatMessage, ChatRequest, ChatWire, ContentPart, FinishReason, ReasoningPart, StreamEvent, Target, TokenUsage, ToolCall } from "./Chat.ts"
import { refusal, wireText, wireToolCall, wireToolCallDelta } from "./Chat.ts"
import { authHeaders, eventJson } from "./internal/http.ts"
import { answerSchemaOf, commonRefusal, dataUrlOf, pushTurn, toolArgumentsOf, toolChoiceMatters } from "./internal/translation.ts"
import type { Served } from "./Served.ts"
import { isRetryableStatus, protocolError, shownUpstreamText, UpstreamError } from "./UpstreamError.ts"

export const API_VERSION = "2023-06-01"
/** Used when the request sets no maxTokens (the API requires one). */
export const DEFAULT_MAX_TOKENS = 4096

/** An image part as an image block: a base64 source for a data: URL, a url source otherwise. */
const imageBlock = (url: string) => {
  const inline = dataUrlOf(url)
  return { type: "image", source: inline ? { type: "base64", media_type: inline.mediaType, data: inline.data } : { type: "url", url } }
}

/** A cache hint as `cache_control` (ephemeral is the only type Anthropic has). */
const cacheControlOf = (cache: CacheHint | undefined) =>
  cache === undefined ? {} : { cache_control: { type: "ephemeral", ...(cache.ttl !== undefined ? { ttl: cache.ttl } : {}) } }

/** Text and image parts as content blocks (Anthropic rejects empty text blocks; raw parts are refused before). */
const blocksOf = (parts: ReadonlyArray<ContentPart>): Array<unknown> =>
  parts.flatMap((p): Array<unknown> =>
    p.type === "text"
      ? (p.text !== "" ? [{ type: "text", text: p.text, ...cacheControlOf(p.cache) }] : [])
      : p.type === "image"
      ? [{ ...imageBlock(p.url), ...cacheControlOf(p.cache) }]
      : []
  )

/** Reasoning parts as the thinking blocks they came as (they open an assistant turn). */
const reasoningBlocksOf = (parts: ReadonlyArray<ReasoningPart>) =>
  parts.map((p) => (p.type === "thinking" ? { type: "thinking", thinking: p.text, signature: p.signature } : { type: "redacted_thinking", data: p.data }))

/** A message-level cache hint on the last of its blocks. */
const withCache = (blocks: Array<Record<string, unknown>>, cache: CacheHint | undefined) => {
  const last = blocks[blocks.length - 1]
  if (cache !== undefined && last !== undefined) blocks[blocks.length - 1] = { ...last, ...cacheControlOf(cache) }
  return blocks
}

/** Chat messages -> Anthropic messages; consecutive tool results merge into one user turn. */
export const toWireMessages = (messages: ReadonlyArray<ChatMessage>) => {
  const out: Array<{ role: "user" | "assistant"; content: Array<unknown> }> = []
  const push = (role: "user" | "assistant", blocks: ReadonlyArray<unknown>) => pushTurn(out, role, blocks)
  for (const m of messages) {
    if (m.role === "system") continue
    if (m.role === "tool") {
      push("user", [{
        type: "tool_result",
        tool_use_id: m.toolCallId ?? "",
        content: m.parts ? blocksOf(m.parts) : m.content,
        ...(m.toolError ? { is_error: true } : {}),
        ...cacheControlOf(m.cache)
      }])
    } else if (m.role === "assistant") {
      push(
        "assistant",
        // Thinking blocks cannot hold cache_control: a message's breakpoint goes on the answer's last block, a
        // text part's on its own block (an OpenAI-format client's breakpoint on the last assistant turn).
        [
          ...reasoningBlocksOf(m.reasoning ?? []),
          ...withCache([
            ...(m.parts !== undefined ? blocksOf(m.parts) as Array<Record<string, unknown>> : m.content !== "" ? [{ type: "text", text: m.content }] : []),
            ...(m.toolCalls ?? []).map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: toolArgumentsOf(c.arguments) }))
          ], m.cache)
        ]
      )
    } else {
      push("user", m.parts ? blocksOf(m.parts) : [{ type: "text", text: m.content }])
    }
  }
  return out
}

/** `tool_choice`, with parallel_tool_calls=false as `disable_parallel_tool_use`. */
const toolChoiceOf = (r: ChatRequest) => {
  const c = r.toolChoice
  if ((c === undefined && r.parallelToolCalls !== false) || !toolChoiceMatters(r)) return {}
  const choice = c === "none"
    ? { type: "none" }
    : c === "required"
    ? { type: "any" }
    : typeof c === "object"
    ? { type: "tool", name: c.name }
    : { type: "auto" }
  return { tool_choice: r.parallelToolCalls === false && c !== "none" ? { ...choice, disable_parallel_tool_use: true } : choice }
}

/** OpenAI's `user` (a stable id of the end user) is Anthropic's `metadata.user_id`. */
const endUserOf = (r: ChatRequest): unknown => r.extra?.user

/** The request without the extra fields this wire maps (`user`). */
const unmappedOf = (r: ChatRequest): ChatRequest => {
  if (r.extra?.user === undefined) return r
  const { user: _mapped, ...rest } = r.extra
  return { ...r, extra: rest }
}

const FAMILY = "Anthropic Messages"
const imageRoles: ReadonlySet<ChatMessage["role"]> = new Set(["user", "tool"])
const details: ReadonlySet<string> = new Set(["auto"])

/**
 * What this wire cannot carry: seed and penalties (no such parameters), OpenAI fields it does not
 * map (all but `user`), JSON mode without a schema (`output_config.format` takes a schema only),
 * images outside user turns and tool results, and image detail (Anthropic picks the resolution).
 */
export const unsupported = (r: ChatRequest): string | undefined => {
  const field = commonRefusal(unmappedOf(r), { seed: false, penalties: false, imageRoles, details })
  if (field !== undefined) return refusal(FAMILY, field)
  const user = endUserOf(r)
  if (user !== undefined && typeof user !== "string") return refusal(FAMILY, "user that is not a string")
  if (r.responseFormat?.type === "json_object") {
    return `${refusal(FAMILY, "response_format json_object")} (send response_format json_schema with a schema)`
  }
  return undefined
}

/** The system prompt: text, or text blocks when a part carries a cache breakpoint. */
const systemOf = (request: ChatRequest) => {
  const messages = request.messages.filter((m) => m.role === "system")
  if (messages.some((m) => m.cache !== undefined || m.parts?.some((p) => p.type !== "raw" && p.cache !== undefined))) {
    return messages.flatMap((m) => withCache(blocksOf(m.parts ?? [{ type: "text", text: m.content }]) as Array<Record<string, unknown>>, m.cache))
  }
  return messages.map((m) => m.content).join("\n\n")
}

/** The neutral reasoning option as `thinking`. */
const thinkingOf = (r: ChatRequest) => {
  const t = r.reasoning
  if (t === undefined) return {}
  return { thinking: t.mode === "enabled" ? { type: "enabled", budget_tokens: t.budgetTokens } : { type: t.mode } }
}

export const toWireRequest = (target: Target, request: ChatRequest, stream: boolean) => {
  const system = systemOf(request)
  return {
    model: request.model,
    max_tokens: request.maxTokens ?? Math.min(DEFAULT_MAX_TOKENS, target.model.maxOutputTokens || DEFAULT_MAX_TOKENS),
    ...(system ? { system } : {}),
    messages: toWireMessages(request.messages),
    ...(request.tools && request.tools.length > 0
      ? {
        tools: request.tools.map((t) => ({
          name: t.name,
          ...(t.description ? { description: t.description } : {}),
          input_schema: t.parameters,
          ...cacheControlOf(t.cache)
        }))
      }
      : {}),
    // Anthropic accepts 0..1; the gateway's 0..2 scale is clamped.
    ...(request.temperature !== undefined ? { temperature: Math.min(1, request.temperature) } : {}),
    ...(request.topP !== undefined ? { top_p: request.topP } : {}),
    ...(request.topK !== undefined ? { top_k: request.topK } : {}),
    ...thinkingOf(request),
    ...(request.stop !== undefined && request.stop.length > 0 ? { stop_sequences: request.stop } : {}),
    ...toolChoiceOf(request),
    ...(typeof endUserOf(request) === "string" ? { metadata: { user_id: endUserOf(request) } } : {}),
    // Structured output: the answer's text is JSON that follows the schema (models of late 2025 on).
    ...(request.responseFormat?.type === "json_schema"
      ? { output_config: { format: { type: "json_schema", schema: answerSchemaOf(request.responseFormat) } } }
      : {}),
    ...(stream ? { stream: true } : {})
  }
}

/** The HTTP status each documented error type stands for (https://docs.anthropic.com/en/api/errors). */
const ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529
}

/**
 * A documented `error` event in a stream (an overload, a rate limit after the answer began): the error
 * its type stands for, as the same failure before the stream would have been, with its type and message.
 */
const streamErrorOf = (provider: string, error: any): UpstreamError => {
  const type = typeof error?.type === "string" ? error.type : undefined
  const status = type !== undefined ? ERROR_STATUS[type] : undefined
  if (status === undefined) return protocolError(provider, `stream error: ${typeof error?.message === "string" ? error.message : "unknown"}`)
  const message = typeof error?.message === "string" ? shownUpstreamText(error.message) : "no message"
  return new UpstreamError({ provider, kind: "http", status, message: `${provider} ended the stream with ${type}: ${message}`, retryable: isRetryableStatus(status) })
}

/** The neutral finish reason of a `stop_reason`; `model_context_window_exceeded` is a truncated answer, as `max_tokens`. */
export const finishReason = (reason: unknown): FinishReason =>
  reason === "max_tokens" || reason === "model_context_window_exceeded"
    ? "length"
    : reason === "tool_use" ? "tool_calls" : reason === "refusal" ? "content_filter" : "stop"

const headers = (target: Target, request: ChatRequest) => ({
  ...authHeaders(target.provider),
  "anthropic-version": API_VERSION,
  ...(request.anthropicBeta !== undefined ? { "anthropic-beta": request.anthropicBeta } : {})
})

/** The stop sequence that ended an answer (`stop_reason: "stop_sequence"`), of a Message or a message_delta, as a field to spread. */
const stopSequenceOf = (m: any): { readonly stopSequence?: string } =>
  m?.stop_reason === "stop_sequence" && typeof m.stop_sequence === "string" ? { stopSequence: m.stop_sequence } : {}

/**
 * Anthropic's usage: input_tokens excludes the cached prompt, reported apart; of the cache writes, those
 * of a one-hour breakpoint (`ttl: "1h"`) are reported in `cache_creation`.
 */
const usageOf = (u: any): Partial<TokenUsage> => ({
  ...(typeof u?.input_tokens === "number" ? { promptTokens: u.input_tokens } : {}),
  ...(typeof u?.output_tokens === "number" ? { completionTokens: u.output_tokens } : {}),
  ...(typeof u?.cache_creation_input_tokens === "number" ? { cacheCreationTokens: u.cache_creation_input_tokens } : {}),
  ...(typeof u?.cache_creation?.ephemeral_1h_input_tokens === "number" ? { cacheCreation1hTokens: u.cache_creation.ephemeral_1h_input_tokens } : {}),
  ...(typeof u?.cache_read_input_tokens === "number" ? { cacheReadTokens: u.cache_read_input_tokens } : {})
})

/** thinking and redacted_thinking blocks as reasoning parts, or the first one's field that is not text. */
const reasoningOf = (blocks: Array<any>): Array<ReasoningPart> | string => {
  const parts: Array<ReasoningPart> = []
  for (const [i, b] of blocks.entries()) {
    if (b?.type === "thinking") {
      const text = wireText(b.thinking)
      const signature = wireText(b.signature)
      if (text === undefined || signature === undefined) return `content[${i}]: a thinking block's thinking or signature is not text`
      parts.push({ type: "thinking", text, signature })
    } else if (b?.type === "redacted_thinking") {
      const data = wireText(b.data)
      if (data === undefined) return `content[${i}]: a redacted_thinking block's data is not text`
      parts.push({ type: "redacted_thinking", data })
    }
  }
  return parts
}
const url = (target: Target) => `${target.provider.endpoint}/messages`

export const wire: ChatWire = {
  request: (target, request, stream) => ({ url: url(target), headers: headers(target, request), body: toWireRequest(target, request, stream) }),
  unsupported,
  carries: { topK: true, reasoning: true, reasoningHistory: true, toolErrors: true },
  result: (provider, body) => {
    if (!Array.isArray(body?.content)) return protocolError(provider, "no content array")
    const blocks: Array<any> = body.content
    let content = ""
    const toolCalls: Array<ToolCall> = []
    for (const [i, b] of blocks.entries()) {
      if (b?.type === "text") {
        const text = wireText(b.text)
        if (text === undefined) return protocolError(provider, `content[${i}].text is not text`)
        content += text
      } else if (b?.type === "tool_use") {
        const call = wireToolCall(b.id, b.name, b.input, `call_${toolCalls.length}`, true)
        if (typeof call === "string") return protocolError(provider, `content[${i}]: ${call}`)
        toolCalls.push(call)
      }
    }
    const reasoning = reasoningOf(blocks)
    if (typeof reasoning === "string") return protocolError(provider, reasoning)
    const usage = usageOf(body.usage)
    return {
      content,
      toolCalls,
      finishReason: finishReason(body.stop_reason),
      ...stopSequenceOf(body),
      // A count left out is counted by the gateway (ProviderCalls.estimatedUsage), never taken as 0.
      usage,
      ...(reasoning.length > 0 ? { reasoning } : {})
    }
  },
  events: (provider) => {
    // Content block index -> tool ordinal, so tool deltas carry OpenAI-like indexes.
    const toolIndex = new Map<number, number>()
    // The event of a field's text (none for an empty one unless `keepEmpty`), or the protocol error naming `what`.
    const textEvent = (value: unknown, what: string, event: (text: string) => StreamEvent, keepEmpty = false): ReadonlyArray<StreamEvent> | UpstreamError => {
      const text = wireText(value)
      if (text === undefined) return protocolError(provider, `${what} carries no text`)
      return text === "" && !keepEmpty ? [] : [event(text)]
    }
    return (event): ReadonlyArray<StreamEvent> | UpstreamError | null => {
      if (event.event === "message_stop") return null
      if (event.event === "ping") return []
      const data = eventJson(provider, event)
      if (data instanceof UpstreamError) return data
      const type = data?.type ?? event.event
      switch (type) {
        case "error":
          return streamErrorOf(provider, data?.error)
        case "message_start": {
          const { completionTokens: _later, ...usage } = usageOf(data?.message?.usage)
          return usage.promptTokens !== undefined ? [{ _tag: "Usage", usage }] : []
        }
        case "content_block_start": {
          const block = data?.content_block
          if (block?.type === "tool_use") {
            const piece = wireToolCallDelta(toolIndex.size, block.id, block.name, undefined, true)
            if (typeof piece === "string") return protocolError(provider, piece)
            toolIndex.set(data.index, piece.index)
            return [piece]
          }
          if (block?.type === "thinking") return textEvent(block.thinking, "a thinking block", (text) => ({ _tag: "Reasoning", index: data.index, text }))
          if (block?.type === "redacted_thinking") return textEvent(block.data, "a redacted_thinking block", (redacted) => ({ _tag: "Reasoning", index: data.index, redacted }), true)
          return block?.type === "text" ? textEvent(block.text, "a text block", (text) => ({ _tag: "Text", text })) : []
        }
        case "content_block_delta": {
          const delta = data?.delta
          switch (delta?.type) {
            case "text_delta":
              return textEvent(delta.text, "a text_delta", (text) => ({ _tag: "Text", text }))
            case "thinking_delta":
              return textEvent(delta.thinking, "a thinking_delta", (text) => ({ _tag: "Reasoning", index: data.index, text }), true)
            case "signature_delta":
              return textEvent(delta.signature, "a signature_delta", (signature) => ({ _tag: "Reasoning", index: data.index, signature }), true)
            case "input_json_delta":
              return textEvent(delta.partial_json, "an input_json_delta", (text) => ({ _tag: "ToolCallDelta", index: toolIndex.get(data.index) ?? 0, arguments: text }))
            default:
              return []
          }
        }
        case "message_delta": {
          const out: Array<StreamEvent> = []
          if (data?.delta?.stop_reason) {
            out.push({ _tag: "Finish", reason: finishReason(data.delta.stop_reason), ...stopSequenceOf(data.delta) })
          }
          // Cumulative counts: output_tokens, and the input and cache counts when Anthropic repeats them here.
          if (data?.usage) {
            const usage = usageOf(data.usage)
            if (Object.keys(usage).length > 0) out.push({ _tag: "Usage", usage })
          }
          return out
        }
        default:
          return []
      }
    }
  }
}

/** What aigw serves through the Anthropic Messages family. */
export const family: Served = { chat: wire }
