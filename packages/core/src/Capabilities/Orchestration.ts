/**
 * Orchestration adapters: framework-style payloads answered in the shape the framework expects.
 * Every model step is a routed completion (Completions.complete: usage and cost recorded per step).
 *
 *  - conversation (AutoGen-style): agents take turns round-robin, one completion per turn, until a
 *    message holds the termination keyword or `max_rounds` turns ran.
 *  - crew (CrewAI-style): each task's role and description are classified and the task is assigned
 *    the model that fits it within the caller's plan (`assign`); a registered agent of the same
 *    name keeps its pinned provider/model.
 *  - graph-node (LangGraph-style): one node's step; with a thread id the resulting state is
 *    checkpointed per avatar and thread, and the next call on that thread starts from it.
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { BadRequest, Conflict, type GatewayError, PayloadTooLarge } from "../Errors.ts"
import { allPromptTokens, type UsageReport } from "../Engine/ProviderCalls.ts"
import { type Plan } from "../Plans.ts"
import { type Preference, Routing, routed } from "../Routing.ts"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import { TaskClassifier } from "../Ml/TaskClassifier.ts"
import type { ChatMessage } from "../Providers/Chat.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { standingStores, stillActing } from "../Accounts/StillActing.ts"
import { DocumentStore } from "../Storage/DocumentStore.ts"
import { Agents } from "./Agents.ts"
import { type CompletionResult, Completions } from "./Completions.ts"
import { BoundedArray, frameworkPayload, Provider } from "../RequestFields.ts"

// Request schemas, shared by the HTTP routes and the MCP tools.
const Str = (max: number, name: string) =>
  Schema.String.pipe(Schema.minLength(1, { message: () => `${name} must not be empty` }), Schema.maxLength(max))

export const CrewBody = frameworkPayload(Schema.Struct({
  tasks: BoundedArray(
    Schema.Struct({
      id: Str(200, "id"),
      agent: Str(2000, "agent"),
      description: Str(50_000, "description"),
      expected_output: Str(10_000, "expected_output")
    }),
    { min: 1, max: 20, minMessage: "tasks must hold at least one task", maxMessage: "a crew runs at most 20 tasks" }
  ),
  process: Schema.optionalWith(Schema.Literal("sequential", "hierarchical").annotations({ message: () => "process must be sequential or hierarchical" }), { default: () => "sequential" as const }),
  provider: Provider
}))

const ConversationAgent = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "an agent's name must be 1-64 letters, digits, _ or -" })),
  system_message: Str(50_000, "system_message"),
  provider: Schema.optional(Schema.String.pipe(Schema.maxLength(100))).annotations({ description: "Default: the request's provider" }),
  model: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({ description: "Default: the request's model" })
})

export const ConversationBody = frameworkPayload(Schema.Struct({
  initial_message: Str(100_000, "initial_message"),
  system_message: Schema.optional(Schema.String.pipe(Schema.maxLength(50_000))),
  provider: Provider,
  model: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "auto" }),
  max_rounds: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100, { message: () => "max_rounds must be an integer from 1 to 100" })), { default: () => 10 }),
  agents: Schema.optional(
    BoundedArray(ConversationAgent, { min: 2, max: 8, minMessage: "agents must hold 2 to 8 agents", maxMessage: "agents must hold 2 to 8 agents" })
  ).annotations({ description: "The participants, speaking round-robin in this order; the first one's answer is the reply. Default: assistant (system_message) and a user_proxy critic." }),
  termination_keyword: Schema.optionalWith(Str(100, "termination_keyword"), { default: () => "TERMINATE" })
}))

const GraphMessage = Schema.Struct({
  role: Schema.Literal("system", "user", "assistant").annotations({ message: () => "role must be one of system, user, assistant" }),
  content: Schema.String.pipe(Schema.maxLength(1_000_000))
})

const ThreadId = Str(200, "thread_id")

export const GraphNodeBody = frameworkPayload(Schema.Struct({
  node_name: Str(200, "node_name"),
  state: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({}) }),
  messages: Schema.optionalWith(BoundedArray(GraphMessage, { max: 1000 }), { default: () => [] }),
  next_node: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  provider: Provider,
  thread_id: Schema.optional(ThreadId).annotations({ description: "Checkpoint thread: the node starts from the thread's stored state (also read from state.thread_id or config.configurable.thread_id)" }),
  config: Schema.optional(Schema.Struct({ configurable: Schema.optional(Schema.Struct({ thread_id: Schema.optional(ThreadId) })) }))
    .annotations({ description: "LangGraph's RunnableConfig; only configurable.thread_id is used" })
}))

export interface CrewTask {
  readonly id: string
  readonly agent: string
  readonly description: string
  readonly expected_output: string
}

/** What a crew reads of the avatar's registered agents: a name and the provider/model it pins ("auto": none). */
interface Pin {
  readonly name: string
  readonly provider: string
  readonly model: string
}

/** Task types that take the best model the plan allows; the others take the cheapest good-enough one. */
const DEMANDING: ReadonlySet<TaskType> = new Set(["code", "math", "analysis", "research"])
/** The catalogue quality (1-5) a cheaper task type's model must reach when one within the plan does. */
export const QUALITY_FLOOR = 3

/** The frameworks' counts (OpenAI's meaning: prompt tokens read from or written to a prompt cache are prompt tokens). */
export const tokenUsage = (results: ReadonlyArray<CompletionResult>) => {
  const prompt_tokens = results.reduce((n, r) => n + allPromptTokens(r.usage), 0)
  const completion_tokens = results.reduce((n, r) => n + r.usage.completionTokens, 0)
  return {
    prompt_tokens,
    completion_tokens,
    total_tokens: prompt_tokens + completion_tokens,
    costUSD: sumCost(results)
  }
}

const sumCost = (results: ReadonlyArray<CompletionResult>) => Math.round(results.reduce((n, r) => n + r.costUSD, 0) * 1e10) / 1e10

/** The usage of several completions as one report (cache counts only when some call reported them). */
const summedUsage = (results: ReadonlyArray<CompletionResult>): UsageReport => {
  const sum = (f: (u: UsageReport) => number | undefined) => results.reduce((n, r) => n + (f(r.usage) ?? 0), 0)
  const reported = (f: (u: UsageReport) => number | undefined) => results.some((r) => f(r.usage) !== undefined) ? sum(f) : undefined
  const cacheCreationTokens = reported((u) => u.cacheCreationTokens)
  const cacheReadTokens = reported((u) => u.cacheReadTokens)
  const reasoningTokens = reported((u) => u.reasoningTokens)
  return {
    promptTokens: sum((u) => u.promptTokens),
    completionTokens: sum((u) => u.completionTokens),
    totalTokens: sum((u) => u.totalTokens),
    estimated: results.some((r) => r.usage.estimated),
    ...(cacheCreationTokens !== undefined ? { cacheCreationTokens } : {}),
    ...(cacheReadTokens !== undefined ? { cacheReadTokens } : {}),
    ...(reasoningTokens !== undefined ? { reasoningTokens } : {})
  }
}

// ---- Conversation ----

type ConversationInput = typeof ConversationBody.Type

interface Speaker {
  readonly name: string
  readonly system_message: string
  readonly provider: string
  readonly model: string
}

const DEFAULT_ASSISTANT = "You are a helpful assistant. Answer the user's request completely. When you are told what is missing, answer again in full with it fixed."

/** The default critic: it stands in for the user and ends the conversation when satisfied. */
const criticPrompt = (keyword: string) =>
  `You stand in for the user who sent the opening message. Review the assistant's last message against that opening message. If it fully and correctly answers it, reply with ${keyword} and nothing else. Otherwise say briefly and precisely what is missing or wrong; do not write the answer yourself.`

/** The participants of a conversation, or the 400 saying why the request's are not usable. */
export const conversationSpeakers = (input: ConversationInput): ReadonlyArray<Speaker> | BadRequest => {
  const of = (a: { readonly name: string; readonly system_message: string; readonly provider?: string | undefined; readonly model?: string | undefined }): Speaker => ({
    name: a.name,
    system_message: a.system_message,
    provider: a.provider ?? input.provider,
    model: a.model ?? input.model
  })
  if (input.agents === undefined) {
    return [
      of({ name: "assistant", system_message: input.system_message ?? DEFAULT_ASSISTANT }),
      of({ name: "user_proxy", system_message: criticPrompt(input.termination_keyword) })
    ]
  }
  if (input.system_message !== undefined) {
    return new BadRequest({ message: "system_message is the default assistant's persona; with agents, give each agent its system_message." })
  }
  const names = input.agents.map((a) => a.name)
  const repeated = names.find((n, i) => names.indexOf(n) !== i)
  if (repeated !== undefined) return new BadRequest({ message: `agents: the name ${repeated} is used twice; each agent needs its own name.` })
  return input.agents.map(of)
}

/** The conversation as `speaker` sees it: its persona, the opening message, its own turns as assistant, the others' as named user turns. */
const viewOf = (speaker: Speaker, opening: string, turns: ReadonlyArray<{ readonly name: string; readonly content: string }>): ReadonlyArray<ChatMessage> => [
  { role: "system", content: speaker.system_message },
  { role: "user", content: opening },
  ...turns.map((t): ChatMessage => t.name === speaker.name ? { role: "assistant", content: t.content } : { role: "user", content: `${t.name}: ${t.content}` })
]

// ---- Graph-node checkpoints ----

export const GRAPH_THREAD = "graph_thread"
/** The largest state a thread keeps (JSON characters): a runaway thread is refused, never truncated. */
export const MAX_THREAD_STATE_CHARS = 2_000_000

interface ThreadCheckpoint {
  readonly threadId: string
  readonly step: number
  readonly state: Record<string, unknown>
}

type GraphNodeInput = Omit<typeof GraphNodeBody.Type, "messages"> & { readonly messages: ReadonlyArray<ChatMessage> }

/** The thread id of a graph-node call (body, state or LangGraph config), or the 400 when they disagree. */
export const threadIdOf = (input: Pick<GraphNodeInput, "thread_id" | "state" | "config">): string | undefined | BadRequest => {
  const fromState = input.state.thread_id
  if (fromState !== undefined && (typeof fromState !== "string" || fromState.length === 0 || fromState.length > 200)) {
    return new BadRequest({ message: "state.thread_id must be a string of 1 to 200 characters." })
  }
  const given = [input.thread_id, fromState, input.config?.configurable?.thread_id].filter((t): t is string => t !== undefined)
  if (new Set(given).size > 1) return new BadRequest({ message: `thread_id, state.thread_id and config.configurable.thread_id name different threads (${[...new Set(given)].join(", ")}); give one.` })
  return given[0]
}

/** Messages in order without repeats (LangGraph's add_messages, for messages without ids). */
const appendMessages = (...lists: ReadonlyArray<ReadonlyArray<unknown>>): Array<unknown> => {
  const seen = new Set<string>()
  return lists.flat().filter((m) => {
    const key = JSON.stringify(m)
    return seen.has(key) ? false : (seen.add(key), true)
  })
}

const asList = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

// ---- Refusals before admission (HTTP routes and MCP tools) ----

/** The routing refusals of a provider and model (no messages yet) before admission. */
export const checkRouting = (avatar: AvatarRecord, provider: string, model = "auto") =>
  Effect.flatMap(Completions, (c) => c.check(avatar, { provider, model, messages: [] }))

/** A conversation's refusals: its agents, then each one's provider and model. */
export const checkConversation = (avatar: AvatarRecord, input: ConversationInput) => {
  const speakers = conversationSpeakers(input)
  return speakers instanceof BadRequest
    ? Effect.fail(speakers)
    : Effect.forEach(new Set(speakers.map((s) => `${s.provider}\u0000${s.model}`)), (key) => {
      const [provider, model] = key.split("\u0000") as [string, string]
      return checkRouting(avatar, provider, model)
    }, { discard: true })
}

/**
 * The registered agent a crew task's agent name pins, if any: named alike, pinning a provider or model, and
 * not overruled by the request's own provider (which wins over a different pinned one).
 */
const pinnedAgent = (registered: ReadonlyArray<Pin>, agentName: string, forced: string) => {
  const named = agentName.trim().toLowerCase()
  return registered.find((a) =>
    a.name.trim().toLowerCase() === named && (a.provider !== "auto" || a.model !== "auto") && (forced === "auto" || a.provider === "auto" || a.provider === forced)
  )
}

/**
 * A crew's refusals: its provider and model, then the provider and model each registered agent its tasks
 * name pins (an unknown provider, one the plan does not allow): before admission, as a request's own are.
 */
export const checkCrew = (avatar: AvatarRecord, input: { readonly tasks: ReadonlyArray<CrewTask>; readonly provider: string; readonly model?: string | undefined }) =>
  Effect.gen(function*() {
    yield* checkRouting(avatar, input.provider, input.model)
    const registered = (yield* Effect.flatMap(Agents, (a) => a.list(avatar))).agents
    const pins = new Set<string>()
    for (const task of input.tasks) {
      const pinned = pinnedAgent(registered, task.agent, input.provider)
      if (pinned !== undefined) pins.add(`${input.provider !== "auto" ? input.provider : pinned.provider}\u0000${pinned.model}`)
    }
    yield* Effect.forEach(pins, (key) => {
      const [provider, model] = key.split("\u0000") as [string, string]
      return checkRouting(avatar, provider, model)
    }, { discard: true })
  })

/** A graph node's refusals: its thread id, then its provider. */
export const checkGraphNode = (avatar: AvatarRecord, input: Pick<GraphNodeInput, "thread_id" | "state" | "config" | "provider">) => {
  const threadId = threadIdOf(input)
  return threadId instanceof BadRequest ? Effect.fail(threadId) : checkRouting(avatar, input.provider)
}

const makeService = Effect.gen(function*() {
  const completions = yield* Completions
  const standing = yield* standingStores
  const classifier = yield* TaskClassifier
  const routing = yield* Routing
  const agents = yield* Agents
  const docs = yield* DocumentStore

  // Each of a request's many calls goes ahead only while the avatar stands behind it (StillActing.ts).
  const run = (avatar: AvatarRecord, provider: string, model: string, messages: ReadonlyArray<ChatMessage>) =>
    Effect.zipRight(stillActing(standing, avatar), completions.complete(avatar, { messages, provider, model }))

  // ---- Crew ----

  /**
   * The provider and model a crew task runs on, and why. A registered agent named like the task's
   * agent pins its provider/model (the request's provider still wins over a different pinned
   * one). Otherwise routing picks among the models the plan allows and the gateway has configured:
   * demanding types the highest quality (tools-capable for code), the others the cheapest model of
   * quality >= QUALITY_FLOOR, relaxed to any model of the plan when none reaches the floor.
   */
  const assign = (avatar: AvatarRecord, registered: ReadonlyArray<Pin>, agentName: string, taskType: TaskType, forced: string, messages: ReadonlyArray<ChatMessage>) =>
    Effect.gen(function*() {
      const plan = avatar.plan as Plan
      const pinned = pinnedAgent(registered, agentName, forced)
      const provider = forced !== "auto" ? forced : pinned?.provider ?? "auto"
      const base = { provider, plan, contextTokens: yield* routing.promptTokens(messages) }
      const scope = `${provider === "auto" ? "" : ` of ${provider}`} on plan ${plan}`
      if (pinned !== undefined && pinned.model !== "auto") {
        const [target] = yield* routed(routing.targets({ ...base, model: pinned.model, needsTools: false }))
        return { target: target!, reason: `registered agent "${pinned.name}" pins ${target!.provider.id}/${target!.model.id}` }
      }
      const demanding = DEMANDING.has(taskType)
      const preference: Preference = demanding ? "quality" : "cost"
      const strict = { ...base, model: "auto", preference, needsTools: taskType === "code", minQuality: demanding ? undefined : QUALITY_FLOOR }
      const found = routing.targets(strict)
      const relaxed = !Array.isArray(found)
      const [target] = yield* routed(relaxed ? routing.targets({ ...base, model: "auto", preference, needsTools: false }) : found)
      const m = target!.model
      const facts = `quality ${m.quality}, $${(m.inputPer1kUSD + m.outputPer1kUSD).toFixed(5)} per 1k tokens in+out`
      const pin = pinned !== undefined ? `registered agent "${pinned.name}" pins provider ${pinned.provider}; ` : ""
      const why = demanding
        ? `${taskType} is demanding: the highest-quality ${strict.needsTools && !relaxed ? "tools-capable " : ""}model${scope}`
        : relaxed
        ? `${taskType}: no model of quality >= ${QUALITY_FLOOR}${scope}, so the cheapest`
        : `${taskType}: the cheapest model of quality >= ${QUALITY_FLOOR}${scope}`
      return { target: target!, reason: `${pin}${why}${demanding && relaxed ? " (none supports tools)" : ""} (${facts})` }
    })

  const crew = Effect.fn("Orchestration.crew")(function*(
    avatar: AvatarRecord,
    input: { readonly tasks: ReadonlyArray<CrewTask>; readonly process: "sequential" | "hierarchical"; readonly provider: string }
  ) {
    const registered: ReadonlyArray<Pin> = (yield* agents.list(avatar)).agents
    const agentSystem = (agent: string) => `You are ${agent}. Work on your task carefully and answer with the deliverable only.`
    const taskPrompt = (task: CrewTask, context: string) =>
      `Task: ${task.description}\nExpected output: ${task.expected_output}${context ? `\n\nContext from the crew's earlier work:\n${context}` : ""}`
    /** One crew step: assigned a model for its task type, then run on it. */
    const step = (agent: string, taskType: TaskType, messages: ReadonlyArray<ChatMessage>) =>
      Effect.gen(function*() {
        const { reason, target } = yield* assign(avatar, registered, agent, taskType, input.provider, messages)
        const result = yield* run(avatar, target.provider.id, target.model.id, messages)
        return { result, assignment: { taskType, reason } }
      })
    const runTask = (task: CrewTask, context: string) =>
      Effect.gen(function*() {
        const { taskType } = yield* classifier.classify(`${task.agent}. ${task.description}`)
        const done = yield* step(task.agent, taskType, [{ role: "system", content: agentSystem(task.agent) }, { role: "user", content: taskPrompt(task, context) }])
        return { task, ...done }
      })
    const outputs: Array<Effect.Effect.Success<ReturnType<typeof runTask>>> = []
    if (input.process === "sequential") {
      for (const task of input.tasks) {
        const context = outputs.map((o) => `[${o.task.id} by ${o.task.agent}]\n${o.result.content}`).join("\n\n")
        outputs.push(yield* runTask(task, context))
      }
    } else {
      outputs.push(...(yield* Effect.forEach(input.tasks, (t) => runTask(t, ""), { concurrency: 4 })))
    }
    // Hierarchical: a manager (an analysis step) reviews the workers' outputs and writes the final answer.
    const manager = input.process === "hierarchical"
      ? yield* step("manager", "analysis", [
        { role: "system", content: "You are the crew manager. Combine your team's results into one final deliverable that meets every task's expected output." },
        { role: "user", content: outputs.map((o) => `Task ${o.task.id} (${o.task.agent}): ${o.task.description}\nExpected: ${o.task.expected_output}\nResult:\n${o.result.content}`).join("\n\n") }
      ])
      : undefined
    const all = [...outputs.map((o) => o.result), ...(manager ? [manager.result] : [])]
    return {
      raw: manager?.result.content ?? outputs.at(-1)?.result.content ?? "",
      process: input.process,
      tasks_output: outputs.map((o) => ({
        id: o.task.id,
        agent: o.task.agent,
        description: o.task.description,
        expected_output: o.task.expected_output,
        raw: o.result.content,
        taskType: o.assignment.taskType,
        provider: o.result.provider,
        model: o.result.model,
        assignment: o.assignment
      })),
      ...(manager ? { manager: { raw: manager.result.content, provider: manager.result.provider, model: manager.result.model, assignment: manager.assignment } } : {}),
      token_usage: tokenUsage(all)
    }
  })

  // ---- Conversation ----

  /**
   * Round-robin turns, one completion each, until a message contains the termination keyword
   * (removed from the content) or max_rounds turns ran. The reply is the first agent's last
   * non-empty message. A failed turn fails the request; the turns before it stay recorded in usage.
   */
  const conversation = Effect.fn("Orchestration.conversation")(function*(avatar: AvatarRecord, input: ConversationInput) {
    const speakers = conversationSpeakers(input)
    if (speakers instanceof BadRequest) return yield* Effect.fail(speakers)
    const keyword = input.termination_keyword
    const turns: Array<{ readonly name: string; readonly content: string; readonly result: CompletionResult }> = []
    let stop_reason: "termination_keyword" | "max_rounds" = "max_rounds"
    while (turns.length < input.max_rounds) {
      const speaker = speakers[turns.length % speakers.length]!
      const result = yield* run(avatar, speaker.provider, speaker.model, viewOf(speaker, input.initial_message, turns))
      const terminates = result.content.includes(keyword)
      turns.push({ name: speaker.name, content: terminates ? result.content.split(keyword).join("").trim() : result.content, result })
      if (terminates) {
        stop_reason = "termination_keyword"
        break
      }
    }
    const first = speakers[0]!.name
    const own = turns.filter((t) => t.name === first)
    const reply = own.filter((t) => t.content.length > 0).at(-1) ?? own.at(-1)!
    const last = turns.at(-1)!.result
    return {
      role: "assistant",
      name: first,
      content: reply.content,
      finish_reason: reply.result.finishReason,
      rounds: turns.length,
      max_rounds: input.max_rounds,
      stop_reason,
      messages: turns.map((t) => ({ name: t.name, role: "assistant" as const, content: t.content, provider: t.result.provider, model: t.result.model })),
      provider: last.provider,
      model: last.model,
      usage: summedUsage(turns.map((t) => t.result)),
      costUSD: sumCost(turns.map((t) => t.result))
    }
  })

  // ---- Graph node ----

  const threadDocId = (avatar: AvatarRecord, threadId: string) => `${avatar.id}:${threadId}`

  /** The thread's checkpoint and its store version (-1: a new thread). Another avatar's thread of that id is a different document. */
  const loadThread = (avatar: AvatarRecord, threadId: string) =>
    Effect.map(docs.get(GRAPH_THREAD, threadDocId(avatar, threadId)), Option.match({
      onNone: () => ({ version: -1, checkpoint: { threadId, step: 0, state: {} } as ThreadCheckpoint }),
      onSome: (d) => ({ version: d.version, checkpoint: d.data as ThreadCheckpoint })
    }))

  /** Stores the next checkpoint unless another call advanced the thread since it was read. */
  const saveThread = (avatar: AvatarRecord, version: number, next: ThreadCheckpoint): Effect.Effect<void, GatewayError> =>
    Effect.gen(function*() {
      if (JSON.stringify(next.state).length > MAX_THREAD_STATE_CHARS) {
        return yield* Effect.fail(new PayloadTooLarge({ message: `Thread ${next.threadId}'s state would exceed ${MAX_THREAD_STATE_CHARS} characters of JSON; start a new thread_id.` }))
      }
      const id = threadDocId(avatar, next.threadId)
      const now = Date.now()
      const saved = version < 0
        ? yield* docs.insertIfAbsent({ kind: GRAPH_THREAD, id, owner: avatar.id, key: next.threadId, data: next, version: 0, createdAt: now, updatedAt: now })
        : yield* docs.update(GRAPH_THREAD, id, version, next, now)
      if (!saved) return yield* Effect.fail(new Conflict({ message: `Thread ${next.threadId} was advanced by a concurrent call; run the node again on its new state.` }))
    })

  const graphNode = Effect.fn("Orchestration.graphNode")(function*(avatar: AvatarRecord, input: GraphNodeInput) {
    const threadId = threadIdOf(input)
    if (threadId instanceof BadRequest) return yield* Effect.fail(threadId)
    const thread = threadId === undefined ? undefined : yield* loadThread(avatar, threadId)
    // On a thread: the stored state, the given keys winning, messages accumulated without repeats.
    const state: Record<string, unknown> = thread === undefined ? input.state : {
      ...thread.checkpoint.state,
      ...input.state,
      messages: appendMessages(asList(thread.checkpoint.state.messages), asList(input.state.messages), input.messages)
    }
    const history: ReadonlyArray<ChatMessage> = input.messages.length > 0
      ? input.messages
      : [{ role: "user", content: `Graph state: ${JSON.stringify(state)}` }]
    const result = yield* run(avatar, input.provider, "auto", [
      { role: "system", content: `You are the "${input.node_name}" node of an agent graph. Do this node's step for the conversation below.` },
      ...history
    ])
    const previous = Array.isArray(state.messages) ? (state.messages as Array<unknown>) : input.messages
    const next = {
      ...state,
      messages: [...previous, { role: "assistant", content: result.content, name: input.node_name }],
      __node__: input.node_name,
      __timestamp__: new Date().toISOString()
    }
    const checkpoint = thread === undefined ? undefined : { thread_id: thread.checkpoint.threadId, step: thread.checkpoint.step + 1 }
    if (thread !== undefined && checkpoint !== undefined) {
      yield* saveThread(avatar, thread.version, { threadId: checkpoint.thread_id, step: checkpoint.step, state: next })
    }
    return {
      state: next,
      nextNode: input.next_node ?? "__end__",
      ...(checkpoint ? { checkpoint } : {}),
      provider: result.provider,
      model: result.model,
      usage: result.usage
    }
  })

  return { crew, conversation, graphNode }
})

export class Orchestration extends Context.Tag("aigw/Orchestration")<Orchestration, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Orchestration, makeService)
