/**
 * The reasoning network: classifies a problem, ranks the avatar's agents for it (Agents.rank), runs
 * a sub-network of the best ones in a topology, judges the answer and hands the run to Learning.
 *
 * Topologies (every step a routed completion as its agent: the agent's instructions as the system
 * prompt, its pinned provider/model else the request's provider and "auto"):
 *  - Serial: each agent builds on the outputs so far;
 *  - Parallel: the agents answer independently and concurrently, a synthesiser merges;
 *  - Hybrid: the best-ranked agent plans, the others work on the plan concurrently, a synthesiser merges;
 *  - Decomposed: the planner agent splits the problem into subtasks with dependencies (JSON); each
 *    subtask runs on its own best-ranked agent once its dependencies are done (independent ones
 *    concurrently) with their outputs, and a synthesiser merges.
 * Every call (planner, steps, synthesiser, judge) counts against the dispatch's Budget and is
 * recorded in the RunGraph, which is what the response's graph and Mermaid chart show. A failed
 * or skipped branch leaves the others running: the answer merges what succeeded (partial).
 */
import { Context, Deferred, Effect, Either, Layer, Option, Schema } from "effect"
import { type GatewayError, Unprocessable, UpstreamFailed } from "../Errors.ts"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import { TaskClassifier, TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import type { ChatOptions } from "../Providers/Chat.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { standingStores, stillActing } from "../Accounts/StillActing.ts"
import { BoundedArray, Provider } from "../RequestFields.ts"
import { Agents, builtinId, type RankedAgent } from "./Agents.ts"
import { Budget, type BudgetLimits, BudgetLimitsSchema, defaultLimits } from "./Budget.ts"
import { type CompletionResult, Completions } from "./Completions.ts"
import { type DispatchRun, type JudgeVerdict, Learning } from "./Learning.ts"
import { parseJsonAnswer } from "./LlmTasks.ts"
import { tokenUsage } from "./Orchestration.ts"
import { ANSWER, PROBLEM, RunGraph, toMermaid, toPlan } from "./RunGraph.ts"

export const Modes = ["Serial", "Parallel", "Hybrid", "Decomposed"] as const
export type Mode = typeof Modes[number]

export const MAX_SUBTASKS = 8

const Str = (max: number, name: string) =>
  Schema.String.pipe(Schema.minLength(1, { message: () => `${name} must not be empty` }), Schema.maxLength(max))

/** The request of POST /v1/reasoning-network/dispatch (and the MCP dispatch tools). */
export const DispatchBody = Schema.Struct({
  problem: Str(50_000, "problem"),
  taskType: Schema.optional(TaskTypeSchema.annotations({ message: () => "taskType must be one of code, math, research, creative, analysis, summarization, translation, general" })),
  mode: Schema.optionalWith(
    Schema.Literal(...Modes).annotations({ description: "Serial, Parallel, Hybrid or Decomposed (default Serial)", message: () => ({ message: "mode must be Serial, Parallel, Hybrid or Decomposed", override: true }) }),
    { default: () => "Serial" as const }
  ),
  provider: Provider,
  agents: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 8, { message: () => "agents must be an integer from 1 to 8" })).annotations({ description: "How many of the best-ranked agents form the sub-network (default 3)" }),
    { default: () => 3 }
  ),
  budget: Schema.optionalWith(BudgetLimitsSchema.annotations({ description: "Limits over every call of the dispatch: maxCalls 1-50 (default 12), maxTokens (default 60000), maxSeconds (default 120)" }), {
    default: () => defaultLimits
  }),
  judge: Schema.optionalWith(Schema.Boolean.annotations({ description: "Score the final answer with one judge call (default true)" }), { default: () => true })
}).annotations({ parseOptions: { onExcessProperty: "error" } }) // a misspelt option is refused by name, not dropped

export interface DispatchInput {
  readonly problem: string
  readonly taskType?: TaskType | undefined
  readonly mode: Mode
  readonly provider: string
  readonly agents: number
  readonly budget: BudgetLimits
  readonly judge: boolean
}

/** Who makes a call: a registry agent, or the synthesiser/judge (routed with the request's provider). */
interface Caller {
  readonly name: string
  readonly agentId: string | null
  readonly instructions: string
  readonly provider: string
  readonly model: string
}

const SYNTHESISER = "You are the synthesiser of a reasoning team. Merge the team's work into one correct, complete final answer to the problem. Answer with the final answer only."
const JUDGE =
  "You are a strict judge. Score how well the answer solves the problem, from 0 (wrong or useless) to 1 (correct and complete). Answer with JSON only: {\"score\": <0-1>, \"reason\": \"<one sentence>\"}."
const LEAD = "You lead a reasoning team: write a short plan of the steps the specialists must take to solve the problem. Do not solve it yourself."
const DECOMPOSE = `Split the problem into subtasks for specialist agents. Answer with JSON only: {"subtasks":[{"id":"s1","task":"<what to do>","dependsOn":[]}]}. At most ${MAX_SUBTASKS} subtasks; dependsOn lists the ids whose results a subtask needs (no cycles).`

/** A success is a judge score of at least this. */
export const SUCCESS_SCORE = 0.6

// Lengths checked before items are decoded (the subtasks' in parseSubtasks, to name the count): the planner's
// answer is a model's, up to the upstream reply bound.
const SubtasksAnswer = Schema.Struct({
  subtasks: Schema.Array(Schema.Struct({
    id: Schema.Union(Schema.String, Schema.Number),
    task: Schema.String.pipe(Schema.minLength(1)),
    dependsOn: Schema.optionalWith(BoundedArray(Schema.Union(Schema.String, Schema.Number), { max: 8 * MAX_SUBTASKS }), { default: () => [] })
  }))
})

export interface Subtask {
  readonly id: string
  readonly task: string
  readonly dependsOn: ReadonlyArray<string>
}

/** The planner's subtasks, or what is wrong with its answer (not JSON, unknown or cyclic dependencies, too many). */
export const parseSubtasks = (content: string): Either.Either<ReadonlyArray<Subtask>, string> => {
  let json: unknown
  try {
    json = parseJsonAnswer(content)
  } catch {
    return Either.left("answered no JSON object")
  }
  const listed = (json as { readonly subtasks?: unknown } | null)?.subtasks
  if (Array.isArray(listed) && listed.length > MAX_SUBTASKS) return Either.left(`answered ${listed.length} subtasks (at most ${MAX_SUBTASKS})`)
  const decoded = Schema.decodeUnknownEither(SubtasksAnswer)(json)
  if (Either.isLeft(decoded)) return Either.left("answered JSON that is not {\"subtasks\":[{\"id\",\"task\",\"dependsOn\"}]}")
  const subtasks = decoded.right.subtasks.map((s) => ({ id: String(s.id), task: s.task, dependsOn: [...new Set(s.dependsOn.map(String))] }))
  if (subtasks.length === 0) return Either.left("answered no subtasks")
  const ids = new Set(subtasks.map((s) => s.id))
  if (ids.size < subtasks.length) return Either.left("answered duplicate subtask ids")
  for (const s of subtasks) {
    const unknown = s.dependsOn.find((d) => !ids.has(d))
    if (unknown !== undefined) return Either.left(`answered subtask ${s.id} depending on unknown id ${unknown}`)
  }
  // Kahn's algorithm: what never becomes free of dependencies sits on a cycle.
  const done = new Set<string>()
  let progressed = true
  while (progressed) {
    progressed = false
    for (const s of subtasks) {
      if (!done.has(s.id) && s.dependsOn.every((d) => done.has(d))) {
        done.add(s.id)
        progressed = true
      }
    }
  }
  const cyclic = subtasks.filter((s) => !done.has(s.id)).map((s) => s.id)
  return cyclic.length > 0 ? Either.left(`answered cyclic dependencies among ${cyclic.join(", ")}`) : Either.right(subtasks)
}

/** The judge's verdict, or why its answer is not one. */
export const parseVerdict = (content: string): Either.Either<JudgeVerdict, string> => {
  let json: unknown
  try {
    json = parseJsonAnswer(content)
  } catch {
    return Either.left("the judge answered no JSON object")
  }
  const { score, reason } = json as { score?: unknown; reason?: unknown }
  if (typeof score !== "number" || !(score >= 0 && score <= 1)) return Either.left("the judge's answer has no score from 0 to 1")
  return Either.right({ success: score >= SUCCESS_SCORE, score, source: "judge", reason: typeof reason === "string" ? reason : "" })
}

const fitNote = (embedder: string, semantic: boolean) =>
  semantic
    ? `Fit is the semantic similarity of the task and each agent's text under the embedding model ${embedder}.`
    : `Fit is lexical: hashed words of the task and each agent's text compared (${embedder}); no embedding model was used.`

const makeService = Effect.gen(function*() {
  const completions = yield* Completions
  const standing = yield* standingStores
  const classifier = yield* TaskClassifier
  const agents = yield* Agents
  const learning = yield* Learning

  const asCaller = (r: RankedAgent, provider: string): Caller => ({
    name: r.agent.name,
    agentId: r.agent.id,
    instructions: r.instructions,
    provider: r.agent.provider !== "auto" ? r.agent.provider : provider,
    model: r.agent.model
  })

  /** response_format json_object when a route for the caller's provider/model can carry it. */
  const jsonFormat = (avatar: AvatarRecord, c: Caller) =>
    Effect.map(
      Effect.either(completions.check(avatar, { provider: c.provider, model: c.model, messages: [], options: { responseFormat: { type: "json_object" } } })),
      (ok): ChatOptions | undefined => (Either.isRight(ok) ? { responseFormat: { type: "json_object" } } : undefined)
    )

  /**
   * The ranked agents that can run for the caller, best first: their provider configured and allowed on
   * its plan, their model routable (Completions.check: no upstream call). An agent seeded from the
   * catalogue for a provider the gateway has no key for, or one the plan does not allow, is never
   * picked to fail (it was, and the dispatch was charged for its refusal).
   */
  const runnableOf = (avatar: AvatarRecord, ranked: ReadonlyArray<RankedAgent>, provider: string) =>
    Effect.filter(ranked, (r) => {
      const c = asCaller(r, provider)
      return Effect.map(Effect.either(completions.check(avatar, { provider: c.provider, model: c.model, messages: [] })), Either.isRight)
    })

  const dispatch = Effect.fn("ReasoningNetwork.dispatch")(function*(avatar: AvatarRecord, input: DispatchInput) {
    const classification = input.taskType ? undefined : yield* classifier.classify(input.problem)
    const taskType: TaskType = input.taskType ?? classification!.taskType
    const ranking = yield* agents.rank(avatar, { task: input.problem, taskType })
    const runnable = yield* runnableOf(avatar, ranking.agents, input.provider)
    if (runnable.length === 0) {
      return yield* Effect.fail(new Unprocessable({
        message: `None of your ${ranking.agents.length} agents can run on plan ${avatar.plan}: their providers are not configured or not allowed on it (the MCP tool gateway_fahrn_get_agents lists them).`
      }))
    }
    const team = runnable.slice(0, input.agents)
    const budget = new Budget(input.budget)
    const graph = new RunGraph()
    const results: Array<CompletionResult> = []
    const outputs = new Map<string, string>()
    const helper = (name: string, instructions: string): Caller => ({ name, agentId: null, instructions, provider: input.provider, model: "auto" })

    /** Makes node `id`'s call as `caller` within the budget and records its outcome in the graph (ok, failed or skipped). */
    const call = (id: string, caller: Caller, user: string, options?: ChatOptions) =>
      Effect.suspend(() => {
        const admission = budget.admit()
        if (!admission.admitted) {
          graph.update(id, { status: "skipped", error: admission.reason })
          return Effect.succeed(Option.none<CompletionResult>())
        }
        const started = Date.now()
        // Checked outside the node's outcome: a revoked avatar ends the whole dispatch (StillActing.ts).
        return Effect.zipRight(stillActing(standing, avatar), completions.complete(avatar, {
          provider: caller.provider,
          model: caller.model,
          options,
          messages: [{ role: "system", content: caller.instructions }, { role: "user", content: user }]
        }).pipe(
          Effect.timeoutOption(Math.max(0, budget.remainingMs())),
          Effect.either,
          Effect.map((outcome) => {
            const ms = Date.now() - started
            if (Either.isRight(outcome) && Option.isSome(outcome.right)) {
              const r = outcome.right.value
              budget.spend(r.usage.totalTokens)
              results.push(r)
              outputs.set(id, r.content)
              graph.update(id, { status: "ok", provider: r.provider, model: r.model, tokens: r.usage.totalTokens, ms, costUSD: r.costUSD })
              return outcome.right
            }
            if (Either.isRight(outcome)) budget.timedOut()
            const error = Either.isLeft(outcome) ? outcome.left.message : `budget time: interrupted after ${input.budget.maxSeconds} s`
            graph.update(id, { status: "failed", provider: caller.provider, model: caller.model, ms, error })
            return Option.none<CompletionResult>()
          })
        ))
      })

    const workOf = (ids: ReadonlyArray<string>) =>
      ids.filter((id) => outputs.has(id)).map((id) => `[${graph.node(id).name}]\n${outputs.get(id)}`).join("\n\n")
    const ask = (work: string) => `Problem: ${input.problem}${work ? `\n\nWork so far:\n${work}` : ""}`

    /** Merges the outputs of `ids` that succeeded; the node whose output is the answer (the best-ranked branch when the synthesiser fails). */
    const synthesise = (ids: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const done = ids.filter((id) => outputs.has(id))
        if (done.length === 0) return undefined
        const id = graph.add("synthesiser", "Synthesiser", null)
        for (const from of done) graph.connect(from, id)
        yield* call(id, helper("Synthesiser", SYNTHESISER), `Problem: ${input.problem}\n\nTeam's work:\n${workOf(done)}`)
        return outputs.has(id) ? id : done[0]
      })

    const concurrently = (jobs: ReadonlyArray<readonly [string, Caller]>, user: string) =>
      Effect.forEach(jobs, ([id, c]) => call(id, c, user), { concurrency: "unbounded", discard: true })

    const subtasks: Array<Subtask & { readonly taskType: TaskType; readonly agentId: string; readonly node: string }> = []

    const topologies: Record<Mode, Effect.Effect<string | undefined, GatewayError>> = {
      Serial: Effect.gen(function*() {
        let previous = PROBLEM
        const ran: Array<string> = []
        for (const r of team) {
          const id = graph.add("agent", r.agent.name, r.agent.id)
          graph.connect(previous, id)
          yield* call(id, asCaller(r, input.provider), ask(workOf(ran)))
          ran.push(id)
          previous = id
        }
        return ran.filter((id) => outputs.has(id)).at(-1)
      }),
      Parallel: Effect.gen(function*() {
        const jobs = team.map((r) => [graph.add("agent", r.agent.name, r.agent.id), asCaller(r, input.provider)] as const)
        for (const [id] of jobs) graph.connect(PROBLEM, id)
        yield* concurrently(jobs, ask(""))
        return yield* synthesise(jobs.map(([id]) => id))
      }),
      Hybrid: Effect.gen(function*() {
        const [lead, ...rest] = team
        const leader = asCaller(lead!, input.provider)
        const leadId = graph.add("planner", leader.name, leader.agentId)
        graph.connect(PROBLEM, leadId)
        yield* call(leadId, { ...leader, instructions: `${leader.instructions}\n\n${LEAD}` }, ask(""))
        if (rest.length === 0) return yield* synthesise([leadId])
        const jobs = rest.map((r) => [graph.add("agent", r.agent.name, r.agent.id), asCaller(r, input.provider)] as const)
        for (const [id] of jobs) graph.connect(outputs.has(leadId) ? leadId : PROBLEM, id)
        yield* concurrently(jobs, ask(workOf([leadId])))
        return yield* synthesise(jobs.map(([id]) => id))
      }),
      Decomposed: Effect.gen(function*() {
        const plannerRanked = runnable.find((r) => r.agent.id === builtinId(avatar.id, "planner")) ?? team[0]!
        const planner = asCaller(plannerRanked, input.provider)
        const plannerId = graph.add("planner", planner.name, planner.agentId)
        graph.connect(PROBLEM, plannerId)
        yield* call(plannerId, { ...planner, instructions: `${planner.instructions}\n\n${DECOMPOSE}` }, `Problem: ${input.problem}`, yield* jsonFormat(avatar, planner))
        const plan = outputs.get(plannerId)
        const failed = (problem: string) => new UpstreamFailed({ provider: graph.node(plannerId).provider ?? input.provider, message: `The planner (${planner.name}) ${problem}.` })
        if (plan === undefined) return yield* Effect.fail(failed(`failed: ${graph.node(plannerId).error}`))
        const parsed = parseSubtasks(plan)
        if (Either.isLeft(parsed)) return yield* Effect.fail(failed(parsed.left))
        // Each subtask is ranked on its own text, under its own task type.
        const picked = yield* Effect.forEach(parsed.right, (s) =>
          Effect.gen(function*() {
            const type = (yield* classifier.classify(s.task)).taskType
            const best = (yield* runnableOf(avatar, (yield* agents.rank(avatar, { task: s.task, taskType: type })).agents, input.provider))[0] ?? team[0]!
            return { s, type, best }
          }), { concurrency: "unbounded" })
        const nodes = new Map(picked.map(({ best, s, type }) => {
          const node = graph.add("agent", best.agent.name, best.agent.id)
          subtasks.push({ ...s, taskType: type, agentId: best.agent.id, node })
          return [s.id, node] as const
        }))
        for (const s of parsed.right) {
          const to = nodes.get(s.id)!
          if (s.dependsOn.length === 0) graph.connect(plannerId, to)
          for (const d of s.dependsOn) graph.connect(nodes.get(d)!, to)
        }
        const finished = new Map(yield* Effect.forEach(parsed.right, (s) => Effect.map(Deferred.make<void>(), (d) => [s.id, d] as const)))
        yield* Effect.forEach(picked, ({ best, s }) =>
          Effect.gen(function*() {
            for (const d of s.dependsOn) yield* Deferred.await(finished.get(d)!)
            const id = nodes.get(s.id)!
            const missing = s.dependsOn.filter((d) => !outputs.has(nodes.get(d)!))
            if (missing.length > 0) graph.update(id, { status: "skipped", error: `dependency ${missing.join(", ")} did not succeed` })
            else {
              const results = workOf(s.dependsOn.map((d) => nodes.get(d)!))
              yield* call(id, asCaller(best, input.provider), `Overall problem: ${input.problem}\n\nYour subtask (${s.id}): ${s.task}${results ? `\n\nResults of the subtasks it depends on:\n${results}` : ""}`)
            }
          }).pipe(Effect.ensuring(Deferred.succeed(finished.get(s.id)!, undefined))), { concurrency: "unbounded", discard: true })
        return yield* synthesise([...nodes.values()])
      })
    }

    const answerId = yield* topologies[input.mode]
    const finalAnswer = answerId === undefined ? "" : outputs.get(answerId)!
    if (answerId !== undefined) graph.connect(answerId, ANSWER)
    const partial = graph.view().nodes.some((n) => n.status !== "ok")

    let verdict: JudgeVerdict | null = null
    let verdictError: string | null = input.judge ? null : "no judge call: the request set judge false"
    if (answerId !== undefined && input.judge) {
      const judge = helper("Judge", JUDGE)
      const id = graph.add("judge", "Judge", null)
      graph.connect(ANSWER, id)
      yield* call(id, judge, `Problem: ${input.problem}\n\nAnswer:\n${finalAnswer}`, yield* jsonFormat(avatar, judge))
      const judged = outputs.has(id) ? parseVerdict(outputs.get(id)!) : Either.left(`the judge call ${graph.node(id).status}: ${graph.node(id).error}`)
      if (Either.isRight(judged)) verdict = judged.right
      else verdictError = judged.left
    }

    const view = graph.view()
    const dispatchId: string = crypto.randomUUID()
    const run: DispatchRun = {
      id: dispatchId,
      problem: input.problem,
      taskType,
      mode: input.mode,
      finalAnswer,
      partial,
      plan: toPlan(view),
      nodes: view.nodes.filter((n) => n.agentId !== null && n.status !== "skipped").map((n) => ({ agentId: n.agentId!, ok: n.status === "ok", ms: n.ms, costUSD: n.costUSD, tokens: n.tokens })),
      verdict
    }
    const { braidGraphId } = yield* learning.record(avatar, run)
    if (answerId === undefined) {
      const failures = view.nodes.map((n) => `${n.id} ${n.name}: ${n.status} (${n.error})`).join("; ")
      return yield* Effect.fail(new UpstreamFailed({ provider: input.provider, message: `No step of the dispatch succeeded: ${failures}.` }))
    }
    const chosen = new Set(team.map((r) => r.agent.id))
    const work = view.nodes.filter((n) => n.kind !== "judge")
    return {
      dispatchId,
      taskType,
      classification: classification ?? null,
      mode: input.mode,
      fit: { embedder: ranking.embedder, semantic: ranking.semantic, note: fitNote(ranking.embedder, ranking.semantic) },
      agents: ranking.agents.map((r) => ({
        id: r.agent.id,
        name: r.agent.name,
        source: r.agent.source,
        provider: r.agent.provider,
        model: r.agent.model,
        score: r.score,
        why: r.why,
        chosen: chosen.has(r.agent.id)
      })),
      subNetwork: [...new Set(work.flatMap((n) => (n.agentId === null ? [] : [n.agentId])))],
      subtasks,
      steps: work.map((n) => ({
        node: n.id,
        kind: n.kind,
        agent: n.agentId ?? n.kind,
        role: n.name,
        output: outputs.get(n.id) ?? "",
        provider: n.provider,
        model: n.model,
        status: n.status,
        error: n.error
      })),
      finalAnswer,
      partial,
      graph: view,
      mermaid: toMermaid(view),
      plan: run.plan,
      budget: budget.report(),
      usage: tokenUsage(results),
      verdict,
      verdictError,
      braidGraphId
    }
  })

  return { dispatch }
})

export class ReasoningNetwork extends Context.Tag("aigw/ReasoningNetwork")<ReasoningNetwork, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(ReasoningNetwork, makeService)
