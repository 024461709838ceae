/**
 * Chat completions: plain, streamed and tool-result continuations. Routes the request,
 * falls back on retryable upstream failures (never after a stream started), records usage
 * and provider health for every call, including streams the client abandons.
 */
import { Context, Effect, Layer, Option, type Scope, Stream } from "effect"
import { type GatewayError, isGatewayError } from "../Errors.ts"
import { ChatCalls, type CompletionResult, finalChunk, makeStreamAccount, type StreamChunk, type UsageReport } from "./ChatCalls.ts"
import { karmaMultiplier, type Plan } from "../Plans.ts"
import { chatAdapters } from "../Providers/Adapters.ts"
import type { ChatMessage, ChatRequest, Target, ToolDefinition } from "../Providers/Chat.ts"
import { ProviderHealth } from "../Providers/ProviderHealth.ts"
import { TaskClassifier } from "../Ml/TaskClassifier.ts"
import { planBlock } from "./AgentRoster.ts"
import { Braid } from "./Braid.ts"
import type { UpstreamError } from "../Providers/UpstreamError.ts"
import { type Preference, Routing } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { roughPromptTokens } from "../Tokens.ts"
import * as RequestId from "../RequestId.ts"

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

export type { CompletionResult, StreamChunk, UsageReport } from "./ChatCalls.ts"

/** A routed call: the final messages, the targets in order and the request for each. */
export interface PlannedCall {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly targets: ReadonlyArray<Target>
  readonly request: (target: Target) => ChatRequest
}

/** The system block `injectAvatarContext` prepends. */
export const avatarContext = (avatar: AvatarRecord) =>
  `Context about the user (avatar): username ${avatar.username}${avatar.title ? `, title "${avatar.title}"` : ""}; karma ${avatar.karmaTotal} (quota multiplier ${
    karmaMultiplier(avatar.karmaTotal).toFixed(2)
  }); plan ${avatar.plan}.`

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
  const health = yield* ProviderHealth
  const calls = yield* ChatCalls
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
          // The caller's own or an Admin-published reasoning graph of the task type (docs/authorization.md).
          const graph = yield* braid.forPrompt(avatar, taskType)
          if (Option.isSome(graph)) {
            messages = withSystemBlock(messages, `Shared reasoning graph for ${taskType} tasks ("${graph.value.title}"); follow its steps:\n\`\`\`mermaid\n${graph.value.mermaid}\n\`\`\``)
          }
        }
        if (input.useFAHRN) messages = withSystemBlock(messages, planBlock(taskType))
      }
      return yield* routed(avatar, input, messages)
    })

  /** Routing targets and the per-target request for the final messages. */
  const routed = (avatar: AvatarRecord, input: CompletionInput, messages: ReadonlyArray<ChatMessage>) =>
    Effect.suspend(() => {
      const planned = plan(avatar, input, messages)
      return Array.isArray(planned.targets)
        ? Effect.succeed(planned as PlannedCall)
        : Effect.fail(planned.targets as Exclude<typeof planned.targets, ReadonlyArray<Target>>)
    })

  /**
   * `prepare` without the Effect-only steps (avatar context, FAHRN, braid), synchronously: the
   * targets (or the routing error) and the request for each. The HTTP fast lane uses it for calls
   * that ask for none of those steps.
   */
  const plan = (avatar: AvatarRecord, input: CompletionInput, messages: ReadonlyArray<ChatMessage>) => {
    const targets = routing.targetsNow({
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
    return {
      messages,
      targets: Array.isArray(targets) && input.routing?.fallback === false ? targets.slice(0, 1) : targets,
      request
    }
  }

  /**
   * The refusals of a call that depend only on the request and configuration (unknown model or
   * provider, provider not configured or not allowed for the plan, no model fits): what routes
   * answer before the call is counted (docs/quota.md). The same routing as the call itself, on the
   * caller's messages (the Effect-only steps add little to the context).
   */
  const check = (avatar: AvatarRecord, input: CompletionInput): Effect.Effect<void, GatewayError> =>
    Effect.asVoid(routed(avatar, input, input.messages))

  /** A plain completion: routed here, called through ChatCalls (interruption aborts the upstream call). */
  const complete = (avatar: AvatarRecord, input: CompletionInput) =>
    Effect.flatMap(Effect.zip(prepare(avatar, input), RequestId.current), ([{ messages, request, targets }, requestId]) =>
      Effect.async<CompletionResult, GatewayError>((resume) => {
        const controller = new AbortController()
        // The request id goes upstream with the call (RequestId.ts).
        calls.complete({ avatar, messages, targets, request, controller, requestId }).then(
          (result) => resume(Effect.succeed(result)),
          (e) => resume(isGatewayError(e) ? Effect.fail(e) : Effect.die(e))
        )
        return Effect.sync(() => controller.abort())
      }))

  /**
   * Opens the upstream stream (with fallback until one accepts) and returns the chunk stream.
   * Usage is recorded once when the stream ends, fails or is interrupted.
   */
  const stream = (avatar: AvatarRecord, input: CompletionInput): Effect.Effect<Stream.Stream<StreamChunk>, GatewayError, Scope.Scope> =>
    Effect.gen(function*() {
      const { messages, request, targets } = yield* prepare(avatar, input)
      const started = performance.now()
      const { target, value: events } = yield* routing.firstSuccess(targets, (t) => chatAdapters[t.provider.adapter]!.stream(t, request(t)))
      const account = makeStreamAccount()
      let recorded: Option.Option<UsageReport> = Option.none()
      const recordOnce = (ok: boolean) =>
        Effect.suspend(() => {
          if (Option.isSome(recorded)) return Effect.succeed(recorded.value)
          return Effect.flatMap(account.report(messages), (r) => {
            if (Option.isSome(recorded)) return Effect.succeed(recorded.value)
            recorded = Option.some(r)
            return Effect.as(Effect.promise(() => calls.record(avatar, target, r, Math.round(performance.now() - started), ok)), r)
          })
        })
      const lastChunk = (error?: string) =>
        Effect.map(recordOnce(error === undefined), (r) => finalChunk(target, account.finishReason(), r, error))
      const body = events.pipe(Stream.filterMap((e) => Option.fromNullable(account.onEvent(e))))
      return body.pipe(
        Stream.concat(Stream.fromEffect(lastChunk())),
        // After the first byte there is no fallback: the stream ends with an error chunk.
        Stream.catchAll((error: UpstreamError) =>
          Stream.fromEffect(
            Effect.zipRight(health.record(target.provider.id, false), lastChunk(error.message))
          )
        ),
        Stream.ensuring(recordOnce(false).pipe(Effect.ignore))
      )
    })

  return { check, complete, stream, plan }
})

export class Completions extends Context.Tag("aigw/Completions")<Completions, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Completions, makeService)
