/** POST /v1/complete, /v1/complete/stream and /v1/complete/tool-result. */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, Effect, Exit, Option, Schema, Scope, Stream } from "effect"
import { type CompletionInput, Completions, type StreamChunk } from "../Capabilities/Completions.ts"
import { BadRequest } from "../Errors.ts"
import { fieldsOutside } from "../JsonText.ts"
import type { ChatStream } from "../Engine/ProviderCalls.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import type { CacheHint, ChatMessage } from "../Providers/Chat.ts"
import { SSE_HEADERS, sseFrame } from "./Edge.ts"
import { chatPlan, type Lane } from "./Lane.ts"
import { RequestDeadline } from "./RequestDeadline.ts"
import { authed } from "./Route.ts"
import { CompletionResult } from "./ResponseSchemas.ts"
import { BoundedArray } from "../RequestFields.ts"

const tag = "Completions"

export const ToolName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "tool names are 1-64 letters, digits, _ or -" }))

/** A tool call as OpenAI sends it (`{id, type, function: {name, arguments}}`) or flat (`{id, name, arguments}`). */
/** Longest signature of a tool call accepted (Gemini's thought signatures grow with the reasoning). */
const MAX_SIGNATURE = 1_000_000

const Signature = Schema.String.pipe(Schema.maxLength(MAX_SIGNATURE))

/**
 * A nested object whose every field the gateway maps: a field it does not name is refused by name
 * (`… is unexpected`), where the body's own decoding ignores unknown fields, so none is dropped unseen.
 */
export const strict = <S extends Schema.Schema.Any>(schema: S) => schema.annotations({ parseOptions: { onExcessProperty: "error" } }) as S

/** A prompt-caching breakpoint (Providers/Chat.ts CacheHint): sent to Anthropic upstreams, honoured by sending nothing elsewhere. */
export const CacheControl = strict(Schema.Struct({ type: Schema.Literal("ephemeral"), ttl: Schema.optional(Schema.Literal("5m", "1h")) }))

/** The neutral breakpoint of a part or block's `cache_control` (null: none). */
export const cacheOf = (block: { readonly cache_control?: { readonly ttl?: "5m" | "1h" | undefined } | null | undefined }): { cache?: CacheHint } =>
  block.cache_control == null ? {} : { cache: block.cache_control.ttl !== undefined ? { ttl: block.cache_control.ttl } : {} }

export const WireToolCall = strict(Schema.Struct({
  id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  type: Schema.optional(Schema.Literal("function")),
  function: Schema.optional(strict(Schema.Struct({
    name: ToolName,
    arguments: Schema.optional(Schema.String),
    /** The openai SDK's parse of `arguments`, which its tool helpers keep on the messages they send back: a copy, no meaning here. */
    parsed_arguments: Schema.optional(Schema.Unknown)
  }))),
  name: Schema.optional(ToolName),
  arguments: Schema.optional(Schema.String),
  /** The upstream's signature of the call, as the answer gave it (`signature`, or OpenAI-style Gemini's `extra_content.google.thought_signature`). */
  signature: Schema.optional(Signature),
  /** A stream delta's position, which clients keep when they build the message from a stream: no meaning here. */
  index: Schema.optional(Schema.Number),
  extra_content: Schema.optional(strict(Schema.Struct({ google: strict(Schema.Struct({ thought_signature: Signature })) })))
}))

/** The text of a /v1/complete/stream answer: a frame per chunk, no opening or trailer. */
const gatewayStreamText = { frames: sseFrame, opening: "", trailer: "" }

/** Longest message text accepted (characters). */
export const MAX_CONTENT = 2_000_000

export const Content = Schema.String.pipe(Schema.maxLength(MAX_CONTENT))

/** A message's tool calls: as many as a request may define tools. */
export const ToolCalls = BoundedArray(WireToolCall, { max: 128 })

/** Bounds on what a conversation's messages hold together (each message's own bounds multiply by 1,000 messages). */
export const TOOL_CALLS_IN_ALL = { fields: ["toolCalls", "tool_calls"], max: 4096, what: "tool calls" } as const

const messageFields = {
  // Absent or null only on an assistant message (one that makes tool calls); every other role's message needs its content (toChatMessages).
  content: Schema.optional(Schema.NullOr(Content)),
  toolCalls: Schema.optional(ToolCalls),
  tool_calls: Schema.optional(ToolCalls),
  toolCallId: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  tool_call_id: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(64)))
}

const messageSchema = <R extends ReadonlyArray<string>>(...roles: R) =>
  Schema.Struct({
    role: Schema.Literal(...(roles as unknown as [string, ...Array<string>])).annotations({
      message: () => `role must be one of ${roles.join(", ")}`
    }),
    ...messageFields
  })

const toolFunctionFields = {
  name: ToolName,
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(10_000))),
  parameters: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), {
    default: () => ({ type: "object", properties: {} })
  })
}
const toolFunctionKeys: ReadonlySet<string> = new Set(Object.keys(toolFunctionFields))

/**
 * A tool in OpenAI's function-calling schema, on every surface: `type` and `function`. The function's
 * fields beyond those mapped (`strict`, ...) are kept and forwarded (`toolsOf`: ToolDefinition.extra); a
 * field of the tool itself no wire carries, so it is refused by name.
 */
export const ToolDefinitionSchema = strict(Schema.Struct({
  type: Schema.optionalWith(Schema.Literal("function"), { default: () => "function" as const }),
  function: Schema.Struct(toolFunctionFields, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}))

/** The call's tools, each with its function's unmapped fields (e.g. `strict`) to forward. */
export const toolsOf = (tools: ReadonlyArray<typeof ToolDefinitionSchema.Type> | undefined): CompletionInput["tools"] =>
  tools?.map((t) => {
    const extra = fieldsOutside(t.function, toolFunctionKeys)
    return { name: t.function.name, description: t.function.description, parameters: t.function.parameters, ...(extra ? { extra } : {}) }
  })

// The fields of a chat call that every surface takes alike (these routes, MCP's gateway_complete).
export const Temperature = Schema.Number.pipe(Schema.between(0, 2, { message: () => "temperature must be between 0 and 2" })).annotations({
  description: "Sampling temperature from 0 (deterministic) to 2; default is provider-specific"
})
export const MaxTokens = Schema.Int.pipe(Schema.between(1, 1_000_000, { message: () => "maxTokens must be an integer from 1 to 1000000" })).annotations({
  description: "Maximum completion tokens"
})
export const Tools = BoundedArray(ToolDefinitionSchema, { max: 128 })
/** `auto` when absent (or empty). */
export const ProviderName = Schema.optionalWith(
  Schema.String.pipe(Schema.maxLength(100)).annotations({
    description: "Provider id (GET /v1/providers; over MCP gateway_list_providers) or auto to let the gateway pick the best fit for the plan",
    default: "auto"
  }),
  { default: () => "auto" }
)
export const ModelName = Schema.optionalWith(
  Schema.String.pipe(Schema.maxLength(200)).annotations({ description: "Model id (GET /v1/models; over MCP gateway_list_models) or auto", default: "auto" }),
  { default: () => "auto" }
)
export const RoutingOptions = Schema.Struct({
  useOpenServ: Schema.optional(Schema.Boolean.annotations({ description: "Accepted for compatibility; routing is the gateway's own" })),
  preference: Schema.optional(Schema.Literal("cost", "balanced", "quality").annotations({
    description: "Ranking for auto: cheapest first, balanced, or best quality first (default follows the plan)",
    message: () => ({ message: "routing.preference must be one of cost, balanced, quality", override: true })
  })),
  fallback: Schema.optional(Schema.Boolean.annotations({ description: "Try the next candidate on retryable upstream failures (default true)" }))
}).annotations({ description: "Advanced routing overrides" })

const requestFields = {
  provider: ProviderName,
  model: ModelName,
  avatarId: Schema.optional(Schema.UUID.annotations({ message: () => "avatarId must be a UUID" })),
  useFAHRN: Schema.optional(Schema.Boolean),
  useHolonicBraid: Schema.optional(Schema.Boolean),
  injectAvatarContext: Schema.optional(Schema.Boolean),
  tools: Schema.optional(Tools),
  temperature: Schema.optional(Temperature),
  maxTokens: Schema.optional(MaxTokens),
  routing: Schema.optional(RoutingOptions)
}

const messageBounds = { min: 1, max: 1000, minMessage: "messages must hold at least one message", totals: [TOOL_CALLS_IN_ALL] }

export const CompleteBody = Schema.Struct({
  messages: BoundedArray(messageSchema("system", "user", "assistant"), messageBounds),
  ...requestFields
})

export const ToolResultBody = Schema.Struct({
  messages: BoundedArray(messageSchema("system", "user", "assistant", "tool"), messageBounds),
  ...requestFields
})

type WireMessage = typeof ToolResultBody.Type["messages"][number]

/** Wire messages -> chat messages; checks that tool results answer earlier tool calls. */
export const chatMessagesOf = (wire: ReadonlyArray<WireMessage>): Array<ChatMessage> | BadRequest => {
  const calls = new Set<string>()
  const out: Array<ChatMessage> = []
  for (const [i, m] of wire.entries()) {
    const toolCalls = (m.toolCalls ?? m.tool_calls ?? []).map((c) => {
      const signature = c.signature ?? c.extra_content?.google.thought_signature
      return {
        id: c.id,
        name: c.function?.name ?? c.name ?? "",
        arguments: c.function?.arguments ?? c.arguments ?? "{}",
        ...(signature !== undefined ? { signature } : {})
      }
    })
    if (toolCalls.some((c) => c.name === "")) return new BadRequest({ message: `messages.${i}: every tool call needs a function name` })
    if (toolCalls.length > 0 && m.role !== "assistant") {
      return new BadRequest({ message: `messages.${i}: only assistant messages carry tool calls` })
    }
    for (const c of toolCalls) calls.add(c.id)
    if ((m.content === undefined || m.content === null) && (m.role !== "assistant" || toolCalls.length === 0)) {
      return new BadRequest({ message: `messages.${i}.content: ${m.role === "assistant" ? "an" : "a"} ${m.role} message needs its content (a string)${m.role === "assistant" ? " or tool calls" : ""}` })
    }
    const toolCallId = m.toolCallId ?? m.tool_call_id
    if (m.role === "tool") {
      if (!toolCallId) return new BadRequest({ message: `messages.${i}: a tool message needs toolCallId (or tool_call_id)` })
      if (!calls.has(toolCallId)) {
        return new BadRequest({ message: `messages.${i}: toolCallId ${toolCallId} answers no earlier assistant tool call` })
      }
    }
    out.push({
      role: m.role as ChatMessage["role"],
      content: m.content ?? "",
      ...(toolCalls.length > 0 ? { toolCalls } : {}),
      ...(m.role === "tool" ? { toolCallId, ...(m.name ? { name: m.name } : {}) } : {}),
      // A participant's name (OpenAI's `name` on other messages) goes on as it came, as the OpenAI surface sends it.
      ...(m.role !== "tool" && m.name ? { extra: { name: m.name } } : {})
    })
  }
  return out
}

export const toChatMessages = (wire: ReadonlyArray<WireMessage>): Effect.Effect<Array<ChatMessage>, BadRequest> =>
  Effect.suspend(() => {
    const messages = chatMessagesOf(wire)
    return messages instanceof BadRequest ? Effect.fail(messages) : Effect.succeed(messages)
  })

/** A request body -> the call's input, after checking its messages (tool results answer earlier calls). */
export const inputOf = (body: typeof ToolResultBody.Type): CompletionInput | BadRequest => {
  const messages = chatMessagesOf(body.messages)
  return messages instanceof BadRequest ? messages : toInput(body, messages)
}

export const toInput = (body: typeof ToolResultBody.Type, messages: ReadonlyArray<ChatMessage>): CompletionInput => ({
  messages,
  provider: body.provider,
  model: body.model,
  tools: toolsOf(body.tools),
  temperature: body.temperature,
  maxTokens: body.maxTokens,
  injectAvatarContext: body.injectAvatarContext,
  useFAHRN: body.useFAHRN,
  useHolonicBraid: body.useHolonicBraid,
  routing: body.routing
})

const encoder = new TextEncoder()

/** Text held for a stream's consumer past which the upstream is not read until it pulls (ProviderCalls.WhenReady). */
const HELD_CHARACTERS = 64 * 1024

/**
 * A chat stream's text as an Effect stream: `opening`, the frames of its chunks, `trailer`. What
 * the run emitted since the consumer last pulled leaves as one piece (one socket write). The run
 * starts at the first pull; each pull waits for the next emission, so a stream is one stage of
 * Effect's machinery and no fiber per emission (Stream.async forks one per emit).
 */
const pulledText = (opened: ChatStream, frames: (chunk: StreamChunk) => string, opening: string, trailer: string): Stream.Stream<Uint8Array> =>
  Stream.suspend(() => {
    let held = opening
    // The opening leaves at the first pull even when empty: the head leaves with it (as the lane's `stream`).
    let pulled = false
    let started = false
    let ended = false
    let failure: { readonly cause: unknown } | undefined
    let waiting: ((next: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>>) => void) | undefined
    // The run waits while more than HELD_CHARACTERS are held for a consumer that does not pull (a client that does not read).
    let resumeRun: (() => void) | undefined
    const next = (): Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>> | undefined => {
      if (held !== "" || !pulled) {
        pulled = true
        const text = held
        held = ""
        const resume = resumeRun
        resumeRun = undefined
        resume?.()
        return Effect.succeed(Chunk.of(encoder.encode(text)))
      }
      if (failure !== undefined) return Effect.die(failure.cause)
      return ended ? Effect.fail(Option.none()) : undefined
    }
    const wake = () => {
      const resume = waiting
      if (resume === undefined) return
      const answer = next()
      if (answer === undefined) return
      waiting = undefined
      resume(answer)
    }
    const start = () => {
      started = true
      opened.run((chunks) => {
        for (const chunk of chunks) held += frames(chunk)
        wake()
        return held.length > HELD_CHARACTERS ? (resume: () => void) => void (resumeRun = resume) : undefined
      }).then(
        () => {
          held += trailer
          ended = true
          wake()
        },
        (cause) => {
          failure = { cause }
          wake()
        }
      )
    }
    return Stream.repeatEffectChunkOption(
      Effect.async<Chunk.Chunk<Uint8Array>, Option.Option<never>>((resume) => {
        if (!started) start()
        const answer = next()
        if (answer !== undefined) return resume(answer)
        waiting = resume
        return Effect.sync(() => {
          waiting = undefined
        })
      })
    )
  })

/**
 * Answers a chat stream on the Effect path: opens the upstream before answering (so routing and
 * upstream refusals still get a status code and an envelope), then streams the same pieces the
 * fast lane writes (Lane.ts's `stream`). The upstream request lives as long as the response
 * stream: a client that disconnects interrupts it, and closing the scope aborts it. A stream still
 * running at the request's deadline (RequestDeadline.ts), when its host gives one, is stopped with
 * the deadline's message in its final chunk.
 */
export const streamAnswer = <E, R>(
  open: Effect.Effect<ChatStream, E, R>,
  textOf: (opened: ChatStream) => { readonly frames: (chunk: StreamChunk) => string; readonly opening: string; readonly trailer: string }
) =>
  Effect.gen(function*() {
    const deadline = yield* Effect.serviceOption(RequestDeadline)
    const scope = yield* Scope.make()
    // Until the response holds the scope (its stream closes it), any exit closes it here.
    return yield* Effect.gen(function*() {
      const opened = yield* Scope.extend(open, scope)
      if (Option.isSome(deadline)) {
        const { at, message } = deadline.value
        // The invocation's time running out is answered as a request not answered in time is (UpstreamTimeout).
        const timer = setTimeout(() => opened.stop({ message, code: "UpstreamTimeout" }), Math.max(0, at - Date.now()))
        yield* Scope.addFinalizer(scope, Effect.sync(() => clearTimeout(timer)))
      }
      const { frames, opening, trailer } = textOf(opened)
      const bytes = Stream.ensuring(pulledText(opened, frames, opening, trailer), Scope.close(scope, Exit.void))
      const { "content-type": contentType, ...headers } = SSE_HEADERS
      return HttpServerResponse.stream(bytes, { contentType, headers })
    }).pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))))
  })

const completeWith = (body: typeof ToolResultBody.Type, avatar: AvatarRecord) =>
  Effect.flatMap(toChatMessages(body.messages), (messages) => Effect.flatMap(Completions, (c) => c.complete(avatar, toInput(body, messages))))

const toolResultProblem = (body: typeof ToolResultBody.Type) =>
  body.messages.some((m) => m.role === "tool")
    ? undefined
    : new BadRequest({ message: "messages must contain at least one role=tool message (use /v1/complete otherwise)" })

const needsToolResult = (body: typeof ToolResultBody.Type) =>
  Effect.suspend(() => {
    const problem = toolResultProblem(body)
    return problem ? Effect.fail(problem) : Effect.void
  })

/**
 * The fast-lane plan of a gateway chat route (Lane.ts): the body's refusals, the hand-off of
 * calls that need preparation (avatar context, FAHRN, the braid), else the routed call, answered
 * as JSON or as an SSE stream of the route's chunks.
 */
const completionLane = (answer: "json" | "stream", problem?: (body: typeof ToolResultBody.Type) => BadRequest | undefined): Lane<typeof ToolResultBody.Type> => ({
  plan: (services, avatar, body) => {
    const refused = problem?.(body)
    if (refused) return refused
    const input = inputOf(body)
    if (input instanceof BadRequest) return input
    const { calls } = services
    return chatPlan(services, avatar, input, ({ messages, request, targets }) =>
      answer === "json"
        ? (lane) => calls.complete({ ...lane.call(targets), messages, request })
        : async (lane) => lane.stream(await calls.openStream({ ...lane.call(targets), messages, request }), sseFrame))
  }
})

/** A chat request's refusals before admission: its messages, then the routing of the call. */
export const checkCompletion = ({ avatar, body }: { readonly avatar: AvatarRecord; readonly body: typeof ToolResultBody.Type }) =>
  Effect.flatMap(toChatMessages(body.messages), (messages) => Effect.flatMap(Completions, (c) => c.check(avatar, toInput(body, messages))))

export const completionRoutes = [
  authed({
    method: "POST",
    path: "/v1/complete",
    success: CompletionResult,
    tag,
    metered: true,
    summary: "Chat completion, routed to the named provider or the best fit for the plan (auto)",
    body: CompleteBody,
    avatarIdOf: (b) => b.avatarId,
    check: checkCompletion,
    handle: ({ avatar, body }) => completeWith(body, avatar),
    lane: completionLane("json")
  }),
  authed({
    method: "POST",
    path: "/v1/complete/stream",
    tag,
    metered: true,
    contentType: "text/event-stream",
    summary: "Streaming chat completion: text/event-stream of {content, done} chunks; the last has done=true and token counts",
    body: CompleteBody,
    avatarIdOf: (b) => b.avatarId,
    check: checkCompletion,
    handle: ({ avatar, body }) =>
      Effect.flatMap(toChatMessages(body.messages), (messages) =>
        streamAnswer(Effect.flatMap(Completions, (c) => c.stream(avatar, toInput(body, messages))), () => gatewayStreamText)),
    lane: completionLane("stream")
  }),
  authed({
    method: "POST",
    path: "/v1/complete/tool-result",
    success: CompletionResult,
    tag,
    metered: true,
    summary: "Continue a tool-calling loop: the history holds assistant tool calls and role=tool results",
    description:
      "Same body as /v1/complete; messages may also have role `tool` with `toolCallId` (or `tool_call_id`) answering an earlier assistant message's `toolCalls` (or OpenAI-style `tool_calls`). Send the same `tools` again.",
    body: ToolResultBody,
    avatarIdOf: (b) => b.avatarId,
    check: (input) => Effect.zipRight(needsToolResult(input.body), checkCompletion(input)),
    handle: ({ avatar, body }) => completeWith(body, avatar),
    lane: completionLane("json", toolResultProblem)
  })
]
