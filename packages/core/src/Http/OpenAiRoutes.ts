/**
 * The OpenAI-compatible surface under /openai/v1: Chat Completions (plain and streamed, with
 * tools) and the model list, so OpenAI SDKs can point their baseURL at the gateway. Same
 * authentication, quota, routing and usage recording as /v1/complete.
 */
import { Effect, Schema, Stream } from "effect"
import { type CompletionInput, type CompletionResult, Completions, type StreamChunk } from "../Capabilities/Completions.ts"
import type { ChatMessage, ChatOptions, ContentPart } from "../Providers/Chat.ts"
import { Catalog } from "../Catalog/Catalog.ts"
import { BadRequest } from "../Errors.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Content, inputOf, MAX_CONTENT, MaxTokens, openStream, Temperature, ToolName, type ToolResultBody, Tools, WireToolCall } from "./CompletionRoutes.ts"
import type { RoutingError } from "../Routing.ts"
import { SSE_DONE, sseFrame } from "./Edge.ts"
import type { Lane } from "./Lane.ts"
import { authed } from "./Route.ts"
import { ChatCompletion, OpenAiModelList } from "./ResponseSchemas.ts"

const tag = "OpenAI-compatible"

const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
const ImagePart = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Struct({
    url: Schema.String.pipe(Schema.pattern(/^(https?:\/\/|data:image\/)/, { message: () => "image_url.url must be an http(s) URL or a data:image/... URL" })),
    detail: Schema.optional(Schema.String.pipe(Schema.maxLength(20)))
  })
})
/** Other part types (input_audio, file, ...): forwarded as they are to OpenAI-compatible upstreams, refused by name elsewhere. */
const OtherPart = Schema.Struct(
  {
    type: Schema.String.pipe(
      Schema.maxLength(64),
      Schema.filter((t) => t !== "text" && t !== "image_url", { message: () => "a text or image_url part has the wrong shape" })
    )
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)

/** OpenAI content: a string, or an array of parts (text, image_url, others). */
const OpenAiContent = Schema.Union(Content, Schema.Null, Schema.Array(Schema.Union(TextPart, ImagePart, OtherPart)).pipe(Schema.maxItems(500)))

/** The fields of a message that map to the neutral message; any other is kept and forwarded (`ChatMessage.extra`). */
const messageFields = {
  role: Schema.Literal("system", "developer", "user", "assistant", "tool").annotations({
    message: () => "role must be one of system, developer, user, assistant, tool"
  }),
  content: Schema.optional(OpenAiContent),
  tool_calls: Schema.optional(Schema.Array(WireToolCall)),
  tool_call_id: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(64)))
}
const OpenAiMessage = Schema.Struct(messageFields, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const Probability = (name: string) => Schema.Number.pipe(Schema.between(0, 1, { message: () => `${name} must be between 0 and 1` }))
const Penalty = (name: string) => Schema.Number.pipe(Schema.between(-2, 2, { message: () => `${name} must be between -2 and 2` }))

const ResponseFormatSchema = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text", "json_object") }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    json_schema: Schema.Struct({
      name: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "json_schema.name is 1-64 letters, digits, _ or -" })),
      description: Schema.optional(Schema.String.pipe(Schema.maxLength(10_000))),
      schema: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({ type: "object" }) }),
      strict: Schema.optional(Schema.NullOr(Schema.Boolean))
    })
  })
)

const ToolChoiceSchema = Schema.Union(
  Schema.Literal("auto", "none", "required"),
  Schema.Struct({ type: Schema.Literal("function"), function: Schema.Struct({ name: ToolName }) })
)

/** The request fields the gateway maps; every other field is kept and forwarded (`ChatRequest.extra`). */
const knownFields = {
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300)),
  messages: Schema.Array(OpenAiMessage).pipe(
    Schema.minItems(1, { message: () => "messages must hold at least one message" }),
    Schema.maxItems(1000)
  ),
  /** Extension: pin a provider (default auto). */
  provider: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  tools: Schema.optional(Tools),
  tool_choice: Schema.optional(Schema.NullOr(ToolChoiceSchema)),
  parallel_tool_calls: Schema.optional(Schema.NullOr(Schema.Boolean)),
  response_format: Schema.optional(Schema.NullOr(ResponseFormatSchema)),
  temperature: Schema.optional(Schema.NullOr(Temperature)),
  top_p: Schema.optional(Schema.NullOr(Probability("top_p"))),
  frequency_penalty: Schema.optional(Schema.NullOr(Penalty("frequency_penalty"))),
  presence_penalty: Schema.optional(Schema.NullOr(Penalty("presence_penalty"))),
  seed: Schema.optional(Schema.NullOr(Schema.Int)),
  stop: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.String).pipe(Schema.maxItems(16))))),
  n: Schema.optional(Schema.NullOr(Schema.Literal(1).annotations({ message: () => "n must be 1: the gateway returns one choice per call (send n calls)" }))),
  max_tokens: Schema.optional(Schema.NullOr(MaxTokens)),
  max_completion_tokens: Schema.optional(Schema.NullOr(MaxTokens)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(Schema.NullOr(Schema.Struct({ include_usage: Schema.optional(Schema.Boolean) })))
}

/**
 * The request, with the gateway's limits (the field schemas of /v1/complete): once it decodes, the
 * call's input is built from it directly, with no second decoding. Fields it does not name are
 * kept (the index signature) and forwarded unchanged to OpenAI-compatible upstreams.
 */
export const ChatCompletionBody = Schema.Struct(knownFields, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
type ChatCompletionBody = typeof ChatCompletionBody.Type
type OpenAiMessage = typeof OpenAiMessage.Type

const knownRequestKeys: ReadonlySet<string> = new Set(Object.keys(knownFields))
const knownMessageKeys: ReadonlySet<string> = new Set(Object.keys(messageFields))

/** The fields of `o` outside `known` (null values are the same as absent), or undefined. */
const unmapped = (o: Readonly<Record<string, unknown>>, known: ReadonlySet<string>) => {
  let out: Record<string, unknown> | undefined
  for (const k in o) if (!known.has(k) && o[k] !== null && o[k] !== undefined) (out ??= {})[k] = o[k]
  return out
}

/** A message's content: its text, and its parts when it has more than text. */
const contentOf = (content: OpenAiMessage["content"]): { text: string; parts?: Array<ContentPart> } => {
  if (content === undefined || content === null) return { text: "" }
  if (typeof content === "string") return { text: content }
  const parts: Array<ContentPart> = []
  let text = ""
  let onlyText = true
  for (const p of content) {
    if (p.type === "text") {
      const t = (p as typeof TextPart.Type).text
      text += t
      parts.push({ type: "text", text: t })
    } else if (p.type === "image_url") {
      const i = (p as typeof ImagePart.Type).image_url
      parts.push({ type: "image", url: i.url, ...(i.detail !== undefined ? { detail: i.detail } : {}) })
      onlyText = false
    } else {
      parts.push({ type: "raw", part: p })
      onlyText = false
    }
  }
  return onlyText ? { text } : { text, parts }
}

/** OpenAI request -> the gateway's completion body (the decoded request already holds its limits), with each message's parts and unmapped fields. */
export const gatewayBodyOf = (body: ChatCompletionBody) => {
  const messages: Array<typeof ToolResultBody.Type["messages"][number]> = []
  const richness: Array<Pick<ChatMessage, "parts" | "extra">> = []
  for (const m of body.messages) {
    const { parts, text } = contentOf(m.content)
    if (text.length > MAX_CONTENT) return new BadRequest({ message: `Invalid request: a message's text parts exceed ${MAX_CONTENT} characters` })
    messages.push({
      role: m.role === "developer" ? "system" : m.role,
      content: text,
      ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}),
      ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
      ...(m.name ? { name: m.name } : {})
    })
    // A name on a non-tool message is not a neutral field: it goes on as it came.
    const others = unmapped(m, knownMessageKeys)
    const extra = m.name && m.role !== "tool" ? { ...others, name: m.name } : others
    richness.push({ ...(parts ? { parts } : {}), ...(extra ? { extra } : {}) })
  }
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined
  const gatewayBody: typeof ToolResultBody.Type = {
    messages,
    provider: body.provider ?? "auto",
    model: body.model,
    ...(body.tools ? { tools: body.tools } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {})
  }
  return { gatewayBody, richness }
}

/** The neutral options of an OpenAI request: mapped fields, and the rest to forward. */
export const optionsOf = (body: ChatCompletionBody): ChatOptions => {
  const f = body.response_format
  const extra = unmapped(body, knownRequestKeys)
  return {
    ...(body.top_p != null ? { topP: body.top_p } : {}),
    ...(body.stop != null ? { stop: typeof body.stop === "string" ? [body.stop] : body.stop } : {}),
    ...(body.seed != null ? { seed: body.seed } : {}),
    ...(body.frequency_penalty != null ? { frequencyPenalty: body.frequency_penalty } : {}),
    ...(body.presence_penalty != null ? { presencePenalty: body.presence_penalty } : {}),
    ...(body.parallel_tool_calls != null ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(body.tool_choice != null ? { toolChoice: typeof body.tool_choice === "string" ? body.tool_choice : { name: body.tool_choice.function.name } } : {}),
    ...(f != null
      ? {
        responseFormat: f.type === "json_schema"
          ? {
            type: "json_schema" as const,
            name: f.json_schema.name,
            schema: f.json_schema.schema,
            ...(f.json_schema.description !== undefined ? { description: f.json_schema.description } : {}),
            ...(f.json_schema.strict != null ? { strict: f.json_schema.strict } : {})
          }
          : { type: f.type }
      }
      : {}),
    ...(extra ? { extra } : {})
  }
}

/** The chat call's input: gateway body, then checked messages with their parts and forwarded fields, then the options. */
export const chatInputOf = (body: ChatCompletionBody): CompletionInput | BadRequest => {
  const converted = gatewayBodyOf(body)
  if (converted instanceof BadRequest) return converted
  const input = inputOf(converted.gatewayBody)
  if (input instanceof BadRequest) return input
  const messages = input.messages.map((m, i) => {
    const rich = converted.richness[i]!
    return rich.parts || rich.extra ? { ...m, ...rich } : m
  })
  return { ...input, messages, options: optionsOf(body) }
}

const wireCalls = (calls: CompletionResult["toolCalls"]) =>
  calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.arguments } }))

export const toChatCompletion = (id: string, r: CompletionResult) => ({
  ...r.extra?.body,
  id,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: r.model,
  provider: r.provider,
  choices: [{
    logprobs: null,
    ...r.extra?.choice,
    index: 0,
    message: {
      refusal: null,
      ...r.extra?.message,
      role: "assistant",
      content: r.toolCalls.length > 0 && r.content === "" ? null : r.content,
      ...(r.toolCalls.length > 0 ? { tool_calls: wireCalls(r.toolCalls) } : {})
    },
    finish_reason: r.finishReason === "error" ? "stop" : r.finishReason
  }],
  usage: { prompt_tokens: r.usage.promptTokens, completion_tokens: r.usage.completionTokens, total_tokens: r.usage.totalTokens }
})

/**
 * Gateway chunks -> chat.completion.chunk objects. `opening` is the role chunk OpenAI sends first
 * (empty content), sent as soon as the upstream accepted the call; then `convert` per chunk (usage
 * chunk when asked, errors as `error`).
 */
export const toChunks = (id: string, model: string, includeUsage: boolean) => {
  const created = Math.floor(Date.now() / 1000)
  const base = { id, object: "chat.completion.chunk", created, model }
  const opening = { ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] }
  const convert = (c: StreamChunk): Array<unknown> => {
    const out: Array<unknown> = []
    if (c.error !== undefined) return [{ error: { message: c.error, type: "api_error", code: "UpstreamFailed" } }]
    if (!c.done) {
      out.push({
        ...base,
        choices: [{
          logprobs: null,
          ...c.extra?.choice,
          index: 0,
          delta: {
            ...c.extra?.delta,
            ...(c.content !== "" || (!c.toolCalls && !c.extra) ? { content: c.content } : {}),
            ...(c.toolCalls
              ? { tool_calls: c.toolCalls.map((t) => ({ index: t.index, ...(t.id ? { id: t.id, type: "function" } : {}), function: { ...(t.name ? { name: t.name } : {}), arguments: t.arguments } })) }
              : {})
          },
          finish_reason: null
        }]
      })
      return out
    }
    out.push({ ...base, model: c.model ?? model, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: c.finishReason ?? "stop" }] })
    if (includeUsage) {
      out.push({
        ...base,
        model: c.model ?? model,
        choices: [],
        usage: { prompt_tokens: c.promptTokens ?? 0, completion_tokens: c.completionTokens ?? 0, total_tokens: (c.promptTokens ?? 0) + (c.completionTokens ?? 0) }
      })
    }
    return out
  }
  return { opening, convert }
}

/** A fresh completion id in OpenAI's format. */
export const completionId = () => `chatcmpl-${crypto.randomUUID().replace(/-/g, "")}`

const chat = (avatar: AvatarRecord, body: ChatCompletionBody) =>
  Effect.gen(function*() {
    const input = chatInputOf(body)
    if (input instanceof BadRequest) return yield* Effect.fail(input)
    const completions = yield* Completions
    const id = completionId()
    if (!body.stream) return toChatCompletion(id, yield* completions.complete(avatar, input))
    const { convert, opening } = toChunks(id, body.model, body.stream_options?.include_usage === true)
    return yield* openStream(
      Effect.map(completions.stream(avatar, input), (chunks) => Stream.concat(Stream.make(opening), Stream.mapConcat(chunks, convert))),
      sseFrame,
      SSE_DONE
    )
  })

/** The fast-lane plan of Chat Completions (Lane.ts): the same input, routing and answer shapes as `chat`. */
const chatLane: Lane<ChatCompletionBody> = {
  plan: ({ calls, completions }, avatar, body) => {
    const input = chatInputOf(body)
    if (input instanceof BadRequest) return input
    const { messages, request, targets } = completions.plan(avatar, input, input.messages)
    if (!Array.isArray(targets)) return targets as RoutingError
    const id = completionId()
    if (!body.stream) return async (lane) => toChatCompletion(id, await calls.complete({ ...lane.call(targets), messages, request }))
    const { convert, opening } = toChunks(id, body.model, body.stream_options?.include_usage === true)
    return async (lane) =>
      lane.stream(
        await calls.openStream({ ...lane.call(targets), messages, request }),
        (chunk) => convert(chunk).map(sseFrame).join(""),
        sseFrame(opening),
        SSE_DONE
      )
  }
}

export const openAiRoutes = [
  authed({
    method: "POST",
    path: "/openai/v1/chat/completions",
    success: ChatCompletion,
    tag,
    envelope: "openai",
    metered: true,
    summary: "OpenAI Chat Completions (plain and stream: true, tools); model may be a catalogue id or auto",
    description: "Errors use OpenAI's shape. An extra `provider` field pins a provider; the answer names it in `provider`.",
    body: ChatCompletionBody,
    check: ({ avatar, body }) =>
      Effect.suspend(() => {
        const input = chatInputOf(body)
        return input instanceof BadRequest ? Effect.fail(input) : Effect.flatMap(Completions, (c) => c.check(avatar, input))
      }),
    handle: ({ avatar, body }) => chat(avatar, body),
    lane: chatLane
  }),
  authed({
    method: "GET",
    path: "/openai/v1/models",
    success: OpenAiModelList,
    tag,
    envelope: "openai",
    summary: "OpenAI model list of the catalogue's chat models",
    handle: () =>
      Effect.map(Catalog, (c) => ({
        object: "list",
        data: [
          { id: "auto", object: "model", created: 0, owned_by: "aigw" },
          ...c.models.filter((m) => m.kind === "chat").map((m) => ({ id: m.id, object: "model", created: 0, owned_by: m.provider }))
        ]
      }))
  })
]
