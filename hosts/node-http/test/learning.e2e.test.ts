/**
 * Learning and accounting end to end through the real server: a dispatch's judge verdict in its
 * agents' scores, the caller's feedback replacing it once (route and MCP tool, owner only, not
 * metered), useFAHRN's planning call and its plan in the answer call's system prompt, and the
 * quota: a dispatch is one request, every upstream call's tokens count in the day's tokens.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, type RecordedRequest, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const usage = { prompt: 12, completion: 8 } // 20 tokens a call
const PLAN = "PLAN-7Q: 1. Restate the claim. 2. Assume a rational root. 3. Derive a contradiction."

const systemOf = (r: RecordedRequest) => ((r.body as any).messages as Array<{ role: string; content: string }>).find((m) => m.role === "system")?.content ?? ""

describe("learning from dispatches", () => {
  let openai: MockUpstream
  let server: RunningServer
  let rpcId = 0

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-learn" })
    // Who asks is told by the system prompt: the judge scores, the useFAHRN planner plans, the rest work.
    openai.setResponder((r) => {
      const system = systemOf(r)
      if (system.startsWith("You are a strict judge")) return { kind: "text", text: "{\"score\": 0.9, \"reason\": \"correct\"}", usage }
      if (system.startsWith("You are the Planner of a reasoning team")) return { kind: "text", text: PLAN, usage }
      return { kind: "text", text: "worked answer", usage }
    })
    server = await startServer({ OPENAI_API_KEY: "sk-learn", OPENAI_BASE_URL: openai.url })
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  const post = (user: TestAvatar, path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })
  const usageOf = async (user: TestAvatar) => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result
  const tool = async (user: TestAvatar, name: string, args: Record<string, unknown>) => {
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${user.token}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method: "tools/call", params: { name, arguments: args } })
    })
    const body: any = await res.json()
    return { isError: body.result?.isError === true, data: body.result?.structuredContent as any, text: String(body.result?.content?.[0]?.text ?? body.error?.message) }
  }
  const PROBLEM = "Compare the total cost of two phone plans over two years and recommend one"

  it("counts a dispatch as one request and every call's tokens; feedback replaces the judge's verdict once, free", async () => {
    const user = await signUp(server, "learn")
    const before = await usageOf(user)
    const calls = openai.requests.length
    const res = await post(user, "/v1/reasoning-network/dispatch", { problem: PROBLEM, mode: "Serial" })
    expect(res.status).toBe(200)
    const run = res.body.result
    expect(run.verdict).toMatchObject({ success: true, score: 0.9, source: "judge" })
    const upstreamCalls = openai.requests.length - calls
    expect(upstreamCalls).toBe(run.subNetwork.length + 1) // each Serial step, then the judge
    const after = await usageOf(user)
    expect(after.dailyCallsUsed - before.dailyCallsUsed).toBe(1)
    expect(after.dailyTokensUsed - before.dailyTokensUsed).toBe(upstreamCalls * (usage.prompt + usage.completion))

    // The judge's success is in the agents' records.
    const ranked = (await tool(user, "gateway_fahrn_get_agents", { taskType: run.taskType, task: PROBLEM })).data.agents
    for (const id of run.subNetwork) expect(ranked.find((a: any) => a.id === id)).toMatchObject({ runs: 1, successes: 1 })

    const feedback = await post(user, "/v1/reasoning-network/feedback", { dispatchId: run.dispatchId, success: false, score: 0.2, comment: "picked the dearer plan" })
    expect(feedback.status).toBe(200)
    const view = feedback.body.result
    expect(view.replaced).toMatchObject({ source: "judge", success: true, score: 0.9 })
    expect(view.verdict).toEqual({ success: false, score: 0.2, source: "feedback", comment: "picked the dearer plan" })
    expect(view.braidGraph).toMatchObject({ id: run.braidGraphId, source: "learned", runs: 1, successes: 0 })
    expect(view.agents.map((a: any) => a.agent.id).sort()).toEqual([...run.subNetwork].sort())
    for (const a of view.agents) {
      expect(a.agent).toMatchObject({ runs: 1, successes: 0, scored: 1 })
      expect(a.score.successRate).toBe(0.3333)
    }
    expect(view).toMatchObject({ embedder: expect.any(String), semantic: expect.any(Boolean) })

    // The same verdict through the MCP tool: the dispatch still counts once.
    const again = await tool(user, "gateway_fahrn_record_outcome", { dispatchId: run.dispatchId, success: false, score: 0.2 })
    expect(again.isError).toBe(false)
    expect(again.data.replaced).toMatchObject({ source: "feedback", success: false })
    expect(again.data.braidGraph).toMatchObject({ runs: 1, successes: 0, scored: 1 })
    for (const a of again.data.agents) expect(a.agent).toMatchObject({ runs: 1, successes: 0, scored: 1 })

    // Feedback is not metered: no request counted, no tokens.
    const end = await usageOf(user)
    expect(end.dailyCallsUsed).toBe(after.dailyCallsUsed)
    expect(end.dailyTokensUsed).toBe(after.dailyTokensUsed)
  })

  it("refuses feedback on an unknown or another avatar's dispatch, and bad bodies", async () => {
    const owner = await signUp(server, "own")
    const other = await signUp(server, "oth")
    const run = (await post(owner, "/v1/reasoning-network/dispatch", { problem: PROBLEM, mode: "Serial", judge: false })).body.result
    expect(run.verdict).toBeNull()
    const foreign = await post(other, "/v1/reasoning-network/feedback", { dispatchId: run.dispatchId, success: true })
    expect(foreign.status).toBe(404)
    expect(foreign.body.message).toContain(run.dispatchId)
    expect((await post(owner, "/v1/reasoning-network/feedback", { dispatchId: "no-such-dispatch", success: true })).status).toBe(404)
    expect((await tool(other, "gateway_fahrn_record_outcome", { dispatchId: run.dispatchId, success: true })).isError).toBe(true)
    const badScore = await post(owner, "/v1/reasoning-network/feedback", { dispatchId: run.dispatchId, success: true, score: 1.5 })
    expect(badScore.status).toBe(400)
    expect(badScore.body.message).toMatch(/score must be between 0 and 1/)
    expect((await post(owner, "/v1/reasoning-network/feedback", { dispatchId: run.dispatchId })).status).toBe(400)
    const extra = await post(owner, "/v1/reasoning-network/feedback", { dispatchId: run.dispatchId, success: true, rating: 5 })
    expect(extra.status).toBe(400)
    expect(extra.body.message).toContain("rating")
    // Without a judge the dispatch counted runs only; the owner's feedback brings the success.
    const ok = await post(owner, "/v1/reasoning-network/feedback", { dispatchId: run.dispatchId, success: true })
    expect(ok.body.result).toMatchObject({ replaced: null, braidGraph: { runs: 1, successes: 1, scored: 0 } })
  })

  it("useFAHRN makes a planning call and answers with its plan in the system prompt; both calls count", async () => {
    const user = await signUp(server, "fahrn")
    const before = await usageOf(user)
    const from = openai.requests.length
    const res = await post(user, "/v1/complete", {
      messages: [{ role: "system", content: "Be rigorous." }, { role: "user", content: "Prove that the square root of 2 is irrational" }],
      useFAHRN: true,
      provider: "openai",
      model: "gpt-4o-mini"
    })
    expect(res.status).toBe(200)
    expect(res.body.result.content).toBe("worked answer")
    const [planning, answer, ...more] = openai.requests.slice(from)
    expect(more).toHaveLength(0)
    // The planning call: the built-in planner's instructions, the user's task, a small answer.
    expect(systemOf(planning!)).toMatch(/^You are the Planner of a reasoning team\. Break the problem into clear steps/)
    expect((planning!.body as any).messages.at(-1)).toEqual({ role: "user", content: "Prove that the square root of 2 is irrational" })
    expect((planning!.body as any).max_tokens ?? (planning!.body as any).max_completion_tokens).toBe(600)
    // The answer call: the plan the mock returned, then the caller's own system prompt.
    expect(systemOf(answer!)).toContain(PLAN)
    expect(systemOf(answer!)).toMatch(/Be rigorous\.$/)
    expect((answer!.body as any).model).toBe("gpt-4o-mini")
    const after = await usageOf(user)
    expect(after.dailyCallsUsed - before.dailyCallsUsed).toBe(1)
    expect(after.dailyTokensUsed - before.dailyTokensUsed).toBe(2 * (usage.prompt + usage.completion))
  })

  it("gateway_complete over MCP takes useFAHRN: the planning call first, its plan in the answer call", async () => {
    const user = await signUp(server, "fahrnmcp")
    const from = openai.requests.length
    const res = await tool(user, "gateway_complete", { messages: [{ role: "user", content: "Prove that the square root of 2 is irrational" }], useFAHRN: true, provider: "openai", model: "gpt-4o-mini" })
    expect(res.isError).toBe(false)
    const [planning, answer, ...more] = openai.requests.slice(from)
    expect(more).toHaveLength(0)
    expect(systemOf(planning!)).toMatch(/^You are the Planner of a reasoning team/)
    expect(systemOf(answer!)).toContain(PLAN)
    const empty = await tool(user, "gateway_complete", { messages: [{ role: "user", content: " " }], useFAHRN: true })
    expect(empty.isError).toBe(true)
    expect(empty.text).toMatch(/useFAHRN plans from the last user message/)
    expect(openai.requests.length).toBe(from + 2)
  })

  it("refuses a useFAHRN completion without user text before admission: nothing counted, no call made", async () => {
    const user = await signUp(server, "fahrnempty")
    const before = await usageOf(user)
    const from = openai.requests.length
    const res = await post(user, "/v1/complete", { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "   " }], useFAHRN: true, provider: "openai" })
    expect(res.status).toBe(400)
    expect(res.body.message).toMatch(/useFAHRN plans from the last user message/)
    expect(openai.requests.length).toBe(from)
    const after = await usageOf(user)
    expect(after.dailyCallsUsed).toBe(before.dailyCallsUsed)
  })

  it("fails a useFAHRN completion with the planning call's error", async () => {
    const user = await signUp(server, "fahrnfail")
    openai.setResponder((r) => (systemOf(r).startsWith("You are the Planner") ? { kind: "error", status: 400, message: "planner refused" } : { kind: "text", text: "should not be reached", usage }))
    try {
      const from = openai.requests.length
      const res = await post(user, "/v1/complete", { messages: [{ role: "user", content: "Prove it" }], useFAHRN: true, provider: "openai", model: "gpt-4o-mini" })
      expect(res.status).toBeGreaterThanOrEqual(400)
      expect(res.body.isError).toBe(true)
      expect(openai.requests.slice(from).every((r) => systemOf(r).startsWith("You are the Planner"))).toBe(true)
    } finally {
      openai.setResponder(undefined)
    }
  })
})
