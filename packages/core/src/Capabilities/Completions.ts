/**
 * Chat completions: plain, streamed and tool-result continuations. Routes the request,
 * falls back on retryable upstream failures (never after a stream started), records usage
 * and provider health for every call, including streams the client abandons.
 */
import { Context, Effect, Layer, Option, type Scope, Stream } from "effect"
import { costOf } from "../Cost.ts"
import type { GatewayError } from "../Errors.ts"
import { karmaMultiplier, type Plan } from "../Plans.ts"
import { chatAdapters } from "../Providers/Adapters.ts"
import type { ChatMessage, ChatRequest, FinishReason, Target, ToolCall, ToolDefinition } from "../Providers/Chat.ts"
import { ProviderHealth } from "../Providers/ProviderHealth.ts"
import { TaskClassifier } from "../Ml/TaskClassifier.ts"
import { planBlock } from "./AgentRoster.ts"
import { Braid } from "./Braid.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import { type Fallback, type Preference, Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { countMessages, countText, roughPromptTokens } from "../Tokens.ts"
import { Usage } from "../Usage.ts"

export interface CompletionInput {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly provider: string
  readonly model: string
  readonly tools?: ReadonlyArray<ToolDefinition> | undefined
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  readonly injectAvatarContext?: boolean | undefined
  readonly useFAHRN?: boolean | undefined
  readonly useHolonicBraid?: boolean | undefined
  readonly routing?: {
    readonly preference?: Preference | undefined
    readonly fallback?: boolean | undefined
    readonly useOpenServ?: boolean | undefined
  } | undefined
}

export interface UsageReport {
  readonly promptTokens: number
  readonly completionTokens: number
  readonly totalTokens: number
  /** True when counted by the gateway's tokenizer because the upstream reported none. */
  readonly estimated: boolean
}

export interface CompletionResult {
  readonly provider: string
  readonly model: string
  readonly content: string
  readonly message: { readonly role: "assistant"; readonly content: string; readonly toolCalls: ReadonlyArray<ToolCall> }
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly finishReason: FinishReason
  readonly usage: UsageReport
  readonly costUSD: number
  readonly latencyMs: number
  /** Earlier candidates that failed with a retryable error before this one answered. */
  readonly fallbacks: ReadonlyArray<Fallback>
}

/** One chunk of `/v1/complete/stream` (the spec's fields plus documented extras). */
export interface StreamChunk {
  readonly content: string
  readonly done: boolean
  readonly toolCalls?: ReadonlyArray<{ readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string }>
  readonly promptTokens?: number
  readonly completionTokens?: number
  readonly finishReason?: FinishReason
  readonly provider?: string
  readonly model?: string
  readonly costUSD?: number
  readonly estimated?: boolean
  readonly error?: string
}

/** The system block `injectAvatarContext` prepends. */
export const avatarContext = (avatar: AvatarRecord) =>
  `Context about the user (avatar): username ${avatar.username}${avatar.title ? `, title "${avatar.title}"` : ""}; karma ${avatar.karmaTotal} (quota multiplier ${
    karmaMultiplier(avatar.karmaTotal).toFixed(2)
  }); plan ${avatar.plan}.`

/** Tokenizer counts for a call whose upstream reported no usage. */
const estimate = (messages: ReadonlyArray<ChatMessage>, completion: string) =>
  Effect.map(Effect.all([countMessages(messages), countText(completion)]), ([promptTokens, completionTokens]): UsageReport => ({
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    estimated: true
  }))

const withAvatarContext = (messages: ReadonlyArray<ChatMessage>, avatar: AvatarRecord) => withSystemBlock(messages, avatarContext(avatar))

/** Prepends `block` to the leading system message, or adds one. */
const withSystemBlock = (messages: ReadonlyArray<ChatMessage>, block: string): ReadonlyArray<ChatMessage> => {
  const [first, ...rest] = messages
  return first?.role === "system"
    ? [{ ...first, content: `${block}\n\n${first.content}` }, ...rest]
    : [{ role: "system", content: block }, ...messages]
}

const makeService = Effect.gen(function*() {
  const routing = yield* Routing
  const usage = yield* Usage
  const health = yield* ProviderHealth
  const classifier = yield* TaskClassifier
  const braid = yield* Braid

  const prepare = (avatar: AvatarRecord, input: CompletionInput) =>
    Effect.gen(function*() {
      let messages = input.injectAvatarContext ? withAvatarContext(input.messages, avatar) : input.messages
      if (input.useFAHRN || input.useHolonicBraid) {
        // Both plan from the last user message's task type.
        const lastUser = [...messages].reverse().find((m) => m.role === "user")
        const { taskType } = yield* classifier.classify(lastUser?.content ?? "")
        if (input.useHolonicBraid) {
          // The shared reasoning graph of the task type, when one was saved.
          const graph = yield* braid.best(taskType)
          if (Option.isSome(graph)) {
            messages = withSystemBlock(messages, `Shared reasoning graph for ${taskType} tasks ("${graph.value.title}"); follow its steps:\n\`\`\`mermaid\n${graph.value.mermaid}\n\`\`\``)
          }
        }
        if (input.useFAHRN) messages = withSystemBlock(messages, planBlock(taskType))
      }
      const targets = yield* routing.targets({
        provider: input.provider,
        model: input.model,
        plan: avatar.plan as Plan,
        needsTools: (input.tools?.length ?? 0) > 0,
        contextTokens: roughPromptTokens(messages) + (input.maxTokens ?? 0),
        maxTokens: input.maxTokens,
        preference: input.routing?.preference
      })
      const request = (t: Target): ChatRequest => ({
        model: t.model.id,
        messages,
        tools: input.tools,
        temperature: input.temperature,
        maxTokens: input.maxTokens
      })
      return { messages, targets: input.routing?.fallback === false ? targets.slice(0, 1) : targets, request }
    })

  const record = (avatar: AvatarRecord, t: Target, report: UsageReport, latencyMs: number, ok: boolean) =>
    usage.record({
      avatarId: avatar.id,
      provider: t.provider.id,
      model: t.model.id,
      capability: "chat",
      promptTokens: report.promptTokens,
      completionTokens: report.completionTokens,
      costUSD: costOf(t.model, report.promptTokens, report.completionTokens),
      latencyMs,
      estimated: report.estimated,
      ok
    })

  const complete = Effect.fn("Completions.complete")(function*(avatar: AvatarRecord, input: CompletionInput) {
    const { messages, request, targets } = yield* prepare(avatar, input)
    const started = performance.now()
    const { fallbacks, target, value } = yield* routing.firstSuccess(targets, (t) => chatAdapters[t.provider.adapter]!.complete(t, request(t)))
    const latencyMs = Math.round(performance.now() - started)
    const report: UsageReport = value.usage
      ? { ...value.usage, totalTokens: value.usage.promptTokens + value.usage.completionTokens, estimated: false }
      : yield* estimate(messages, value.content + value.toolCalls.map((c) => c.arguments).join(""))
    yield* record(avatar, target, report, latencyMs, true)
    const result: CompletionResult = {
      provider: target.provider.id,
      model: target.model.id,
      content: value.content,
      message: { role: "assistant", content: value.content, toolCalls: value.toolCalls },
      toolCalls: value.toolCalls,
      finishReason: value.finishReason,
      usage: report,
      costUSD: costOf(target.model, report.promptTokens, report.completionTokens),
      latencyMs,
      fallbacks
    }
    return result
  })

  /**
   * Opens the upstream stream (with fallback until one accepts) and returns the chunk stream.
   * Usage is recorded once when the stream ends, fails or is interrupted.
   */
  const stream = (avatar: AvatarRecord, input: CompletionInput): Effect.Effect<Stream.Stream<StreamChunk>, GatewayError, Scope.Scope> =>
    Effect.gen(function*() {
      const { messages, request, targets } = yield* prepare(avatar, input)
      const started = performance.now()
      const { target, value: events } = yield* routing.firstSuccess(targets, (t) => chatAdapters[t.provider.adapter]!.stream(t, request(t)))
      let text = ""
      let toolArgs = ""
      let finish: FinishReason = "stop"
      let upstreamPrompt: number | undefined
      let upstreamCompletion: number | undefined
      let recorded: Option.Option<UsageReport> = Option.none()
      const report = Effect.suspend((): Effect.Effect<UsageReport> => {
        if (upstreamPrompt !== undefined && upstreamCompletion !== undefined) {
          return Effect.succeed({ promptTokens: upstreamPrompt, completionTokens: upstreamCompletion, totalTokens: upstreamPrompt + upstreamCompletion, estimated: false })
        }
        const [prompt, completion] = [upstreamPrompt, upstreamCompletion]
        return Effect.map(estimate(messages, text + toolArgs), (e) => {
          const promptTokens = prompt ?? e.promptTokens
          const completionTokens = completion ?? e.completionTokens
          return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, estimated: true }
        })
      })
      const recordOnce = (ok: boolean) =>
        Effect.suspend(() => {
          if (Option.isSome(recorded)) return Effect.succeed(recorded.value)
          return Effect.flatMap(report, (r) => {
            if (Option.isSome(recorded)) return Effect.succeed(recorded.value)
            recorded = Option.some(r)
            return Effect.as(record(avatar, target, r, Math.round(performance.now() - started), ok), r)
          })
        })
      const finalChunk = (error?: string) =>
        Effect.map(recordOnce(error === undefined), (r): StreamChunk => ({
          content: "",
          done: true,
          promptTokens: r.promptTokens,
          completionTokens: r.completionTokens,
          finishReason: error === undefined ? finish : "error",
          provider: target.provider.id,
          model: target.model.id,
          costUSD: costOf(target.model, r.promptTokens, r.completionTokens),
          estimated: r.estimated,
          ...(error !== undefined ? { error } : {})
        }))
      const body = events.pipe(
        Stream.filterMap((e): Option.Option<StreamChunk> => {
          switch (e._tag) {
            case "Text":
              text += e.text
              return Option.some({ content: e.text, done: false })
            case "ToolCallDelta":
              toolArgs += e.arguments
              return Option.some({
                content: "",
                done: false,
                toolCalls: [{ index: e.index, ...(e.id ? { id: e.id } : {}), ...(e.name ? { name: e.name } : {}), arguments: e.arguments }]
              })
            case "Finish":
              finish = e.reason
              return Option.none()
            case "Usage":
              if (e.usage.promptTokens !== undefined) upstreamPrompt = e.usage.promptTokens
              if (e.usage.completionTokens !== undefined) upstreamCompletion = e.usage.completionTokens
              return Option.none()
          }
        })
      )
      return body.pipe(
        Stream.concat(Stream.fromEffect(finalChunk())),
        // After the first byte there is no fallback: the stream ends with an error chunk.
        Stream.catchAll((error: UpstreamError) =>
          Stream.fromEffect(
            Effect.zipRight(health.record(target.provider.id, false), finalChunk(error.message))
          )
        ),
        Stream.ensuring(recordOnce(false).pipe(Effect.ignore))
      )
    })

  return { complete, stream }
})

export class Completions extends Context.Tag("aigw/Completions")<Completions, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Completions, makeService)
