/**
 * One conformance suite for the MCP server, run with the official @modelcontextprotocol/sdk
 * client over each transport (streamable HTTP against the node host, stdio against hosts/mcp):
 * tool list and input schemas, every tool with valid and invalid arguments, domain and upstream
 * errors, anonymous calls and a quota refusal.
 *
 * The target runs with OPENAI_API_KEY / OPENAI_BASE_URL pointing at `upstream` and
 * AIGW_PLAN_LIMITS={"Free":2}; `client` acts for a Gold avatar, `freeClient` for a Free avatar
 * that has made no call today.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { describe, expect, it } from "vitest"
import { data } from "../../../src/Catalog/Catalog.ts"
import type { MockUpstream } from "../../support/mockUpstreams.ts"

export interface McpSuiteTarget {
  readonly client: () => Client
  readonly username: () => string
  readonly anonymous: () => Client
  readonly freeClient: () => Client
  readonly upstream: () => MockUpstream
}

export const TOOL_NAMES = [
  "gateway_braid_find_graph",
  "gateway_braid_record_outcome",
  "gateway_braid_save_graph",
  "gateway_complete",
  "gateway_embed",
  "gateway_estimate_cost",
  "gateway_fahrn_dispatch",
  "gateway_fahrn_evolve_agent_skill",
  "gateway_fahrn_get_agent_skill",
  "gateway_fahrn_get_agents",
  "gateway_fahrn_record_outcome",
  "gateway_fahrn_register_agent",
  "gateway_fahrn_seed_openserv_agents",
  "gateway_fahrn_solve",
  "gateway_generate_image",
  "gateway_get_avatar_context",
  "gateway_get_model",
  "gateway_get_usage",
  "gateway_health",
  "gateway_list_models",
  "gateway_list_openserv_models",
  "gateway_list_providers",
  "gateway_memory_external_add",
  "gateway_memory_external_list_providers",
  "gateway_memory_external_search",
  "gateway_memory_get_earth_holon",
  "gateway_memory_get_or_create_holon",
  "gateway_memory_propagate",
  "gateway_memory_propagate_up",
  "gateway_memory_record",
  "gateway_memory_search",
  "gateway_memory_set_membrane_rule",
  "gateway_ml_classify_task",
  "gateway_ml_sentiment",
  "gateway_orchestrate_conversation",
  "gateway_orchestrate_crew",
  "gateway_orchestrate_graph_node",
  "gateway_orchestrator_invoke",
  "gateway_orchestrator_list",
  "gateway_orchestrator_register",
  "gateway_rerank"
]

export const PARAMETERLESS = [
  "gateway_list_providers",
  "gateway_get_avatar_context",
  "gateway_list_openserv_models",
  "gateway_health",
  "gateway_fahrn_seed_openserv_agents",
  "gateway_memory_get_earth_holon",
  "gateway_memory_external_list_providers",
  "gateway_orchestrator_list"
]

type CallResult = {
  readonly isError?: boolean
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly structuredContent?: Record<string, unknown>
}

export const callTool = async (client: Client, name: string, args: Record<string, unknown>): Promise<CallResult> =>
  (await client.callTool({ name, arguments: args })) as CallResult

const textOf = (r: CallResult) => r.content[0]?.text ?? ""

const hello = { messages: [{ role: "user", content: "Hello" }], provider: "openai", model: "gpt-4o-mini", maxTokens: 32 }

/** Valid arguments for every tool and a check of its answer. */
const validCalls = (username: () => string): ReadonlyArray<readonly [string, Record<string, unknown>, (r: any) => void]> => [
  // Capability tools that also call the upstream come first: the test checks gateway_complete's request last.
  ["gateway_embed", { texts: ["alpha", "beta"], provider: "openai", model: "text-embedding-3-small" }, (r) => {
    expect(r).toMatchObject({ provider: "openai", model: "text-embedding-3-small", dimensions: 8 })
    expect(r.embeddings).toHaveLength(2)
  }],
  ["gateway_rerank", { query: "red kite", documents: ["a blue car", "a red kite in the wind"], topN: 1 }, (r) => {
    // No rerank model is configured here: auto reranks with BM25 in-process.
    expect(r).toMatchObject({ provider: "local", model: "bm25", results: [{ index: 1, document: "a red kite in the wind" }] })
  }],
  ["gateway_generate_image", { prompt: "a red kite", width: 1024, height: 1024 }, (r) => {
    expect(r).toMatchObject({ provider: "openai", model: "gpt-image-1", n: 1, size: "1024x1024" })
  }],
  ["gateway_fahrn_solve", { problem: "Write a haiku about the sea", taskType: "creative" }, (r) => {
    expect(r).toMatchObject({ taskType: "creative", mode: "Hybrid", finalAnswer: "Hello from MCP" })
    expect(r.mermaid).toMatch(/^flowchart TD/)
  }],
  ["gateway_fahrn_dispatch", { problem: "Add 2 and 2", mode: "Parallel" }, (r) => {
    expect(r).toMatchObject({ mode: "Parallel", finalAnswer: "Hello from MCP" })
    expect(r.subNetwork).toHaveLength(3)
  }],
  ["gateway_orchestrate_crew", { tasks: [{ id: "t1", agent: "Writer", description: "Greet", expected_output: "a greeting" }] }, (r) => {
    expect(r).toMatchObject({ raw: "Hello from MCP", process: "sequential" })
  }],
  ["gateway_orchestrate_conversation", { initial_message: "Hi" }, (r) => {
    expect(r).toMatchObject({ role: "assistant", content: "Hello from MCP" })
  }],
  ["gateway_orchestrate_graph_node", { node_name: "n1", state: { k: 1 }, next_node: "n2" }, (r) => {
    expect(r).toMatchObject({ nextNode: "n2", state: { k: 1, __node__: "n1" } })
  }],
  ["gateway_complete", hello, (r) => {
    expect(r).toMatchObject({ provider: "openai", model: "gpt-4o-mini", content: "Hello from MCP", finishReason: "stop" })
    expect(r.usage).toMatchObject({ promptTokens: 9, completionTokens: 3, estimated: false })
    expect(r.costUSD).toBeGreaterThan(0)
  }],
  ["gateway_list_models", { plan: "Free", capability: "tools" }, (r) => {
    expect(r.total).toBe(r.models.length)
    expect(r.total).toBeGreaterThan(0)
    for (const m of r.models) expect(m).toMatchObject({ supportsFunctions: true, minPlanLabel: "Free" })
  }],
  ["gateway_get_model", { modelId: "gpt-4o-mini" }, (r) => expect(r).toMatchObject({ id: "gpt-4o-mini", provider: "openai", kind: "chat" })],
  ["gateway_list_providers", {}, (r) => {
    expect(r.total).toBe(data.providers.length)
    expect(r.providers.find((p: any) => p.id === "openai")).toMatchObject({ configured: true, minPlan: "Free" })
  }],
  ["gateway_estimate_cost", { provider: "openai", model: "gpt-4o-mini", promptTokens: 1000, completionTokens: 1000 }, (r) => {
    expect(r.estimatedUSD).toBeCloseTo(0.00015 + 0.0006, 12)
    expect(r.note).toMatch(/gpt-4o-mini/)
  }],
  ["gateway_get_usage", { plan: "Bronze", karma: 0 }, (r) => {
    expect(r).toMatchObject({ whatIf: true, plan: "Bronze", enforced: { plan: "Gold" } })
    expect(r.dailyCallsUsed).toBeGreaterThanOrEqual(1)
    expect(r.periodDay).toMatch(/^\d{4}-\d\d-\d\d$/)
  }],
  ["gateway_get_avatar_context", {}, (r) => {
    expect(r).toMatchObject({ username: username(), plan: "Gold", karma: 0, karmaMultiplier: 1, avatarType: "User" })
    expect(r.contextBlock).toContain(`username ${username()}`)
  }],
  ["gateway_list_openserv_models", {}, (r) => {
    expect(r.total).toBe(r.models.length)
    for (const m of r.models) expect(m.id).toMatch(/^aigw\//)
  }],
  ["gateway_health", {}, (r) => {
    expect(r.status).toBe("ok")
    expect(new Date(r.timestamp).toISOString()).toBe(r.timestamp)
  }],
  ["gateway_ml_classify_task", { text: "Write a Rust function that sorts a vector of strings" }, (r) => {
    expect(r).toMatchObject({ taskType: "code", recognised: true })
    expect(r.confidence).toBeGreaterThan(0.3)
  }],
  ["gateway_ml_sentiment", { text: "I love this gateway, it is wonderful! The docs are not bad either." }, (r) => {
    expect(r).toMatchObject({ label: "positive", sentences: [{ label: "positive" }, { label: "positive" }], sentenceCount: 2 })
    expect(r.score).toBeGreaterThan(0)
  }]
]

/** Invalid arguments for every tool and the decode message the tool error must carry. */
export const invalidCalls: ReadonlyArray<readonly [string, Record<string, unknown>, RegExp]> = [
  ["gateway_complete", { messages: [] }, /messages: messages must hold at least one message/],
  // The first problem only (docs/errors.md).
  ["gateway_complete", { ...hello, temperature: 5, maxTokens: 0 }, /: temperature: temperature must be between 0 and 2$/],
  ["gateway_complete", { ...hello, maxTokens: 0 }, /maxTokens: maxTokens must be an integer from 1 to 1000000/],
  ["gateway_complete", { messages: [{ role: "robot", content: "x" }] }, /messages\.0\.role: role must be one of system, user, assistant/],
  ["gateway_embed", { texts: [] }, /texts: texts must hold at least one string/],
  ["gateway_rerank", { query: "x", documents: [] }, /documents: documents must hold at least one document/],
  ["gateway_generate_image", { prompt: "" }, /prompt: prompt must not be empty/],
  ["gateway_memory_external_search", { query: "", limit: 99 }, /query: query must not be empty$/],
  ["gateway_memory_external_search", { query: "x", limit: 99 }, /limit: limit must be an integer from 1 to 50/],
  ["gateway_memory_external_add", { text: "x", metadata: { tags: ["a"] } }, /metadata\.tags/],
  ["gateway_fahrn_dispatch", { problem: "x", mode: "Star" }, /mode: mode must be Serial, Parallel, Hybrid or Decomposed/],
  ["gateway_orchestrate_crew", { tasks: [] }, /tasks: tasks must hold at least one task/],
  ["gateway_list_models", { plan: "Platinum" }, /plan: plan must be one of Free, Bronze, Silver, Gold, Enterprise/],
  ["gateway_get_model", {}, /modelId: is missing/],
  ["gateway_list_providers", { all: true }, /this tool takes no arguments \(got all\)/],
  ["gateway_estimate_cost", { provider: "openai", model: "gpt-4o-mini", promptTokens: -1 }, /promptTokens: token counts must be integers from 0 to 100000000/],
  ["gateway_get_usage", { karma: 1.5 }, /karma: karma must be an integer/],
  ["gateway_get_avatar_context", { avatarId: "x" }, /this tool takes no arguments/],
  ["gateway_list_openserv_models", { page: 2 }, /this tool takes no arguments/],
  ["gateway_health", { verbose: true }, /this tool takes no arguments/],
  ["gateway_ml_classify_task", { text: "" }, /text: text must not be empty/],
  ["gateway_ml_sentiment", { text: 42 }, /text: Expected string, actual 42/],
  ["gateway_ml_sentiment", { text: "x".repeat(20_001) }, /text: text is limited to 20000 characters/]
]

export const mcpToolSuite = (target: McpSuiteTarget) => {
  describe("tools", () => {
    it("lists the gateway's tools with precise input schemas", async () => {
      const { tools } = await target.client().listTools()
      expect(tools.map((t) => t.name).sort()).toEqual(TOOL_NAMES)
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
      for (const t of tools) {
        expect(t.description!.length, t.name).toBeGreaterThan(40)
        expect(t.inputSchema).toMatchObject({ type: "object", additionalProperties: false })
        expect(t.annotations?.title, t.name).toBeTruthy()
      }
      for (const name of PARAMETERLESS) expect(byName[name]!.inputSchema.properties).toEqual({})
      const complete = byName.gateway_complete!.inputSchema as any
      expect(complete.required).toEqual(["messages"])
      expect(complete.properties.messages).toMatchObject({ type: "array", minItems: 1 })
      expect(complete.properties.messages.items).toMatchObject({
        type: "object",
        required: ["role", "content"],
        properties: { role: { enum: ["system", "user", "assistant"] } }
      })
      expect(complete.properties.temperature).toMatchObject({ type: "number", minimum: 0, maximum: 2 })
      expect(complete.properties.maxTokens).toMatchObject({ type: "integer", minimum: 1 })
      expect(complete.properties.provider).toMatchObject({ type: "string", default: "auto" })
      expect(complete.properties.routing.properties.preference.enum).toEqual(["cost", "balanced", "quality"])
      const estimate = byName.gateway_estimate_cost!.inputSchema as any
      expect(estimate.required).toEqual(["provider", "model", "promptTokens"])
      expect(estimate.properties.promptTokens).toMatchObject({ type: "integer", minimum: 0 })
      const models = byName.gateway_list_models!.inputSchema as any
      expect(models.required ?? []).toEqual([])
      expect(models.properties.plan.enum).toEqual(["Free", "Bronze", "Silver", "Gold", "Enterprise"])
      expect(models.properties.capability.enum).toEqual(["chat", "embeddings", "rerank", "tools", "vision"])
      for (const name of ["gateway_ml_classify_task", "gateway_ml_sentiment"]) {
        expect(byName[name]!.inputSchema).toMatchObject({ required: ["text"], properties: { text: { type: "string", minLength: 1 } } })
      }
      expect((byName.gateway_get_model!.inputSchema as any).required).toEqual(["modelId"])
      expect(byName.gateway_list_models!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false })
      expect(byName.gateway_complete!.annotations).toMatchObject({ readOnlyHint: false, openWorldHint: true })
    })

    it("answers every tool with valid arguments (structured content and the same JSON as text)", async () => {
      target.upstream().setScenario({ kind: "text", text: "Hello from MCP", usage: { prompt: 9, completion: 3 } })
      for (const [name, args, check] of validCalls(target.username)) {
        const r = await callTool(target.client(), name, args)
        expect(r.isError, `${name}: ${textOf(r)}`).toBe(false)
        expect(JSON.parse(textOf(r)), name).toEqual(r.structuredContent)
        check(r.structuredContent)
      }
      const sent = target.upstream().requests.at(-1)!.body as any
      expect(sent).toMatchObject({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hello" }] })
    })

    it("answers invalid arguments with a tool error carrying the decode message, and stays up", async () => {
      for (const [name, args, message] of invalidCalls) {
        const r = await callTool(target.client(), name, args)
        expect(r.isError, name).toBe(true)
        expect(textOf(r), name).toMatch(new RegExp(`^Invalid arguments for ${name}: `))
        expect(textOf(r), name).toMatch(message)
        expect(r.structuredContent).toMatchObject({ error: { kind: "BadRequest" } })
      }
      expect((await callTool(target.client(), "gateway_health", {})).isError).toBe(false)
    })

    it("answers domain and upstream failures as tool errors", async () => {
      const unknown = await callTool(target.client(), "gateway_get_model", { modelId: "no-such-model" })
      expect(unknown).toMatchObject({ isError: true, structuredContent: { error: { kind: "NotFound" } } })
      expect(textOf(unknown)).toMatch(/Unknown model no-such-model/)
      const estimate = await callTool(target.client(), "gateway_estimate_cost", { provider: "openai", model: "claude-x", promptTokens: 1 })
      expect(textOf(estimate)).toMatch(/No price is known for model claude-x of provider openai/)
      target.upstream().queue({ kind: "error", status: 400, message: "bad parameter from upstream" })
      const failed = await callTool(target.client(), "gateway_complete", hello)
      expect(failed).toMatchObject({ isError: true, structuredContent: { error: { kind: "UpstreamFailed", provider: "openai" } } })
      expect(textOf(failed)).toMatch(/bad parameter from upstream/)
    })

    it("refuses an unknown tool with a protocol error", async () => {
      await expect(target.client().callTool({ name: "gateway_no_such_tool", arguments: {} })).rejects.toThrow(/not found/)
    })
  })

  describe("without credentials", () => {
    it("lists the tools, runs gateway_health, and answers 'authentication required' for the rest", async () => {
      const client = target.anonymous()
      expect((await client.listTools()).tools.length).toBe(TOOL_NAMES.length)
      const health = await callTool(client, "gateway_health", {})
      expect(health.isError).toBe(false)
      expect(health.structuredContent).toMatchObject({ status: "ok" })
      const before = target.upstream().requests.length
      for (const [name, args] of validCalls(() => "")) {
        if (name === "gateway_health") continue
        const r = await callTool(client, name, args)
        expect(r.isError, name).toBe(true)
        expect(textOf(r), name).toMatch(/authentication required/i)
        expect(r.structuredContent).toMatchObject({ error: { kind: "Unauthorized" } })
      }
      expect(target.upstream().requests.length).toBe(before)
    })
  })

  describe("quota", () => {
    it("refuses a metered tool beyond the daily limit with a tool error saying when the quota resets", async () => {
      const client = target.freeClient()
      expect((await callTool(client, "gateway_ml_sentiment", { text: "fine" })).isError).toBe(false)
      expect((await callTool(client, "gateway_ml_classify_task", { text: "translate hello to French" })).isError).toBe(false)
      const before = target.upstream().requests.length
      const refused = await callTool(client, "gateway_complete", hello)
      expect(refused.isError).toBe(true)
      expect(textOf(refused)).toMatch(/Daily quota of 2 calls for plan Free is used up; it resets at the next UTC midnight \(\d{4}-\d\d-\d\dT00:00:00\.000Z\)/)
      const error = (refused.structuredContent as any).error
      expect(error.kind).toBe("QuotaExceeded")
      expect(error.retryAfterSeconds).toBeGreaterThan(0)
      expect(error.retryAfterSeconds).toBeLessThanOrEqual(86_400)
      expect(Date.parse(error.resetsAt)).toBeGreaterThan(Date.now())
      expect(target.upstream().requests.length).toBe(before)
      // Catalogue, usage and health are not metered, as on HTTP.
      const usage = await callTool(client, "gateway_get_usage", {})
      expect(usage.structuredContent).toMatchObject({ dailyCallsUsed: 2, dailyCallLimit: 2, remainingCallsToday: 0 })
      expect((await callTool(client, "gateway_list_models", {})).isError).toBe(false)
    })
  })
}

/**
 * A conversation (a tool making many model calls) whose key `revoke` revokes while it runs: it ends with the
 * tool error of a revoked request before its next model call (Accounts/StillActing.ts), whatever the transport.
 * The conversation's agents answer slowly (their persona names them) so that the revocation comes first.
 */
export const expectConversationStoppedByRevocation = async (client: Client, upstream: MockUpstream, revoke: () => Promise<void>) => {
  const ours = (r: { body: unknown }) => JSON.stringify((r.body as any)?.messages ?? []).includes("revoked persona")
  upstream.setResponder((r) => (ours(r) ? { kind: "text", text: "go on", frameDelayMs: 400 } : undefined))
  try {
    const agents = ["Planner", "Coder"].map((name) => ({ name, system_message: `${name} revoked persona` }))
    const pending = callTool(client, "gateway_orchestrate_conversation", {
      initial_message: "Build it", provider: "openai", model: "gpt-4o-mini", max_rounds: 20, termination_keyword: "DONE", agents
    })
    for (const deadline = Date.now() + 10_000; upstream.requests.filter(ours).length === 0 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20))
    await revoke()
    expect(await pending).toMatchObject({
      isError: true,
      structuredContent: { error: { kind: "Unauthorized", message: expect.stringMatching(/^The avatar was deleted, its password reset or the API key that made this request revoked/) } }
    })
    expect(upstream.requests.filter(ours).length).toBeLessThanOrEqual(2)
  } finally {
    upstream.setResponder(() => undefined)
  }
}

