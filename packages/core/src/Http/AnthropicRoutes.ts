/**
 * The Anthropic-compatible surface under /anthropic/v1: the Messages API (plain and streamed,
 * with tools, tool results and images), so the Anthropic SDKs and Claude-based tools can point
 * their base URL at the gateway. The request becomes the same neutral call as /openai/v1 and
 * /v1/complete (same authentication, quota, routing and usage recording) and the answer is
 * written back in Anthropic's shapes. A field or block it cannot carry is a 400 naming it.
 */
import { Effect, Option, Schema } from "effect"
import type { CompletionInput, CompletionResult, StreamChunk } from "../Capabilities/Completions.ts"
import { BadRequest, NotFound, UpstreamFailed } from "../Errors.ts"
import { argumentsObject, type CacheHint, type ChatMessage, type ChatOptions, type ContentPart, type FinishReason, joinedText, type ReasoningPart } from "../Providers/Chat.ts"
import { chatSurface, headerOf, type RequestHeaders } from "./ChatSurface.ts"
import type { InputCounts } from "../Engine/ProviderCalls.ts"
import { errorBody } from "./Edge.ts"
import { CacheControl, cacheOf, Content, inputOf, MAX_CONTENT, ToolName, type ToolResultBody } from "./CompletionRoutes.ts"
import { AnthropicMessage, AnthropicModel, AnthropicModelList } from "./ResponseSchemas.ts"
import { Catalog, type ModelEntry } from "../Catalog/Catalog.ts"
import { namedModel, pathModelId } from "../Catalog/Queries.ts"
import { countMessages } from "../Tokens.ts"
import { authed } from "./Route.ts"
import { BoundedArray } from "../RequestFields.ts"
import type { Plan } from "../Plans.ts"
import { Routing, type RoutingError } from "../Routing.ts"

const tag = "Anthropic-compatible"

// ---- Models (GET /anthropic/v1/models, as the Anthropic SDKs' models.list and models.retrieve call them) ----

const EPOCH = "1970-01-01T00:00:00Z"
const autoAnthropicModel = { type: "model" as const, id: "auto", display_name: "auto (the gateway routes)", created_at: EPOCH }
const anthropicModel = (m: ModelEntry) => ({ type: "model" as const, id: m.id, display_name: m.name, created_at: EPOCH })

const ModelsQuery = Schema.Struct({
  limit: Schema.optional(Schema.String.pipe(
    Schema.pattern(/^\d{1,4}$/, { message: () => "limit must be a whole number from 1 to 1000" }),
    Schema.compose(Schema.NumberFromString),
    Schema.between(1, 1000, { message: () => "limit must be a whole number from 1 to 1000" })
  )),
  after_id: Schema.optional(Schema.String.pipe(Schema.maxLength(300))),
  before_id: Schema.optional(Schema.String.pipe(Schema.maxLength(300)))
})

/**
 * One page of the surface's models (`auto`, then the catalogue's chat models), as Anthropic pages its
 * list: `limit` (20) after `after_id` or before `before_id`, with `has_more`, `first_id` and `last_id`.
 */
const modelsPage = (all: ReadonlyArray<ReturnType<typeof anthropicModel>>, query: typeof ModelsQuery.Type) => {
  const limit = query.limit ?? 20
  if (query.after_id !== undefined && query.before_id !== undefined) {
    return Effect.fail(new BadRequest({ message: "Give after_id or before_id, not both.", param: "before_id" }))
  }
  const cursor = query.after_id ?? query.before_id
  const at = cursor === undefined ? -1 : all.findIndex((m) => m.id === cursor)
  if (cursor !== undefined && at < 0) {
    const param = query.after_id !== undefined ? "after_id" : "before_id"
    return Effect.fail(new BadRequest({ message: `${param} ${JSON.stringify(cursor)} is no model of this list.`, param }))
  }
  const [from, to] = query.before_id !== undefined ? [Math.max(0, at - limit), at] : [at + 1, at + 1 + limit]
  const data = all.slice(from, to)
  const hasMore = query.before_id !== undefined ? from > 0 : to < all.length
  return Effect.succeed({ data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null })
}

/** A block's breakpoint; null (as the SDK's types allow) is none. */
const cached = { cache_control: Schema.optional(Schema.NullOr(CacheControl)) }

/** `citations` is accepted as null (none), as the SDK's types allow; citations themselves no upstream but Anthropic takes. */
const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Content, ...cached, citations: Schema.optional(Schema.Null) })
const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  ...cached,
  source: Schema.Union(
    Schema.Struct({
      type: Schema.Literal("base64"),
      media_type: Schema.Literal("image/jpeg", "image/png", "image/gif", "image/webp"),
      data: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/=\s]*$/, { message: () => "source.data must be base64" }))
    }),
    Schema.Struct({
      type: Schema.Literal("url"),
      url: Schema.String.pipe(Schema.pattern(/^https?:\/\//, { message: () => "source.url must be an http(s) URL" }))
    })
  )
})
const BlockId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: BlockId,
  name: ToolName,
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  ...cached
})
/** Reasoning returned by an Anthropic upstream, sent back in later turns (only Anthropic upstreams take it back). */
const ThinkingBlock = Schema.Struct({ type: Schema.Literal("thinking"), thinking: Schema.String, signature: Schema.String })
const RedactedThinkingBlock = Schema.Struct({ type: Schema.Literal("redacted_thinking"), data: Schema.String })
const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: BlockId,
  ...cached,
  content: Schema.optional(Schema.Union(Content, BoundedArray(TextBlock, { max: 500 }))),
  // A failed tool: Anthropic upstreams take the flag; the wires of other upstreams have none, and refuse it by name.
  is_error: Schema.optional(Schema.NullOr(Schema.Boolean))
})

const AnthropicMessageIn = Schema.Union(
  Schema.Struct({
    role: Schema.Literal("user"),
    content: Schema.Union(Content, BoundedArray(Schema.Union(TextBlock, ImageBlock, ToolResultBlock), { max: 500 }))
  }),
  Schema.Struct({
    role: Schema.Literal("assistant"),
    content: Schema.Union(
      Content,
      BoundedArray(Schema.Union(TextBlock, ToolUseBlock, ThinkingBlock, RedactedThinkingBlock), { max: 500 })
    )
  })
)

const ToolSpec = Schema.Struct({
  type: Schema.optional(Schema.Literal("custom")),
  name: ToolName,
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(10_000))),
  input_schema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  ...cached
})

/** Extended thinking: a budget of at least 1024 tokens (below max_tokens, which Anthropic checks), off, or the model's choice. */
const Thinking = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("enabled"),
    budget_tokens: Schema.Int.pipe(Schema.between(1024, 1_000_000, { message: () => "thinking.budget_tokens must be an integer of at least 1024" }))
  }),
  Schema.Struct({ type: Schema.Literal("disabled", "adaptive") })
)

const ToolChoiceIn = Schema.Union(
  Schema.Struct({ type: Schema.Literal("auto", "any", "none"), disable_parallel_tool_use: Schema.optional(Schema.Boolean) }),
  Schema.Struct({ type: Schema.Literal("tool"), name: ToolName, disable_parallel_tool_use: Schema.optional(Schema.Boolean) })
)

/**
 * The Messages request with the gateway's limits. Unlike the OpenAI surface, there is no
 * upstream family that takes unknown Anthropic fields as they are, so a field, block type or
 * option this schema does not name is refused with a 400 naming it (never dropped).
 */
export const MessagesBody = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300)),
  max_tokens: Schema.Int.pipe(Schema.between(1, 1_000_000, { message: () => "max_tokens must be an integer from 1 to 1000000" })),
  messages: BoundedArray(AnthropicMessageIn, {
    min: 1,
    max: 1000,
    minMessage: "messages must hold at least one message",
    totals: [{ fields: ["content"], max: 10_000, what: "content blocks" }]
  }),
  system: Schema.optional(Schema.Union(Content, BoundedArray(TextBlock, { max: 100 }))),
  temperature: Schema.optional(Schema.Number.pipe(Schema.between(0, 1, { message: () => "temperature must be between 0 and 1" }))),
  top_p: Schema.optional(Schema.Number.pipe(Schema.between(0, 1, { message: () => "top_p must be between 0 and 1" }))),
  top_k: Schema.optional(Schema.Int.pipe(Schema.between(0, 1_000_000, { message: () => "top_k must be a non-negative integer" }))),
  thinking: Schema.optional(Thinking),
  stop_sequences: Schema.optional(BoundedArray(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500)), { max: 16 })),
  tools: Schema.optional(BoundedArray(ToolSpec, { max: 128 })),
  tool_choice: Schema.optional(ToolChoiceIn),
  metadata: Schema.optional(Schema.Struct({ user_id: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(256)))) })),
  /** Structured output (Anthropic's `output_config.format`, the SDKs' `messages.parse`): the answer as JSON of this schema, on any upstream that can give one. */
  output_config: Schema.optional(Schema.Struct({
    format: Schema.Struct({ type: Schema.Literal("json_schema"), schema: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })
  })),
  stream: Schema.optional(Schema.Boolean),
  /** Extension: pin a provider (default auto). */
  provider: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  // Anthropic's server-side Threads (the SDK's toolRunner asks for one by default): refused as Anthropic refuses
  // what a Thread cannot carry, so that the SDK goes on without one (messagesInputOf).
  thread: Schema.optional(Schema.Unknown)
}).annotations({ parseOptions: { onExcessProperty: "error" } })
type MessagesBody = typeof MessagesBody.Type

type GatewayMessage = typeof ToolResultBody.Type["messages"][number]

const textOf = (content: string | ReadonlyArray<{ readonly text: string }> | undefined) =>
  content === undefined ? "" : typeof content === "string" ? content : joinedText(content.map((b) => b.text))

/** A message-level breakpoint: the last one its blocks carry (Anthropic caches the prefix up to the breakpoint). */
const lastCacheOf = (blocks: ReadonlyArray<{ readonly cache_control?: { readonly ttl?: "5m" | "1h" | undefined } | null | undefined }>) =>
  blocks.reduce<{ cache?: CacheHint }>((found, b) => (b.cache_control != null ? cacheOf(b) : found), {})

const imagePart = (block: typeof ImageBlock.Type): ContentPart => {
  const source = block.source
  return { type: "image", url: source.type === "url" ? source.url : `data:${source.media_type};base64,${source.data}`, ...cacheOf(block) }
}

/** What a gateway message gets beyond the OpenAI-like shape: parts, a cache breakpoint, reasoning. */
type Neutral = Pick<ChatMessage, "parts" | "cache" | "reasoning" | "toolError">

/**
 * Anthropic messages -> the gateway's messages, with the parts of those that hold images: the
 * system prompt first, a user turn's tool results as tool messages (in order, its text and images
 * as a user message), an assistant turn's tool_use blocks as its tool calls.
 */
const gatewayMessagesOf = (body: MessagesBody) => {
  const messages: Array<GatewayMessage> = []
  const neutral: Array<Neutral> = []
  const push = (m: GatewayMessage, n: Neutral = {}) => {
    messages.push(m)
    neutral.push(n)
  }
  if (body.system !== undefined) {
    const system = body.system
    const parts = typeof system === "string" || !system.some((b) => b.cache_control != null)
      ? {}
      : { parts: system.map((b): ContentPart => ({ type: "text", text: b.text, ...cacheOf(b) })) }
    push({ role: "system", content: textOf(system) }, parts)
  }
  for (const m of body.messages) {
    if (typeof m.content === "string") {
      push({ role: m.role, content: m.content })
    } else if (m.role === "assistant") {
      const calls = m.content.filter((b) => b.type === "tool_use")
      const reasoning = m.content.flatMap((b): Array<ReasoningPart> =>
        b.type === "thinking"
          ? [{ type: "thinking", text: b.thinking, signature: b.signature }]
          : b.type === "redacted_thinking"
          ? [{ type: "redacted_thinking", data: b.data }]
          : []
      )
      const answered = m.content.filter((b) => b.type === "text" || b.type === "tool_use")
      push({
        role: "assistant",
        content: textOf(m.content.filter((b) => b.type === "text")),
        ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: JSON.stringify(c.input) } })) } : {})
      }, { ...lastCacheOf(answered), ...(reasoning.length > 0 ? { reasoning } : {}) })
    } else {
      let pending: Array<ContentPart> = []
      const flush = () => {
        if (pending.length === 0) return
        const text = joinedText(pending.flatMap((p) => (p.type === "text" ? [p.text] : [])))
        push({ role: "user", content: text }, pending.some((p) => p.type !== "text" || p.cache !== undefined) ? { parts: pending } : {})
        pending = []
      }
      for (const b of m.content) {
        if (b.type === "tool_result") {
          flush()
          push(
            { role: "tool", tool_call_id: b.tool_use_id, content: textOf(b.content) },
            { ...lastCacheOf([...(typeof b.content === "object" ? b.content : []), b]), ...(b.is_error === true ? { toolError: true as const } : {}) }
          )
        } else pending.push(b.type === "text" ? { type: "text", text: b.text, ...cacheOf(b) } : imagePart(b))
      }
      flush()
    }
  }
  return { messages, neutral }
}

/** The neutral options of a Messages request. */
const optionsOf = (body: MessagesBody, anthropicBeta: string | undefined): ChatOptions => {
  const choice = body.tool_choice
  const user = body.metadata?.user_id
  const thinking = body.thinking
  return {
    ...(body.top_p !== undefined ? { topP: body.top_p } : {}),
    ...(body.top_k !== undefined ? { topK: body.top_k } : {}),
    ...(thinking !== undefined
      ? { reasoning: thinking.type === "enabled" ? { mode: "enabled" as const, budgetTokens: thinking.budget_tokens } : { mode: thinking.type } }
      : {}),
    ...(anthropicBeta !== undefined && anthropicBeta !== "" ? { anthropicBeta } : {}),
    ...(body.stop_sequences !== undefined ? { stop: body.stop_sequences } : {}),
    ...(choice !== undefined
      ? { toolChoice: choice.type === "tool" ? { name: choice.name } : choice.type === "any" ? "required" as const : choice.type }
      : {}),
    ...(choice?.disable_parallel_tool_use === true ? { parallelToolCalls: false } : {}),
    ...(body.output_config !== undefined ? { responseFormat: { type: "json_schema" as const, name: "output", schema: body.output_config.format.schema } } : {}),
    // metadata.user_id is OpenAI's `user`: an end-user id for abuse monitoring.
    ...(user != null ? { extra: { user } } : {})
  }
}

/** The chat call's input of a Messages request: checked messages (tool results answer earlier tool_use blocks), parts, options. */
export const messagesInputOf = (body: MessagesBody, headers: RequestHeaders = {}): CompletionInput | BadRequest => {
  if (body.thread !== undefined && body.thread !== null) {
    return new BadRequest({
      message: "thread is not supported by the gateway: it keeps no conversations; send the full conversation without thread",
      param: "thread",
      details: { error_code: "thread_unsupported_request", unsupported: ["thread"] }
    })
  }
  // As Anthropic's API: every message but a final assistant one needs content (an empty turn is not dropped unseen).
  const empty = body.messages.findIndex((m, i) => m.content.length === 0 && !(m.role === "assistant" && i === body.messages.length - 1))
  if (empty !== -1) return new BadRequest({ message: `Invalid request: messages.${empty}: content must not be empty` })
  const { messages, neutral } = gatewayMessagesOf(body)
  if (messages.some((m) => (m.content ?? "").length > MAX_CONTENT)) {
    return new BadRequest({ message: `Invalid request: a message's text blocks exceed ${MAX_CONTENT} characters` })
  }
  const input = inputOf({
    messages,
    provider: body.provider ?? "auto",
    model: body.model,
    maxTokens: body.max_tokens,
    ...(body.temperature !== undefined ? { temperature: body.temperature } : {}),
    ...(body.tools
      ? { tools: body.tools.map((t) => ({ type: "function" as const, function: { name: t.name, description: t.description, parameters: t.input_schema } })) }
      : {})
  })
  if (input instanceof BadRequest) return input
  return {
    ...input,
    messages: input.messages.map((m, i) => ({ ...m, ...neutral[i] })),
    ...(input.tools !== undefined ? { tools: input.tools.map((t, i) => ({ ...t, ...cacheOf(body.tools![i]!) })) } : {}),
    options: optionsOf(body, headerOf(headers, "anthropic-beta"))
  }
}

/**
 * Anthropic's stop reason of an answer. An answer with tool calls is `tool_use` when its upstream said only
 * that it stopped (OpenAI does so for a named `tool_choice`, as some compatible servers do for any call):
 * Anthropic's clients run the tools while the stop reason is `tool_use`. A refusal (an OpenAI-format
 * upstream's `refusal` field) is `refusal`.
 */
const stopReasonOf = (reason: FinishReason | undefined, toolCalls: boolean, refused: boolean) =>
  refused
    ? "refusal" as const
    : reason === "length"
    ? "max_tokens" as const
    : reason === "tool_calls" || (toolCalls && (reason === "stop" || reason === undefined))
    ? "tool_use" as const
    : reason === "content_filter"
    ? "refusal" as const
    : "end_turn" as const

/** An OpenAI-format upstream's refusal (its message's or delta's `refusal` text), which Anthropic's format gives as text with stop reason `refusal`. */
const refusalOf = (fields: Readonly<Record<string, unknown>> | undefined): string | undefined =>
  typeof fields?.refusal === "string" && fields.refusal !== "" ? fields.refusal : undefined

/** The cache counts of a usage, under Anthropic's names, when the upstream reported them (the writes' split by lifetime too). */
const cacheUsageOf = (u: { readonly cacheCreationTokens?: number | undefined; readonly cacheReadTokens?: number | undefined; readonly cacheCreation1hTokens?: number | undefined }) => ({
  ...(u.cacheCreationTokens !== undefined ? { cache_creation_input_tokens: u.cacheCreationTokens } : {}),
  ...(u.cacheCreationTokens !== undefined && u.cacheCreation1hTokens !== undefined
    ? { cache_creation: { ephemeral_5m_input_tokens: u.cacheCreationTokens - u.cacheCreation1hTokens, ephemeral_1h_input_tokens: u.cacheCreation1hTokens } }
    : {}),
  ...(u.cacheReadTokens !== undefined ? { cache_read_input_tokens: u.cacheReadTokens } : {})
})

const reasoningBlockOf = (p: ReasoningPart) =>
  p.type === "thinking" ? { type: "thinking" as const, thinking: p.text, signature: p.signature } : { type: "redacted_thinking" as const, data: p.data }

export const toAnthropicMessage = (id: string, r: CompletionResult) => {
  const content: Array<
    | { readonly type: "text"; readonly text: string }
    | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: Record<string, unknown> }
    | ReturnType<typeof reasoningBlockOf>
  > = (r.reasoning ?? []).map(reasoningBlockOf)
  const refused = refusalOf(r.extra?.message)
  // The refusal after any text, as a stream gives it.
  const text = refused === undefined ? r.content : r.content + refused
  if (text !== "" || r.toolCalls.length === 0) content.push({ type: "text", text })
  for (const c of r.toolCalls) {
    const input = argumentsObject(c.arguments)
    if (input === undefined) {
      return new UpstreamFailed({ provider: r.provider, message: `Upstream provider ${r.provider} answered a tool call (${c.name}) whose arguments are not a JSON object` })
    }
    content.push({ type: "tool_use", id: c.id, name: c.name, input })
  }
  return {
    id,
    type: "message" as const,
    role: "assistant" as const,
    model: r.model,
    provider: r.provider,
    content,
    stop_reason: r.stopSequence !== undefined ? "stop_sequence" as const : stopReasonOf(r.finishReason, r.toolCalls.length > 0, refused !== undefined),
    stop_sequence: r.stopSequence ?? null,
    usage: { input_tokens: r.usage.promptTokens, output_tokens: r.usage.completionTokens, ...cacheUsageOf(r.usage) }
  }
}

/** One Anthropic SSE event: its type as the event name, the object as data. */
export const anthropicFrame = (event: { readonly type: string }) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`

/**
 * Gateway chunks -> Anthropic stream events. The first call of `convert` starts with message_start
 * (empty content), whose usage has the input counts the upstream reported by then
 * (`reportedInput`): an Anthropic upstream's, from its own message_start; 0 for wires that report
 * them only at the end, where message_delta carries them. `convert` opens a content block when the
 * kind of content changes (text, or a new tool call), sends its deltas, and closes the last block
 * before message_delta and message_stop.
 */
export const toEvents = (id: string, model: string, reportedInput: () => InputCounts = () => ({})) => {
  let started = false
  const opening = () => {
    const input = reportedInput()
    return {
      type: "message_start",
      message: {
        id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null,
        usage: { input_tokens: input.promptTokens ?? 0, output_tokens: 0, ...cacheUsageOf(input) }
      }
    }
  }
  let next = 0
  /** The open block: text, the tool call of that ordinal, or the upstream's reasoning block of that index. */
  let open: { readonly index: number; readonly tool: number | undefined; readonly reasoning?: number } | undefined
  const toolBlocks = new Map<number, number>()
  let refused = false
  const convert = (c: StreamChunk): Array<{ readonly type: string }> => {
    const out: Array<{ type: string; [k: string]: unknown }> = []
    if (!started) {
      started = true
      out.push(opening())
    }
    if (c.error !== undefined) {
      out.push(errorBody("anthropic", { _tag: c.errorCode ?? "UpstreamFailed", message: c.error }) as { type: string })
      return out
    }
    const close = () => {
      if (open !== undefined) out.push({ type: "content_block_stop", index: open.index })
      open = undefined
    }
    const start = (tool: number | undefined, block: Record<string, unknown>, reasoning?: number) => {
      close()
      open = { index: next++, tool, ...(reasoning !== undefined ? { reasoning } : {}) }
      out.push({ type: "content_block_start", index: open.index, content_block: block })
      return open.index
    }
    if (c.done) {
      close()
      out.push({
        type: "message_delta",
        delta: { stop_reason: c.stopSequence !== undefined ? "stop_sequence" : stopReasonOf(c.finishReason, toolBlocks.size > 0, refused), stop_sequence: c.stopSequence ?? null },
        usage: { input_tokens: c.promptTokens ?? 0, output_tokens: c.completionTokens ?? 0, ...cacheUsageOf(c) }
      })
      out.push({ type: "message_stop" })
      return out
    }
    const r = c.reasoning
    if (r !== undefined) {
      if (r.redacted !== undefined) start(undefined, { type: "redacted_thinking", data: r.redacted }, r.index)
      else {
        const index = open?.reasoning === r.index ? open.index : start(undefined, { type: "thinking", thinking: "", signature: "" }, r.index)
        if (r.text !== undefined && r.text !== "") out.push({ type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: r.text } })
        if (r.signature !== undefined) out.push({ type: "content_block_delta", index, delta: { type: "signature_delta", signature: r.signature } })
      }
    }
    const refusal = c.extra === undefined ? undefined : refusalOf(c.extra.delta)
    if (refusal !== undefined) refused = true
    const text = refusal === undefined ? c.content : c.content + refusal
    if (text !== "") {
      const index = open !== undefined && open.tool === undefined && open.reasoning === undefined ? open.index : start(undefined, { type: "text", text: "" })
      out.push({ type: "content_block_delta", index, delta: { type: "text_delta", text } })
    }
    for (const t of c.toolCalls ?? []) {
      let index = toolBlocks.get(t.index)
      if (index === undefined) {
        index = start(t.index, { type: "tool_use", id: t.id ?? "", name: t.name ?? "", input: {} })
        toolBlocks.set(t.index, index)
      }
      if (t.arguments !== "") out.push({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: t.arguments } })
    }
    return out
  }
  return { convert }
}

/** A fresh message id in Anthropic's format. */
export const messageId = () => `msg_${crypto.randomUUID().replace(/-/g, "")}`

const messagesSurface = chatSurface<MessagesBody, { readonly type: string }>({
  inputOf: messagesInputOf,
  streamed: (body: MessagesBody) => body.stream === true,
  newId: messageId,
  answer: toAnthropicMessage,
  stream: (id, _body, opened) => ({ ...toEvents(id, opened.target.model.id, opened.reportedInput), frame: anthropicFrame })
})

/** The count_tokens request: what a Messages request sends before the answer. */
export const CountTokensBody = MessagesBody.pick("model", "messages", "system", "tools", "tool_choice", "thinking", "provider")
  .annotations({ parseOptions: { onExcessProperty: "error" } })

/**
 * The gateway tokenizer's estimate of a request's input tokens (Tokens.ts): the messages as the
 * call would send them, their reasoning text and the tools' definitions. An estimate for every
 * upstream: Anthropic's own counter is not called (it would need a routed upstream call).
 */
export const countTokensOf = (body: typeof CountTokensBody.Type) =>
  Effect.gen(function*() {
    const input = messagesInputOf({ ...body, max_tokens: 1 })
    if (input instanceof BadRequest) return yield* Effect.fail(input)
    const reasoning = input.messages.flatMap((m) => m.reasoning ?? []).map((p) => (p.type === "thinking" ? p.text : p.data)).join("\n")
    const tools = input.tools && input.tools.length > 0 ? JSON.stringify(input.tools.map(({ cache: _hint, ...t }) => t)) : ""
    return { input_tokens: yield* countMessages(input.messages, [reasoning, tools]) }
  })

export const anthropicRoutes = [
  authed({
    method: "POST",
    path: "/anthropic/v1/messages",
    success: AnthropicMessage,
    tag,
    envelope: "anthropic",
    metered: true,
    summary: "Anthropic Messages (plain and stream: true, tools, tool results, images, thinking, cache_control); model may be a catalogue id, an alias, provider/model or auto",
    description:
      "Authenticate with `x-api-key` (as the Anthropic SDKs do) or a Bearer token. Errors use Anthropic's shape. An extra `provider` field pins a provider; the answer names it in `provider`. `cache_control` breakpoints reach Anthropic upstreams (elsewhere they change nothing: a documented no-op); `thinking` and `top_k` reach Anthropic and Gemini upstreams and are refused by name by others; thinking blocks come back (plain and streamed) and may be sent back in later turns to Anthropic upstreams; the `anthropic-beta` header is forwarded to Anthropic upstreams. Documents and server tools are refused with a 400 naming them.",
    body: MessagesBody,
    check: messagesSurface.check,
    handle: messagesSurface.handle,
    lane: messagesSurface.lane
  }),
  authed({
    method: "GET",
    path: "/anthropic/v1/models",
    success: AnthropicModelList,
    tag,
    envelope: "anthropic",
    summary: "Anthropic model list: auto and the catalogue's chat models, paged as Anthropic pages it (limit, after_id, before_id)",
    description: "Every model the Messages surface takes by id; a model of another provider is answered by that provider through the gateway.",
    query: ModelsQuery,
    handle: ({ query }) =>
      Effect.flatMap(Catalog, (c) => modelsPage([autoAnthropicModel, ...c.models.filter((m) => m.kind === "chat").map(anthropicModel)], query))
  }),
  authed({
    method: "GET",
    path: "/anthropic/v1/models/*",
    success: AnthropicModel,
    tag,
    envelope: "anthropic",
    summary: "One chat model of the catalogue in Anthropic's shape (a catalogue id or provider/model; ids with `/` may be URL-encoded); 404 for an unknown id",
    handle: ({ params }) =>
      Effect.flatMap(Catalog, (c) => {
        const id = pathModelId(params["*"] ?? "")
        if (id === "auto") return Effect.succeed(autoAnthropicModel)
        return Option.match(Option.filter(namedModel(c, id), (m) => m.kind === "chat"), {
          onNone: () => Effect.fail(new NotFound({ message: `The model '${id}' is no chat model of the gateway's catalogue. See GET /anthropic/v1/models.` })),
          onSome: (m) => Effect.succeed(anthropicModel(m))
        })
      })
  }),
  authed({
    method: "POST",
    path: "/anthropic/v1/messages/count_tokens",
    success: Schema.Struct({ input_tokens: Schema.Int }),
    tag,
    envelope: "anthropic",
    metered: false,
    summary: "Anthropic count_tokens: the gateway tokenizer's estimate of a Messages request's input tokens (not metered)",
    description:
      "Takes the Messages request's model, messages, system, tools, tool_choice and thinking and answers `{ input_tokens }`, counted by the gateway's tokenizer: an estimate for every upstream, Anthropic included (its own counter is not called). Not counted against the quota.",
    body: CountTokensBody,
    // A model or provider the Messages request would be refused as unknown is refused here too (404).
    handle: ({ body, caller }) =>
      Effect.flatMap(Routing, (routing) => {
        const found = routing.targets({ provider: body.provider ?? "auto", model: body.model, plan: caller.plan as Plan, needsTools: false, contextTokens: 0 })
        return !Array.isArray(found) && (found as RoutingError)._tag === "NotFound" ? Effect.fail(found as RoutingError) : countTokensOf(body)
      })
  })
]
