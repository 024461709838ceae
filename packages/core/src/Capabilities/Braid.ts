/**
 * The braid: shared reasoning graphs. Any avatar may save a Mermaid reasoning graph for a task
 * type; solver outcomes feed each graph's quality metadata; the best graph of a task type is the
 * one with the highest smoothed success rate, (successes + 1) / (runs + 2), newest first on ties.
 * `useHolonicBraid` injects it into a completion's context.
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { NotFound } from "../Errors.ts"
import { TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import type { TaskType } from "../Ml/taskExamples.data.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { DocumentStore, modify } from "../Storage/DocumentStore.ts"

export const KIND = "braid_graph"

export interface BraidGraph {
  readonly id: string
  readonly taskType: TaskType
  readonly title: string
  readonly description: string
  readonly mermaid: string
  readonly createdBy: string
  readonly runs: number
  readonly successes: number
  /** Sum of reported scores (0-1), for the mean. */
  readonly scoreSum: number
  readonly scored: number
}

export const Mermaid = Schema.String.pipe(
  Schema.maxLength(20_000, { message: () => "mermaid is limited to 20000 characters" }),
  Schema.filter((s) => /^\s*(flowchart|graph)\s+(TD|TB|BT|LR|RL)\b/.test(s) && /-->|---|==>|-\.->/.test(s) || "mermaid must be a flowchart (\"flowchart TD\" …) with at least one edge")
)

export const SaveGraphParams = {
  taskType: TaskTypeSchema.annotations({ description: "Task type the graph solves", message: () => "taskType must be one of code, math, research, creative, analysis, summarization, translation, general" }),
  mermaid: Mermaid.annotations({ description: "Mermaid flowchart of the reasoning steps" }),
  title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(5000)))
}

export const quality = (g: BraidGraph) => ({
  runs: g.runs,
  successes: g.successes,
  successRate: Math.round(((g.successes + 1) / (g.runs + 2)) * 1e4) / 1e4,
  meanScore: g.scored === 0 ? null : Math.round((g.scoreSum / g.scored) * 1e4) / 1e4
})

const view = (g: BraidGraph) => ({ ...g, quality: quality(g) })

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore

  const save = Effect.fn("Braid.save")(function*(avatar: AvatarRecord, input: { readonly taskType: TaskType; readonly mermaid: string; readonly title?: string | undefined; readonly description?: string | undefined }) {
    const now = Date.now()
    const graph: BraidGraph = {
      id: crypto.randomUUID(),
      taskType: input.taskType,
      title: input.title ?? `${input.taskType} reasoning graph`,
      description: input.description ?? "",
      mermaid: input.mermaid.trim(),
      createdBy: avatar.id,
      runs: 0,
      successes: 0,
      scoreSum: 0,
      scored: 0
    }
    yield* docs.insert({ kind: KIND, id: graph.id, owner: null, key: graph.taskType, data: graph, version: 0, createdAt: now, updatedAt: now })
    return view(graph)
  })

  /** The task type's graphs, best first. */
  const ranked = (taskType: TaskType) =>
    Effect.map(docs.list(KIND, { key: taskType }), (list) =>
      list.map((d) => d.data as BraidGraph).sort((a, b) => quality(b).successRate - quality(a).successRate))

  /** The best graph of a task type, or None. */
  const best = (taskType: TaskType) => Effect.map(ranked(taskType), (graphs) => Option.fromNullable(graphs[0]))

  const find = (taskType: TaskType) =>
    Effect.map(ranked(taskType), (graphs) => ({
      taskType,
      graph: graphs[0] ? view(graphs[0]) : null,
      alternatives: Math.max(0, graphs.length - 1)
    }))

  const recordOutcome = Effect.fn("Braid.recordOutcome")(function*(input: { readonly graphId: string; readonly success: boolean; readonly score?: number | undefined }) {
    const updated = yield* modify<BraidGraph>(docs, KIND, input.graphId, (g) => ({
      ...g,
      runs: g.runs + 1,
      successes: g.successes + (input.success ? 1 : 0),
      scoreSum: g.scoreSum + (input.score ?? 0),
      scored: g.scored + (input.score === undefined ? 0 : 1)
    }))
    if (Option.isNone(updated)) return yield* Effect.fail(new NotFound({ message: `No braid graph ${input.graphId}.` }))
    return view(updated.value)
  })

  return { save, best, find, recordOutcome }
})

export class Braid extends Context.Tag("aigw/Braid")<Braid, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Braid, makeService)
