/**
 * Learning from dispatches: the record counts each node's agent and the learned braid graph of
 * the plan; feedback replaces the verdict by its difference (a dispatch counts once); learned
 * graphs become braid candidates with their first success.
 */
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Agents } from "../../src/Capabilities/Agents.ts"
import { Braid } from "../../src/Capabilities/Braid.ts"
import { type DispatchRun, Learning } from "../../src/Capabilities/Learning.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"
import { coreRuntime, testAvatar } from "../support/inProcess.ts"

const runtime = coreRuntime()
afterAll(() => runtime.dispose())

const run = <A, E>(f: (s: { learning: typeof Learning.Service; agents: typeof Agents.Service; braid: typeof Braid.Service }) => Effect.Effect<A, E>) =>
  runtime.runPromise(Effect.gen(function*() {
    return yield* f({ learning: yield* Learning, agents: yield* Agents, braid: yield* Braid })
  }))

const plan = "flowchart TD\n  problem([Problem]) --> analyst[Analyst]\n  analyst --> critic[Critic]\n  critic --> answer([Final answer])"

const dispatch = (avatar: AvatarRecord, id: string, over: Partial<DispatchRun> = {}): DispatchRun => ({
  id, problem: "Compare two pricing plans", taskType: "analysis", mode: "Serial", finalAnswer: "Plan B", partial: false, plan,
  nodes: [
    { agentId: `builtin:${avatar.id}:analyst`, ok: true, ms: 200, costUSD: 0.002, tokens: 30 },
    { agentId: `builtin:${avatar.id}:critic`, ok: false, ms: 50, costUSD: 0, tokens: 0 }
  ],
  verdict: { success: true, score: 0.8, source: "judge", reason: "sound comparison" },
  ...over
})

const statsOf = (agents: typeof Agents.Service, avatar: AvatarRecord, role: string) =>
  Effect.map(agents.rank(avatar, { task: "Compare two pricing plans", taskType: "analysis" }), (r) => r.agents.find((a) => a.agent.id === `builtin:${avatar.id}:${role}`)!.agent)

const tagOf = (e: Effect.Effect<unknown, { readonly _tag: string }>) => Effect.map(Effect.flip(e), (x) => x._tag)

describe("learning", () => {
  it("records a dispatch into its agents and learned graph; feedback replaces the judge's verdict once", () =>
    run(({ agents, braid, learning }) => Effect.gen(function*() {
      const fay = testAvatar("fay")
      yield* agents.rank(fay, { task: "seed", taskType: "analysis" })
      const { braidGraphId } = yield* learning.record(fay, dispatch(fay, "r-1"))
      expect(braidGraphId).toMatch(/^learned:fay:analysis:[0-9a-f]{16}$/)
      expect(yield* statsOf(agents, fay, "analyst")).toMatchObject({ runs: 1, successes: 1, totalMs: 200, totalCostUSD: 0.002, scoreSum: 0.8, scored: 1 })
      // The critic's node failed: a run, no success.
      expect(yield* statsOf(agents, fay, "critic")).toMatchObject({ runs: 1, successes: 0, totalMs: 50 })
      expect(yield* tagOf(learning.record(fay, dispatch(fay, "r-1")))).toBe("BadRequest")

      const first = yield* learning.feedback(fay, { dispatchId: "r-1", success: false, score: 0.2, comment: "missed the discount" })
      expect(first.replaced).toMatchObject({ source: "judge", success: true, score: 0.8 })
      expect(first.verdict).toEqual({ success: false, score: 0.2, source: "feedback", comment: "missed the discount" })
      expect(first.braidGraph).toMatchObject({ id: braidGraphId, source: "learned", runs: 1, successes: 0, scored: 1 })
      expect(first.braidGraph.scoreSum).toBeCloseTo(0.2)
      expect(first.agents.map((a) => a.agent.id).sort()).toEqual(["builtin:fay:analyst", "builtin:fay:critic"])
      expect(first.agents.find((a) => a.agent.id === "builtin:fay:analyst")!.score.successRate).toBe(0.3333)
      // The same feedback again changes nothing: the dispatch counts once.
      const second = yield* learning.feedback(fay, { dispatchId: "r-1", success: false, score: 0.2 })
      expect(second.braidGraph).toMatchObject({ runs: 1, successes: 0, scored: 1 })
      const analyst = yield* statsOf(agents, fay, "analyst")
      expect(analyst).toMatchObject({ runs: 1, successes: 0, totalMs: 200, scored: 1 })
      expect(analyst.scoreSum).toBeCloseTo(0.2)
      // Feedback without a score takes the score back.
      const third = yield* learning.feedback(fay, { dispatchId: "r-1", success: true })
      expect(third.braidGraph).toMatchObject({ runs: 1, successes: 1, scored: 0 })
      expect(yield* statsOf(agents, fay, "analyst")).toMatchObject({ runs: 1, successes: 1, scored: 0 })
      expect(yield* statsOf(agents, fay, "critic")).toMatchObject({ runs: 1, successes: 0 })
      // Only the dispatch's owner gives feedback.
      expect(yield* tagOf(learning.feedback(testAvatar("gus"), { dispatchId: "r-1", success: true }))).toBe("NotFound")
      expect(yield* tagOf(learning.feedback(fay, { dispatchId: "nope", success: true }))).toBe("NotFound")
    })))

  it("accumulates one learned graph per plan and makes it a candidate only after a success", () =>
    run(({ braid, learning }) => Effect.gen(function*() {
      const hal = testAvatar("hal")
      const failed = { success: false, score: 0.1, source: "judge", reason: "wrong" } as const
      const a = yield* learning.record(hal, dispatch(hal, "h-1", { verdict: failed }))
      const b = yield* learning.record(hal, dispatch(hal, "h-2", { verdict: null }))
      expect(b.braidGraphId).toBe(a.braidGraphId)
      // Learned, never succeeded: not offered.
      expect((yield* braid.find(hal, "analysis")).graph).toBeNull()
      const after = yield* learning.feedback(hal, { dispatchId: "h-2", success: true, score: 0.9 })
      expect(after.braidGraph).toMatchObject({ runs: 2, successes: 1 })
      expect((yield* braid.find(hal, "analysis")).graph).toMatchObject({ id: a.braidGraphId, source: "learned", mermaid: plan })
      // Another avatar never sees it.
      expect((yield* braid.find(testAvatar("ivy"), "analysis")).graph).toBeNull()
      expect(yield* tagOf(learning.record(hal, dispatch(hal, "h-3", { plan: "not a flowchart" })))).toBe("BadRequest")
    })))
})
