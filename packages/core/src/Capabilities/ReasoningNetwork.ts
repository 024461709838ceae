/**
 * The reasoning network: classifies a problem, scores a fixed roster of agent roles for its task
 * type, assembles a sub-network of the best three and runs it (Serial: each agent builds on the
 * previous; Parallel: agents answer independently and a synthesiser merges; Hybrid: a planner
 * first, then parallel specialists, then the synthesiser). Every step is a routed completion.
 * The answer carries the plan as a Mermaid flowchart.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import { TaskClassifier, TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import { type AgentRole, type Mode, mermaidPlan, roster, scoreAgents } from "./AgentRoster.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { type CompletionResult, Completions } from "./Completions.ts"
import { tokenUsage } from "./Orchestration.ts"
import { Provider } from "../RequestFields.ts"

const Str = (max: number, name: string) =>
  Schema.String.pipe(Schema.minLength(1, { message: () => `${name} must not be empty` }), Schema.maxLength(max))

/** The request of POST /v1/reasoning-network/dispatch. */
export const DispatchBody = Schema.Struct({
  problem: Str(50_000, "problem"),
  taskType: Schema.optional(TaskTypeSchema.annotations({ message: () => "taskType must be one of code, math, research, creative, analysis, summarization, translation, general" })),
  mode: Schema.optionalWith(Schema.Literal("Serial", "Parallel", "Hybrid").annotations({ message: () => "mode must be Serial, Parallel or Hybrid" }), { default: () => "Serial" as const }),
  provider: Provider
})

const makeService = Effect.gen(function*() {
  const completions = yield* Completions
  const classifier = yield* TaskClassifier

  const dispatch = Effect.fn("ReasoningNetwork.dispatch")(function*(
    avatar: AvatarRecord,
    input: { readonly problem: string; readonly taskType?: TaskType | undefined; readonly mode: Mode; readonly provider: string }
  ) {
    const classification = input.taskType ? undefined : yield* classifier.classify(input.problem)
    const taskType: TaskType = input.taskType ?? classification!.taskType
    const scores = scoreAgents(taskType)
    const chosen = scores.slice(0, 3).map((s) => roster.find((a) => a.id === s.id)!)
    const steps: Array<{ agent: string; role: string; output: string; result: CompletionResult }> = []
    const step = (agent: AgentRole, context: string) =>
      Effect.map(
        completions.complete(avatar, {
          provider: input.provider,
          model: "auto",
          messages: [
            { role: "system", content: `You are the ${agent.role} of a reasoning team. ${agent.instructions}` },
            { role: "user", content: `Problem: ${input.problem}${context ? `\n\nWork so far:\n${context}` : ""}` }
          ]
        }),
        (result) => ({ agent: agent.id, role: agent.role, output: result.content, result })
      )
    const contextOf = (xs: ReadonlyArray<{ role: string; output: string }>) => xs.map((s) => `[${s.role}]\n${s.output}`).join("\n\n")
    if (input.mode === "Serial") {
      for (const a of chosen) steps.push(yield* step(a, contextOf(steps)))
    } else {
      const [lead, ...rest] = chosen
      if (input.mode === "Hybrid") steps.push(yield* step(lead!, ""))
      const workers = input.mode === "Hybrid" ? rest : chosen
      steps.push(...(yield* Effect.forEach(workers, (a) => step(a, contextOf(steps)), { concurrency: 3 })))
    }
    const final = input.mode === "Serial"
      ? steps.at(-1)!.result
      : yield* completions.complete(avatar, {
        provider: input.provider,
        model: "auto",
        messages: [
          { role: "system", content: "You are the synthesiser of a reasoning team. Merge the team's work into one correct, complete final answer to the problem." },
          { role: "user", content: `Problem: ${input.problem}\n\nTeam's work:\n${contextOf(steps)}` }
        ]
      })
    return {
      taskType,
      classification: classification ?? null,
      mode: input.mode,
      agents: scores,
      subNetwork: chosen.map((a) => a.id),
      steps: steps.map((s) => ({ agent: s.agent, role: s.role, output: s.output, provider: s.result.provider, model: s.result.model })),
      finalAnswer: final.content,
      mermaid: mermaidPlan(input.mode, chosen),
      usage: tokenUsage([...steps.map((s) => s.result), ...(input.mode === "Serial" ? [] : [final])])
    }
  })

  return { dispatch }
})

export class ReasoningNetwork extends Context.Tag("aigw/ReasoningNetwork")<ReasoningNetwork, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(ReasoningNetwork, makeService)
