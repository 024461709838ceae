/**
 * Learning from the reasoning network's runs. Every dispatch is stored (kind "dispatch", owner
 * the avatar) with its nodes and its verdict, and counted once:
 *  - each node's agent: runs + 1, its time and cost; a success when the node ran ok and the
 *    verdict says success; the verdict's score into scoreSum/scored;
 *  - the avatar's learned braid graph of the task type for the plan that ran (one per topology,
 *    so the same plan accumulates): runs + 1, a success and the score from the verdict.
 * The caller's feedback replaces the current verdict (the judge's or earlier feedback): the
 * difference between the two is applied, so a dispatch never counts twice. A comment is kept
 * with the verdict; rewriting a skill document stays the explicit evolve tool (no model call here).
 */
import { createHash } from "node:crypto"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { BadRequest, NotFound } from "../Errors.ts"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { DocumentStore, modify } from "../Storage/DocumentStore.ts"
import { Agents } from "./Agents.ts"
import { Braid, Mermaid, type OutcomeDelta } from "./Braid.ts"

export const DISPATCH = "dispatch"

export interface DispatchRun {
  readonly id: string
  readonly problem: string
  readonly taskType: TaskType
  readonly mode: "Serial" | "Parallel" | "Hybrid" | "Decomposed"
  readonly finalAnswer: string
  /** Some node failed or was skipped by the budget. */
  readonly partial: boolean
  /** Mermaid flowchart of the topology that ran, without per-run figures: the braid graph candidate. */
  readonly plan: string
  readonly nodes: ReadonlyArray<{ readonly agentId: string; readonly ok: boolean; readonly ms: number; readonly costUSD: number; readonly tokens: number }>
  readonly verdict: JudgeVerdict | null
}

/** The judge call's verdict on a dispatch's answer (ReasoningNetwork.ts). */
export interface JudgeVerdict {
  readonly success: boolean
  readonly score: number
  readonly source: "judge"
  readonly reason: string
}

/** The verdict a dispatch currently counts with: the judge's, or the caller's feedback. */
export type Verdict =
  | JudgeVerdict
  | { readonly success: boolean; readonly score: number | null; readonly source: "feedback"; readonly comment: string | null }

interface StoredDispatch {
  readonly run: Omit<DispatchRun, "verdict">
  readonly braidGraphId: string
  readonly verdict: Verdict | null
  readonly recordedAtUtc: string
}

/** The request of POST /v1/reasoning-network/feedback and of gateway_fahrn_record_outcome. */
export const FeedbackParams = {
  dispatchId: Schema.String.pipe(Schema.minLength(1, { message: () => "dispatchId must not be empty" }), Schema.maxLength(100)),
  success: Schema.Boolean.annotations({ description: "Whether the dispatch's answer solved the task" }),
  score: Schema.optional(Schema.Number.pipe(Schema.between(0, 1, { message: () => "score must be between 0 and 1" })).annotations({ description: "Quality 0-1" })),
  comment: Schema.optional(Schema.String.pipe(Schema.maxLength(5000)).annotations({ description: "Kept with the verdict; no model is called" }))
}
/** A field the feedback does not handle is refused by name, not dropped. */
export const FeedbackBody = Schema.Struct(FeedbackParams).annotations({ parseOptions: { onExcessProperty: "error" } })

/** The avatar's learned graph of a task type for one plan topology. */
export const learnedGraphId = (avatarId: string, taskType: TaskType, plan: string) =>
  `learned:${avatarId}:${taskType}:${createHash("sha256").update(plan.trim()).digest("hex").slice(0, 16)}`

/** What a verdict adds to a dispatch's counts. */
const counted = (v: Verdict | null) => ({
  success: v?.success === true ? 1 : 0,
  scoreSum: v?.score ?? 0,
  scored: v !== null && v.score !== null ? 1 : 0
})

const minus = (a: ReturnType<typeof counted>, b: ReturnType<typeof counted>) => ({ success: a.success - b.success, scoreSum: a.scoreSum - b.scoreSum, scored: a.scored - b.scored })

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore
  const agents = yield* Agents
  const braid = yield* Braid

  /** Applies a verdict's counts (or their difference) to the nodes' agents and the learned graph. */
  const apply = (avatar: AvatarRecord, stored: StoredDispatch, c: ReturnType<typeof counted>, firstCount: boolean) =>
    Effect.gen(function*() {
      const delta: OutcomeDelta = { runs: firstCount ? 1 : 0, successes: c.success, scoreSum: c.scoreSum, scored: c.scored }
      const graph = yield* braid.learn(avatar, { id: stored.braidGraphId, taskType: stored.run.taskType, mermaid: stored.run.plan, delta })
      yield* Effect.forEach(stored.run.nodes, (n) =>
        agents.addStats(avatar, n.agentId, {
          ...(firstCount ? { runs: 1, totalMs: n.ms, totalCostUSD: n.costUSD } : {}),
          successes: n.ok ? c.success : 0,
          scoreSum: c.scoreSum,
          scored: c.scored
        }), { discard: true })
      return graph
    })

  const record = Effect.fn("Learning.record")(function*(avatar: AvatarRecord, run: DispatchRun) {
    if (!Schema.is(Mermaid)(run.plan)) return yield* Effect.fail(new BadRequest({ message: "The dispatch's plan must be a Mermaid flowchart with at least one edge." }))
    const { verdict, ...rest } = run
    const stored: StoredDispatch = { run: rest, braidGraphId: learnedGraphId(avatar.id, run.taskType, run.plan), verdict, recordedAtUtc: new Date().toISOString() }
    const now = Date.now()
    const inserted = yield* docs.insertIfAbsent({ kind: DISPATCH, id: run.id, owner: avatar.id, key: run.taskType, data: stored, version: 0, createdAt: now, updatedAt: now })
    if (!inserted) return yield* Effect.fail(new BadRequest({ message: `Dispatch ${run.id} is recorded already.` }))
    yield* apply(avatar, stored, counted(verdict), true)
    return { braidGraphId: stored.braidGraphId }
  })

  /** The caller's verdict on its own dispatch replaces the current one; answers the dispatch with the agents' new scores. */
  const feedback = Effect.fn("Learning.feedback")(function*(avatar: AvatarRecord, input: { readonly dispatchId: string; readonly success: boolean; readonly score?: number | undefined; readonly comment?: string | undefined }) {
    const doc = yield* docs.get(DISPATCH, input.dispatchId)
    if (Option.isNone(doc) || doc.value.owner !== avatar.id) return yield* Effect.fail(new NotFound({ message: `No dispatch ${input.dispatchId}.` }))
    const verdict: Verdict = { success: input.success, score: input.score ?? null, source: "feedback", comment: input.comment ?? null }
    let replaced: Verdict | null = null // the verdict the winning compare-and-set replaced
    const updated = Option.getOrThrow(
      yield* modify<StoredDispatch>(docs, DISPATCH, input.dispatchId, (d) => {
        replaced = d.verdict
        return { ...d, verdict }
      })
    )
    const graph = yield* apply(avatar, updated, minus(counted(verdict), counted(replaced)), false)
    const ids = new Set(updated.run.nodes.map((n) => n.agentId))
    const ranking = yield* agents.rank(avatar, { task: updated.run.problem, taskType: updated.run.taskType })
    return {
      dispatchId: input.dispatchId,
      problem: updated.run.problem,
      taskType: updated.run.taskType,
      mode: updated.run.mode,
      partial: updated.run.partial,
      verdict,
      replaced: replaced as Verdict | null,
      braidGraph: graph,
      embedder: ranking.embedder,
      semantic: ranking.semantic,
      agents: ranking.agents.filter((r) => ids.has(r.agent.id))
    }
  })

  return { record, feedback }
})

export class Learning extends Context.Tag("aigw/Learning")<Learning, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Learning, makeService)
