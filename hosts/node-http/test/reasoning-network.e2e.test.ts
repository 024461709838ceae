/**
 * The reasoning network end to end through the real server: each topology's call graph as the
 * OpenAI mock sees it (which calls, in which order, with which inputs), the budget stopping a
 * runaway dispatch (calls, and a hanging upstream under maxSeconds), partial results when a branch
 * fails, the planner's JSON checked, the judge's verdict moving agent scores, and the run's Mermaid
 * chart parsed with the real Mermaid parser and compared with the graph.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseFlowchart } from "../../../packages/core/test/support/mermaid.ts"
import { type MockUpstream, type RecordedRequest, type Scenario, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const usage = { prompt: 10, completion: 5 } // 15 tokens a call
const TOKENS = 15

interface Seen {
  readonly who: string
  readonly user: string
  readonly jsonFormat: boolean
}

const messages = (r: RecordedRequest) => (r.body as { messages: Array<{ role: string; content: string }> }).messages
const systemOf = (r: RecordedRequest) => messages(r).find((m) => m.role === "system")?.content ?? ""
const userOf = (r: RecordedRequest) => messages(r).find((m) => m.role === "user")?.content ?? ""

/** Who a call is, told by its system prompt: an agent's skill document starts "# <name>: <type> skill". */
const whoOf = (r: RecordedRequest) => {
  const system = systemOf(r)
  if (system.startsWith("You are the synthesiser")) return "synthesiser"
  if (system.startsWith("You are a strict judge")) return "judge"
  const name = /^# (.+?): \w+ skill/.exec(system)?.[1] ?? "?"
  if (system.includes("Split the problem into subtasks")) return `planner:${name}`
  if (system.includes("You lead a reasoning team")) return `lead:${name}`
  const subtask = /Your subtask \(([^)]+)\)/.exec(userOf(r))?.[1]
  return subtask ? `subtask:${subtask}` : name
}

describe("reasoning network", () => {
  let openai: MockUpstream
  let server: RunningServer
  let seen: Array<Seen> = []
  /** Answers by who is asking; each test sets what the roles say. */
  let answer: (who: string, r: RecordedRequest) => Scenario | undefined = () => undefined
  const text = (t: string): Scenario => ({ kind: "text", text: t, usage })

  const dispatch = (user: TestAvatar, body: Record<string, unknown>) => call(server.url, "POST", "/v1/reasoning-network/dispatch", { apiKey: user.apiKey, body })
  const fresh = async (body: Record<string, unknown>) => {
    seen = []
    return dispatch(await signUp(server, "rn"), body)
  }

  const defaults = (who: string): Scenario =>
    who === "judge" ? text("{\"score\": 0.9, \"reason\": \"correct\"}") : who === "synthesiser" ? text("merged answer") : text(`output of ${who}`)

  /** The chart parses with Mermaid and has exactly the graph's nodes (plus the terminals) and edges. */
  const expectChartIsGraph = async (result: any) => {
    const chart = await parseFlowchart(result.mermaid)
    expect(chart.vertices.map((v) => v.id).sort()).toEqual(["answer", "problem", ...result.graph.nodes.map((n: any) => n.id)].sort())
    expect(chart.edges.map((e) => `${e.start}>${e.end}`).sort()).toEqual(result.graph.edges.map((e: any) => `${e.from}>${e.to}`).sort())
    for (const n of result.graph.nodes) expect(chart.vertices.find((v) => v.id === n.id)!.classes).toEqual([n.status])
    const plan = await parseFlowchart(result.plan)
    expect(plan.vertices.length).toBe(result.graph.nodes.filter((n: any) => n.kind !== "judge").length + 2)
  }
  const edges = (result: any) => result.graph.edges.map((e: any) => `${e.from}>${e.to}`).sort()

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-rn" })
    openai.setResponder((r) => {
      if (r.path !== "/v1/chat/completions") return undefined
      const who = whoOf(r)
      seen.push({ who, user: userOf(r), jsonFormat: (r.body as any).response_format?.type === "json_object" })
      return answer(who, r) ?? defaults(who)
    })
    server = await startServer({ OPENAI_API_KEY: "sk-rn", OPENAI_BASE_URL: openai.url })
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  it("Serial: each ranked agent builds on the previous one's output, as its own agent; the chart is the graph", async () => {
    answer = () => undefined
    const res = await fresh({ problem: "Write a Python function that checks whether a number is prime", mode: "Serial" })
    expect(res.status).toBe(200)
    const r = res.body.result
    const team = r.agents.filter((a: any) => a.chosen).map((a: any) => a.name)
    expect(team).toEqual(r.agents.slice(0, 3).map((a: any) => a.name))
    expect(r).toMatchObject({ taskType: "code", mode: "Serial", partial: false, finalAnswer: `output of ${team[2]}`, subtasks: [] })
    expect(r.fit.note).toMatch(r.fit.semantic ? `under the embedding model ${r.fit.embedder}` : /^Fit is lexical: hashed words/)
    for (const a of r.agents) expect(Object.keys(a.score).sort()).toEqual(["composite", "cost", "fit", "latency", "successRate"])
    expect(r.agents[0].why).toEqual(expect.any(String))
    expect(seen.map((s) => s.who)).toEqual([...team, "judge"])
    expect(seen[1]!.user).toContain(`output of ${team[0]}`)
    expect(seen[2]!.user).toContain(`output of ${team[1]}`)
    expect(seen[3]!.jsonFormat).toBe(true)
    expect(edges(r)).toEqual(["answer>n4", "n1>n2", "n2>n3", "n3>answer", "problem>n1"])
    expect(r.steps.map((s: any) => [s.role, s.status])).toEqual(team.map((t: string) => [t, "ok"]))
    expect(r.subNetwork).toEqual(r.graph.nodes.filter((n: any) => n.kind === "agent").map((n: any) => n.agentId))
    expect(r.usage.total_tokens).toBe(4 * TOKENS)
    expect(r.budget).toEqual({ limits: { maxCalls: 12, maxTokens: 60000, maxSeconds: 120 }, used: { calls: 4, tokens: 4 * TOKENS, ms: expect.any(Number) }, exhausted: null })
    expect(r.verdict).toEqual({ success: true, score: 0.9, source: "judge", reason: "correct" })
    expect(r.braidGraphId).toMatch(/^learned:/)
    expect(r.dispatchId).toEqual(expect.any(String))
    expect(r.mermaid).toContain(`${team[0]} · openai/`)
    expect(r.mermaid).toContain(`· ${TOKENS} tok ·`)
    await expectChartIsGraph(r)
  })

  it("Parallel: independent answers, then a synthesiser that merges them", async () => {
    answer = () => undefined
    const r = (await fresh({ problem: "Summarise the causes of the French revolution", mode: "Parallel", agents: 4, judge: false })).body.result
    const team = r.agents.slice(0, 4).map((a: any) => a.name)
    expect(seen.slice(0, 4).map((s) => s.who).sort()).toEqual([...team].sort())
    for (const s of seen.slice(0, 4)) expect(s.user).not.toContain("output of")
    expect(seen.map((s) => s.who)).toEqual([...seen.slice(0, 4).map((s) => s.who), "synthesiser"])
    for (const t of team) expect(seen[4]!.user).toContain(`output of ${t}`)
    expect(r).toMatchObject({ finalAnswer: "merged answer", partial: false, verdict: null, verdictError: expect.stringMatching(/judge false/) })
    expect(edges(r)).toEqual(["n1>n5", "n2>n5", "n3>n5", "n4>n5", "n5>answer", "problem>n1", "problem>n2", "problem>n3", "problem>n4"])
    expect(r.usage.total_tokens).toBe(5 * TOKENS)
    await expectChartIsGraph(r)
  })

  it("Hybrid: the best-ranked agent plans, the others work on the plan in parallel, a synthesiser merges", async () => {
    answer = (who) => (who.startsWith("lead:") ? text("THE PLAN") : undefined)
    const r = (await fresh({ problem: "Compare PostgreSQL and SQLite for a small web app", mode: "Hybrid" })).body.result
    const [lead, ...rest] = r.agents.slice(0, 3).map((a: any) => a.name)
    expect(seen[0]).toMatchObject({ who: `lead:${lead}` })
    expect(seen.slice(1, 3).map((s) => s.who).sort()).toEqual([...rest].sort())
    for (const s of seen.slice(1, 3)) expect(s.user).toContain("THE PLAN")
    expect(seen.slice(3).map((s) => s.who)).toEqual(["synthesiser", "judge"])
    expect(r.graph.nodes.map((n: any) => n.kind)).toEqual(["planner", "agent", "agent", "synthesiser", "judge"])
    expect(edges(r)).toEqual(["answer>n5", "n1>n2", "n1>n3", "n2>n4", "n3>n4", "n4>answer", "problem>n1"])
    await expectChartIsGraph(r)
  })

  it("Decomposed: the planner's subtasks run on their own best agents in dependency order, with their dependencies' outputs", async () => {
    const plan = {
      subtasks: [
        { id: "facts", task: "Research the facts about prime numbers", dependsOn: [] },
        { id: "code", task: "Write Python code that tests primality", dependsOn: [] },
        { id: "review", task: "Review the code against the facts", dependsOn: ["facts", "code"] },
        { id: "doc", task: "Write documentation for the reviewed code", dependsOn: ["review"] }
      ]
    }
    answer = (who) =>
      who.startsWith("planner:") ? text(`Here is the plan:\n\`\`\`json\n${JSON.stringify(plan)}\n\`\`\``) : who.startsWith("subtask:") ? text(`result of ${who.slice(8)}`) : undefined
    const res = await fresh({ problem: "Build and document a primality checker", mode: "Decomposed", taskType: "code" })
    expect(res.status).toBe(200)
    const r = res.body.result
    const order = seen.map((s) => s.who)
    expect(order[0]).toMatch(/^planner:Planner$/)
    expect(seen[0]!.jsonFormat).toBe(true)
    expect(order.slice(1, 3).sort()).toEqual(["subtask:code", "subtask:facts"])
    expect(order.slice(3)).toEqual(["subtask:review", "subtask:doc", "synthesiser", "judge"])
    const review = seen.find((s) => s.who === "subtask:review")!.user
    expect(review).toContain("result of facts")
    expect(review).toContain("result of code")
    const doc = seen.find((s) => s.who === "subtask:doc")!.user
    expect(doc).toContain("result of review")
    expect(doc).not.toContain("result of facts")
    for (const t of ["result of facts", "result of code", "result of review", "result of doc"]) expect(seen.find((s) => s.who === "synthesiser")!.user).toContain(t)
    expect(r.subtasks.map((s: any) => [s.id, s.dependsOn, s.node])).toEqual([["facts", [], "n2"], ["code", [], "n3"], ["review", ["facts", "code"], "n4"], ["doc", ["review"], "n5"]])
    for (const s of r.subtasks) expect(r.graph.nodes.find((n: any) => n.id === s.node).agentId).toBe(s.agentId)
    expect(edges(r)).toEqual(
      ["answer>n7", "n1>n2", "n1>n3", "n2>n4", "n2>n6", "n3>n4", "n3>n6", "n4>n5", "n4>n6", "n5>n6", "n6>answer", "problem>n1"].sort()
    )
    expect(r.usage.total_tokens).toBe(7 * TOKENS)
    await expectChartIsGraph(r)

    // The planner's problems fail the dispatch with a 502 that names them.
    answer = (who) => (who.startsWith("planner:") ? text("I would rather not plan.") : undefined)
    const notJson = await fresh({ problem: "Build a primality checker", mode: "Decomposed", taskType: "code" })
    expect(notJson.status).toBe(502)
    expect(notJson.body.message).toBe("The planner (Planner) answered no JSON object.")
    answer = (who) =>
      who.startsWith("planner:") ? text(JSON.stringify({ subtasks: [{ id: "a", task: "x", dependsOn: ["b"] }, { id: "b", task: "y", dependsOn: ["a"] }] })) : undefined
    const cyclic = await fresh({ problem: "Build a primality checker", mode: "Decomposed", taskType: "code" })
    expect(cyclic.status).toBe(502)
    expect(cyclic.body.message).toMatch(/cyclic dependencies among a, b/)
  })

  it("the budget stops a runaway dispatch: calls beyond maxCalls are skipped, the answer is partial", async () => {
    answer = () => undefined
    const r = (await fresh({ problem: "Summarise the causes of the French revolution", mode: "Parallel", budget: { maxCalls: 3 } })).body.result
    expect(seen.map((s) => s.who)).not.toContain("synthesiser")
    expect(seen).toHaveLength(3)
    expect(r.graph.nodes.map((n: any) => [n.kind, n.status])).toEqual([["agent", "ok"], ["agent", "ok"], ["agent", "ok"], ["synthesiser", "skipped"], ["judge", "skipped"]])
    expect(r.graph.nodes[3].error).toBe("budget calls: the 3 calls allowed were made")
    expect(r).toMatchObject({ partial: true, finalAnswer: `output of ${r.agents[0].name}`, verdict: null, verdictError: expect.stringMatching(/judge call skipped: budget calls/) })
    expect(r.budget).toMatchObject({ limits: { maxCalls: 3, maxTokens: 60000, maxSeconds: 120 }, used: { calls: 3, tokens: 3 * TOKENS }, exhausted: "calls" })
    expect(edges(r)).toContain("n1>answer")
    await expectChartIsGraph(r)

    const tokens = (await fresh({ problem: "Summarise the causes of the French revolution", mode: "Serial", budget: { maxTokens: 2 * TOKENS } })).body.result
    expect(tokens.graph.nodes.map((n: any) => n.status)).toEqual(["ok", "ok", "skipped", "skipped"])
    expect(tokens.budget.exhausted).toBe("tokens")

    for (const budget of [{ maxCalls: 0 }, { maxCalls: 51 }, { maxSeconds: 0 }, { maxCalls: 2, extra: 1 }]) {
      expect((await fresh({ problem: "x", budget })).status).toBe(400)
    }
    expect((await fresh({ problem: "x", agents: 9 })).status).toBe(400)
  })

  it("the time limit interrupts a hanging call; the other branches' answer comes back partial", async () => {
    let hung = ""
    answer = (who) => {
      if (hung === "" && !["synthesiser", "judge"].includes(who)) hung = who
      return who === hung ? { kind: "hang" } : undefined
    }
    const started = Date.now()
    const res = await fresh({ problem: "Summarise the causes of the French revolution", mode: "Parallel", budget: { maxSeconds: 1 } })
    expect(Date.now() - started).toBeLessThan(8000)
    expect(res.status).toBe(200)
    const r = res.body.result
    const hangNode = r.graph.nodes.find((n: any) => n.name === hung)
    expect(hangNode).toMatchObject({ status: "failed", error: "budget time: interrupted after 1 s" })
    expect(r.graph.nodes.filter((n: any) => n.kind === "agent" && n.status === "ok")).toHaveLength(2)
    expect(r.graph.nodes.find((n: any) => n.kind === "synthesiser")).toMatchObject({ status: "skipped", error: "budget time: 1 s elapsed" })
    expect(r).toMatchObject({ partial: true, budget: { exhausted: "time", used: { calls: 3, tokens: 2 * TOKENS } } })
    expect(r.finalAnswer).toMatch(/^output of /)
    await expectChartIsGraph(r)
  })

  it("a failing branch leaves the others: the synthesiser merges what succeeded; all failing is a 502 naming them", async () => {
    let failing = ""
    answer = (who) => {
      if (failing === "" && !["synthesiser", "judge"].includes(who)) failing = who
      return who === failing ? { kind: "error", status: 400, message: "branch refused" } : undefined
    }
    const r = (await fresh({ problem: "Summarise the causes of the French revolution", mode: "Parallel" })).body.result
    const failed = r.graph.nodes.find((n: any) => n.name === failing)
    expect(failed).toMatchObject({ status: "failed", error: expect.stringMatching(/branch refused/) })
    const synth = seen.find((s) => s.who === "synthesiser")!.user
    expect(synth).not.toContain(`output of ${failing}`)
    expect(r).toMatchObject({ partial: true, finalAnswer: "merged answer", budget: { exhausted: null } })
    expect(r.steps.find((s: any) => s.role === failing)).toMatchObject({ status: "failed", output: "" })
    expect(edges(r)).not.toContain(`${failed.id}>n4`)
    await expectChartIsGraph(r)

    answer = (who) => (["synthesiser", "judge"].includes(who) ? undefined : { kind: "error", status: 400, message: "all refused" })
    const none = await fresh({ problem: "Summarise the causes of the French revolution", mode: "Parallel" })
    expect(none.status).toBe(502)
    expect(none.body.message).toMatch(/^No step of the dispatch succeeded: n1 .*failed \(.*all refused/)
  })

  it("the judge's verdict moves the agents' scores in the next dispatch; a judge that answers nonsense gives no verdict", async () => {
    const user = await signUp(server, "rn")
    const problem = "Write a Python function that checks whether a number is prime"
    const successRates = (r: any) => Object.fromEntries(r.agents.map((a: any) => [a.id, a.score.successRate]))
    answer = () => undefined
    const first = (await dispatch(user, { problem, mode: "Serial" })).body.result
    expect(first.verdict.success).toBe(true)
    answer = (who) => (who === "judge" ? text("{\"score\": 0.1, \"reason\": \"wrong\"}") : undefined)
    const second = (await dispatch(user, { problem, mode: "Serial" })).body.result
    expect(second.verdict).toEqual({ success: false, score: 0.1, source: "judge", reason: "wrong" })
    answer = (who) => (who === "judge" ? text("looks good to me") : undefined)
    const third = (await dispatch(user, { problem, mode: "Serial" })).body.result
    expect(third).toMatchObject({ verdict: null, verdictError: "the judge answered no JSON object" })
    const before = successRates(first)
    const after1 = successRates(second)
    const after2 = successRates(third)
    for (const id of first.subNetwork) {
      expect(before[id]).toBe(0.5)
      expect(after1[id]).toBeCloseTo(2 / 3, 3) // one run, one success
      expect(after2[id]).toBeCloseTo(2 / 4, 3) // two runs, one success
    }
    const untouched = first.agents.find((a: any) => !first.subNetwork.includes(a.id))
    expect(after2[untouched.id]).toBe(0.5)
    expect(second.braidGraphId).toMatch(/^learned:/)
  })

  it("MCP gateway_fahrn_dispatch runs each mode as itself (Decomposed is not Hybrid)", async () => {
    const plan = { subtasks: [{ id: "one", task: "First part", dependsOn: [] }, { id: "two", task: "Second part", dependsOn: ["one"] }] }
    answer = (who) => (who.startsWith("planner:") ? text(JSON.stringify(plan)) : undefined)
    const user = await signUp(server, "rn")
    const client = new Client({ name: "rn-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { "x-api-key": user.apiKey } } }))
    try {
      seen = []
      const r = (await client.callTool({ name: "gateway_fahrn_dispatch", arguments: { problem: "Plan a two-part essay", mode: "Decomposed", judge: false } })) as any
      expect(r.isError).toBeFalsy()
      expect(r.structuredContent).toMatchObject({ mode: "Decomposed", subtasks: [{ id: "one" }, { id: "two", dependsOn: ["one"] }], finalAnswer: "merged answer" })
      expect(seen.map((s) => s.who)).toEqual(["planner:Planner", "subtask:one", "subtask:two", "synthesiser"])
      const solved = (await client.callTool({ name: "gateway_fahrn_solve", arguments: { problem: "Plan a two-part essay", judge: false } })) as any
      expect(solved.structuredContent.mode).toBe("Hybrid")
    } finally {
      await client.close()
    }
  })

  it("never picks an agent its caller cannot run: catalogue agents of unconfigured or plan-gated providers stay out of the team", async () => {
    answer = () => undefined
    const user = await signUp(server, "rn")
    const client = new Client({ name: "rn-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { "x-api-key": user.apiKey } } }))
    try {
      const seeded = (await client.callTool({ name: "gateway_fahrn_seed_openserv_agents", arguments: {} })) as any
      expect(seeded.structuredContent.created).toBeGreaterThan(10)
    } finally {
      await client.close()
    }
    // Only OpenAI is configured here, and the caller is on Free: for every mode, each agent that ran is one it can run.
    for (const mode of ["Serial", "Parallel", "Hybrid"]) {
      seen = []
      const res = await dispatch(user, { problem: "What is 2 + 2? Answer briefly.", mode, judge: false })
      expect([mode, res.status]).toEqual([mode, 200])
      const r = res.body.result
      const chosen = r.agents.filter((a: any) => a.chosen)
      expect(chosen.length).toBe(3)
      for (const a of chosen) expect([a.name, a.provider]).toEqual([a.name, expect.stringMatching(/^(openai|auto)$/)])
      expect(r.steps.every((s: any) => s.status === "ok")).toBe(true)
    }
  })

  it("refuses what it does not take", async () => {
    for (const body of [{}, { problem: "x", mode: "Star" }, { problem: "x", judge: "yes" }, { problem: "x", taskType: "poetry" }]) {
      const res = await fresh(body)
      expect(res.status).toBe(400)
    }
    const badMode = await fresh({ problem: "x", mode: "Star" })
    expect(badMode.body.message).toMatch(/^Invalid request body: mode: mode must be Serial, Parallel, Hybrid or Decomposed/)
    const misspelt = await fresh({ problem: "x", maxCalls: 3 })
    expect(misspelt.status).toBe(400)
    expect(misspelt.body.message).toMatch(/maxCalls: is unexpected/)
    expect(seen).toEqual([])
  })
})
