/**
 * Anthropic Messages API adapter: top-level `system`, content blocks (text, image, tool_use,
 * tool_result), `max_tokens` required, `tool_choice`, structured output through
 * `output_config.format`, SSE with typed events. What it refuses, and why, is in
 * docs/providers.md ("Translation across wire formats").
 */
import type { CacheHint, ChatMessage, ChatRequest, ChatWire, ContentPart, FinishReason, ReasoningPart, StreamEvent, Target, TokenUsage } from "./Chat.ts"
import { refusal } from "./Chat.ts"
import { authHeaders, eventJson } from "./internal/http.ts"
import { answerSchemaOf, commonRefusal, dataUrlOf, pushTurn, toolArgumentsOf, toolChoiceMatters } from "./internal/translation.ts"
import type { Served } from "./Served.ts"
import { protocolError, UpstreamError } from "./UpstreamError.ts"

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
      push("user", [{ type: "tool_result", tool_use_id: m.toolCallId ?? "", content: m.parts ? blocksOf(m.parts) : m.content, ...cacheControlOf(m.cache) }])
    } else if (m.role === "assistant") {
      push(
        "assistant",
        // Thinking blocks cannot hold cache_control: the breakpoint goes on the answer's last block.
        [
          ...reasoningBlocksOf(m.reasoning ?? []),
          ...withCache([
            ...(m.content !== "" ? [{ type: "text", text: m.content }] : []),
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

/** Anthropic's usage: input_tokens excludes the cached prompt, reported apart. */
const usageOf = (u: any): Partial<TokenUsage> => ({
  ...(typeof u?.input_tokens === "number" ? { promptTokens: u.input_tokens } : {}),
  ...(typeof u?.output_tokens === "number" ? { completionTokens: u.output_tokens } : {}),
  ...(typeof u?.cache_creation_input_tokens === "number" ? { cacheCreationTokens: u.cache_creation_input_tokens } : {}),
  ...(typeof u?.cache_read_input_tokens === "number" ? { cacheReadTokens: u.cache_read_input_tokens } : {})
})

/** thinking and redacted_thinking blocks as reasoning parts. */
const reasoningOf = (blocks: Array<any>): Array<ReasoningPart> =>
  blocks.flatMap((b): Array<ReasoningPart> =>
    b.type === "thinking"
      ? [{ type: "thinking", text: String(b.thinking ?? ""), signature: String(b.signature ?? "") }]
      : b.type === "redacted_thinking"
      ? [{ type: "redacted_thinking", data: String(b.data ?? "") }]
      : []
  )
const url = (target: Target) => `${target.provider.endpoint}/messages`

export const wire: ChatWire = {
  request: (target, request, stream) => ({ url: url(target), headers: headers(target, request), body: toWireRequest(target, request, stream) }),
  unsupported,
  carries: { topK: true, reasoning: true, reasoningHistory: true },
  result: (provider, body) => {
    if (!Array.isArray(body?.content)) return protocolError(provider, "no content array")
    const blocks: Array<any> = body.content
    const reasoning = reasoningOf(blocks)
    const usage = usageOf(body.usage)
    return {
      content: blocks.filter((b) => b.type === "text").map((b) => String(b.text)).join(""),
      toolCalls: blocks
        .filter((b) => b.type === "tool_use")
        .map((b) => ({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.input ?? {}) })),
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
    return (event): ReadonlyArray<StreamEvent> | UpstreamError | null => {
      if (event.event === "message_stop") return null
      if (event.event === "ping") return []
      const data = eventJson(provider, event)
      if (data instanceof UpstreamError) return data
      const type = data?.type ?? event.event
      switch (type) {
        case "error":
          return protocolError(provider, `stream error: ${data?.error?.message ?? "unknown"}`)
        case "message_start": {
          const { completionTokens: _later, ...usage } = usageOf(data?.message?.usage)
          return usage.promptTokens !== undefined ? [{ _tag: "Usage", usage }] : []
        }
        case "content_block_start": {
          const block = data?.content_block
          if (block?.type === "tool_use") {
            const ordinal = toolIndex.size
            toolIndex.set(data.index, ordinal)
            return [{ _tag: "ToolCallDelta", index: ordinal, id: String(block.id), name: String(block.name), arguments: "" }]
          }
          if (block?.type === "thinking") return block.thinking ? [{ _tag: "Reasoning", index: data.index, text: String(block.thinking) }] : []
          if (block?.type === "redacted_thinking") return [{ _tag: "Reasoning", index: data.index, redacted: String(block.data ?? "") }]
          return block?.type === "text" && block.text ? [{ _tag: "Text", text: String(block.text) }] : []
        }
        case "content_block_delta": {
          const delta = data?.delta
          if (delta?.type === "text_delta") return [{ _tag: "Text", text: String(delta.text) }]
          if (delta?.type === "thinking_delta") return [{ _tag: "Reasoning", index: data.index, text: String(delta.thinking ?? "") }]
          if (delta?.type === "signature_delta") return [{ _tag: "Reasoning", index: data.index, signature: String(delta.signature ?? "") }]
          if (delta?.type === "input_json_delta") {
            return [{ _tag: "ToolCallDelta", index: toolIndex.get(data.index) ?? 0, arguments: String(delta.partial_json ?? "") }]
          }
          return []
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
