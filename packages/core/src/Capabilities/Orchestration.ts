/**
 * Orchestration adapters: framework-style payloads (a crew of agents, a conversation, one node of
 * a state graph) run as gateway completions and answered in the shape the framework expects.
 * Each agent step is a real routed completion; usage is recorded per step.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { Preference } from "../Routing.ts"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import { TaskClassifier } from "../Ml/TaskClassifier.ts"
import type { ChatMessage } from "../Providers/Chat.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { type CompletionResult, Completions } from "./Completions.ts"
import { Provider } from "../RequestFields.ts"

// Request schemas, shared by the HTTP routes and the MCP tools.
const Str = (max: number, name: string) =>
  Schema.String.pipe(Schema.minLength(1, { message: () => `${name} must not be empty` }), Schema.maxLength(max))

export const CrewBody = Schema.Struct({
  tasks: Schema.Array(
    Schema.Struct({
      id: Str(200, "id"),
      agent: Str(2000, "agent"),
      description: Str(50_000, "description"),
      expected_output: Str(10_000, "expected_output")
    })
  ).pipe(Schema.minItems(1, { message: () => "tasks must hold at least one task" }), Schema.maxItems(20, { message: () => "a crew runs at most 20 tasks" })),
  process: Schema.optionalWith(Schema.Literal("sequential", "hierarchical").annotations({ message: () => "process must be sequential or hierarchical" }), { default: () => "sequential" as const }),
  provider: Provider
})

export const ConversationBody = Schema.Struct({
  initial_message: Str(100_000, "initial_message"),
  system_message: Schema.optional(Schema.String.pipe(Schema.maxLength(50_000))),
  provider: Provider,
  model: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "auto" }),
  max_rounds: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100, { message: () => "max_rounds must be an integer from 1 to 100" })), { default: () => 10 })
})

const GraphMessage = Schema.Struct({
  role: Schema.Literal("system", "user", "assistant").annotations({ message: () => "role must be one of system, user, assistant" }),
  content: Schema.String.pipe(Schema.maxLength(1_000_000))
})

export const GraphNodeBody = Schema.Struct({
  node_name: Str(200, "node_name"),
  state: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({}) }),
  messages: Schema.optionalWith(Schema.Array(GraphMessage).pipe(Schema.maxItems(1000)), { default: () => [] }),
  next_node: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  provider: Provider
})

export interface CrewTask {
  readonly id: string
  readonly agent: string
  readonly description: string
  readonly expected_output: string
}

/**
 * How an agent's role maps to a provider under `auto`: the role and task are classified, and
 * demanding task types (code, math, analysis, research) route by quality, the rest by balance.
 */
export const preferenceForTask = (taskType: TaskType): Preference =>
  taskType === "code" || taskType === "math" || taskType === "analysis" || taskType === "research" ? "quality" : "balanced"

export const tokenUsage = (results: ReadonlyArray<CompletionResult>) => {
  const prompt_tokens = results.reduce((n, r) => n + r.usage.promptTokens, 0)
  const completion_tokens = results.reduce((n, r) => n + r.usage.completionTokens, 0)
  return {
    prompt_tokens,
    completion_tokens,
    total_tokens: prompt_tokens + completion_tokens,
    costUSD: Math.round(results.reduce((n, r) => n + r.costUSD, 0) * 1e10) / 1e10
  }
}

const makeService = Effect.gen(function*() {
  const completions = yield* Completions
  const classifier = yield* TaskClassifier

  const run = (avatar: AvatarRecord, provider: string, messages: ReadonlyArray<ChatMessage>, options: { model?: string; preference?: Preference } = {}) =>
    completions.complete(avatar, {
      messages,
      provider,
      model: options.model ?? "auto",
      routing: options.preference ? { preference: options.preference } : undefined
    })

  const crew = Effect.fn("Orchestration.crew")(function*(
    avatar: AvatarRecord,
    input: { readonly tasks: ReadonlyArray<CrewTask>; readonly process: "sequential" | "hierarchical"; readonly provider: string }
  ) {
    const outputs: Array<{ task: CrewTask; result: CompletionResult; taskType: TaskType }> = []
    const agentSystem = (task: CrewTask) =>
      `You are ${task.agent}. Work on your task carefully and answer with the deliverable only.`
    const taskPrompt = (task: CrewTask, context: string) =>
      `Task: ${task.description}\nExpected output: ${task.expected_output}${context ? `\n\nContext from the crew's earlier work:\n${context}` : ""}`
    const runTask = (task: CrewTask, context: string) =>
      Effect.gen(function*() {
        const { taskType } = yield* classifier.classify(`${task.agent}. ${task.description}`)
        const result = yield* run(avatar, input.provider, [
          { role: "system", content: agentSystem(task) },
          { role: "user", content: taskPrompt(task, context) }
        ], { preference: preferenceForTask(taskType) })
        return { task, result, taskType }
      })
    if (input.process === "sequential") {
      for (const task of input.tasks) {
        const context = outputs.map((o) => `[${o.task.id} by ${o.task.agent}]\n${o.result.content}`).join("\n\n")
        outputs.push(yield* runTask(task, context))
      }
    } else {
      outputs.push(...(yield* Effect.forEach(input.tasks, (t) => runTask(t, ""), { concurrency: 4 })))
    }
    // Hierarchical: a manager reviews the workers' outputs and writes the crew's final answer.
    const manager = input.process === "hierarchical"
      ? yield* run(avatar, input.provider, [
        { role: "system", content: "You are the crew manager. Combine your team's results into one final deliverable that meets every task's expected output." },
        { role: "user", content: outputs.map((o) => `Task ${o.task.id} (${o.task.agent}): ${o.task.description}\nExpected: ${o.task.expected_output}\nResult:\n${o.result.content}`).join("\n\n") }
      ], { preference: "quality" })
      : undefined
    const all = [...outputs.map((o) => o.result), ...(manager ? [manager] : [])]
    return {
      raw: manager?.content ?? outputs.at(-1)?.result.content ?? "",
      process: input.process,
      tasks_output: outputs.map((o) => ({
        id: o.task.id,
        agent: o.task.agent,
        description: o.task.description,
        expected_output: o.task.expected_output,
        raw: o.result.content,
        taskType: o.taskType,
        provider: o.result.provider,
        model: o.result.model
      })),
      ...(manager ? { manager: { raw: manager.content, provider: manager.provider, model: manager.model } } : {}),
      token_usage: tokenUsage(all)
    }
  })

  const conversation = Effect.fn("Orchestration.conversation")(function*(
    avatar: AvatarRecord,
    input: { readonly initial_message: string; readonly system_message?: string | undefined; readonly provider: string; readonly model: string; readonly max_rounds: number }
  ) {
    const result = yield* run(avatar, input.provider, [
      ...(input.system_message ? [{ role: "system" as const, content: input.system_message }] : []),
      { role: "user", content: input.initial_message }
    ], { model: input.model })
    return {
      role: "assistant",
      name: "assistant",
      content: result.content,
      finish_reason: result.finishReason,
      rounds: 1,
      max_rounds: input.max_rounds,
      provider: result.provider,
      model: result.model,
      usage: result.usage,
      costUSD: result.costUSD
    }
  })

  const graphNode = Effect.fn("Orchestration.graphNode")(function*(
    avatar: AvatarRecord,
    input: {
      readonly node_name: string
      readonly state: Record<string, unknown>
      readonly messages: ReadonlyArray<ChatMessage>
      readonly next_node?: string | undefined
      readonly provider: string
    }
  ) {
    const history: ReadonlyArray<ChatMessage> = input.messages.length > 0
      ? input.messages
      : [{ role: "user", content: `Graph state: ${JSON.stringify(input.state)}` }]
    const result = yield* run(avatar, input.provider, [
      { role: "system", content: `You are the "${input.node_name}" node of an agent graph. Do this node's step for the conversation below.` },
      ...history
    ])
    const previous = Array.isArray(input.state.messages) ? (input.state.messages as Array<unknown>) : input.messages
    return {
      state: {
        ...input.state,
        messages: [...previous, { role: "assistant", content: result.content, name: input.node_name }],
        __node__: input.node_name,
        __timestamp__: new Date().toISOString()
      },
      nextNode: input.next_node ?? "__end__",
      provider: result.provider,
      model: result.model,
      usage: result.usage
    }
  })

  return { crew, conversation, graphNode }
})

export class Orchestration extends Context.Tag("aigw/Orchestration")<Orchestration, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Orchestration, makeService)
