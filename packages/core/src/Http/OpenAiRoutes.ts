/**
 * The OpenAI-compatible surface under /openai/v1: Chat Completions (plain and streamed, with
 * tools) and the model list, so OpenAI SDKs can point their baseURL at the gateway. Same
 * authentication, quota, routing and usage recording as /v1/complete.
 */
import { Effect, Schema, Stream } from "effect"
import { type CompletionResult, Completions, type StreamChunk } from "../Capabilities/Completions.ts"
import { Catalog } from "../Catalog/Catalog.ts"
import { BadRequest } from "../Errors.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { Content, inputOf, MAX_CONTENT, MaxTokens, openStream, Temperature, type ToolResultBody, Tools, WireToolCall } from "./CompletionRoutes.ts"
import type { RoutingError } from "../Routing.ts"
import { SSE_DONE, sseFrame } from "./Edge.ts"
import type { Lane } from "./Lane.ts"
import { authed } from "./Route.ts"
import { ChatCompletion, OpenAiModelList } from "./ResponseSchemas.ts"

const tag = "OpenAI-compatible"

const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
const OtherPart = Schema.Struct({ type: Schema.String })

/** OpenAI content: a string, or an array of parts of which only text is supported. */
const OpenAiContent = Schema.Union(Content, Schema.Null, Schema.Array(Schema.Union(TextPart, OtherPart)))

const OpenAiMessage = Schema.Struct({
  role: Schema.Literal("system", "developer", "user", "assistant", "tool").annotations({
    message: () => "role must be one of system, developer, user, assistant, tool"
  }),
  content: Schema.optional(OpenAiContent),
  tool_calls: Schema.optional(Schema.Array(WireToolCall)),
  tool_call_id: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(64)))
})

/**
 * The request, with the gateway's limits (the field schemas of /v1/complete): once it decodes, the
 * call's input is built from it directly, with no second decoding.
 */
export const ChatCompletionBody = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  messages: Schema.Array(OpenAiMessage).pipe(
    Schema.minItems(1, { message: () => "messages must hold at least one message" }),
    Schema.maxItems(1000)
  ),
  /** Extension: pin a provider (default auto). */
  provider: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  tools: Schema.optional(Tools),
  temperature: Schema.optional(Schema.NullOr(Temperature)),
  max_tokens: Schema.optional(Schema.NullOr(MaxTokens)),
  max_completion_tokens: Schema.optional(Schema.NullOr(MaxTokens)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(Schema.NullOr(Schema.Struct({ include_usage: Schema.optional(Schema.Boolean) }))),
  user: Schema.optional(Schema.String)
})
type ChatCompletionBody = typeof ChatCompletionBody.Type

const textOf = (content: typeof OpenAiContent.Type | undefined): string | BadRequest => {
  if (content === undefined || content === null) return ""
  if (typeof content === "string") return content
  const unsupported = content.find((p) => p.type !== "text")
  if (unsupported) return new BadRequest({ message: `content parts of type ${unsupported.type} are not supported; send text` })
  return content.map((p) => (p as { text: string }).text).join("")
}

/** OpenAI request -> the gateway's completion body (the decoded request already holds its limits). */
export const gatewayBodyOf = (body: ChatCompletionBody): typeof ToolResultBody.Type | BadRequest => {
  const messages: Array<typeof ToolResultBody.Type["messages"][number]> = []
  for (const m of body.messages) {
    const content = textOf(m.content)
    if (content instanceof BadRequest) return content
    if (content.length > MAX_CONTENT) return new BadRequest({ message: `Invalid request: a message's text parts exceed ${MAX_CONTENT} characters` })
    messages.push({
      role: m.role === "developer" ? "system" : m.role,
      content,
      ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}),
      ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
      ...(m.name ? { name: m.name } : {})
    })
  }
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined
  return {
    messages,
    provider: body.provider ?? "auto",
    model: body.model,
    ...(body.tools ? { tools: body.tools } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {})
  }
}

/** The chat call's input: gateway body, then checked messages. */
export const chatInputOf = (body: ChatCompletionBody) => {
  const gatewayBody = gatewayBodyOf(body)
  return gatewayBody instanceof BadRequest ? gatewayBody : inputOf(gatewayBody)
}

const wireCalls = (calls: CompletionResult["toolCalls"]) =>
  calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.arguments } }))

export const toChatCompletion = (id: string, r: CompletionResult) => ({
  id,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: r.model,
  provider: r.provider,
  choices: [{
    index: 0,
    message: {
      role: "assistant",
      content: r.toolCalls.length > 0 && r.content === "" ? null : r.content,
      refusal: null,
      ...(r.toolCalls.length > 0 ? { tool_calls: wireCalls(r.toolCalls) } : {})
    },
    logprobs: null,
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
          index: 0,
          delta: {
            ...(c.content !== "" || !c.toolCalls ? { content: c.content } : {}),
            ...(c.toolCalls
              ? { tool_calls: c.toolCalls.map((t) => ({ index: t.index, ...(t.id ? { id: t.id, type: "function" } : {}), function: { ...(t.name ? { name: t.name } : {}), arguments: t.arguments } })) }
              : {})
          },
          logprobs: null,
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
