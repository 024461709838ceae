/**
 * NLP Cloud (a bespoke provider): chat through its chatbot API and embeddings, each on a model
 * named in the path.
 *
 * References: https://docs.nlpcloud.com/#chatbot-and-conversational-ai (`POST
 * /v1/gpu/{model}/chatbot` {input, context, history [{input, response}]} -> {response, history})
 * and https://docs.nlpcloud.com/#embeddings (`POST /v1/gpu/{model}/embeddings` {sentences} ->
 * {embeddings}); the key goes in `Authorization: Token <key>`.
 *
 * The chatbot API takes a conversation and nothing else: no tools, images, JSON output or sampling
 * settings, which are refused by name. It has no streaming: a streamed call sends the same request
 * and delivers the whole answer as one chunk when it arrives (the `framing` below).
 */
import type { ChatMessage, ChatRequest, ChatResult, ChatWire, EventParser } from "./Chat.ts"
import { extraFieldOf, refusal } from "./Chat.ts"
import { checked, type EmbeddingWire } from "./Embeddings.ts"
import { authHeaders, eventJson } from "./internal/http.ts"
import type { SseEvent } from "./internal/sse.ts"
import type { Served } from "./Served.ts"
import { protocolError, UpstreamError } from "./UpstreamError.ts"

const FAMILY = "NLP Cloud chatbot"

const modelPath = (endpoint: string, model: string, task: string) => `${endpoint}/gpu/${encodeURIComponent(model)}/${task}`

/** The first request setting the chatbot API has no field for, by its OpenAI name. */
const unsupportedSetting = (r: ChatRequest): string | undefined => {
  if ((r.tools?.length ?? 0) > 0) return "tools"
  if (r.toolChoice !== undefined) return "tool_choice"
  if (r.parallelToolCalls !== undefined) return "parallel_tool_calls"
  if (r.responseFormat !== undefined && r.responseFormat.type !== "text") return `response_format ${r.responseFormat.type}`
  if (r.temperature !== undefined) return "temperature"
  if (r.maxTokens !== undefined) return "max_tokens"
  if (r.topP !== undefined) return "top_p"
  if (r.stop !== undefined) return "stop"
  if (r.seed !== undefined) return "seed"
  if (r.frequencyPenalty !== undefined) return "frequency_penalty"
  if (r.presencePenalty !== undefined) return "presence_penalty"
  return undefined
}

const unsupportedMessage = (m: ChatMessage): string | undefined => {
  if (m.role === "tool") return "tool messages"
  if ((m.toolCalls?.length ?? 0) > 0) return "assistant tool calls"
  if (m.parts?.some((p) => p.type === "image")) return "image parts"
  if (m.name !== undefined) return "messages[].name"
  return undefined
}

const unsupported = (r: ChatRequest): string | undefined => {
  const field = extraFieldOf(r) ?? unsupportedSetting(r) ?? r.messages.map(unsupportedMessage).find((x) => x !== undefined)
  if (field !== undefined) return refusal(FAMILY, field)
  if (r.messages.at(-1)?.role !== "user") return `a conversation that does not end with a user message is not supported by the ${FAMILY} API (it answers the last input)`
  return undefined
}

/**
 * The conversation as the chatbot API takes it: system messages joined as the context, the turns
 * before the last user message as input/response pairs (consecutive messages of one role joined).
 */
export const toWireBody = (r: ChatRequest) => {
  const context = r.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n\n")
  const turns: Array<{ input: string; response: string }> = []
  let input: Array<string> = []
  let response: Array<string> = []
  for (const m of r.messages) {
    if (m.role === "user") {
      if (response.length > 0) {
        turns.push({ input: input.join("\n\n"), response: response.join("\n\n") })
        input = []
        response = []
      }
      input.push(m.content)
    } else if (m.role === "assistant") response.push(m.content)
  }
  return { input: input.join("\n\n"), ...(context !== "" ? { context } : {}), history: turns }
}

const result = (provider: string, body: any): ChatResult | UpstreamError =>
  typeof body?.response === "string"
    ? { content: body.response, toolCalls: [], finishReason: "stop", usage: undefined }
    : protocolError(provider, "no response text in the chatbot answer")

const PROGRESS = "aigw.progress"
const ANSWER = "aigw.answer"

/** The whole JSON answer as one event at its end; each read before it is a progress event, so the engine's idle timer sees the answer arriving. */
const wholeAnswer = (): EventParser => {
  const chunks: Array<Uint8Array> = []
  return {
    push: (bytes) => {
      chunks.push(bytes)
      return [{ event: PROGRESS, data: "" }]
    },
    end: () => [{ event: ANSWER, data: Buffer.concat(chunks).toString("utf8") }]
  }
}

const events: ChatWire["events"] = (provider) => (event: SseEvent) => {
  if (event.event === PROGRESS) return []
  const body = eventJson(provider, event)
  if (body instanceof UpstreamError) return body
  const answer = result(provider, body)
  if (answer instanceof UpstreamError) return answer
  return [{ _tag: "Text", text: answer.content }, { _tag: "Finish", reason: "stop" }]
}

export const chat: ChatWire = {
  request: (target, request) => ({
    url: modelPath(target.provider.endpoint, target.model.id, "chatbot"),
    headers: authHeaders(target.provider),
    body: toWireBody(request)
  }),
  result,
  events,
  unsupported,
  framing: wholeAnswer
}

export const embeddings: EmbeddingWire = {
  request: (target, texts) => ({
    url: modelPath(target.provider.endpoint, target.model.id, "embeddings"),
    headers: authHeaders(target.provider),
    body: { sentences: texts }
  }),
  // The embeddings API reports no token count: the gateway estimates it.
  result: (provider, body, n) => checked(provider, body?.embeddings, n, undefined)
}

// Classification and translation: the registry's default reason (no adapter yet) applies.
export const served: Served = { chat, embeddings }
