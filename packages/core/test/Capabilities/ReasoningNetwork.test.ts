/**
 * The reasoning network's pure parts: the run graph and its Mermaid renderings (parsed with the
 * real Mermaid parser), the budget's accounting, and the planner's and judge's answers.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Budget } from "../../src/Capabilities/Budget.ts"
import { parseSubtasks, parseVerdict } from "../../src/Capabilities/ReasoningNetwork.ts"
import { ANSWER, mermaidLabel, PROBLEM, RunGraph, toMermaid, toPlan } from "../../src/Capabilities/RunGraph.ts"
import { parseFlowchart } from "../support/mermaid.ts"

const sampleGraph = () => {
  const g = new RunGraph()
  const plan = g.add("planner", "Planner \"lead\" #1 <b>", "a1")
  const x = g.add("agent", "Coder & `tester`", "a2")
  const y = g.add("agent", "Critic", "a3")
  const s = g.add("synthesiser", "Synthesiser", null)
  g.connect(PROBLEM, plan)
  g.connect(plan, x)
  g.connect(plan, y)
  g.connect(x, s)
  g.connect(y, s)
  g.connect(s, ANSWER)
  g.update(plan, { status: "ok", provider: "openai", model: "gpt-4o-mini", tokens: 30, ms: 12 })
  g.update(x, { status: "failed", provider: "openai", model: "auto", ms: 5, error: "upstream said \"no\"\nat line 2" })
  g.update(y, { status: "ok", provider: "openai", model: "gpt-4o", tokens: 40, ms: 20 })
  g.update(s, { status: "skipped", error: "budget calls: the 3 calls allowed were made" })
  return g
}

describe("run graph", () => {
  it("renders the graph that ran as a flowchart the Mermaid parser reads back node for node", async () => {
    const view = sampleGraph().view()
    const chart = await parseFlowchart(toMermaid(view))
    expect(chart.direction).toBe("TB")
    expect(chart.vertices.map((v) => v.id).sort()).toEqual([ANSWER, PROBLEM, ...view.nodes.map((n) => n.id)].sort())
    expect(chart.edges.map((e) => [e.start, e.end])).toEqual(view.edges.map((e) => [e.from, e.to]))
    const text = (id: string) => chart.vertices.find((v) => v.id === id)!.text
    expect(text("n1")).toBe("Planner \"lead\" #1 <b> · openai/gpt-4o-mini · 30 tok · 12 ms")
    expect(text("n2")).toBe("Coder & `tester` · openai/auto · failed: upstream said \"no\" at line 2")
    expect(text("n4")).toBe("Synthesiser · no call · skipped: budget calls: the 3 calls allowed were made")
    const classes = (id: string) => chart.vertices.find((v) => v.id === id)!.classes
    expect([classes("n1"), classes("n2"), classes("n3"), classes("n4")]).toEqual([["ok"], ["failed"], ["ok"], ["skipped"]])
  })

  it("renders the plan without per-run figures or the judge, identical for the same topology", async () => {
    const g = sampleGraph()
    const judge = g.add("judge", "Judge", null)
    g.connect(ANSWER, judge)
    const plan = toPlan(g.view())
    expect(plan).not.toMatch(/tok|ms|openai|Judge|classDef/)
    const chart = await parseFlowchart(plan)
    expect(chart.vertices.map((v) => v.id).sort()).toEqual([ANSWER, PROBLEM, "n1", "n2", "n3", "n4"].sort())
    expect(chart.edges).toHaveLength(6)
    const again = sampleGraph()
    again.update("n2", { status: "ok", tokens: 99, ms: 1 })
    expect(toPlan(again.view())).toBe(plan)
  })

  it("escapes what quoted labels cannot take", () => {
    expect(mermaidLabel("a \"b\" #c <d> & `e`\nf")).toBe("a #quot;b#quot; #35;c #lt;d#gt; #amp; #96;e#96; f")
  })
})

describe("budget", () => {
  it("admits calls up to maxCalls, then refuses with the limit remembered", () => {
    const b = new Budget({ maxCalls: 2, maxTokens: 1000, maxSeconds: 10 }, () => 0)
    expect(b.admit().admitted).toBe(true)
    b.spend(100)
    expect(b.admit().admitted).toBe(true)
    b.spend(50)
    const refused = b.admit()
    expect(refused).toEqual({ admitted: false, reason: "budget calls: the 2 calls allowed were made" })
    expect(b.report()).toEqual({ limits: { maxCalls: 2, maxTokens: 1000, maxSeconds: 10 }, used: { calls: 2, tokens: 150, ms: 0 }, exhausted: "calls" })
  })

  it("refuses a call once the tokens are spent, and after the time is up", () => {
    let now = 1000
    const tokens = new Budget({ maxCalls: 10, maxTokens: 100, maxSeconds: 10 }, () => now)
    tokens.admit()
    tokens.spend(120)
    expect(tokens.admit()).toMatchObject({ admitted: false, reason: expect.stringMatching(/^budget tokens: 120 of 100/) })
    expect(tokens.report().exhausted).toBe("tokens")
    const time = new Budget({ maxCalls: 10, maxTokens: 100, maxSeconds: 2 }, () => now)
    expect(time.admit().admitted).toBe(true)
    now += 1500
    expect(time.remainingMs()).toBe(500)
    now += 500
    expect(time.admit()).toMatchObject({ admitted: false, reason: "budget time: 2 s elapsed" })
    expect(time.report()).toMatchObject({ used: { calls: 1, tokens: 0, ms: 2000 }, exhausted: "time" })
  })

  it("keeps the first limit that stopped a call; an interrupted call counts as time", () => {
    const b = new Budget({ maxCalls: 1, maxTokens: 100, maxSeconds: 10 }, () => 0)
    b.admit()
    b.timedOut()
    b.admit()
    expect(b.report().exhausted).toBe("time")
  })
})

describe("planner and judge answers", () => {
  it("reads subtasks from fenced JSON, numeric ids included", () => {
    const parsed = parseSubtasks("Here:\n```json\n{\"subtasks\":[{\"id\":1,\"task\":\"a\"},{\"id\":\"2\",\"task\":\"b\",\"dependsOn\":[1]}]}\n```")
    expect(parsed).toEqual(Either.right([{ id: "1", task: "a", dependsOn: [] }, { id: "2", task: "b", dependsOn: ["1"] }]))
  })

  it("names what is wrong with a plan", () => {
    const wrong = (text: string) => Either.getLeft(parseSubtasks(text))
    const sub = (id: string, dependsOn: Array<string> = []) => ({ id, task: `do ${id}`, dependsOn })
    const json = (subtasks: Array<unknown>) => JSON.stringify({ subtasks })
    expect(wrong("no plan here")).toMatchObject({ value: "answered no JSON object" })
    expect(wrong("{\"steps\": []}")._tag).toBe("Some")
    expect(wrong(json([sub("a", ["b"]), sub("b", ["a"]), sub("c")]))).toMatchObject({ value: "answered cyclic dependencies among a, b" })
    expect(wrong(json([sub("a", ["zz"])]))).toMatchObject({ value: "answered subtask a depending on unknown id zz" })
    expect(wrong(json(Array.from({ length: 9 }, (_, i) => sub(`s${i}`))))).toMatchObject({ value: "answered 9 subtasks (at most 8)" })
    expect(wrong(json([sub("a"), sub("a")]))).toMatchObject({ value: "answered duplicate subtask ids" })
    expect(wrong(json([]))).toMatchObject({ value: "answered no subtasks" })
    // A hostile answer's length is read before its items are decoded (a million took seconds).
    expect(wrong(json(Array.from({ length: 1_000_000 }, (_, i) => sub(`s${i}`))))).toMatchObject({ value: "answered 1000000 subtasks (at most 8)" })
    expect(wrong(json([sub("a", Array.from({ length: 1_000_000 }, () => "a"))]))._tag).toBe("Some")
  })

  it("reads the judge's score; success from 0.6", () => {
    expect(parseVerdict("{\"score\": 0.6, \"reason\": \"fine\"}")).toEqual(Either.right({ success: true, score: 0.6, source: "judge", reason: "fine" }))
    expect(parseVerdict("```json\n{\"score\": 0.2}\n```")).toEqual(Either.right({ success: false, score: 0.2, source: "judge", reason: "" }))
    expect(Either.isLeft(parseVerdict("{\"score\": 7}"))).toBe(true)
    expect(Either.isLeft(parseVerdict("great answer"))).toBe(true)
  })
})
