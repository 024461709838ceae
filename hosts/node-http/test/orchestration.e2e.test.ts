/**
 * The orchestrators end to end (crew, conversation, graph-node): the real server with two
 * OpenAI-wire mock upstreams (openai, groq) answering by the speaking agent's system prompt.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { answerBySystem, messagesOf, modelOf, resetMocks, systemOf, text } from "../../../packages/core/test/support/agentMocks.ts"
import { type MockUpstream, type RecordedRequest, type Scenario, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"


describe("orchestrators", () => {
  let openai: MockUpstream
  let groq: MockUpstream
  let server: RunningServer
  let silver: TestAvatar
  let free: TestAvatar
  const post = (path: string, body: unknown, user = silver) => call(server.url, "POST", path, { apiKey: user.apiKey, body })
  /** One MCP tool call as `user` (agents are registered through MCP). */
  const mcpTool = async (user: TestAvatar, name: string, args: Record<string, unknown>) => {
    const client = new Client({ name: "aigw-orchestration-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${user.token}` } } }))
    try {
      return (await client.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent?: any }
    } finally {
      await client.close()
    }
  }
  const upstreamCalls = () => openai.requests.length + groq.requests.length
  const respond = (f: (system: string, r: RecordedRequest) => Scenario) => answerBySystem([openai, groq], f)

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-o" })
    groq = await startOpenAiMock({ apiKey: "sk-g" })
    server = await startServer({ ...adminEnv, OPENAI_API_KEY: "sk-o", OPENAI_BASE_URL: openai.url, GROQ_API_KEY: "sk-g", GROQ_BASE_URL: groq.url })
    silver = await signUp(server, "orch")
    free = await signUp(server, "orchfree")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${silver.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
    expect(plan.body.result.plan).toBe("Silver")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
    await groq?.close()
  })
  beforeEach(() => resetMocks([openai, groq]))

  describe("crew", () => {
    const tasks = [
      { id: "t1", agent: "Senior software engineer", description: "Write a Python function that parses ISO dates and fix the failing unit test", expected_output: "code" },
      { id: "t2", agent: "Editor", description: "Summarize the following article into three key points", expected_output: "three bullets" }
    ]

    it("runs each role on the model that fits it, passing earlier outputs on", async () => {
      respond(() => text("crew step output"))
      // CrewAI's own settings ride along (an agent's backstory, verbose): they configure the framework, not the call.
      const res = await post("/v1/orchestrate/crew", { tasks: tasks.map((t) => ({ ...t, async_execution: false, context: [] })), verbose: true, agents: [{ role: "x", backstory: "y" }] })
      expect(res.body.result).toMatchObject({ raw: "crew step output", process: "sequential" })
      const [code, summary] = res.body.result.tasks_output
      expect(code).toMatchObject({ id: "t1", taskType: "code", provider: "openai", model: "gpt-5.4", assignment: { taskType: "code", reason: expect.stringMatching(/highest-quality tools-capable model on plan Silver/) } })
      expect(summary).toMatchObject({ id: "t2", taskType: "summarization", provider: "groq", model: "openai/gpt-oss-120b", assignment: { reason: expect.stringMatching(/cheapest model of quality >= 3 on plan Silver/) } })
      expect(openai.requests.map(modelOf)).toEqual(["gpt-5.4"])
      expect(groq.requests.map(modelOf)).toEqual(["openai/gpt-oss-120b"])
      expect(messagesOf(groq.requests[0]!).at(-1)!.content).toContain("[t1 by Senior software engineer]")
      expect(res.body.result.token_usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 })
      // A Free avatar's code role gets the best its plan allows; a forced provider keeps every role on it.
      expect((await post("/v1/orchestrate/crew", { tasks }, free)).body.result.tasks_output[0].model).toBe("openai/gpt-oss-120b")
      const forced = await post("/v1/orchestrate/crew", { tasks, provider: "openai" })
      expect(forced.body.result.tasks_output.map((t: { provider: string }) => t.provider)).toEqual(["openai", "openai"])
    })

    it("uses a registered agent's pinned model for its role, and a manager for hierarchical crews", async () => {
      respond((system) => text(system.startsWith("You are the crew manager") ? "final deliverable" : "part"))
      const agent = await mcpTool(silver, "gateway_fahrn_register_agent", { name: "Editor", description: "Edits copy", skills: ["summarization"], provider: "openai", model: "gpt-4.1-mini" })
      expect(agent.isError).not.toBe(true)
      const res = await post("/v1/orchestrate/crew", { process: "hierarchical", tasks })
      expect(res.body.result.tasks_output[1]).toMatchObject({ provider: "openai", model: "gpt-4.1-mini", assignment: { reason: "registered agent \"Editor\" pins openai/gpt-4.1-mini" } })
      expect(res.body.result.manager).toMatchObject({ raw: "final deliverable", assignment: { taskType: "analysis" } })
      expect(res.body.result.raw).toBe("final deliverable")
    })

    it("refuses a pin no call could run: an unknown provider at registration, one the plan does not allow before admission", async () => {
      const unknown = await mcpTool(free, "gateway_fahrn_register_agent", { name: "Ghost", description: "d", skills: ["summarization"], provider: "nosuch", model: "m" })
      expect(unknown.isError).toBe(true)
      expect(JSON.stringify(unknown)).toContain("Unknown provider nosuch")
      // A Free avatar may pin a plan-gated provider (its plan may change), but a crew naming the agent is refused uncounted.
      const gated = await mcpTool(free, "gateway_fahrn_register_agent", { name: "Writer", description: "d", skills: ["summarization"], provider: "openai", model: "gpt-5.4" })
      expect(gated.isError).not.toBe(true)
      const before = (await call(server.url, "GET", "/v1/usage", { apiKey: free.apiKey })).body.result.dailyCallsUsed
      const calls = upstreamCalls()
      const res = await post("/v1/orchestrate/crew", { tasks: [{ id: "a", agent: "Writer", description: "Summarise this.", expected_output: "a summary" }] }, free)
      expect(res.status).toBe(403)
      expect((await call(server.url, "GET", "/v1/usage", { apiKey: free.apiKey })).body.result.dailyCallsUsed).toBe(before)
      expect(upstreamCalls()).toBe(calls)
    })

    it("refuses malformed crews before any call", async () => {
      expect((await post("/v1/orchestrate/crew", { tasks: [] })).status).toBe(400)
      expect((await post("/v1/orchestrate/crew", { tasks: [{ id: "a", agent: "x", description: "y" }] })).status).toBe(400)
      expect((await post("/v1/orchestrate/crew", { tasks: [{ id: "a", agent: "x", description: "y", expected_output: "z" }], process: "chaotic" })).status).toBe(400)
      expect(upstreamCalls()).toBe(0)
    })
  })

  describe("conversation", () => {
    const critic = (system: string) => system.startsWith("You stand in for the user")

    it("stops when the critic is satisfied: transcript, summed usage, one admitted request", async () => {
      let answers = 0
      respond((system) => {
        if (critic(system)) return answers < 2 ? text("Add an example.", 30, 5) : text("Good. TERMINATE", 40, 2)
        answers++
        return text(answers === 1 ? "Arr, a closure captures variables." : "Arr, a closure captures variables; e.g. a counter.", 25, 12)
      })
      const before = (await call(server.url, "GET", "/v1/usage", { apiKey: free.apiKey })).body.result
      const res = await post("/v1/orchestrate/conversation", { initial_message: "What is a closure?", system_message: "You are a pirate." }, free)
      expect(res.status).toBe(200)
      expect(res.body.result).toMatchObject({
        role: "assistant",
        name: "assistant",
        content: "Arr, a closure captures variables; e.g. a counter.",
        rounds: 4,
        max_rounds: 10,
        stop_reason: "termination_keyword",
        usage: { promptTokens: 25 + 30 + 25 + 40, completionTokens: 12 + 5 + 12 + 2, totalTokens: 151 }
      })
      expect(res.body.result.messages.map((m: { name: string; content: string }) => `${m.name}: ${m.content}`)).toEqual([
        "assistant: Arr, a closure captures variables.",
        "user_proxy: Add an example.",
        "assistant: Arr, a closure captures variables; e.g. a counter.",
        "user_proxy: Good."
      ])
      expect(upstreamCalls()).toBe(4)
      expect(openai.requests.concat(groq.requests).filter((r) => systemOf(r) === "You are a pirate.")).toHaveLength(2)
      const after = (await call(server.url, "GET", "/v1/usage", { apiKey: free.apiKey })).body.result
      expect(after.dailyCallsUsed - before.dailyCallsUsed).toBe(1)
      expect(after.dailyTokensUsed - before.dailyTokensUsed).toBe(151)
    })

    it("runs its agents round-robin up to max_rounds", async () => {
      respond((system, r) => text(`${system} says ${messagesOf(r).length - 1}`))
      const agents = [{ name: "planner", system_message: "P" }, { name: "coder", system_message: "C", provider: "groq" }, { name: "tester", system_message: "T" }]
      const res = await post("/v1/orchestrate/conversation", { initial_message: "Build a CLI", agents, provider: "openai", max_rounds: 4, termination_keyword: "SHIP IT" })
      expect(res.body.result).toMatchObject({ name: "planner", content: "P says 4", rounds: 4, stop_reason: "max_rounds", max_rounds: 4 })
      expect(res.body.result.messages.map((m: { name: string; provider: string }) => `${m.name}@${m.provider}`)).toEqual(["planner@openai", "coder@groq", "tester@openai", "planner@openai"])
      expect(res.body.result.usage.totalTokens).toBe(60)
    })

    it("refuses bad conversations before any call", async () => {
      const two = [{ name: "a", system_message: "A" }, { name: "b", system_message: "B" }]
      const refused = async (body: unknown, status: number, message: RegExp) => {
        const res = await post("/v1/orchestrate/conversation", body)
        expect(res.status).toBe(status)
        expect(res.body.message).toMatch(message)
      }
      await refused({ initial_message: "Hi", max_rounds: 0 }, 400, /max_rounds/)
      await refused({}, 400, /initial_message/)
      await refused({ initial_message: "Hi", agents: [two[0]] }, 400, /2 to 8 agents/)
      await refused({ initial_message: "Hi", agents: [two[0], two[0]] }, 400, /used twice/)
      await refused({ initial_message: "Hi", agents: two, system_message: "x" }, 400, /each agent its system_message/)
      await refused({ initial_message: "Hi", agents: [two[0], { ...two[1], provider: "nope" }] }, 404, /Unknown provider nope/)
      expect(upstreamCalls()).toBe(0)
    })
  })

  describe("graph-node", () => {
    it("runs a node and extends the state, statelessly without a thread", async () => {
      respond(() => text("node reply"))
      const res = await post("/v1/orchestrate/graph-node", {
        node_name: "researcher",
        state: { topic: "tides", step: 1 },
        messages: [{ role: "user", content: "Explain tides" }],
        next_node: "writer"
      })
      expect(res.status).toBe(200)
      expect(res.body.result.nextNode).toBe("writer")
      expect(res.body.result.state).toMatchObject({ topic: "tides", step: 1, __node__: "researcher" })
      expect(res.body.result.checkpoint).toBeUndefined()
      expect(new Date(res.body.result.state.__timestamp__).toISOString()).toBe(res.body.result.state.__timestamp__)
      expect(res.body.result.state.messages.at(-1)).toMatchObject({ role: "assistant", content: "node reply" })
      const end = await post("/v1/orchestrate/graph-node", { node_name: "final" })
      expect(end.body.result.nextNode).toBe("__end__")
      // A framework's own settings ride along as the framework sends them (LangGraph's RunnableConfig, a message id).
      const configured = await post("/v1/orchestrate/graph-node", {
        node_name: "final",
        messages: [{ role: "user", content: "hi", id: "m1" }],
        config: { recursion_limit: 25, tags: ["t"], configurable: { thread_id: undefined, checkpoint_ns: "" } },
        interrupt_before: []
      })
      expect(configured.status, JSON.stringify(configured.body)).toBe(200)
      expect((await post("/v1/orchestrate/graph-node", { state: {} })).status).toBe(400)
    })

    it("keeps a thread's state across calls, never across avatars", async () => {
      let n = 0
      respond(() => text(`draft ${++n}`))
      const first = await post("/v1/orchestrate/graph-node", { node_name: "writer", thread_id: "essay", state: { topic: "tides" }, messages: [{ role: "user", content: "Write about tides" }], next_node: "critic" })
      expect(first.body.result).toMatchObject({ nextNode: "critic", checkpoint: { thread_id: "essay", step: 1 } })
      const second = await post("/v1/orchestrate/graph-node", { node_name: "critic", config: { configurable: { thread_id: "essay" } }, state: { verdict: "pending" } })
      expect(second.body.result.checkpoint).toEqual({ thread_id: "essay", step: 2 })
      expect(second.body.result.state).toMatchObject({ topic: "tides", verdict: "pending", __node__: "critic" })
      expect(second.body.result.state.messages).toEqual([
        { role: "user", content: "Write about tides" },
        { role: "assistant", content: "draft 1", name: "writer" },
        { role: "assistant", content: "draft 2", name: "critic" }
      ])
      // The critic's model saw the stored state.
      expect(messagesOf(openai.requests.concat(groq.requests).at(-1)!).at(-1)!.content).toContain("\"topic\":\"tides\"")
      const other = await post("/v1/orchestrate/graph-node", { node_name: "critic", state: { thread_id: "essay" } }, free)
      expect(other.body.result.checkpoint).toEqual({ thread_id: "essay", step: 1 })
      expect(other.body.result.state.topic).toBeUndefined()
      const clash = await post("/v1/orchestrate/graph-node", { node_name: "x", thread_id: "a", state: { thread_id: "b" } })
      expect(clash.status).toBe(400)
      expect(clash.body.message).toMatch(/different threads/)
      expect(upstreamCalls()).toBe(3)
    })
  })
})
