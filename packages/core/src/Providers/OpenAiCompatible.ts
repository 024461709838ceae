/**
 * The OpenAI-compatible wire family (Chat Completions and embeddings wire formats), and what each
 * OpenAI-compatible provider serves beyond it: one data entry per provider in `providers` (its
 * quirks, media endpoints with their default models, job APIs). A provider of this family with no
 * entry serves what the family serves and the catalogue says it offers.
 */
import type { ChatMessage, ChatRequest, ChatWire, ContentPart, FinishReason, ResponseFormat, StreamEvent, Target, ToolCall, ToolChoice, ToolDefinition, TokenUsage, WireRequest } from "./Chat.ts"
import { reportedCount, wireText, wireToolCall, wireToolCallDelta } from "./Chat.ts"
import { openAiEmbeddings } from "./Embeddings.ts"
import { authHeaders, eventJson } from "./internal/http.ts"
import { fieldsOutside } from "../JsonText.ts"
import { openAiImages, openAiImageSizeRefusal } from "./OpenAiMedia.ts"
import type { Quirks, Served } from "./Served.ts"
import { protocolError, UpstreamError } from "./UpstreamError.ts"

/** Local model servers take no key unless they were started with one (then `<ID>_API_KEY` is sent as a bearer token). */
const localServer: Served = { credentials: () => undefined }

/** Azure OpenAI's API version for deployment URLs; without it the v1 API (`.../openai/v1`, deployment name as `model`). */
export const AZURE_API_VERSION = "AZURE_OPENAI_API_VERSION"

/**
 * Azure OpenAI's URL for an endpoint: the v1 API by default (the deployment name is the body's
 * `model`); the deployment URL with an api-version when AZURE_OPENAI_API_VERSION is set.
 */
const atAzureUrl = (target: Target, request: WireRequest): WireRequest => ({ ...request, url: azureUrl(target, request.url) })

const azureUrl = (target: Target, url: string) => {
  const version = target.provider.settings[AZURE_API_VERSION]
  if (version === undefined) return url
  const path = url.slice(target.provider.endpoint.length + 1)
  // The deployment API lives under /openai; a base URL given with /v1 is accepted.
  const base = target.provider.endpoint.replace(/\/v1$/, "")
  return `${base}/deployments/${encodeURIComponent(target.model.id)}/${path}?api-version=${encodeURIComponent(version)}`
}

const defaults: Quirks = { maxTokensField: "max_tokens", streamUsage: true }

const quirksOf = (providerId: string): Quirks => ({ ...defaults, ...providers[providerId]?.quirks })

const toWirePart = (p: ContentPart) =>
  p.type === "text"
    ? { type: "text", text: p.text }
    : p.type === "image"
    ? { type: "image_url", image_url: { url: p.url, ...(p.detail !== undefined ? { detail: p.detail } : {}) } }
    : p.part

const wireContent = (m: ChatMessage) => (m.parts !== undefined ? m.parts.map(toWirePart) : m.content)

/**
 * An assistant message's empty content as OpenAI writes it where something else is the answer: null beside
 * tool calls, a refusal or an audio answer (the neutral message holds "" for all of these).
 */
const answeredElsewhere = (m: ChatMessage) =>
  m.role === "assistant" && m.content === "" && m.parts === undefined &&
  ((m.toolCalls !== undefined && m.toolCalls.length > 0) || m.extra?.refusal != null || m.extra?.audio != null)

const toWireMessage = (m: ChatMessage) => {
  // Fields the neutral message does not model go back as they came (OpenAI-format callers only).
  const base = m.extra ?? {}
  // A tool message's name (Gemini answers tools by it; Mistral's API takes it) goes on as it came.
  if (m.role === "tool") return { ...base, role: "tool", tool_call_id: m.toolCallId ?? "", ...(m.name !== undefined ? { name: m.name } : {}), content: wireContent(m) }
  const content = answeredElsewhere(m) ? null : wireContent(m)
  if (m.role === "assistant" && m.toolCalls && m.toolCalls.length > 0) return { ...base, role: "assistant", content, tool_calls: wireToolCalls(m.toolCalls) }
  return { ...base, role: m.role, content }
}

/** OpenAI-format `tool_calls` of an assistant message (also Cohere's). */
export const wireToolCalls = (calls: ReadonlyArray<ToolCall>) =>
  calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }))

/** OpenAI-format function `tools` (also Cohere's), or nothing when the request offers none. */
export const wireTools = (tools: ReadonlyArray<ToolDefinition> | undefined) =>
  tools && tools.length > 0
    ? {
      tools: tools.map((t) => ({
        type: "function",
        // A function's unmapped fields (strict, ...) reach only OpenAI-format upstreams: the others refuse them (extraFieldOf).
        function: { ...t.extra, name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.parameters }
      }))
    }
    : {}

/** The OpenAI `response_format` of a neutral one. */
export const wireResponseFormat = (f: ResponseFormat) =>
  f.type === "json_schema"
    ? {
      type: "json_schema",
      json_schema: {
        name: f.name,
        schema: f.schema,
        ...(f.description !== undefined ? { description: f.description } : {}),
        ...(f.strict !== undefined ? { strict: f.strict } : {})
      }
    }
    : { type: f.type }

/** The OpenAI `tool_choice` of a neutral one. */
export const wireToolChoice = (c: ToolChoice) => (typeof c === "string" ? c : { type: "function", function: { name: c.name } })

/** Sampling and format options in the OpenAI format (also used by other families that take the same names). */
const wireOptions = (r: ChatRequest) => ({
  ...(r.topP !== undefined ? { top_p: r.topP } : {}),
  ...(r.stop !== undefined ? { stop: r.stop } : {}),
  ...(r.seed !== undefined ? { seed: r.seed } : {}),
  ...(r.frequencyPenalty !== undefined ? { frequency_penalty: r.frequencyPenalty } : {}),
  ...(r.presencePenalty !== undefined ? { presence_penalty: r.presencePenalty } : {}),
  ...(r.responseFormat !== undefined ? { response_format: wireResponseFormat(r.responseFormat) } : {}),
  ...(r.toolChoice !== undefined ? { tool_choice: wireToolChoice(r.toolChoice) } : {}),
  ...(r.parallelToolCalls !== undefined ? { parallel_tool_calls: r.parallelToolCalls } : {})
})

export const toWireRequest = (providerId: string, request: ChatRequest, stream: boolean) => {
  const q = quirksOf(providerId)
  const body = {
    // Fields aigw does not map are the caller's to send: they go first, and the mapped ones win.
    ...request.extra,
    model: request.model,
    messages: request.messages.map(toWireMessage),
    ...wireTools(request.tools),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.maxTokens !== undefined ? { [q.maxTokensField]: request.maxTokens } : {}),
    ...wireOptions(request),
    ...(stream ? { stream: true, ...(q.streamUsage ? { stream_options: { include_usage: true } } : {}) } : {})
  }
  return q.renamed ? renameFields(body, q.renamed) : body
}

const renameFields = (body: Record<string, unknown>, renamed: Readonly<Record<string, string>>) => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(body)) out[renamed[k] ?? k] = v
  return out
}

/**
 * The neutral finish reason of an OpenAI-format `finish_reason`, with the values compatible
 * providers add: Mistral's `model_length` and `error`, DeepSeek's `insufficient_system_resource`,
 * watsonx's `time_limit` and `cancelled`. An answer that ended in an error is a failed call, not a
 * short success (the engine's `upstreamFailedAnswer`).
 */
export const finishReason = (reason: unknown): FinishReason => {
  switch (reason) {
    case "length":
    case "model_length":
    case "time_limit":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool_calls"
    case "content_filter":
      return "content_filter"
    case "error":
    case "insufficient_system_resource":
    case "cancelled":
      return "error"
    default:
      return "stop"
  }
}

/**
 * The counts of an OpenAI `usage` (the completion's from the total when only that is given); a count
 * not given stays undefined. `prompt_tokens` includes the tokens read from the prompt cache
 * (`prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`): they are taken out
 * of the prompt count, which excludes them (Providers/Chat.ts TokenUsage), and the OpenAI surface
 * adds them back. `completion_tokens_details.reasoning_tokens` are part of the completion's.
 */
const usageOf = (u: any): Partial<TokenUsage> | undefined => {
  const prompt = typeof u?.prompt_tokens === "number" ? u.prompt_tokens : undefined
  const completionTokens = typeof u?.completion_tokens === "number"
    ? u.completion_tokens
    : prompt !== undefined && typeof u.total_tokens === "number" ? u.total_tokens - prompt : undefined
  if (prompt === undefined && completionTokens === undefined) return undefined
  const cachedCount = u.prompt_tokens_details?.cached_tokens ?? u.prompt_cache_hit_tokens
  const cached = typeof cachedCount === "number" && prompt !== undefined && cachedCount > 0 && cachedCount <= prompt ? cachedCount : undefined
  const reasoning = u.completion_tokens_details?.reasoning_tokens
  const promptDetails = otherCounts(u.prompt_tokens_details, "cached_tokens")
  const completionDetails = otherCounts(u.completion_tokens_details, "reasoning_tokens")
  return {
    promptTokens: cached === undefined ? prompt : prompt! - cached,
    completionTokens,
    ...(cached !== undefined ? { cacheReadTokens: cached } : {}),
    ...(typeof reasoning === "number" && reasoning > 0 ? { reasoningTokens: reasoning } : {}),
    ...(promptDetails !== undefined || completionDetails !== undefined
      ? { tokenDetails: { ...(promptDetails ? { prompt: promptDetails } : {}), ...(completionDetails ? { completion: completionDetails } : {}) } }
      : {})
  }
}

/** The believable counts of a `*_tokens_details` object other than the one the gateway models (`TokenDetails`); at most 16. */
const otherCounts = (details: unknown, modelled: string): Record<string, number> | undefined => {
  if (typeof details !== "object" || details === null || Array.isArray(details)) return undefined
  let out: Record<string, number> | undefined
  let n = 0
  for (const [name, value] of Object.entries(details)) {
    const count = reportedCount(value)
    if (name === modelled || name === "__proto__" || count === undefined || name.length > 64 || n++ >= 16) continue
    ;(out ??= {})[name] = count
  }
  return out
}

const url = (target: Target) => `${target.provider.endpoint}/chat/completions`

const isObject = (v: unknown): v is Record<string, any> => typeof v === "object" && v !== null && !Array.isArray(v)

const modelledBody = new Set(["id", "object", "created", "model", "choices", "usage"])
const modelledChoice = new Set(["index", "message", "finish_reason", "delta"])
const modelledMessage = new Set(["role", "content", "tool_calls", "function_call"])
const modelledDelta = new Set(["role", "content", "tool_calls", "function_call"])

/**
 * A message's or delta's `content`: a string (absent or null: none), or (Mistral's reasoning models) an array of chunks,
 * `text` ones and `thinking` ones (`{ type: "thinking", thinking: [{ type: "text", text }] }`).
 * The text chunks are the answer; the thinking comes back as `reasoning_content` (DeepSeek's and
 * Bedrock's name for it here); a chunk of any other type is kept as it came, in `content_parts`.
 */
const contentOf = (content: unknown): { readonly text: string; readonly fields?: Record<string, unknown> } | undefined => {
  if (!Array.isArray(content)) {
    const text = wireText(content)
    return text === undefined ? undefined : { text }
  }
  let text = ""
  let reasoning = ""
  const others: Array<unknown> = []
  for (const part of content) {
    if (part?.type === "text" && typeof part.text === "string") text += part.text
    else if (part?.type === "thinking" && Array.isArray(part.thinking) && part.thinking.every((t: any) => typeof t?.text === "string")) {
      for (const t of part.thinking) reasoning += t.text
    } else others.push(part)
  }
  const fields = { ...(reasoning !== "" ? { reasoning_content: reasoning } : {}), ...(others.length > 0 ? { content_parts: others } : {}) }
  return Object.keys(fields).length > 0 ? { text, fields } : { text }
}

/** The thought signature Gemini's OpenAI-compatible endpoint puts on a tool call, as the neutral call's `signature`. */
const signatureOf = (call: any): { readonly signature?: string } => {
  const signature = call?.extra_content?.google?.thought_signature
  return typeof signature === "string" ? { signature } : {}
}

/**
 * A tool call of an OpenAI-format answer, or why it is none (Chat.ts `wireToolCall`: a call without
 * an id gets one by its position); Gemini's OpenAI-compatible API gives its signature in `extra_content`.
 */
const toolCallOf = (c: any, i: number): ToolCall | string => {
  const call = wireToolCall(c?.id, c?.function?.name, c?.function?.arguments, `call_${i}`)
  return typeof call === "string" ? call : { ...call, ...signatureOf(c) }
}

/** What an OpenAI-format answer carries beyond the neutral result (so the OpenAI surface returns it). */
const extraOf = (body: any, choice: any, contentFields: Record<string, unknown> | undefined) => {
  const messageExtra = fieldsOutside(choice.message, modelledMessage)
  const message = contentFields ? { ...messageExtra, ...contentFields } : messageExtra
  const extra = { body: fieldsOutside(body, modelledBody), choice: fieldsOutside(choice, modelledChoice), message }
  return extra.body || extra.choice || extra.message ? extra : undefined
}

export const wire: ChatWire = {
  request: (target, request, stream) => ({
    url: url(target),
    headers: authHeaders(target.provider),
    body: toWireRequest(target.provider.id, request, stream)
  }),
  result: (provider, body) => {
    const choice = body?.choices?.[0]
    if (!isObject(choice?.message)) return protocolError(provider, "no choices[0].message object")
    const message = choice.message
    if (message.tool_calls != null && !Array.isArray(message.tool_calls)) return protocolError(provider, "choices[0].message.tool_calls is not a list")
    // The legacy `function_call` of older compatible servers is the one call it names.
    const legacy = message.function_call
    if (legacy != null && !isObject(legacy)) return protocolError(provider, "choices[0].message.function_call is not an object")
    const calls: Array<unknown> = Array.isArray(message.tool_calls) && message.tool_calls.length > 0 ? message.tool_calls : legacy != null ? [{ function: legacy }] : []
    const content = contentOf(message.content)
    if (content === undefined) return protocolError(provider, "choices[0].message.content is neither text nor an array of parts")
    const extra = extraOf(body, choice, content.fields)
    const toolCalls: Array<ToolCall> = []
    for (const [i, c] of calls.entries()) {
      const call = toolCallOf(c, i)
      if (typeof call === "string") return protocolError(provider, `tool call ${i}: ${call}`)
      toolCalls.push(call)
    }
    return {
      content: content.text,
      toolCalls,
      finishReason: finishReason(choice.finish_reason),
      usage: usageOf(body.usage),
      ...(extra ? { extra } : {})
    }
  },
  events: (provider) => {
    // The tool calls begun so far, by index: a call's first piece names it.
    const begun = new Set<number>()
    return (event) => {
      if (event.data === "[DONE]") return null
      const chunk = eventJson(provider, event)
      if (chunk instanceof UpstreamError) return chunk
      if (chunk?.error) return protocolError(provider, `stream error: ${chunk.error.message ?? JSON.stringify(chunk.error)}`)
      const out: Array<StreamEvent> = []
      if (chunk?.choices != null && !Array.isArray(chunk.choices)) return protocolError(provider, "a stream chunk's choices is not a list")
      const choice = chunk?.choices?.[0]
      if (choice !== undefined && !isObject(choice)) return protocolError(provider, "a stream chunk's choices[0] is not an object")
      const delta = choice?.delta
      if (delta != null && !isObject(delta)) return protocolError(provider, "a stream chunk's delta is not an object")
      // A string on nearly every event: the chunks of an array (Mistral's reasoning) are read only when they come.
      let contentFields: Record<string, unknown> | undefined
      if (typeof delta?.content === "string") {
        if (delta.content !== "") out.push({ _tag: "Text", text: delta.content })
      } else if (delta?.content !== undefined && delta.content !== null) {
        const content = contentOf(delta.content)
        if (content === undefined) return protocolError(provider, "a stream delta's content is neither text nor an array of parts")
        if (content.text !== "") out.push({ _tag: "Text", text: content.text })
        contentFields = content.fields
      }
      if (delta?.tool_calls != null && !Array.isArray(delta.tool_calls)) return protocolError(provider, "a stream delta's tool_calls is not a list")
      for (const call of delta?.tool_calls ?? []) {
        if (!isObject(call)) return protocolError(provider, "a stream delta's tool call is not an object")
        const index = call.index ?? 0
        const piece = wireToolCallDelta(index, call.id, call.function?.name, call.function?.arguments, !begun.has(index))
        if (typeof piece === "string") return protocolError(provider, piece)
        begun.add(piece.index)
        out.push({ ...piece, ...signatureOf(call) })
      }
      const deltaExtra = contentFields ? { ...fieldsOutside(delta, modelledDelta), ...contentFields } : fieldsOutside(delta, modelledDelta)
      const choiceExtra = fieldsOutside(choice, modelledChoice)
      const bodyExtra = fieldsOutside(chunk, modelledBody)
      if (deltaExtra || choiceExtra || bodyExtra) {
        // Set one by one rather than spread: this runs for nearly every event of a stream.
        const extra: { delta?: Record<string, unknown>; choice?: Record<string, unknown>; body?: Record<string, unknown> } = {}
        if (deltaExtra) extra.delta = deltaExtra
        if (choiceExtra) extra.choice = choiceExtra
        if (bodyExtra) extra.body = bodyExtra
        out.push({ _tag: "Extra", extra })
      }
      if (choice?.finish_reason) out.push({ _tag: "Finish", reason: finishReason(choice.finish_reason) })
      const usage = usageOf(chunk?.usage)
      if (usage) out.push({ _tag: "Usage", usage })
      return out
    }
  }
}

/** What every provider of the family serves (where the catalogue says the upstream offers it). */
export const family: Served = { chat: wire, embeddings: openAiEmbeddings }

/** Each OpenAI-compatible provider's differences from the family: adding one is one entry here. */
export const providers: Readonly<Record<string, Served>> = {
  openai: {
    quirks: { maxTokensField: "max_completion_tokens" },
    images: { defaultModel: "gpt-image-1", unsupported: openAiImageSizeRefusal },
    moderation: { defaultModel: "omni-moderation-latest" },
    speech: { defaultModel: "gpt-4o-mini-tts" },
    transcription: { defaultModel: "gpt-4o-mini-transcribe" },
    batchApi: "openai",
    fineTuning: "openai"
  },
  "azure-openai": {
    quirks: { maxTokensField: "max_completion_tokens" },
    chat: { ...wire, request: (t, r, stream) => atAzureUrl(t, wire.request(t, r, stream)) },
    embeddings: { ...openAiEmbeddings, request: (t, texts) => atAzureUrl(t, openAiEmbeddings.request(t, texts)) },
    settings: [{
      name: AZURE_API_VERSION,
      description: "Use deployment URLs (`/openai/deployments/{deployment}/...?api-version=`) with this API version, e.g. 2024-10-21; unset: the v1 API"
    }]
  },
  ollama: localServer,
  vllm: localServer,
  lmstudio: localServer,
  llamacpp: localServer,
  "together-ai": {
    // Together's image API takes `width` and `height`; it ignores OpenAI's `size`.
    images: { defaultModel: "black-forest-labs/FLUX.1-schnell", generate: openAiImages("width and height") },
    // https://docs.together.ai/reference/audio-transcriptions (without a language it assumes `en`)
    transcription: { defaultModel: "openai/whisper-large-v3" }
  },
  // https://deepinfra.com/black-forest-labs/FLUX-2-dev/api (OpenAI format under /v1/openai, `size`)
  deepinfra: { images: { defaultModel: "black-forest-labs/FLUX-2-dev" } },
  // https://www.scaleway.com/en/docs/generative-apis/how-to/query-audio-models/ and its supported-models page
  scaleway: { transcription: { defaultModel: "whisper-large-v3" } },
  // https://docs.siliconflow.com/en/api-reference/audio/create-audio-transcriptions (file and model only)
  siliconflow: {
    transcription: {
      defaultModel: "FunAudioLLM/SenseVoiceSmall",
      unsupported: (r) => (r.language ? "language: SiliconFlow transcription takes no language" : undefined)
    }
  },
  // xAI's image API takes no `size` (https://docs.x.ai/docs/guides/image-generations): an aspect_ratio and resolution of its own.
  xai: {
    images: {
      defaultModel: "grok-2-image",
      unsupported: (r) =>
        r.width !== undefined ? `xAI's image API takes no pixel size (width and height); leave them out, or send xAI's own aspect_ratio and resolution through /openai/v1/images/generations` : undefined
    }
  },
  mistral: {
    // Mistral refuses unknown fields (stream_options) and names the seed random_seed.
    quirks: { streamUsage: false, renamed: { seed: "random_seed" } },
    moderation: { defaultModel: "mistral-moderation-latest" },
    transcription: { defaultModel: "voxtral-mini-latest" }
  },
  groq: { transcription: { defaultModel: "whisper-large-v3-turbo" } }
}
