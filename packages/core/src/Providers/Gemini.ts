/**
 * Google Gemini generateContent / streamGenerateContent adapter: `contents` of `parts` (text,
 * `inlineData`, `fileData`), `systemInstruction`, `functionDeclarations` / `functionCall` /
 * `functionResponse`, `toolConfig`, `generationConfig` (sampling, stop, seed, penalties, JSON
 * output, media resolution), `usageMetadata`. What it refuses, and why, is in docs/providers.md
 * ("Translation across wire formats").
 */
import type { ChatMessage, ChatRequest, ChatWire, ContentPart, FinishReason, StreamEvent, Target, TokenUsage, ToolCall } from "./Chat.ts"
import { refusal, reportedCount, wireText, wireToolCall } from "./Chat.ts"
import { geminiEmbeddings } from "./Embeddings.ts"
import { authHeaders, eventJson } from "./internal/http.ts"
import { answerSchemaOf, commonRefusal, dataUrlOf, hasTools, imagesOfRequest, imageTypeOfUrl, toolArgumentsOf, toolChoiceMatters } from "./internal/translation.ts"
import type { Served } from "./Served.ts"
import { protocolError, UpstreamError } from "./UpstreamError.ts"

/** Gemini's schema dialect (an OpenAPI subset) rejects a few JSON Schema keywords. */
export const sanitizeSchema = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(sanitizeSchema)
  if (typeof schema !== "object" || schema === null) return schema
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(schema)) {
    if (k === "$schema" || k === "additionalProperties" || k === "$id") continue
    out[k] = sanitizeSchema(v)
  }
  return out
}

/**
 * An image part: `inlineData` for a data: URL, `fileData` for an https URL (the Gemini API fetches
 * public and signed URLs; its type comes from the file extension, `unsupported` refuses the rest).
 */
const imagePart = (url: string) => {
  const inline = dataUrlOf(url)
  return inline
    ? { inlineData: { mimeType: inline.mediaType, data: inline.data } }
    : { fileData: { mimeType: imageTypeOfUrl(url), fileUri: url } }
}

/** Text and image parts as Gemini parts (raw parts are refused before). */
const partsOfMessage = (parts: ReadonlyArray<ContentPart>): Array<unknown> =>
  parts.flatMap((p): Array<unknown> => (p.type === "text" ? (p.text !== "" ? [{ text: p.text }] : []) : p.type === "image" ? [imagePart(p.url)] : []))

/**
 * Gemini 3 and later (and the aliases that name them, `gemini-pro-latest`; only 1.x and 2.x models are known not
 * to check) refuse (400) a history whose function calls carry no thought signature, which is so
 * for calls another model made and for clients that keep none (Anthropic's format has no field for one).
 * Such a turn's first call gets the value Google documents for histories the model did not produce; a
 * signature that came back is sent as it came.
 */
const FOREIGN_CALL_SIGNATURE = "skip_thought_signature_validator"
const checksCallSignatures = (model: string) => /(?:^|\/)gemini-/.test(model) && !/(?:^|\/)gemini-[12](?:[.-]|$)/.test(model)

export const toWireContents = (messages: ReadonlyArray<ChatMessage>, model = "") => {
  const checksSignatures = checksCallSignatures(model)
  // Gemini answers tools by name; recover each call id's tool name from the history.
  const names = new Map<string, string>()
  for (const m of messages) for (const c of m.toolCalls ?? []) names.set(c.id, c.name)
  const out: Array<{ role: "user" | "model"; parts: Array<any> }> = []
  const push = (role: "user" | "model", parts: Array<any>) => {
    const last = out[out.length - 1]
    // One by one: a spread of a message's many parts would overflow the stack.
    if (last && last.role === role) for (const part of parts) last.parts.push(part)
    else out.push({ role, parts })
  }
  for (const m of messages) {
    if (m.role === "system") continue
    if (m.role === "tool") {
      const name = m.name ?? names.get(m.toolCallId ?? "") ?? "tool"
      push("user", [{ functionResponse: { name, response: { content: parseArgsOrText(m.content) } } }])
    } else if (m.role === "assistant") {
      const calls = m.toolCalls ?? []
      const unsigned = checksSignatures && calls.length > 0 && calls.every((c) => c.signature === undefined || c.signature === "")
      push("model", [
        ...(m.content !== "" ? [{ text: m.content }] : []),
        ...calls.map((c, i) => ({
          functionCall: { name: c.name, args: toolArgumentsOf(c.arguments) },
          ...(unsigned && i === 0 ? { thoughtSignature: FOREIGN_CALL_SIGNATURE } : c.signature ? { thoughtSignature: c.signature } : {})
        }))
      ])
    } else {
      push("user", m.parts ? partsOfMessage(m.parts) : [{ text: m.content }])
    }
  }
  return out
}

const parseArgsOrText = (s: string): unknown => {
  try {
    return JSON.parse(s)
  } catch {
    return s
  }
}

/** `toolConfig.functionCallingConfig`: AUTO, ANY (required, or one named function), NONE. */
const toolConfigOf = (r: ChatRequest) => {
  const c = r.toolChoice
  if (c === undefined || !toolChoiceMatters(r)) return {}
  const functionCallingConfig = c === "none"
    ? { mode: "NONE" }
    : c === "required"
    ? { mode: "ANY" }
    : typeof c === "object"
    ? { mode: "ANY", allowedFunctionNames: [c.name] }
    : { mode: "AUTO" }
  return { toolConfig: { functionCallingConfig } }
}

const mediaResolutions: Readonly<Record<string, string>> = { low: "MEDIA_RESOLUTION_LOW", high: "MEDIA_RESOLUTION_HIGH" }

/** The request's image detail (low or high; one value per request, `unsupported` refuses a mix) as `mediaResolution`. */
const mediaResolutionOf = (r: ChatRequest) => {
  const detail = imagesOfRequest(r).map((i) => i.detail).find((d) => d !== undefined && d !== "auto")
  return detail !== undefined ? { mediaResolution: mediaResolutions[detail] } : {}
}

/** JSON output: any JSON for json_object, JSON following the schema (as JSON Schema, `responseJsonSchema`) for json_schema. */
const responseFormatOf = (r: ChatRequest) => {
  const f = r.responseFormat
  if (f === undefined || f.type === "text") return {}
  return { responseMimeType: "application/json", ...(f.type === "json_schema" ? { responseJsonSchema: answerSchemaOf(f) } : {}) }
}

const FAMILY = "Gemini generateContent"
const imageRoles: ReadonlySet<ChatMessage["role"]> = new Set(["user"])
const details: ReadonlySet<string> = new Set(["auto", "low", "high"])

/**
 * What this wire cannot carry: images outside user turns, https images whose type the URL does not
 * tell (fileData needs it), different image details in one request (Gemini's resolution is per
 * request), and parallel_tool_calls=false (Gemini cannot be kept to one call a turn).
 */
export const unsupported = (r: ChatRequest): string | undefined => {
  const field = commonRefusal(r, { seed: true, penalties: true, imageRoles, details })
  if (field !== undefined) return refusal(FAMILY, field)
  const images = imagesOfRequest(r)
  const remote = images.find((i) => !i.url.startsWith("data:") && imageTypeOfUrl(i.url) === undefined)
  if (remote !== undefined) {
    return `${refusal(FAMILY, "image_url with an https URL that does not end in an image file extension")} (send a data: URL)`
  }
  if (new Set(images.map((i) => i.detail).filter((d) => d !== undefined && d !== "auto")).size > 1) {
    return refusal(FAMILY, "image_url.detail with different values in one request")
  }
  if (r.parallelToolCalls === false && hasTools(r) && r.toolChoice !== "none") return refusal(FAMILY, "parallel_tool_calls=false")
  return undefined
}

/** The reasoning option as `thinkingConfig.thinkingBudget`: a budget, 0 (off) or -1 (the model decides: dynamic thinking). */
const thinkingConfigOf = (r: ChatRequest) => {
  const t = r.reasoning
  if (t === undefined) return {}
  const thinkingBudget = t.mode === "disabled" ? 0 : t.mode === "adaptive" ? -1 : t.budgetTokens ?? -1
  return { thinkingConfig: { thinkingBudget } }
}

export const toWireRequest = (request: ChatRequest) => {
  const system = request.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n\n")
  const generationConfig = {
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.maxTokens !== undefined ? { maxOutputTokens: request.maxTokens } : {}),
    ...(request.topP !== undefined ? { topP: request.topP } : {}),
    ...(request.topK !== undefined ? { topK: request.topK } : {}),
    ...thinkingConfigOf(request),
    ...(request.stop !== undefined && request.stop.length > 0 ? { stopSequences: request.stop } : {}),
    ...(request.seed !== undefined ? { seed: request.seed } : {}),
    ...(request.frequencyPenalty !== undefined ? { frequencyPenalty: request.frequencyPenalty } : {}),
    ...(request.presencePenalty !== undefined ? { presencePenalty: request.presencePenalty } : {}),
    ...responseFormatOf(request),
    ...mediaResolutionOf(request)
  }
  return {
    contents: toWireContents(request.messages, request.model),
    ...(system ? { systemInstruction: { parts: [{ text: system }] } } : {}),
    ...(request.tools && request.tools.length > 0
      ? {
        tools: [{
          functionDeclarations: request.tools.map((t) => ({
            name: t.name,
            ...(t.description ? { description: t.description } : {}),
            parameters: sanitizeSchema(t.parameters)
          }))
        }]
      }
      : {}),
    ...toolConfigOf(request),
    ...(Object.keys(generationConfig).length > 0 ? { generationConfig } : {})
  }
}

/** Gemini's and Vertex's finish reasons that mean the answer was blocked. */
const BLOCKED = new Set([
  "SAFETY",
  "RECITATION",
  "PROHIBITED_CONTENT",
  "BLOCKLIST",
  "SPII",
  "IMAGE_SAFETY",
  "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_RECITATION",
  "MODEL_ARMOR"
])
/** Those that mean the model failed to produce a usable answer (a malformed or unexpected function call, …). */
const FAILED = new Set(["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE", "LANGUAGE"])

export const finishReason = (reason: unknown, hasCalls: boolean): FinishReason =>
  typeof reason === "string" && FAILED.has(reason)
    ? "error"
    : hasCalls ? "tool_calls" : reason === "MAX_TOKENS" ? "length" : typeof reason === "string" && BLOCKED.has(reason) ? "content_filter" : "stop"

const blockedPrompt = (body: any): boolean => typeof body?.promptFeedback?.blockReason === "string" && !(body.candidates?.length > 0)

/**
 * The answer's text (thought parts apart) and tool calls in the first candidate's parts, or the first
 * of them (a candidate, its content, a part) that is not what the wire says. Calls are numbered from `offset` when Gemini gives no id.
 */
const readParts = (body: any, offset: number): { readonly text: string; readonly calls: Array<ToolCall> } | string => {
  const none = { text: "", calls: [] }
  const candidates = body?.candidates
  if (candidates == null) return none
  if (!Array.isArray(candidates)) return "candidates is not a list"
  const candidate = candidates[0]
  if (candidate === undefined) return none
  if (typeof candidate !== "object" || candidate === null) return "candidates[0] is not an object"
  const content = candidate.content
  if (content == null) return none
  if (typeof content !== "object" || Array.isArray(content)) return "candidates[0].content is not an object"
  const parts = content.parts
  if (parts == null) return none
  if (!Array.isArray(parts)) return "candidates[0].content.parts is not an array"
  let text = ""
  const calls: Array<ToolCall> = []
  for (const [i, p] of parts.entries()) {
    if (p?.functionCall) {
      const f = p.functionCall
      const call = wireToolCall(f.id, f.name, f.args, `call_${offset + calls.length}_${f.name}`, true)
      if (typeof call === "string") return `parts[${i}]: ${call}`
      // Gemini 3 wants it back with the call (a part's sibling of functionCall).
      calls.push(typeof p.thoughtSignature === "string" ? { ...call, signature: p.thoughtSignature } : call)
    } else if (p?.text !== undefined && !p.thought) {
      const piece = wireText(p.text)
      if (piece === undefined) return `parts[${i}].text is not text`
      text += piece
    } else {
      // An image (an image model's answer), a file or code the model ran: no chat answer here carries one, and an
      // answer without it would be an empty or partial success.
      const kind = typeof p === "object" && p !== null ? UNCARRIED_PARTS.find((k) => p[k] != null) : undefined
      if (kind !== undefined) return `parts[${i}] is ${kind}, which the gateway's chat answers cannot carry (text and function calls only)`
    }
  }
  return { text, calls }
}

/** Answer parts Gemini may send that a chat answer has no place for. */
const UNCARRIED_PARTS = ["inlineData", "fileData", "executableCode", "codeExecutionResult"] as const

/**
 * `promptTokenCount` includes the tokens served from the cache (`cachedContentTokenCount`, implicit
 * caching too): they are taken out of the prompt count, which excludes them (Providers/Chat.ts TokenUsage).
 * Thinking tokens are output tokens, billed as such.
 */
const usageOf = (u: any): Partial<TokenUsage> | undefined => {
  // Only counts that are counts take part in the arithmetic: a negative cache count would raise the prompt's.
  const prompt = reportedCount(u?.promptTokenCount)
  if (prompt === undefined) return undefined
  const cached = reportedCount(u.cachedContentTokenCount)
  const read = cached !== undefined && cached <= prompt ? cached : undefined
  const thoughts = reportedCount(u.thoughtsTokenCount)
  const candidates = reportedCount(u.candidatesTokenCount)
  return {
    promptTokens: prompt - (read ?? 0),
    // Left out, the completion is counted by the gateway (ProviderCalls.estimatedUsage), never taken as 0.
    ...(candidates !== undefined ? { completionTokens: candidates + (thoughts ?? 0) } : {}),
    ...(read !== undefined ? { cacheReadTokens: read } : {}),
    ...(thoughts !== undefined ? { reasoningTokens: thoughts } : {})
  }
}

const url = (target: Target, stream: boolean) =>
  `${target.provider.endpoint}/models/${encodeURIComponent(target.model.id)}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`

export const wire: ChatWire = {
  request: (target, request, stream) => ({ url: url(target, stream), headers: authHeaders(target.provider), body: toWireRequest(request) }),
  unsupported,
  // Gemini's thought parts carry no Anthropic signature: reasoning history is refused, not dropped.
  carries: { topK: true, reasoning: true },
  result: (provider, body) => {
    // A blocked prompt has no candidates, only the reason (promptFeedback.blockReason).
    if (blockedPrompt(body)) return { content: "", toolCalls: [], finishReason: "content_filter", usage: usageOf(body.usageMetadata) }
    // No candidate and no blocked prompt: nothing was answered (an empty success was billed).
    if (!Array.isArray(body?.candidates) || body.candidates.length === 0) return protocolError(provider, "no candidates")
    const read = readParts(body, 0)
    if (typeof read === "string") return protocolError(provider, read, usageOf(body.usageMetadata))
    return {
      content: read.text,
      toolCalls: read.calls,
      finishReason: finishReason(body.candidates[0]?.finishReason, read.calls.length > 0),
      usage: usageOf(body.usageMetadata)
    }
  },
  events: (provider) => {
    let calls = 0
    return (event): ReadonlyArray<StreamEvent> | UpstreamError => {
      const chunk = eventJson(provider, event)
      if (chunk instanceof UpstreamError) return chunk
      if (chunk?.error) return protocolError(provider, `stream error: ${chunk.error.message ?? "unknown"}`)
      const out: Array<StreamEvent> = []
      const read = readParts(chunk, calls)
      if (typeof read === "string") return protocolError(provider, read)
      if (read.text !== "") out.push({ _tag: "Text", text: read.text })
      for (const c of read.calls) {
        out.push({ _tag: "ToolCallDelta", index: calls++, id: c.id, name: c.name, arguments: c.arguments, ...(c.signature !== undefined ? { signature: c.signature } : {}) })
      }
      const reason = chunk?.candidates?.[0]?.finishReason
      if (reason) out.push({ _tag: "Finish", reason: finishReason(reason, calls > 0) })
      else if (blockedPrompt(chunk)) out.push({ _tag: "Finish", reason: "content_filter" })
      const usage = usageOf(chunk?.usageMetadata)
      if (usage) out.push({ _tag: "Usage", usage })
      return out
    }
  }
}

/** What aigw serves through the Gemini family. */
export const family: Served = { chat: wire, embeddings: geminiEmbeddings }
