/**
 * The OpenAI-compatible surface under /openai/v1: Chat Completions (plain and streamed, with
 * tools), embeddings, moderations, image generation and the models, so OpenAI SDKs can point
 * their baseURL at the gateway. Same authentication, quota, routing and usage recording as the
 * gateway's own routes, through the same capability services. A request field a route does not
 * map is forwarded to OpenAI-format upstreams, or refused by name: never dropped.
 */
import { Effect, Option, Schema } from "effect"
import type { CompletionInput, CompletionResult, StreamChunk } from "../Capabilities/Completions.ts"
import { allPromptTokens } from "../Engine/ProviderCalls.ts"
import { Embeddings, EmbeddingsBody, type EmbeddingsInput, type EmbeddingsResult } from "../Capabilities/Embeddings.ts"
import { ImagesBody, Media } from "../Capabilities/Media.ts"
import { type ChatMessage, type ChatOptions, type ContentPart, joinedText } from "../Providers/Chat.ts"
import { Catalog, type ModelEntry } from "../Catalog/Catalog.ts"
import { namedModel, pathModelId } from "../Catalog/Queries.ts"
import { BadRequest, NotFound } from "../Errors.ts"
import { fieldsOutside } from "../JsonText.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import {
  CacheControl,
  cacheOf,
  Content,
  inputOf,
  MAX_CONTENT,
  MaxTokens,
  strict,
  Temperature,
  Tools,
  ToolName,
  type ToolResultBody,
  TOOL_CALLS_IN_ALL,
  ToolCalls
} from "./CompletionRoutes.ts"
import type { RoutingError } from "../Routing.ts"
import { errorBody, SSE_DONE, sseData } from "./Edge.ts"
import { chatSurface } from "./ChatSurface.ts"
import { onLane } from "./Lane.ts"
import { authed, decoderNow } from "./Route.ts"
import { ChatCompletion, OpenAiEmbeddingList, OpenAiImages, OpenAiModel, OpenAiModelList, OpenAiModeration } from "./ResponseSchemas.ts"
import { BoundedArray } from "../RequestFields.ts"

const tag = "OpenAI-compatible"

/** A part's prompt-caching breakpoint (Anthropic's `cache_control`, as OpenRouter and LangChain send it in OpenAI's format). */
const cached = { cache_control: Schema.optional(Schema.NullOr(CacheControl)) }

// Text and image parts carry only the fields below: another is refused by name, never dropped.
const TextPart = strict(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String, ...cached }))
const ImagePart = strict(Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: strict(Schema.Struct({
    url: Schema.String.pipe(Schema.pattern(/^(https?:\/\/|data:image\/)/, { message: () => "image_url.url must be an http(s) URL or a data:image/... URL" })),
    detail: Schema.optional(Schema.String.pipe(Schema.maxLength(20)))
  })),
  ...cached
}))
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
const OpenAiContent = Schema.Union(Content, Schema.Null, BoundedArray(Schema.Union(TextPart, ImagePart, OtherPart), { max: 500 }))

/** The fields of a message that map to the neutral message; any other is kept and forwarded (`ChatMessage.extra`). */
const messageFields = {
  role: Schema.Literal("system", "developer", "user", "assistant", "tool").annotations({
    message: () => "role must be one of system, developer, user, assistant, tool"
  }),
  content: Schema.optional(OpenAiContent),
  tool_calls: Schema.optional(ToolCalls),
  tool_call_id: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(64)))
}
const OpenAiMessage = Schema.Struct(messageFields, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const Probability = (name: string) => Schema.Number.pipe(Schema.between(0, 1, { message: () => `${name} must be between 0 and 1` }))
const Penalty = (name: string) => Schema.Number.pipe(Schema.between(-2, 2, { message: () => `${name} must be between -2 and 2` }))

const ResponseFormatSchema = Schema.Union(
  strict(Schema.Struct({ type: Schema.Literal("text", "json_object") })),
  strict(Schema.Struct({
    type: Schema.Literal("json_schema"),
    json_schema: strict(Schema.Struct({
      name: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "json_schema.name is 1-64 letters, digits, _ or -" })),
      description: Schema.optional(Schema.String.pipe(Schema.maxLength(10_000))),
      schema: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({ type: "object" }) }),
      strict: Schema.optional(Schema.NullOr(Schema.Boolean))
    }))
  }))
)

const ToolChoiceSchema = Schema.Union(
  Schema.Literal("auto", "none", "required"),
  strict(Schema.Struct({ type: Schema.Literal("function"), function: strict(Schema.Struct({ name: ToolName })) }))
)

/** The request fields the gateway maps; every other field is kept and forwarded (`ChatRequest.extra`). */
const knownFields = {
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300)),
  messages: BoundedArray(OpenAiMessage, {
    min: 1,
    max: 1000,
    minMessage: "messages must hold at least one message",
    totals: [TOOL_CALLS_IN_ALL, { fields: ["content"], max: 10_000, what: "content parts" }]
  }),
  /** Extension: pin a provider (default auto). */
  provider: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  tools: Schema.optional(Schema.NullOr(Tools)),
  tool_choice: Schema.optional(Schema.NullOr(ToolChoiceSchema)),
  parallel_tool_calls: Schema.optional(Schema.NullOr(Schema.Boolean)),
  response_format: Schema.optional(Schema.NullOr(ResponseFormatSchema)),
  temperature: Schema.optional(Schema.NullOr(Temperature)),
  top_p: Schema.optional(Schema.NullOr(Probability("top_p"))),
  frequency_penalty: Schema.optional(Schema.NullOr(Penalty("frequency_penalty"))),
  presence_penalty: Schema.optional(Schema.NullOr(Penalty("presence_penalty"))),
  seed: Schema.optional(Schema.NullOr(Schema.Int)),
  stop: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, BoundedArray(Schema.String, { max: 16 })))),
  n: Schema.optional(Schema.NullOr(Schema.Literal(1).annotations({ message: () => "n must be 1: the gateway returns one choice per call (send n calls)" }))),
  max_tokens: Schema.optional(Schema.NullOr(MaxTokens)),
  max_completion_tokens: Schema.optional(Schema.NullOr(MaxTokens)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  // include_obfuscation: false drops the upstream's `obfuscation` field from the chunks the gateway writes.
  stream_options: Schema.optional(Schema.NullOr(strict(Schema.Struct({ include_usage: Schema.optional(Schema.Boolean), include_obfuscation: Schema.optional(Schema.Boolean) }))))
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

/** A message's content: its text, and its parts when it has more than text. */
const contentOf = (content: OpenAiMessage["content"]): { text: string; parts?: Array<ContentPart> } => {
  if (content === undefined || content === null) return { text: "" }
  if (typeof content === "string") return { text: content }
  const parts: Array<ContentPart> = []
  const texts: Array<string> = []
  let onlyText = true
  for (const p of content) {
    if (p.type === "text") {
      const part = p as typeof TextPart.Type
      texts.push(part.text)
      const cache = cacheOf(part)
      parts.push({ type: "text", text: part.text, ...cache })
      // A breakpoint needs the parts: the joined text cannot say where it was.
      if (cache.cache !== undefined) onlyText = false
    } else if (p.type === "image_url") {
      const part = p as typeof ImagePart.Type
      const i = part.image_url
      parts.push({ type: "image", url: i.url, ...(i.detail !== undefined ? { detail: i.detail } : {}), ...cacheOf(part) })
      onlyText = false
    } else {
      parts.push({ type: "raw", part: p })
      onlyText = false
    }
  }
  const text = joinedText(texts)
  return onlyText ? { text } : { text, parts }
}

/**
 * A message's unmapped fields without the copies of an answer a client sends back with it: the openai
 * SDK's `parsed` (its parse of the content) and an empty `annotations` list carry nothing an upstream
 * could use, and refused they would stop a conversation from going on with another provider's model.
 */
const withoutAnswerCopies = (fields: Record<string, unknown> | undefined) => {
  if (fields === undefined || (!("parsed" in fields) && !("annotations" in fields))) return fields
  const { annotations, parsed: _parsed, ...rest } = fields
  const noAnnotations = annotations === undefined || (Array.isArray(annotations) && annotations.length === 0)
  const kept = noAnnotations ? rest : { ...rest, annotations }
  return Object.keys(kept).length > 0 ? kept : undefined
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
    const others = withoutAnswerCopies(fieldsOutside(m, knownMessageKeys))
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
  const extra = fieldsOutside(body, knownRequestKeys)
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
  // Refused rather than one of them dropped unseen; and stream_options as OpenAI refuses it.
  if (body.max_tokens != null && body.max_completion_tokens != null && body.max_tokens !== body.max_completion_tokens) {
    return new BadRequest({ message: "max_tokens and max_completion_tokens differ: send one of them", param: "max_completion_tokens" })
  }
  if (body.stream_options != null && body.stream !== true) {
    return new BadRequest({ message: "stream_options is only allowed when stream is true", param: "stream_options" })
  }
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

/** The chunk field `include_obfuscation: false` drops. */
const OBFUSCATION = new Set(["obfuscation"])

/** A tool call's signature where Gemini's OpenAI-compatible API puts it, for clients that send it back as they got it. */
const signatureField = (signature: string | undefined) => signature !== undefined ? { extra_content: { google: { thought_signature: signature } } } : {}

const wireCalls = (calls: CompletionResult["toolCalls"]) =>
  calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: c.arguments }, ...signatureField(c.signature) }))

export const toChatCompletion = (id: string, r: CompletionResult) => ({
  ...r.extra?.body,
  id,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: r.model,
  provider: r.provider,
  choices: [{
    // The upstream's own values, when it sent them (extra), replace these defaults.
    logprobs: null as Readonly<Record<string, unknown>> | null,
    ...r.extra?.choice,
    index: 0,
    message: {
      refusal: null as string | null,
      ...r.extra?.message,
      role: "assistant",
      // No text beside tool calls or a refusal: null, as OpenAI answers.
      content: r.content === "" && (r.toolCalls.length > 0 || typeof r.extra?.message?.refusal === "string") ? null : r.content,
      ...(r.toolCalls.length > 0 ? { tool_calls: wireCalls(r.toolCalls) } : {})
    },
    finish_reason: r.finishReason === "error" ? "stop" : r.finishReason
  }],
  usage: openAiUsage(r.usage)
})

/**
 * A call's counts as OpenAI's `usage`: `prompt_tokens` includes the tokens read from or written to
 * the prompt cache (the neutral prompt count excludes them), those read are `cached_tokens`, and
 * the reasoning's tokens (part of the completion's) `reasoning_tokens`, when the upstream reported them.
 */
const openAiUsage = (u: Pick<StreamChunk, "promptTokens" | "completionTokens" | "cacheCreationTokens" | "cacheReadTokens" | "reasoningTokens" | "tokenDetails">) => {
  const prompt = allPromptTokens(u)
  const completion = u.completionTokens ?? 0
  // The upstream's other counts (audio, predicted-output tokens) beside those the gateway models.
  const promptDetails = u.cacheReadTokens !== undefined ? { ...u.tokenDetails?.prompt, cached_tokens: u.cacheReadTokens } : u.tokenDetails?.prompt
  const completionDetails = u.reasoningTokens !== undefined
    ? { ...u.tokenDetails?.completion, reasoning_tokens: u.reasoningTokens }
    : u.tokenDetails?.completion
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(promptDetails !== undefined ? { prompt_tokens_details: promptDetails } : {}),
    ...(completionDetails !== undefined ? { completion_tokens_details: completionDetails } : {})
  }
}

/**
 * Gateway chunks -> chat.completion.chunk objects. `opening` is the role chunk OpenAI sends first
 * (empty content), sent as soon as the upstream accepted the call; then `convert` per chunk (usage
 * chunk when asked, errors as `error`).
 */
export const toChunks = (id: string, model: string, includeUsage: boolean, withoutObfuscation = false) => {
  const created = Math.floor(Date.now() / 1000)
  // The fields every chunk repeats, serialised once per stream: a chunk's JSON is this head, then its own
  // fields (the same text as serialising { ...base, ...fields }).
  const headOf = (m: string) => JSON.stringify({ id, object: "chat.completion.chunk", created, model: m }).slice(0, -1)
  const head = headOf(model)
  const chunk = (fields: { readonly choices: ReadonlyArray<unknown>; readonly usage?: unknown }, h = head) => `${h},${JSON.stringify(fields).slice(1)}`
  const opening = chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] })
  const convert = (c: StreamChunk): Array<string> => {
    if (c.error !== undefined) return [JSON.stringify(errorBody("openai", { _tag: c.errorCode ?? "UpstreamFailed", message: c.error }))]
    // The upstream chunk's own unmodelled fields (system_fingerprint, ...) after the head, as OpenAI orders them;
    // its padding against length side channels not when the client asked for none (include_obfuscation: false).
    const own = withoutObfuscation && c.extra?.body?.obfuscation !== undefined ? fieldsOutside(c.extra.body, OBFUSCATION) : c.extra?.body
    if (!c.done) {
      // A text chunk (the most frequent) written out directly: the same text as the general form below.
      if (c.toolCalls === undefined && c.extra?.delta === undefined && c.extra?.choice === undefined) {
        const fields = own === undefined ? "" : JSON.stringify(own).slice(1, -1)
        return [`${head},${fields === "" ? "" : `${fields},`}"choices":[{"logprobs":null,"index":0,"delta":{"content":${JSON.stringify(c.content)}},"finish_reason":null}]}`]
      }
      return [chunk({
        ...own,
        choices: [{
          logprobs: null,
          ...c.extra?.choice,
          index: 0,
          delta: {
            ...c.extra?.delta,
            ...(c.content !== "" || (!c.toolCalls && !c.extra?.delta && !c.extra?.choice) ? { content: c.content } : {}),
            ...(c.toolCalls
              ? {
                tool_calls: c.toolCalls.map((t) => ({
                  index: t.index,
                  ...(t.id ? { id: t.id, type: "function" } : {}),
                  function: { ...(t.name ? { name: t.name } : {}), arguments: t.arguments },
                  ...signatureField(t.signature)
                }))
              }
              : {})
          },
          finish_reason: null
        }]
      })]
    }
    const final = c.model === undefined || c.model === model ? head : headOf(c.model)
    const out = [chunk({ ...own, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: c.finishReason ?? "stop" }] }, final)]
    if (includeUsage) {
      out.push(chunk({ ...own, choices: [], usage: openAiUsage(c) }, final))
    }
    return out
  }
  return { opening, convert }
}

/** The first field of `body` outside `known` (null is absent), refused by name: the route cannot carry it. */
const refuseUnmapped = (body: Readonly<Record<string, unknown>>, known: ReadonlySet<string>, path: string, why: string) => {
  const field = Object.keys(fieldsOutside(body, known) ?? {})[0]
  return field === undefined ? undefined : new BadRequest({ message: `${field} is not supported on ${path}: ${why}; remove it`, param: field })
}

/** A request conversion as an Effect: its value, or its 400. */
const decided = <A>(convert: () => A | BadRequest): Effect.Effect<A, BadRequest> =>
  Effect.suspend(() => {
    const value = convert()
    return value instanceof BadRequest ? Effect.fail(value) : Effect.succeed(value)
  })

const Model = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300))
/** Extension: pin a provider (default auto). */
const PinProvider = Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(100))))
const Open = Schema.Record({ key: Schema.String, value: Schema.Unknown })

// ---- Embeddings ----

const embeddingFields = {
  model: Model,
  input: Schema.Union(Schema.String, Schema.Array(Schema.Unknown)),
  encoding_format: Schema.optional(Schema.NullOr(Schema.Literal("float", "base64").annotations({ message: () => "encoding_format must be float or base64" }))),
  provider: PinProvider
}
const EmbeddingsRequest = Schema.Struct(embeddingFields, Open)
type EmbeddingsRequest = typeof EmbeddingsRequest.Type
const embeddingKeys: ReadonlySet<string> = new Set(Object.keys(embeddingFields))
const decodeEmbeddings = decoderNow(EmbeddingsBody, "request")

/** OpenAI embeddings request -> the gateway's (its limits); token-id input and unmapped fields are refused by name. */
const embeddingsInputOf = (body: EmbeddingsRequest): EmbeddingsInput | BadRequest => {
  const refused = refuseUnmapped(body, embeddingKeys, "/openai/v1/embeddings", "the gateway's embeddings calls do not carry it")
  if (refused) return refused
  const texts = typeof body.input === "string" ? [body.input] : body.input
  if (!texts.every((t) => typeof t === "string")) {
    return new BadRequest({ message: "input must be a string or an array of strings: token-id input (arrays of integers) is not supported, send the text", param: "input" })
  }
  if (texts.length === 0 || texts.includes("")) return new BadRequest({ message: "input must not be empty, nor hold an empty string", param: "input" })
  return decodeEmbeddings({ texts, model: body.model, provider: body.provider ?? "auto" })
}

/** A vector as OpenAI's base64 encoding: little-endian float32. */
const base64Vector = (vector: ReadonlyArray<number>) => {
  const view = new DataView(new ArrayBuffer(vector.length * 4))
  vector.forEach((v, i) => view.setFloat32(i * 4, v, true))
  return Buffer.from(view.buffer).toString("base64")
}

const toEmbeddingList = (r: EmbeddingsResult, format: EmbeddingsRequest["encoding_format"]) => ({
  object: "list",
  data: r.embeddings.map((e, index) => ({ object: "embedding", index, embedding: format === "base64" ? base64Vector(e) : e })),
  model: r.model,
  provider: r.provider,
  usage: { prompt_tokens: r.usage.promptTokens, total_tokens: r.usage.totalTokens }
})

// ---- Moderations ----

// OpenAI's multi-modal form: an array of parts is one input (one result); its text parts are read, an image refused by name.
const ModerationPart = Schema.Union(
  strict(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String.pipe(Schema.maxLength(100_000)) })),
  Schema.Struct({ type: Schema.Literal("image_url"), image_url: Schema.Unknown })
)
const moderationFields = {
  model: Schema.optional(Schema.NullOr(Model)),
  input: Schema.Union(
    Schema.String.pipe(Schema.minLength(1, { message: () => "input must not be empty" }), Schema.maxLength(100_000)),
    BoundedArray(Schema.String.pipe(Schema.maxLength(100_000)), {
      min: 1,
      max: 32,
      minMessage: "input must hold at least one string",
      maxMessage: "input holds at most 32 strings"
    }),
    BoundedArray(ModerationPart, { min: 1, max: 32, minMessage: "input must hold at least one part", maxMessage: "input holds at most 32 parts" })
  ).annotations({
    message: () => ({ message: "input must be a non-empty string, an array of 1 to 32 strings, or an array of text parts", override: true })
  }),
  provider: PinProvider
}
const ModerationRequest = Schema.Struct(moderationFields, Open)
type ModerationRequest = typeof ModerationRequest.Type
const moderationKeys: ReadonlySet<string> = new Set(Object.keys(moderationFields))
/** The texts judged, one result each: a string, each string of a list, or the text parts of one multi-modal input. */
const moderationTexts = (body: ModerationRequest): ReadonlyArray<string> => {
  const input = body.input
  if (typeof input === "string") return [input]
  if (input.every((i): i is string => typeof i === "string")) return input
  return [joinedText(input.flatMap((p) => (typeof p === "object" && p.type === "text" ? [p.text] : [])))]
}

const moderationRefusal = (body: ModerationRequest) => {
  // The multi-modal form (an array of parts), one input: text only, and some text.
  const parts = Array.isArray(body.input) && body.input.some((p) => typeof p === "object") ? body.input : undefined
  if (parts?.some((p) => typeof p === "object" && p.type === "image_url")) {
    return new BadRequest({ message: "Invalid request: image_url parts are not supported by the gateway's moderation calls (text only)", param: "input" })
  }
  if (parts !== undefined && moderationTexts(body)[0] === "") return new BadRequest({ message: "Invalid request: input's text parts hold no text", param: "input" })
  return refuseUnmapped(body, moderationKeys, "/openai/v1/moderations", "the gateway's moderation calls do not carry it")
}

/** One text per result, as OpenAI answers: every category named (flagged or scored) with its flag. */
const moderate = (avatar: AvatarRecord, body: ModerationRequest) =>
  Effect.gen(function*() {
    const refused = moderationRefusal(body)
    if (refused) return yield* Effect.fail(refused)
    const media = yield* Media
    const provider = body.provider ?? "auto"
    const answers = yield* Effect.forEach(
      moderationTexts(body),
      (text) => media.moderation(avatar, { text, provider, model: body.model ?? undefined }),
      { concurrency: 4 }
    )
    return {
      id: `modr-${crypto.randomUUID().replace(/-/g, "")}`,
      model: answers[0]!.model,
      provider: answers[0]!.provider,
      results: answers.map((a) => {
        const flagged = new Set(a.categories)
        const names = new Set([...Object.keys(a.categoryScores), ...flagged])
        return {
          flagged: a.flagged,
          categories: Object.fromEntries([...names].map((n) => [n, flagged.has(n)])),
          category_scores: Object.fromEntries([...names].map((n) => [n, a.categoryScores[n] ?? 0])),
          // The inputs each category was judged on: this route takes text only (OpenAI's SDKs require the field).
          category_applied_input_types: Object.fromEntries([...names].map((n) => [n, ["text"]]))
        }
      })
    }
  })

// ---- Images ----

const imageFields = {
  prompt: Schema.String.pipe(Schema.minLength(1, { message: () => "prompt must not be empty" }), Schema.maxLength(32_000)),
  model: Schema.optional(Schema.NullOr(Model)),
  n: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 10, { message: () => "n must be an integer from 1 to 10" })))),
  size: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(20)))),
  // A streamed image (partial images as SSE) would reach the upstream and be made, then not be read: refused first.
  stream: Schema.optional(Schema.NullOr(Schema.Literal(false).annotations({
    message: () => "stream is not supported on images: the gateway answers the images whole (omit stream, or send false)"
  }))),
  provider: PinProvider
}
const ImagesRequest = Schema.Struct(imageFields, Open)
type ImagesRequest = typeof ImagesRequest.Type
const imageKeys: ReadonlySet<string> = new Set(Object.keys(imageFields))

/**
 * OpenAI images request -> the media capability's: a `WIDTHxHEIGHT` size maps to width and height
 * (the capability's limits); every other field (quality, style, response_format, user, another
 * size such as auto) goes on unchanged, since every images provider speaks the OpenAI format.
 */
const imagesInputOf = (body: ImagesRequest) => {
  const pixels = /^(\d{1,5})x(\d{1,5})$/i.exec(body.size ?? "")
  const rest = fieldsOutside(body, imageKeys)
  const extra = pixels || body.size == null ? rest : { ...rest, size: body.size }
  return {
    prompt: body.prompt,
    provider: body.provider ?? "auto",
    n: body.n ?? 1,
    ...(body.model != null ? { model: body.model } : {}),
    ...(pixels ? { width: Number(pixels[1]), height: Number(pixels[2]) } : {}),
    ...(extra ? { extra } : {})
  }
}

/** Checks a `WIDTHxHEIGHT` size against the capability's limits (ImagesBody), before the call. */
const decodeImages = decoderNow(ImagesBody, "request")
const checkedImagesInput = (body: ImagesRequest) => {
  const input = imagesInputOf(body)
  const checked = decodeImages({ prompt: input.prompt, provider: input.provider, n: input.n, width: input.width, height: input.height })
  return checked instanceof BadRequest ? checked : input
}

/** A fresh completion id in OpenAI's format. */
export const completionId = () => `chatcmpl-${crypto.randomUUID().replace(/-/g, "")}`

/** A Chat Completions stream: OpenAI's chunks as `data:` events, ended by `[DONE]`. */
export const openAiStream = (id: string, body: ChatCompletionBody, model: string) => ({
  ...toChunks(id, model, body.stream_options?.include_usage === true, body.stream_options?.include_obfuscation === false),
  frame: sseData,
  trailer: SSE_DONE
})

/** Chat Completions over the gateway's one chat call (ChatSurface.ts builds the check, the handler and the fast-lane plan). */
const chat = chatSurface({
  inputOf: chatInputOf,
  streamed: (body: ChatCompletionBody) => body.stream === true,
  newId: completionId,
  answer: toChatCompletion,
  stream: (id, body, opened) => openAiStream(id, body, opened.target.model.id)
})

const autoModel = { id: "auto", object: "model", created: 0, owned_by: "aigw" }
const openAiModel = (m: ModelEntry) => ({ id: m.id, object: "model", created: 0, owned_by: m.provider })

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
    ...chat
  }),
  authed({
    method: "POST",
    path: "/openai/v1/embeddings",
    success: OpenAiEmbeddingList,
    tag,
    envelope: "openai",
    metered: true,
    summary: "OpenAI Embeddings: input a string or strings, encoding_format float or base64; model may be a catalogue id or auto",
    description: "Token-id input and fields the gateway does not carry (dimensions, user, ...) are refused by name. An extra `provider` field pins a provider.",
    body: EmbeddingsRequest,
    check: ({ avatar, body }) => Effect.flatMap(decided(() => embeddingsInputOf(body)), (input) => Effect.flatMap(Embeddings, (e) => e.check(avatar, input))),
    handle: ({ avatar, body }) =>
      Effect.flatMap(decided(() => embeddingsInputOf(body)), (input) =>
        Effect.map(Effect.flatMap(Embeddings, (e) => e.embed(avatar, input)), (r) => toEmbeddingList(r, body.encoding_format))),
    lane: {
      plan: ({ calls, embeddings }, avatar, body) => {
        const input = embeddingsInputOf(body)
        if (input instanceof BadRequest) return input
        const targets = embeddings.laneTargets(avatar, input)
        if (targets === undefined) return undefined
        if (!Array.isArray(targets)) return targets as RoutingError
        return async (lane) => toEmbeddingList(await calls.embed({ ...lane.call(targets), texts: input.texts }), body.encoding_format)
      }
    }
  }),
  authed({
    method: "POST",
    path: "/openai/v1/moderations",
    success: OpenAiModeration,
    tag,
    envelope: "openai",
    metered: true,
    meteredCalls: (body) => moderationTexts(body).length,
    summary: "OpenAI Moderations: input a string or strings (one result each); model optional",
    description: "Image parts and fields the gateway does not carry are refused by name. An extra `provider` field pins a provider.",
    ...onLane(ModerationRequest, {
      check: ({ avatar, body }) =>
        Effect.flatMap(decided(() => moderationRefusal(body) ?? body), (b) => Effect.flatMap(Media, (m) => m.check.moderation(avatar, b.provider ?? "auto", b.model ?? undefined))),
      handle: ({ avatar, body }) => moderate(avatar, body)
    })
  }),
  authed({
    method: "POST",
    path: "/openai/v1/images/generations",
    success: OpenAiImages,
    tag,
    envelope: "openai",
    metered: true,
    summary: "OpenAI image generation: prompt, model, n, size; quality, style, response_format and other fields go to the provider unchanged",
    description: "Every images provider speaks the OpenAI format, so fields the gateway does not map are forwarded as sent.",
    ...onLane(ImagesRequest, {
      check: ({ avatar, body }) => Effect.flatMap(decided(() => checkedImagesInput(body)), (input) => Effect.flatMap(Media, (m) => m.check.images(avatar, input))),
      handle: ({ avatar, body }) =>
        Effect.flatMap(decided(() => checkedImagesInput(body)), (input) =>
          Effect.map(Effect.flatMap(Media, (m) => m.images(avatar, input)), (r) => ({
            // The provider's fields the gateway does not model, where OpenAI's answer has them (gpt-image's output_format, quality, …).
            ...r.extra,
            created: Math.floor(Date.now() / 1000),
            data: r.images.map((i) => ({
              ...(i.url !== undefined ? { url: i.url } : {}),
              ...(i.b64Json !== undefined ? { b64_json: i.b64Json } : {}),
              ...(i.revisedPrompt !== undefined ? { revised_prompt: i.revisedPrompt } : {})
            })),
            ...(r.usage
              ? {
                usage: {
                  input_tokens: r.usage.promptTokens,
                  output_tokens: r.usage.completionTokens,
                  total_tokens: r.usage.totalTokens,
                  input_tokens_details: { text_tokens: r.usage.promptTokens - r.usage.promptImageTokens, image_tokens: r.usage.promptImageTokens }
                }
              }
              : {}),
            model: r.model,
            provider: r.provider
          })))
    })
  }),
  authed({
    method: "GET",
    path: "/openai/v1/models/*",
    success: OpenAiModel,
    tag,
    envelope: "openai",
    summary: "One model of the catalogue in OpenAI's shape (ids with `/` may be sent as is or URL-encoded); 404 for an unknown id",
    handle: ({ params }) =>
      Effect.flatMap(Catalog, (c) => {
        const id = pathModelId(params["*"] ?? "")
        if (id === "auto") return Effect.succeed(autoModel)
        return Option.match(namedModel(c, id), {
          onNone: () => Effect.fail(new NotFound({ message: `The model '${id}' does not exist in the gateway's catalogue. See GET /openai/v1/models.` })),
          onSome: (m) => Effect.succeed(openAiModel(m))
        })
      })
  }),
  authed({
    method: "GET",
    path: "/openai/v1/models",
    success: OpenAiModelList,
    tag,
    envelope: "openai",
    summary: "OpenAI model list of the catalogue's models (chat, embeddings, rerank): every id GET /openai/v1/models/{id} answers",
    handle: () =>
      Effect.map(Catalog, (c) => ({
        object: "list",
        data: [autoModel, ...c.models.map(openAiModel)]
      }))
  })
]
