/**
 * The braid: Mermaid reasoning graphs per task type. A graph is private to the avatar that saved
 * it; only an Admin may publish one to every avatar (docs/authorization.md), because whatever a
 * graph says lands in the system prompt of each `useHolonicBraid` completion that receives it.
 * The candidates for a caller are its own graphs and the published ones; the best is the one with
 * the highest smoothed success rate, (successes + 1) / (runs + 2), then the highest mean score,
 * the caller's own and then the newest first on ties. Outcomes may be reported by the graph's
 * owner (Admins for published graphs) or, once per completion that received the graph, by the
 * avatar that used it.
 *
 * Learned graphs are written by the reasoning network (Learning.ts): private to the avatar whose
 * dispatch ran the plan, one per task type and plan topology, their outcomes the dispatches'
 * verdicts. They become candidates only once they have at least one success.
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { Forbidden, NotFound } from "../Errors.ts"
import { TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import { activeAmong, type AvatarRecord, AvatarStore } from "../Storage/AvatarStore.ts"
import { DocumentStore, modify } from "../Storage/DocumentStore.ts"

export const KIND = "braid_graph"

export interface BraidGraph {
  readonly id: string
  readonly taskType: TaskType
  readonly title: string
  readonly description: string
  readonly mermaid: string
  readonly createdBy: string
  /** Published by an Admin to every avatar; otherwise private to `createdBy`. */
  readonly published: boolean
  /** Saved by a caller, or learned from the avatar's dispatches (absent on graphs stored before: saved). */
  readonly source?: "saved" | "learned" | undefined
  readonly runs: number
  readonly successes: number
  /** Sum of reported scores (0-1), for the mean. */
  readonly scoreSum: number
  readonly scored: number
}

/** Per avatar and graph: how many outcome reports its completions with that graph still allow. */
export const USE = "braid_use"

interface BraidUse {
  readonly reportsLeft: number
}

export const Mermaid = Schema.String.pipe(
  Schema.maxLength(20_000, { message: () => "mermaid is limited to 20000 characters" }),
  Schema.filter((s) => /^\s*(flowchart|graph)\s+(TD|TB|BT|LR|RL)\b/.test(s) && /-->|---|==>|-\.->/.test(s) || "mermaid must be a flowchart (\"flowchart TD\" …) with at least one edge")
)

export const SaveGraphParams = {
  taskType: TaskTypeSchema.annotations({ description: "Task type the graph solves", message: () => "taskType must be one of code, math, research, creative, analysis, summarization, translation, general" }),
  mermaid: Mermaid.annotations({ description: "Mermaid flowchart of the reasoning steps" }),
  title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(5000))),
  publish: Schema.optional(Schema.Boolean).annotations({ description: "Admin only: publish the graph to every avatar's useHolonicBraid; otherwise it is private to you" })
}

export interface OutcomeInput {
  readonly graphId: string
  readonly success: boolean
  readonly score?: number | undefined
}

/** Outcome counts added to a graph; negative when a dispatch's verdict is replaced. */
export interface OutcomeDelta {
  readonly runs: number
  readonly successes: number
  readonly scoreSum: number
  readonly scored: number
}

export const quality = (g: BraidGraph) => ({
  runs: g.runs,
  successes: g.successes,
  successRate: Math.round(((g.successes + 1) / (g.runs + 2)) * 1e4) / 1e4,
  meanScore: g.scored === 0 ? null : Math.round((g.scoreSum / g.scored) * 1e4) / 1e4
})

const view = (g: BraidGraph) => ({ ...g, quality: quality(g) })

/**
 * Published graphs live under their own key, so documents saved before graphs had owners (owner
 * null, key = task type, written by anyone) match no query: they reach no prompt.
 */
const publishedKey = (taskType: TaskType) => `published:${taskType}`

const isAdmin = (avatar: AvatarRecord) => avatar.avatarType === "Admin"

/** A learned graph earns a place among the candidates with its first success. */
const eligible = (g: BraidGraph) => g.source !== "learned" || g.successes >= 1

const meanScore = (g: BraidGraph) => quality(g).meanScore ?? -1

const added = (g: BraidGraph, d: OutcomeDelta): BraidGraph => ({
  ...g,
  runs: g.runs + d.runs,
  successes: g.successes + d.successes,
  scoreSum: g.scoreSum + d.scoreSum,
  scored: g.scored + d.scored
})

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore
  const avatars = yield* AvatarStore

  const save = Effect.fn("Braid.save")(function*(avatar: AvatarRecord, input: { readonly taskType: TaskType; readonly mermaid: string; readonly title?: string | undefined; readonly description?: string | undefined; readonly publish?: boolean | undefined }) {
    const published = input.publish === true
    if (published && !isAdmin(avatar)) return yield* Effect.fail(new Forbidden({ message: "Only an Admin can publish a reasoning graph to other avatars; save it without publish to keep it for yourself." }))
    const now = Date.now()
    const graph: BraidGraph = {
      id: crypto.randomUUID(),
      taskType: input.taskType,
      title: input.title ?? `${input.taskType} reasoning graph`,
      description: input.description ?? "",
      mermaid: input.mermaid.trim(),
      createdBy: avatar.id,
      published,
      source: "saved",
      runs: 0,
      successes: 0,
      scoreSum: 0,
      scored: 0
    }
    yield* docs.insert({
      kind: KIND,
      id: graph.id,
      owner: published ? null : avatar.id,
      key: published ? publishedKey(graph.taskType) : graph.taskType,
      data: graph,
      version: 0,
      createdAt: now,
      updatedAt: now
    })
    return view(graph)
  })

  /**
   * The published graphs of a task type whose publisher is still an active Admin: a graph's text reaches
   * other avatars' prompts only while its author holds the role (docs/authorization.md), so demoting or
   * deleting an Admin withdraws what it published.
   */
  const stillPublished = (taskType: TaskType) =>
    Effect.flatMap(docs.list(KIND, { owner: null, key: publishedKey(taskType) }), (docsOf) => {
      const graphs = docsOf.map((d) => d.data as BraidGraph)
      return Effect.map(activeAmong(avatars, graphs.map((g) => g.createdBy), isAdmin), (admins) => graphs.filter((g) => admins.has(g.createdBy)))
    })

  /** The caller's own and the published graphs of a task type (learned ones once they succeeded), best first. */
  const ranked = (avatar: AvatarRecord, taskType: TaskType) =>
    Effect.map(
      Effect.all([docs.list(KIND, { owner: avatar.id, key: taskType }), stillPublished(taskType)]),
      ([own, published]) =>
        [...own.map((d) => d.data as BraidGraph), ...published].filter(eligible).sort((a, b) => quality(b).successRate - quality(a).successRate || meanScore(b) - meanScore(a))
    )

  const find = (avatar: AvatarRecord, taskType: TaskType) =>
    Effect.map(ranked(avatar, taskType), (graphs) => ({
      taskType,
      graph: graphs[0] ? view(graphs[0]) : null,
      alternatives: Math.max(0, graphs.length - 1)
    }))

  /**
   * The graph a `useHolonicBraid` completion of the caller receives. Each time a published graph
   * is received, the caller may report one outcome for it (its own graphs need no allowance).
   */
  const forPrompt = Effect.fn("Braid.forPrompt")(function*(avatar: AvatarRecord, taskType: TaskType) {
    const graph = (yield* ranked(avatar, taskType))[0]
    if (graph === undefined) return Option.none<BraidGraph>()
    if (graph.published) {
      const id = `${avatar.id}:${graph.id}`
      const now = Date.now()
      const inserted = yield* docs.insertIfAbsent({ kind: USE, id, owner: avatar.id, key: graph.id, data: { reportsLeft: 1 } satisfies BraidUse, version: 0, createdAt: now, updatedAt: now })
      if (!inserted) yield* modify<BraidUse>(docs, USE, id, (u) => ({ reportsLeft: u.reportsLeft + 1 }))
    }
    return Option.some(graph)
  })

  /** Spends one of the caller's report allowances for the graph; false when none is left. */
  const spendUse = (avatar: AvatarRecord, graphId: string) =>
    Effect.suspend(() => {
      let spent = false // set by the attempt that wins the compare-and-set
      return Effect.map(
        modify<BraidUse>(docs, USE, `${avatar.id}:${graphId}`, (u) => {
          spent = u.reportsLeft > 0
          return { reportsLeft: Math.max(0, u.reportsLeft - 1) }
        }),
        () => spent
      )
    })

  const recordOutcome = Effect.fn("Braid.recordOutcome")(function*(avatar: AvatarRecord, input: OutcomeInput) {
    const doc = yield* docs.get(KIND, input.graphId)
    // Another avatar's private graph, or an ownerless one saved before graphs had owners, is not there for the caller.
    if (Option.isNone(doc) || !((doc.value.data as BraidGraph).published === true || doc.value.owner === avatar.id)) {
      return yield* Effect.fail(new NotFound({ message: `No braid graph ${input.graphId}.` }))
    }
    const graph = doc.value.data as BraidGraph
    if (graph.published && !isAdmin(avatar) && !(yield* spendUse(avatar, graph.id))) {
      return yield* Effect.fail(new Forbidden({ message: "Outcomes of a published graph are reported by Admins, or once per useHolonicBraid completion of yours that received it." }))
    }
    const updated = yield* modify<BraidGraph>(docs, KIND, graph.id, (g) => added(g, { runs: 1, successes: input.success ? 1 : 0, scoreSum: input.score ?? 0, scored: input.score === undefined ? 0 : 1 }))
    return view(Option.getOrThrow(updated))
  })

  /**
   * Adds a dispatch's outcome to the avatar's learned graph `id` of the plan, creating it first
   * (insertIfAbsent: the same topology accumulates, concurrent dispatches race safely).
   */
  const learn = Effect.fn("Braid.learn")(function*(avatar: AvatarRecord, input: { readonly id: string; readonly taskType: TaskType; readonly mermaid: string; readonly delta: OutcomeDelta }) {
    const now = Date.now()
    const graph: BraidGraph = {
      id: input.id,
      taskType: input.taskType,
      title: `Learned ${input.taskType} network`,
      description: "The topology of this avatar's reasoning-network dispatches, with their verdicts.",
      mermaid: input.mermaid.trim(),
      createdBy: avatar.id,
      published: false,
      source: "learned",
      runs: 0,
      successes: 0,
      scoreSum: 0,
      scored: 0
    }
    yield* docs.insertIfAbsent({ kind: KIND, id: graph.id, owner: avatar.id, key: graph.taskType, data: graph, version: 0, createdAt: now, updatedAt: now })
    const updated = yield* modify<BraidGraph>(docs, KIND, graph.id, (g) => added(g, input.delta))
    return view(Option.getOrThrow(updated))
  })

  return { save, find, forPrompt, recordOutcome, learn }
})

export class Braid extends Context.Tag("aigw/Braid")<Braid, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Braid, makeService)
