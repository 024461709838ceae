/**
 * AWS Bedrock through the Converse API: `POST /model/{modelId}/converse` and `/converse-stream`.
 * The wire is pure translation like the other families; the stream comes in AWS's binary event
 * stream framing (decoded with Smithy's event stream codec, which checks each frame's CRCs), and
 * requests carry either a Bedrock API key (bearer) or an AWS SigV4 signature (Smithy's signer).
 */
import { once } from "../Once.ts"
import type { ChatMessage, ChatRequest, ChatWire, EventParser, FinishReason, StreamEvent, Target, ToolCall } from "./Chat.ts"
import { refusal, wireText, wireToolCall, wireToolCallDelta } from "./Chat.ts"
import { eventJson } from "./internal/http.ts"
import type { SseEvent } from "./internal/sse.ts"
import { commonRefusal, dataUrlOf, hasTools, imagesOfRequest, pushTurn, toolArgumentsOf, toolChoiceMatters } from "./internal/translation.ts"
import type { Served } from "./Served.ts"
import { protocolError, shownUpstreamText, UpstreamError } from "./UpstreamError.ts"

const FAMILY = "Bedrock Converse"
const DEFAULT_REGION = "us-east-1"

// ---------------------------------------------------------------------------------------------
// Request

/** Converse's image formats by media type; it takes image bytes (or S3 locations), never a URL to fetch. */
const imageFormats: Readonly<Record<string, string>> = { "image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp" }

/** A `data:image/...;base64,` URL as Converse's image format and base64 bytes, or undefined. */
const dataImage = (url: string): { format: string; bytes: string } | undefined => {
  const inline = dataUrlOf(url)
  const format = inline === undefined ? undefined : imageFormats[inline.mediaType]
  return format === undefined ? undefined : { format, bytes: inline!.data }
}

/**
 * The tool that carries a JSON answer: Converse has no response format, so `response_format` is a
 * forced call of this tool with the schema as its input schema, and its input comes back as the text.
 */
export const ANSWER_TOOL = "aigw_json_answer"

/** The answer tool's input schema (the format's description goes to the tool's). */
const answerSchema = (f: ChatRequest["responseFormat"]): Readonly<Record<string, unknown>> | undefined =>
  f?.type === "json_schema" ? f.schema : f?.type === "json_object" ? { type: "object" } : undefined

const hasToolBlocks = (r: ChatRequest) => r.messages.some((m) => m.role === "tool" || (m.toolCalls?.length ?? 0) > 0)

/**
 * The models whose toolChoice may force a tool (`any`, `tool`): AWS documents it for Anthropic Claude and
 * Amazon Nova only (model ids, inference profiles such as `us.anthropic.…` and ARNs naming them).
 */
const FORCED_TOOL_MODELS = /anthropic\.claude|amazon\.nova/i

/** What of a request makes Converse force a tool: a JSON answer (the answer tool), a required or named tool choice. */
const forcesTool = (r: ChatRequest): string | undefined =>
  answerSchema(r.responseFormat) !== undefined
    ? "response_format"
    : hasTools(r) && (r.toolChoice === "required" || typeof r.toolChoice === "object")
    ? "tool_choice required or a named tool"
    : undefined

const imageRoles: ReadonlySet<ChatMessage["role"]> = new Set(["user", "tool"])
const details: ReadonlySet<string> = new Set(["auto"])

/**
 * What Converse cannot carry: seed and penalties, parallel_tool_calls false (no such switch), image
 * URLs it would have to fetch and image types it does not take, image detail, tool_choice none when
 * the history holds tool blocks (Converse takes those only with the tools), a tool choice without
 * tools, and response_format together with tools (the JSON answer is itself a forced tool call).
 */
export const unsupported = (r: ChatRequest): string | undefined => {
  const forcing = forcesTool(r)
  if (forcing !== undefined && !FORCED_TOOL_MODELS.test(r.model)) {
    return `${refusal(FAMILY, `${forcing} with model ${r.model}`)}: Converse forces a tool (toolChoice any or tool) only for Anthropic Claude and Amazon Nova models`
  }
  const field = commonRefusal(r, { seed: false, penalties: false, imageRoles, details })
  if (field !== undefined) return refusal(FAMILY, field)
  if (r.parallelToolCalls === false) return refusal(FAMILY, "parallel_tool_calls false")
  for (const image of imagesOfRequest(r)) {
    if (dataImage(image.url) === undefined) {
      const shown = image.url.startsWith("data:") ? `${image.url.slice(0, 30)}...` : image.url
      return `${refusal(FAMILY, `image_url ${shown}`)} (send a data:image/png, jpeg, gif or webp base64 URL)`
    }
  }
  // Converse rejects a blank text block, and a message needs one: refused here, not by the upstream after the call.
  if (r.messages.some((m) => (m.role === "user" || m.role === "system") && m.parts === undefined && m.content.trim() === "")) {
    return refusal(FAMILY, "an empty user or system message")
  }
  if (r.toolChoice === "none" && hasToolBlocks(r)) return refusal(FAMILY, "tool_choice none with tool calls in the history")
  if (!hasTools(r) && toolChoiceMatters(r)) return refusal(FAMILY, "tool_choice without tools")
  if (r.tools?.some((t) => t.name === ANSWER_TOOL)) return refusal(FAMILY, `a tool named ${ANSWER_TOOL} (reserved for response_format)`)
  const schema = answerSchema(r.responseFormat)
  if (schema !== undefined) {
    if (hasTools(r) && r.toolChoice !== "none") return refusal(FAMILY, "response_format together with tools")
    if (hasToolBlocks(r)) return refusal(FAMILY, "response_format with tool calls in the history")
    // A tool's input is a JSON object.
    if (schema.type !== undefined && schema.type !== "object") return refusal(FAMILY, `response_format json_schema of type ${String(schema.type)}`)
  }
  return undefined
}

/** Text and image parts as content blocks (Converse rejects blank text blocks; raw parts were refused). */
const contentBlocks = (m: ChatMessage): Array<unknown> =>
  m.parts === undefined
    ? [{ text: m.content }]
    : m.parts.flatMap((p): Array<unknown> => {
      if (p.type === "text") return p.text === "" ? [] : [{ text: p.text }]
      const image = p.type === "image" ? dataImage(p.url) : undefined
      return image ? [{ image: { format: image.format, source: { bytes: image.bytes } } }] : []
    })

/** Chat messages -> Converse messages; consecutive tool results merge into one user turn. */
export const toWireMessages = (messages: ReadonlyArray<ChatMessage>) => {
  const turns: Array<{ role: "user" | "assistant"; content: Array<unknown> }> = []
  for (const m of messages) {
    if (m.role === "system") continue
    if (m.role === "tool") {
      pushTurn(turns, "user", [{ toolResult: { toolUseId: m.toolCallId ?? "", content: contentBlocks(m) } }])
    } else if (m.role === "assistant") {
      // An assistant turn that only called tools has no text block (Converse rejects blank ones).
      const text = m.content === "" && m.parts === undefined ? [] : contentBlocks(m)
      const uses = (m.toolCalls ?? []).map((c) => ({ toolUse: { toolUseId: c.id, name: c.name, input: toolArgumentsOf(c.arguments) } }))
      pushTurn(turns, "assistant", [...text, ...uses])
    } else {
      pushTurn(turns, "user", contentBlocks(m))
    }
  }
  return turns
}

const toolChoiceOf = (c: ChatRequest["toolChoice"]) =>
  c === "required" ? { any: {} } : typeof c === "object" ? { tool: { name: c.name } } : { auto: {} }

const toolSpec = (name: string, description: string | undefined, schema: Readonly<Record<string, unknown>>) => ({
  toolSpec: { name, ...(description ? { description } : {}), inputSchema: { json: schema } }
})

/** The tools and tool choice: the forced answer tool for response_format, else the request's tools (none for "none"). */
const toolConfigOf = (request: ChatRequest) => {
  const schema = answerSchema(request.responseFormat)
  if (schema !== undefined) {
    const description = request.responseFormat?.type === "json_schema" ? request.responseFormat.description : undefined
    return { tools: [toolSpec(ANSWER_TOOL, description ?? "Give the answer as this tool's input.", schema)], toolChoice: { tool: { name: ANSWER_TOOL } } }
  }
  const tools = request.toolChoice === "none" ? [] : request.tools ?? []
  return tools.length === 0 ? undefined : { tools: tools.map((t) => toolSpec(t.name, t.description, t.parameters)), toolChoice: toolChoiceOf(request.toolChoice) }
}

export const toWireRequest = (request: ChatRequest) => {
  const system = request.messages.filter((m) => m.role === "system").map((m) => ({ text: m.content }))
  const inference = {
    ...(request.maxTokens !== undefined ? { maxTokens: request.maxTokens } : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.topP !== undefined ? { topP: request.topP } : {}),
    ...(request.stop !== undefined && request.stop.length > 0 ? { stopSequences: request.stop } : {})
  }
  const toolConfig = toolConfigOf(request)
  return {
    messages: toWireMessages(request.messages),
    ...(system.length > 0 ? { system } : {}),
    ...(Object.keys(inference).length > 0 ? { inferenceConfig: inference } : {}),
    ...(toolConfig !== undefined ? { toolConfig } : {})
  }
}

/**
 * The region of a Bedrock runtime host, if it names one: `bedrock-runtime.<region>.amazonaws.com`
 * (`.com.cn` in China), the dual-stack `bedrock-runtime.<region>.api.aws`, and a VPC endpoint's
 * `vpce-….bedrock-runtime.<region>.vpce.amazonaws.com`.
 */
export const regionOfHost = (host: string) =>
  /(?:^|\.)bedrock-runtime(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.(?:vpce\.)?(?:amazonaws\.com(?:\.cn)?|api\.aws)$/.exec(host.toLowerCase())?.[1]

const regionOf = (settings: Readonly<Record<string, string>>, url: URL) => settings.AWS_REGION ?? regionOfHost(url.hostname) ?? DEFAULT_REGION

/** The catalogue's endpoint follows AWS_REGION; an endpoint set with BEDROCK_BASE_URL is used as is. */
const endpointOf = (target: Target) => {
  const { endpoint, baseUrl, settings } = target.provider
  const region = settings.AWS_REGION
  return region !== undefined && endpoint === baseUrl.replace(/\/+$/, "") ? `https://bedrock-runtime.${region}.amazonaws.com` : endpoint
}

// ---------------------------------------------------------------------------------------------
// Answers

/**
 * The neutral finish reason; a forced call of the answer tool (no other tool called) is a plain stop.
 * A malformed tool call or output is a failed answer, as Gemini's MALFORMED_FUNCTION_CALL.
 */
export const finishReason = (reason: unknown, calledTools = true): FinishReason =>
  reason === "malformed_tool_use" || reason === "malformed_model_output"
    ? "error"
    : reason === "tool_use"
    ? calledTools ? "tool_calls" : "stop"
    : reason === "max_tokens" || reason === "model_context_window_exceeded"
    ? "length"
    : reason === "content_filtered" || reason === "guardrail_intervened"
    ? "content_filter"
    : "stop"

/** Converse's usage: `inputTokens` excludes the prompt cache's reads and writes, reported apart. */
const usageOf = (u: any) =>
  typeof u?.inputTokens === "number"
    ? {
      promptTokens: u.inputTokens,
      completionTokens: typeof u.outputTokens === "number" ? u.outputTokens : 0,
      ...(typeof u.cacheReadInputTokens === "number" ? { cacheReadTokens: u.cacheReadInputTokens } : {}),
      ...(typeof u.cacheWriteInputTokens === "number" ? { cacheCreationTokens: u.cacheWriteInputTokens } : {})
    }
    : undefined

/** Event types of ConverseStream; any other (an exception's type) fails the stream rather than be skipped. */
const STREAM_EVENTS = new Set(["messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"])

/** The event the framing emits for bytes that are not a valid event stream (its data says why). */
const FRAMING_ERROR = "aigw.framingError"

const streamEvents = (provider: string) => {
  // Content block index -> tool ordinal, so tool deltas carry OpenAI-like indexes.
  const toolIndex = new Map<number, number>()
  // Content blocks that are the answer tool's input: streamed as the answer's text.
  const answerBlocks = new Set<number>()
  return (event: SseEvent): ReadonlyArray<StreamEvent> | UpstreamError | null => {
    if (event.event === FRAMING_ERROR) return protocolError(provider, `bad event stream: ${event.data}`)
    if (!STREAM_EVENTS.has(event.event)) {
      const body = eventJson(provider, event)
      const message = body instanceof UpstreamError ? shownUpstreamText(event.data, 300) : body?.message ?? body?.Message ?? shownUpstreamText(event.data, 300)
      return protocolError(provider, `stream error: ${event.event}: ${String(message)}`)
    }
    const data = eventJson(provider, event)
    if (data instanceof UpstreamError) return data
    switch (event.event) {
      case "contentBlockStart": {
        const tool = data?.start?.toolUse
        if (tool === undefined || tool === null) return []
        if (tool.name === ANSWER_TOOL) {
          answerBlocks.add(data.contentBlockIndex)
          return []
        }
        const piece = wireToolCallDelta(toolIndex.size, tool.toolUseId, tool.name, undefined, true)
        if (typeof piece === "string") return protocolError(provider, piece)
        toolIndex.set(data.contentBlockIndex, piece.index)
        return [piece]
      }
      case "contentBlockDelta": {
        const delta = data?.delta
        if (delta?.text !== undefined) {
          const text = wireText(delta.text)
          if (text === undefined) return protocolError(provider, "a contentBlockDelta's text is not text")
          return text === "" ? [] : [{ _tag: "Text", text }]
        }
        // Reasoning models' thinking, as OpenAI-format providers stream it (`reasoning_content`).
        if (typeof delta?.reasoningContent?.text === "string") return [{ _tag: "Extra", extra: { delta: { reasoning_content: delta.reasoningContent.text } } }]
        if (delta?.toolUse !== undefined) {
          const input = wireText(delta.toolUse?.input)
          if (input === undefined) return protocolError(provider, "a contentBlockDelta's toolUse.input is not text")
          if (answerBlocks.has(data.contentBlockIndex)) return [{ _tag: "Text", text: input }]
          return [{ _tag: "ToolCallDelta", index: toolIndex.get(data.contentBlockIndex) ?? 0, arguments: input }]
        }
        return []
      }
      case "messageStop":
        return [{ _tag: "Finish", reason: finishReason(data?.stopReason, toolIndex.size > 0) }]
      case "metadata": {
        // The last event of an answer (after messageStop); the stream ends with the body.
        const usage = usageOf(data?.usage)
        return usage ? [{ _tag: "Usage", usage }] : []
      }
      default:
        return []
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Stream framing: AWS event stream messages (prelude with total length, headers, payload, CRCs)

/** AWS caps an event stream message at 16 MiB; a longer prelude means the bytes are not one. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024
const MIN_MESSAGE_BYTES = 16

const utf8Decoder = new TextDecoder()
const utf8Encoder = new TextEncoder()

/**
 * Smithy's event stream codec and SigV4 signer, imported by the first Bedrock call (`authorize`, which
 * every call passes before its stream is framed): a process without Bedrock does not load them.
 */
const smithy = once(async () => {
  const [{ Sha256 }, { EventStreamCodec }, { SignatureV4 }] = await Promise.all([
    import("@aws-crypto/sha256-js"),
    import("@smithy/core/event-streams"),
    import("@smithy/signature-v4")
  ])
  return { Sha256, SignatureV4, codec: new EventStreamCodec((bytes) => utf8Decoder.decode(bytes), (text) => utf8Encoder.encode(text)) }
})
type Codec = Awaited<ReturnType<typeof smithy.get>>["codec"]

const headerText = (headers: Record<string, { value: unknown }>, name: string) => {
  const v = headers[name]?.value
  return typeof v === "string" ? v : undefined
}

/** One decoded message as an event: `:event-type` (or the exception's type) and the payload text. */
const toEvent = (codec: Codec, frame: Uint8Array): SseEvent => {
  const { body, headers } = codec.decode(frame)
  const data = utf8Decoder.decode(body)
  switch (headerText(headers, ":message-type")) {
    case "event":
      return { event: headerText(headers, ":event-type") ?? "", data }
    case "exception":
      return { event: headerText(headers, ":exception-type") ?? "unknownException", data }
    case "error":
      return { event: headerText(headers, ":error-code") ?? "unknownError", data: JSON.stringify({ message: headerText(headers, ":error-message") ?? data }) }
    default:
      return { event: FRAMING_ERROR, data: `unknown message type ${String(headerText(headers, ":message-type"))}` }
  }
}

/**
 * The event stream decoder for one stream; malformed or truncated frames become one framing-error event.
 * Reads wait, uncopied into one buffer, until the frame they belong to is whole: joining the buffer with
 * every read copied a large frame once per read (quadratic in the frame's reads).
 */
export const framing = (): EventParser => {
  const codec = smithy.current()?.codec
  let pending: Array<Uint8Array> = []
  let pendingBytes = 0
  // Bytes needed before a frame can be read: its length prefix, then the length it declares.
  let needed = 4
  let failed = false
  const fail = (why: string): Array<SseEvent> => {
    failed = true
    pending = []
    pendingBytes = 0
    return [{ event: FRAMING_ERROR, data: why }]
  }
  return {
    push: (bytes) => {
      if (failed) return []
      if (codec === undefined) return fail("the event stream codec is not loaded: the call did not pass authorize")
      // A copy: the transport owns the chunk it passed.
      pending.push(new Uint8Array(bytes))
      pendingBytes += bytes.length
      if (pendingBytes < needed) return []
      const joined = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes)
      const out: Array<SseEvent> = []
      let offset = 0
      needed = 4
      while (joined.length - offset >= 4) {
        const length = new DataView(joined.buffer, joined.byteOffset + offset, 4).getUint32(0, false)
        if (length < MIN_MESSAGE_BYTES || length > MAX_MESSAGE_BYTES) return [...out, ...fail(`a frame declares ${length} bytes`)]
        if (joined.length - offset < length) {
          needed = length
          break
        }
        try {
          out.push(toEvent(codec, joined.subarray(offset, offset + length)))
        } catch (e) {
          return [...out, ...fail((e as Error).message)]
        }
        offset += length
      }
      const rest = joined.subarray(offset)
      pending = rest.length > 0 ? [rest] : []
      pendingBytes = rest.length
      return out
    },
    end: () => (failed || pendingBytes === 0 ? [] : fail(`the stream ended inside a frame (${pendingBytes} bytes left)`))
  }
}

// ---------------------------------------------------------------------------------------------
// Credentials: a Bedrock API key (bearer), else AWS access keys (SigV4)

/** Signs the exact bytes the transport sends (it POSTs `JSON.stringify(body)`). */
const sign = async (settings: Readonly<Record<string, string>>, request: { url: string; headers: Record<string, string>; body: unknown }) => {
  const { Sha256, SignatureV4 } = await smithy.get()
  const url = new URL(request.url)
  const signer = new SignatureV4({
    service: "bedrock",
    region: regionOf(settings, url),
    credentials: {
      accessKeyId: settings.AWS_ACCESS_KEY_ID ?? "",
      secretAccessKey: settings.AWS_SECRET_ACCESS_KEY ?? "",
      ...(settings.AWS_SESSION_TOKEN !== undefined ? { sessionToken: settings.AWS_SESSION_TOKEN } : {})
    },
    sha256: Sha256
  })
  const signed = await signer.sign({
    method: "POST",
    protocol: url.protocol,
    hostname: url.hostname,
    path: url.pathname,
    query: {},
    headers: { ...request.headers, host: url.host },
    body: JSON.stringify(request.body)
  })
  return signed.headers as Record<string, string>
}

export const wire: ChatWire = {
  request: (target, request, stream) => ({
    url: `${endpointOf(target)}/model/${encodeURIComponent(request.model)}/${stream ? "converse-stream" : "converse"}`,
    // No credential here: `authorize` adds the bearer key or the signature (never both).
    headers: { "content-type": "application/json", accept: stream ? "application/vnd.amazon.eventstream" : "application/json" },
    body: toWireRequest(request)
  }),
  result: (provider, body) => {
    const content = body?.output?.message?.content
    if (!Array.isArray(content)) return protocolError(provider, "no output.message.content array")
    let text = ""
    let answer: string | undefined
    const calls: Array<ToolCall> = []
    for (const [i, b] of (content as Array<any>).entries()) {
      if (b?.text !== undefined) {
        const piece = wireText(b.text)
        if (piece === undefined) return protocolError(provider, `output.message.content[${i}].text is not text`)
        text += piece
      } else if (typeof b?.toolUse === "object" && b.toolUse !== null) {
        const u = b.toolUse
        const call = wireToolCall(u.toolUseId, u.name, u.input, `call_${calls.length}`, true)
        if (typeof call === "string") return protocolError(provider, `output.message.content[${i}]: ${call}`)
        // The answer tool's input is the structured answer itself (response_format).
        if (call.name === ANSWER_TOOL) answer = call.arguments
        else calls.push(call)
      }
    }
    const reasoning = (content as Array<any>).map((b) => b?.reasoningContent?.reasoningText?.text).filter((t) => typeof t === "string").join("")
    return {
      content: answer ?? text,
      toolCalls: calls,
      finishReason: finishReason(body.stopReason, calls.length > 0),
      usage: usageOf(body.usage),
      ...(reasoning !== "" ? { extra: { message: { reasoning_content: reasoning } } } : {})
    }
  },
  events: streamEvents,
  unsupported,
  framing
}

export const served: Served = {
  chat: wire,
  notServed: {
    embeddings: "Bedrock's embedding models (Titan Text Embeddings) take one text per InvokeModel call and aigw's embedding wire sends one request per batch; not wired yet"
  },
  settings: [
    { name: "AWS_ACCESS_KEY_ID", description: "AWS access key id for SigV4 signing (when BEDROCK_API_KEY is not set)" },
    { name: "AWS_SECRET_ACCESS_KEY", description: "AWS secret access key for SigV4 signing", secret: true },
    { name: "AWS_SESSION_TOKEN", description: "AWS session token, for temporary credentials (optional)", secret: true },
    { name: "AWS_REGION", description: "AWS region to call and sign for (default: the base URL's region, else us-east-1)" }
  ],
  credentials: (view, prefix) =>
    view.hasApiKey || (view.settings.AWS_ACCESS_KEY_ID !== undefined && view.settings.AWS_SECRET_ACCESS_KEY !== undefined)
      ? undefined
      : `set ${prefix}_API_KEY (a Bedrock API key), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary credentials)`,
  authorize: async (provider, request) => {
    await smithy.get()
    return provider.apiKey !== undefined
      ? { ...request, headers: { ...request.headers, authorization: `Bearer ${provider.apiKey}` } }
      : { ...request, headers: await sign(provider.settings, request) }
  }
}
