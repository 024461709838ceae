/**
 * Chat completions: plain, streamed and tool-result continuations. Routes the request,
 * falls back on retryable upstream failures (never after a stream started), records usage
 * and provider health for every call, including streams the client abandons.
 */
import { Context, Effect, Layer, Option, type Scope } from "effect"
import type { GatewayError } from "../Errors.ts"
import { type ChatStream, type CompletionResult, lift, ProviderCalls } from "../Engine/ProviderCalls.ts"
import { Cancel } from "../Providers/internal/cancel.ts"
import { karmaMultiplier, type Plan } from "../Plans.ts"
import type { ChatMessage, ChatOptions, ChatRequest, Target, ToolDefinition } from "../Providers/Chat.ts"
import { reasoningRefusal, refusedParam } from "../Providers/Chat.ts"
import { servedBy } from "../Providers/Registry.ts"
import { BadRequest } from "../Errors.ts"
import { TaskClassifier } from "../Ml/TaskClassifier.ts"
import { planner } from "./AgentRoster.ts"
import { Braid } from "./Braid.ts"
import { type Preference, routed, Routing, type RoutingError } from "../Routing.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { standingStores, stillActing } from "../Accounts/StillActing.ts"
import * as RequestId from "../RequestId.ts"

export interface CompletionInput {
  readonly messages: ReadonlyArray<ChatMessage>
  readonly provider: string
  readonly model: string
  readonly tools?: ReadonlyArray<ToolDefinition> | undefined
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  /** Sampling, format and tool-choice options, and OpenAI fields forwarded as they are (Providers/Chat.ts). */
  readonly options?: ChatOptions | undefined
  readonly injectAvatarContext?: boolean | undefined
  readonly useFAHRN?: boolean | undefined
  readonly useHolonicBraid?: boolean | undefined
  readonly routing?: {
    readonly preference?: Preference | undefined
    readonly fallback?: boolean | undefined
    readonly useOpenServ?: boolean | undefined
  } | undefined
}

export type { CompletionResult, StreamChunk, UsageReport } from "../Engine/ProviderCalls.ts"

/**
 * True when a call asks for steps that need Effect services (avatar context, FAHRN, the braid):
 * `prepare` runs them; the fast lane hands such requests to the Effect routes.
 */
export const needsPreparation = (input: Pick<CompletionInput, "injectAvatarContext" | "useFAHRN" | "useHolonicBraid">) =>
  input.injectAvatarContext === true || input.useFAHRN === true || input.useHolonicBraid === true

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

const lastUserMessage = (messages: ReadonlyArray<ChatMessage>) => [...messages].reverse().find((m) => m.role === "user")

/** `useFAHRN` needs a user message to plan from; refused before admission (`check`) and in `prepare`. */
const fahrnRefusal = (input: CompletionInput) =>
  input.useFAHRN && !lastUserMessage(input.messages)?.content.trim()
    ? new BadRequest({ message: "useFAHRN plans from the last user message: the request has no user message with text." })
    : undefined

/** The planning call's answer is a short plan, not a solution. */
const PLAN_MAX_TOKENS = 600

const streamCancelled = new DOMException("The stream's reader went away", "AbortError")

const makeService = Effect.gen(function*() {
  const routing = yield* Routing
  const calls = yield* ProviderCalls
  const classifier = yield* TaskClassifier
  const braid = yield* Braid
  const standing = yield* standingStores

  const prepare = (avatar: AvatarRecord, input: CompletionInput) =>
    Effect.gen(function*() {
      let messages = input.injectAvatarContext ? withAvatarContext(input.messages, avatar) : input.messages
      // The braid and the planning step both work from the last user message.
      const lastUser = lastUserMessage(messages)
      if (input.useHolonicBraid) {
        const { taskType } = yield* classifier.classify(lastUser?.content ?? "")
        // The caller's own or an Admin-published reasoning graph of the task type (docs/authorization.md).
        const graph = yield* braid.forPrompt(avatar, taskType)
        if (Option.isSome(graph)) {
          messages = withSystemBlock(messages, `Shared reasoning graph for ${taskType} tasks ("${graph.value.title}"); follow its steps:\n\`\`\`mermaid\n${graph.value.mermaid}\n\`\`\``)
        }
      }
      if (input.useFAHRN) {
        const refused = fahrnRefusal(input)
        if (refused) return yield* Effect.fail(refused)
        const plan = yield* planningCall(avatar, input.provider, lastUser!.content)
        // The answer's call is a second call of this request: made only while the avatar stands behind it (StillActing.ts).
        yield* stillActing(standing, avatar)
        messages = withSystemBlock(messages, `Plan for this request from a planning step (${plan.provider}/${plan.model}); work through it before answering:\n${plan.content}`)
      }
      return yield* planned(avatar, input, messages)
    })

  /**
   * The `useFAHRN` planning step: one routed call (same provider, model auto) with the built-in
   * planner's instructions, recorded like any call; none of the preparation steps, so no recursion.
   */
  const planningCall = (avatar: AvatarRecord, provider: string, task: string): Effect.Effect<CompletionResult, GatewayError> =>
    complete(avatar, {
      provider,
      model: "auto",
      maxTokens: PLAN_MAX_TOKENS,
      messages: [
        { role: "system", content: `You are the ${planner.role} of a reasoning team. ${planner.instructions} Answer with a short numbered plan only; do not solve the problem.` },
        { role: "user", content: task }
      ]
    })

  /** Routing targets and the per-target request for the final messages. */
  const planned = (avatar: AvatarRecord, input: CompletionInput, messages: ReadonlyArray<ChatMessage>) =>
    Effect.flatMap(routing.promptTokens(messages, input.maxTokens), (promptTokens): Effect.Effect<PlannedCall, RoutingError | BadRequest> => {
      const call = plan(avatar, input, messages, promptTokens)
      return Effect.as(routed(call.targets), call as PlannedCall)
    })

  /**
   * `prepare` without the Effect-only steps (avatar context, FAHRN, braid), synchronously: the
   * targets (or the routing error) and the request for each, given the prompt's tokens
   * (`Routing.promptTokens`). The HTTP fast lane uses it for calls that ask for none of those steps.
   */
  const plan = (avatar: AvatarRecord, input: CompletionInput, messages: ReadonlyArray<ChatMessage>, promptTokens: number) => {
    const targets = routing.targets({
      provider: input.provider,
      model: input.model,
      plan: avatar.plan as Plan,
      needsTools: (input.tools?.length ?? 0) > 0,
      contextTokens: promptTokens + (input.maxTokens ?? 0),
      maxTokens: input.maxTokens,
      preference: input.routing?.preference
    })
    // Asked for once per target by the wire check below and again by the call: built once for the last target asked.
    let builtFor: Target | undefined
    let built!: ChatRequest
    const request = (t: Target): ChatRequest => {
      if (builtFor !== t) {
        builtFor = t
        built = { ...input.options, model: t.model.id, messages, tools: input.tools, temperature: input.temperature, maxTokens: input.maxTokens }
      }
      return built
    }
    return { messages, targets: honouring(Array.isArray(targets) && input.routing?.fallback === false ? targets.slice(0, 1) : targets, request), request }
  }

  /**
   * The targets whose wire can carry the request (tool choice, images, response format, forwarded
   * fields); when none can, a 400 naming the field and the provider.
   */
  const honouring = (targets: ReadonlyArray<Target> | RoutingError, request: (t: Target) => ChatRequest): ReadonlyArray<Target> | RoutingError | BadRequest => {
    if (!Array.isArray(targets)) return targets
    let reason: { readonly message: string; readonly param: string | undefined } | undefined
    const able = targets.filter((t) => {
      const wire = servedBy(t.provider).chat
      const field = reasoningRefusal(request(t), wire?.carries ?? {})
      const problem = field !== undefined ? `${field} is not supported by this provider's wire format` : wire?.unsupported?.(request(t))
      if (problem !== undefined) reason ??= { message: `${problem} (provider ${t.provider.id}, model ${t.model.id}).`, param: refusedParam(problem) }
      return problem === undefined
    })
    return able.length > 0 ? able : new BadRequest(reason!)
  }

  /**
   * The refusals of a call that depend only on the request and configuration (unknown model or
   * provider, provider not configured or not allowed for the plan, no model fits): what routes
   * answer before the call is counted (docs/quota.md). The same routing as the call itself, on the
   * caller's messages (the Effect-only steps add little to the context).
   */
  const check = (avatar: AvatarRecord, input: CompletionInput): Effect.Effect<void, GatewayError> => {
    const refused = fahrnRefusal(input)
    return refused ? Effect.fail(refused) : Effect.asVoid(planned(avatar, input, input.messages))
  }

  /** A plain completion: routed here, called through the engine (interruption aborts the upstream call). */
  const complete = (avatar: AvatarRecord, input: CompletionInput) =>
    Effect.flatMap(Effect.zip(prepare(avatar, input), RequestId.current), ([{ messages, request, targets }, requestId]) =>
      lift((cancel) => calls.complete({ avatar, messages, targets, request, cancel, requestId })))

  /**
   * Opens the upstream stream through the engine (fallback until one accepts) and returns it to be
   * run once. Closing the scope before the run has finished (its consumer gone or interrupted)
   * aborts the upstream call; the engine records usage once in every case.
   */
  const stream = (avatar: AvatarRecord, input: CompletionInput): Effect.Effect<ChatStream, GatewayError, Scope.Scope> =>
    Effect.gen(function*() {
      const { messages, request, targets } = yield* prepare(avatar, input)
      const requestId = yield* RequestId.current
      const cancel = new Cancel()
      let finished = false
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (!finished) cancel.abort(streamCancelled)
        })
      )
      const opened = yield* lift(() => calls.openStream({ avatar, messages, targets, request, cancel, requestId }), cancel)
      return {
        target: opened.target,
        reportedInput: opened.reportedInput,
        stop: opened.stop,
        run: (emit) =>
          opened.run(emit).then(() => {
            finished = true
          })
      }
    })

  return { check, complete, stream, plan }
})

export class Completions extends Context.Tag("aigw/Completions")<Completions, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Completions, makeService)
