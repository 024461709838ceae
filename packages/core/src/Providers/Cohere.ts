/**
 * The Cohere v2 wire family (https://docs.cohere.com/reference/chat, chat-stream, embed, rerank):
 * chat with tools, images and JSON output, plain and streamed, embeddings and rerank.
 *
 * Chat: `POST /chat` with OpenAI-like messages and function tools; `p` for top_p, `stop_sequences`,
 * `tool_choice` REQUIRED or NONE only (no named tool), `response_format` json_object with an
 * optional `json_schema`. The answer holds `message.content[]` text parts, `message.tool_calls`,
 * `message.tool_plan` (the text the model writes before its tool calls, which aigw carries as the
 * message's content both ways), `finish_reason` and `usage.billed_units` / `usage.tokens`. A stream
 * is SSE whose JSON events are typed: content-delta, tool-plan-delta, tool-call-start/-delta,
 * message-end (finish reason and usage); the connection closes after message-end.
 */
import type { ChatMessage, ChatRequest, ChatResult, ChatWire, ContentPart, FinishReason, StreamEvent, TokenUsage, ToolCall } from "./Chat.ts"
import { extraFieldOf, refusal, wireText, wireToolCall, wireToolCallDelta } from "./Chat.ts"
import { cohereEmbeddings } from "./Embeddings.ts"
import { authHeaders, eventJson } from "./internal/http.ts"
import { answerSchemaOf } from "./internal/translation.ts"
import { wireToolCalls, wireTools } from "./OpenAiCompatible.ts"
import { cohereRerank } from "./Rerank.ts"
import type { Served } from "./Served.ts"
import { protocolError, shownUpstreamText, UpstreamError } from "./UpstreamError.ts"

const FAMILY = "Cohere"

const finishReason = (reason: unknown): FinishReason => {
  switch (String(reason).toUpperCase()) {
    case "MAX_TOKENS":
      return "length"
    case "TOOL_CALL":
      return "tool_calls"
    case "ERROR":
    case "TIMEOUT":
      return "error"
    default:
      return "stop"
  }
}

// Raw parts never get here: `unsupported` refuses them (extraFieldOf names them).
const wirePart = (p: ContentPart) =>
  p.type === "image"
    ? { type: "image_url", image_url: { url: p.url, ...(p.detail !== undefined ? { detail: p.detail } : {}) } }
    : { type: "text", text: p.type === "text" ? p.text : "" }

const toWireMessage = (m: ChatMessage) => {
  switch (m.role) {
    case "tool":
      return { role: "tool", tool_call_id: m.toolCallId ?? "", content: m.content }
    case "assistant":
      return m.toolCalls && m.toolCalls.length > 0
        ? {
          role: "assistant",
          ...(m.content !== "" ? { tool_plan: m.content } : {}),
          tool_calls: wireToolCalls(m.toolCalls)
        }
        : { role: "assistant", content: m.content }
    case "user":
      return { role: "user", content: m.parts !== undefined ? m.parts.map(wirePart) : m.content }
    case "system":
      return { role: "system", content: m.content }
  }
}

/** JSON output; a json_schema format's description rides in its schema (`answerSchemaOf`: Cohere takes only a schema). */
const responseFormat = (f: NonNullable<ChatRequest["responseFormat"]>) =>
  f.type === "json_schema" ? { type: "json_object", json_schema: answerSchemaOf(f) } : { type: f.type }

export const toWireRequest = (r: ChatRequest, stream: boolean) => ({
  model: r.model,
  messages: r.messages.map(toWireMessage),
  ...wireTools(r.tools),
  ...(r.toolChoice === "required" ? { tool_choice: "REQUIRED" } : r.toolChoice === "none" ? { tool_choice: "NONE" } : {}),
  ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
  ...(r.maxTokens !== undefined ? { max_tokens: r.maxTokens } : {}),
  ...(r.topP !== undefined ? { p: r.topP } : {}),
  ...(r.stop !== undefined ? { stop_sequences: r.stop } : {}),
  ...(r.seed !== undefined ? { seed: r.seed } : {}),
  ...(r.frequencyPenalty !== undefined ? { frequency_penalty: r.frequencyPenalty } : {}),
  ...(r.presencePenalty !== undefined ? { presence_penalty: r.presencePenalty } : {}),
  ...(r.responseFormat !== undefined ? { response_format: responseFormat(r.responseFormat) } : {}),
  ...(stream ? { stream: true } : {})
})

/** What the Cohere v2 wire cannot carry, named. */
const unsupported = (r: ChatRequest): string | undefined => {
  const extra = extraFieldOf(r)
  if (extra !== undefined) return refusal(FAMILY, extra)
  if (typeof r.toolChoice === "object") return `tool_choice naming a function (${r.toolChoice.name}) is not supported by the ${FAMILY} wire format (it takes required or none)`
  if (r.parallelToolCalls === false) return refusal(FAMILY, "parallel_tool_calls: false")
  const imageOutsideUser = r.messages.find((m) => m.role !== "user" && m.parts?.some((p) => p.type === "image"))
  if (imageOutsideUser !== undefined) return refusal(FAMILY, `image parts in ${imageOutsideUser.role} messages`)
  return undefined
}

/** The counts Cohere reports (billed units, else tokens); one left out is counted by the gateway, never taken as 0. */
const usageOf = (u: any): Partial<TokenUsage> | undefined => {
  const counts = u?.billed_units?.input_tokens !== undefined ? u.billed_units : u?.tokens
  return typeof counts?.input_tokens === "number"
    ? { promptTokens: counts.input_tokens, ...(counts.output_tokens !== undefined ? { completionTokens: counts.output_tokens } : {}) }
    : undefined
}

/**
 * The text of a message's content (its `text` items) and its reasoning (`thinking` items, which Cohere's
 * reasoning models answer first), or why it has none that can be read.
 */
const textOf = (content: unknown): { readonly text: string; readonly thinking: string } | { readonly problem: string } => {
  if (content === undefined || content === null) return { text: "", thinking: "" }
  if (!Array.isArray(content)) return { problem: "message.content is not an array" }
  let text = ""
  let thinking = ""
  for (const [i, c] of content.entries()) {
    if (c?.type !== "text" && c?.type !== "thinking") continue
    const piece = wireText(c.type === "text" ? c.text : c.thinking)
    if (piece === undefined) return { problem: `message.content[${i}].${c.type} is not text` }
    if (c.type === "text") text += piece
    else thinking += piece
  }
  return { text, thinking }
}

const result = (provider: string, body: any): ChatResult | UpstreamError => {
  const message = body?.message
  if (typeof message !== "object" || message === null) return protocolError(provider, "no message in the chat answer")
  const read = textOf(message.content)
  if ("problem" in read) return protocolError(provider, read.problem)
  const { text, thinking } = read
  const toolCalls: Array<ToolCall> = []
  for (const [i, c] of (Array.isArray(message.tool_calls) ? message.tool_calls : []).entries()) {
    const call = wireToolCall(c?.id, c?.function?.name, c?.function?.arguments, `call_${i}`)
    if (typeof call === "string") return protocolError(provider, `message.tool_calls[${i}]: ${call}`)
    toolCalls.push(call)
  }
  return {
    content: text === "" && toolCalls.length > 0 && typeof message.tool_plan === "string" ? message.tool_plan : text,
    toolCalls,
    finishReason: finishReason(body.finish_reason),
    usage: usageOf(body.usage),
    // The reasoning as OpenAI-format reasoning models give theirs (the OpenAI surface's `reasoning_content`).
    ...(thinking !== "" ? { extra: { message: { reasoning_content: thinking } } } : {})
  }
}

const events: ChatWire["events"] = (provider) => (event) => {
  const chunk = eventJson(provider, event)
  if (chunk instanceof UpstreamError) return chunk
  if (typeof chunk !== "object" || chunk === null) return protocolError(provider, "a stream event is not a JSON object")
  const delta = chunk.delta?.message
  switch (chunk.type) {
    case "content-delta":
    case "tool-plan-delta": {
      // A reasoning model's thinking comes first, as content deltas of `thinking`.
      if (chunk.type === "content-delta" && delta?.content?.thinking !== undefined) {
        const thinking = wireText(delta.content.thinking)
        if (thinking === undefined) return protocolError(provider, "a content-delta event's thinking is not text")
        return thinking !== "" ? [{ _tag: "Extra", extra: { delta: { reasoning_content: thinking } } }] : []
      }
      const text = wireText(chunk.type === "content-delta" ? delta?.content?.text : delta?.tool_plan)
      if (text === undefined) return protocolError(provider, `a ${chunk.type} event carries no text`)
      return text !== "" ? [{ _tag: "Text", text }] : []
    }
    case "tool-call-start":
    case "tool-call-delta": {
      const call = delta?.tool_calls
      // A call's start names it (Cohere's chat stream reference); the deltas after it carry arguments.
      const piece = wireToolCallDelta(chunk.index ?? 0, call?.id, call?.function?.name, call?.function?.arguments, chunk.type === "tool-call-start")
      return typeof piece === "string" ? protocolError(provider, piece) : [piece]
    }
    case "message-end": {
      const reason = chunk.delta?.finish_reason
      if (finishReason(reason) === "error") return protocolError(provider, `stream ended with ${String(reason)}${chunk.delta?.error ? `: ${chunk.delta.error}` : ""}`)
      const out: Array<StreamEvent> = [{ _tag: "Finish", reason: finishReason(reason) }]
      const usage = usageOf(chunk.delta?.usage)
      if (usage) out.push({ _tag: "Usage", usage })
      return out
    }
    case undefined:
      // An error object in place of an event.
      return protocolError(provider, `stream error: ${typeof chunk.message === "string" ? chunk.message : shownUpstreamText(JSON.stringify(chunk), 200)}`)
    default:
      // message-start, content-start/-end, tool-call-end, citations, debug: nothing to deliver.
      return []
  }
}

export const wire: ChatWire = {
  request: (target, request, stream) => ({
    url: `${target.provider.endpoint}/chat`,
    headers: authHeaders(target.provider),
    body: toWireRequest(request, stream)
  }),
  result,
  events,
  unsupported
}

/** What the Cohere family serves (where the catalogue says the upstream offers it). */
export const family: Served = { chat: wire, embeddings: cohereEmbeddings, rerank: cohereRerank }
