/**
 * The MCP tools with state: agent registry and skill evolution, the braid of reasoning graphs
 * (and useHolonicBraid), holonic memory with membrane rules, and the orchestrator registry
 * invoking OpenAI-chat and A2A endpoints. In process, against wire-format mocks.
 */
import * as McpServer from "@effect/ai/McpServer"
import { Effect, Layer, ManagedRuntime, Option, Redacted } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Completions } from "../../src/Capabilities/Completions.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import * as Mcp from "../../src/Mcp/index.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import { DocumentStore } from "../../src/Storage/DocumentStore.ts"
import { type MockUpstream, startOpenAiMock } from "../support/mockUpstreams.ts"

const avatar = (id: string, username: string, avatarType: "User" | "Admin" = "User"): AvatarRecord => ({
  id, username, email: `${username}@example.com`, passwordHash: "x", title: "", description: "", image: "", dob: null, karmaTotal: 0,
  avatarType, providerType: "Default", plan: "Free", emailVerified: true, pendingEmail: null, isActive: true, createdAt: 0, updatedAt: 0, deletedAt: null, tokensValidAfter: 0
})
const alice = avatar("00000000-0000-4000-8000-0000000000a1", "alice")
const bob = avatar("00000000-0000-4000-8000-0000000000b2", "bob")
const root = avatar("00000000-0000-4000-8000-0000000000c3", "root", "Admin")

describe("stateful MCP tools", () => {
  let openai: MockUpstream
  let a2a: http.Server
  let a2aUrl = ""
  let a2aRequests: Array<any> = []
  let runtime: ManagedRuntime.ManagedRuntime<any, any>

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-st" })
    a2a = http.createServer((req, res) => {
      let body = ""
      req.on("data", (c) => (body += c)).on("end", () => {
        const rpc = JSON.parse(body)
        a2aRequests.push(rpc)
        const text = rpc.params.message.parts[0].text
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
          jsonrpc: "2.0",
          id: rpc.id,
          result: { kind: "message", role: "agent", messageId: "m-1", parts: [{ kind: "text", text: `A2A agent says: ${text.toUpperCase()}` }] }
        }))
      })
    })
    await new Promise<void>((r) => a2a.listen(0, "127.0.0.1", r))
    a2aUrl = `http://127.0.0.1:${(a2a.address() as AddressInfo).port}/a2a`
    runtime = ManagedRuntime.make(
      Mcp.layerTools.pipe(
        Layer.provideMerge(McpServer.McpServer.layer),
        Layer.provideMerge(Layers.layerMemory),
        Layer.provideMerge(Mailer.layerMemory),
        Layer.provideMerge(GatewayConfig.layer({
          allowPrivateUrls: true,
          providerEnv: (id) => id === "openai" ? { apiKey: Option.some(Redacted.make("sk-st")), baseUrl: Option.some(openai.url) } : { apiKey: Option.none(), baseUrl: Option.none() }
        }))
      )
    )
    // The callers are stored avatars: what an Admin published counts while it is one (Braid.ts).
    await runtime.runPromise(Effect.flatMap(AvatarStore, (s) => Effect.forEach([alice, bob, root], s.insert)))
  })
  afterAll(async () => {
    await runtime?.dispose()
    await openai?.close()
    await new Promise<void>((r) => a2a.close(() => r()))
  })

  const call = async (name: string, args: Record<string, unknown>, caller: AvatarRecord = alice) => {
    const r: any = await runtime.runPromise(
      Effect.flatMap(McpServer.McpServer, (s) => s.callTool({ name, arguments: args })).pipe(
        Effect.provideService(Mcp.McpCaller, { resolve: Effect.succeed(Option.some(caller)) })
      )
    )
    return { isError: r.isError === true, data: r.structuredContent as any, text: r.content[0].text as string }
  }

  it("lists every tool of the spec", async () => {
    const tools = await runtime.runPromise(Effect.map(McpServer.McpServer, (s) => s.tools.map((t) => t.name)))
    expect(tools).toHaveLength(41)
    expect(tools).toEqual(expect.arrayContaining(["gateway_memory_external_search", "gateway_memory_external_add", "gateway_memory_external_list_providers"]))
  })

  it("registers agents, scores them live, seeds catalogue agents", async () => {
    const coder = await call("gateway_fahrn_register_agent", { name: "Coder", description: "Writes TypeScript", skills: ["code"] })
    expect(coder.isError).toBe(false)
    await call("gateway_fahrn_register_agent", { name: "Poet", description: "Writes verse", skills: ["creative"] })
    const ranked = await call("gateway_fahrn_get_agents", { taskType: "code", task: "Write a TypeScript function" })
    const [coderRank, poetRank] = ["Coder", "Poet"].map((n) => ranked.data.agents.findIndex((a: any) => a.name === n))
    expect(coderRank).toBeLessThan(poetRank)
    expect(ranked.data.agents[coderRank].score.fit).toBeGreaterThan(ranked.data.agents[poetRank].score.fit)
    expect(ranked.data.agents[coderRank].why).toMatch(/^Composite /)
    const seeded = await call("gateway_fahrn_seed_openserv_agents", {})
    expect(seeded.data.created).toBeGreaterThan(20)
    expect((await call("gateway_fahrn_seed_openserv_agents", {})).data.created).toBe(0)
    // Bob has none of Alice's agents, only his own built-in roles.
    const bobs = (await call("gateway_fahrn_get_agents", {}, bob)).data
    expect(bobs.total).toBe(8)
    expect(bobs.agents.every((a: any) => a.source === "builtin")).toBe(true)
    expect((await call("gateway_fahrn_register_agent", { name: "x", description: "y", skills: ["cooking"] })).isError).toBe(true)
  })

  it("evolves an agent's skill document with a model and records the outcome", async () => {
    const agents = (await call("gateway_fahrn_get_agents", { taskType: "code" })).data.agents
    const coder = agents.find((a: any) => a.name === "Coder")
    const initial = await call("gateway_fahrn_get_agent_skill", { agentId: coder.id, taskCategory: "code" })
    expect(initial.data).toMatchObject({ version: 0, taskCategory: "code" })
    expect(initial.data.document).toContain("# Coder: code skill")
    openai.setScenario({ kind: "text", text: "# Coder: code skill\n\n## Lessons learned\n- Run the tests before answering." })
    const evolved = await call("gateway_fahrn_evolve_agent_skill", { agentId: coder.id, taskCategory: "code", feedback: "Forgot to run tests", success: false })
    expect(evolved.isError, evolved.text).toBe(false)
    expect(evolved.data).toMatchObject({ version: 1 })
    expect(evolved.data.document).toContain("Run the tests")
    expect((await call("gateway_fahrn_get_agent_skill", { agentId: coder.id, taskCategory: "code" })).data.version).toBe(1)
    const after = (await call("gateway_fahrn_get_agents", { taskType: "code" })).data.agents.find((a: any) => a.id === coder.id)
    expect(after).toMatchObject({ runs: 1, successes: 0 })
    expect((await call("gateway_fahrn_get_agent_skill", { agentId: coder.id, taskCategory: "code" }, bob)).isError).toBe(true)
  })

  it("saves, finds and scores reasoning graphs (own and Admin-published); useHolonicBraid injects the best", async () => {
    const mermaid = "flowchart TD\n  A[Read the problem] --> B[Write tests]\n  B --> C[Implement]"
    const saved = await call("gateway_braid_save_graph", { taskType: "code", mermaid, title: "TDD" })
    expect(saved.data).toMatchObject({ taskType: "code", published: false, quality: { runs: 0, successRate: 0.5 } })
    const weaker = await call("gateway_braid_save_graph", { taskType: "code", mermaid: "graph LR\n  X --> Y" }, bob)
    await call("gateway_braid_record_outcome", { graphId: saved.data.id, success: true, score: 0.9 })
    await call("gateway_braid_record_outcome", { graphId: weaker.data.id, success: false }, bob)
    const found = await call("gateway_braid_find_graph", { taskType: "code" })
    expect(found.data.graph).toMatchObject({ id: saved.data.id, quality: { runs: 1, successes: 1, meanScore: 0.9 } })
    expect(found.data.alternatives).toBe(0)
    // Private: bob sees only his own graph and may not report on alice's.
    expect((await call("gateway_braid_find_graph", { taskType: "code" }, bob)).data.graph.id).toBe(weaker.data.id)
    expect((await call("gateway_braid_record_outcome", { graphId: saved.data.id, success: false }, bob)).isError).toBe(true)
    expect((await call("gateway_braid_save_graph", { taskType: "code", mermaid, publish: true }, bob)).isError).toBe(true)
    const published = await call("gateway_braid_save_graph", { taskType: "math", mermaid, title: "Curated", publish: true }, root)
    expect(published.data).toMatchObject({ published: true })
    expect((await call("gateway_braid_find_graph", { taskType: "math" }, bob)).data.graph.id).toBe(published.data.id)
    expect((await call("gateway_braid_find_graph", { taskType: "research" })).data.graph).toBeNull()
    expect((await call("gateway_braid_save_graph", { taskType: "code", mermaid: "not a graph" })).isError).toBe(true)
    expect((await call("gateway_braid_record_outcome", { graphId: "nope", success: true })).isError).toBe(true)

    openai.setScenario({ kind: "text", text: "braided" })
    await runtime.runPromise(Effect.flatMap(Completions, (c) =>
      c.complete(alice, { messages: [{ role: "user", content: "Write a TypeScript function that reverses a string" }], provider: "openai", model: "gpt-4o-mini", useHolonicBraid: true })))
    const system = (openai.requests.at(-1)!.body as any).messages[0]
    expect(system.role).toBe("system")
    expect(system.content).toContain("Shared reasoning graph for code tasks (\"TDD\")")
    expect(system.content).toContain("Write tests")
  })

  it("records holon memories, propagates them through membranes, searches", async () => {
    const earth = await call("gateway_memory_get_earth_holon", {})
    expect(earth.data).toMatchObject({ id: "earth", level: "planet" })
    const europe = await call("gateway_memory_get_or_create_holon", { name: "Europe", level: "continent" })
    const lisbon = await call("gateway_memory_get_or_create_holon", { name: "Lisbon", level: "city", parentId: europe.data.id })
    expect(lisbon.data.path).toEqual(["Earth", "Europe", "Lisbon"])
    expect((await call("gateway_memory_get_or_create_holon", { name: "lisbon", level: "city", parentId: europe.data.id })).data).toMatchObject({ id: lisbon.data.id, created: false })
    await call("gateway_memory_record", { holonId: lisbon.data.id, content: "The tram 28 is crowded in summer", tags: ["transport"], consent: true })
    await call("gateway_memory_record", { holonId: lisbon.data.id, content: "My flat's door code is 4821", tags: ["private"], consent: false })
    await call("gateway_memory_record", { holonId: lisbon.data.id, content: "Pastel de nata at the bakery by the river", tags: ["food"], consent: true })
    expect((await call("gateway_memory_propagate", { holonId: lisbon.data.id })).data).toMatchObject({ propagated: 0, reason: expect.stringMatching(/no membrane rule/) })
    expect((await call("gateway_memory_set_membrane_rule", { holonId: lisbon.data.id, allowTags: ["transport", "private"] }, bob)).isError).toBe(true)
    await call("gateway_memory_set_membrane_rule", { holonId: lisbon.data.id, allowTags: ["transport", "private"] })
    await call("gateway_memory_set_membrane_rule", { holonId: europe.data.id, allowTags: ["*"] })
    const up = await call("gateway_memory_propagate_up", { holonId: lisbon.data.id })
    expect(up.data).toMatchObject({ reached: "earth", total: 2 })
    expect(up.data.steps.map((s: any) => s.propagated)).toEqual([1, 1])
    expect((await call("gateway_memory_propagate", { holonId: lisbon.data.id })).data.propagated).toBe(0)
    const atEarth = await call("gateway_memory_search", { holonId: "earth", query: "tram in summer" }, bob)
    expect(atEarth.data.results.map((r: any) => r.content)).toEqual(["The tram 28 is crowded in summer"])
    const mine = await call("gateway_memory_search", { holonId: lisbon.data.id, query: "door code" })
    expect(mine.data.results[0].content).toContain("door code")
    const theirs = await call("gateway_memory_search", { holonId: lisbon.data.id, query: "door code" }, bob)
    expect(theirs.data.results.map((r: any) => r.content)).not.toContain("My flat's door code is 4821")
    expect((await call("gateway_memory_record", { holonId: "nowhere", content: "x" })).isError).toBe(true)
    const ext = await call("gateway_memory_external_list_providers", {})
    expect(ext.data.providers.map((p: any) => p.id)).toContain("mem0")
  })

  it("others' items flooding a holon neither hide the caller's own from a search nor come free; unknown targets are refused before counting", async () => {
    const dora = avatar("00000000-0000-4000-8000-0000000000d4", "dora")
    const eve = avatar("00000000-0000-4000-8000-0000000000e5", "eve")
    await runtime.runPromise(Effect.flatMap(AvatarStore, (s) => Effect.forEach([dora, eve], s.insert)))
    const used = async (who: AvatarRecord) => (await call("gateway_get_usage", {}, who)).data.dailyCallsUsed as number
    const porto = (await call("gateway_memory_get_or_create_holon", { name: "Porto", level: "city" }, dora)).data
    await call("gateway_memory_record", { holonId: porto.id, content: "dentist appointment on tuesday" }, dora)
    // Eve records once through the tool (counted), then 10,500 more items are in the holon (more than a search or a count read before), newer than dora's.
    const before = await used(eve)
    expect((await call("gateway_memory_record", { holonId: porto.id, content: "z", consent: true }, eve)).isError).toBe(false)
    expect(await used(eve)).toBe(before + 1)
    await runtime.runPromise(Effect.flatMap(DocumentStore, (docs) =>
      Effect.forEach(Array.from({ length: 10_500 }, (_, i) => i), (i) => {
        const item = { id: `flood-${i}`, holonId: porto.id, content: "z", tags: [], consent: i % 2 === 0, authorAvatarId: eve.id, origin: null, createdAtUtc: new Date(Date.now() + 1_000 + i).toISOString() }
        return docs.insert({ kind: "holon_item", id: item.id, owner: eve.id, key: porto.id, data: item, version: 0, createdAt: Date.now() + 1_000 + i, updatedAt: 0 })
      }, { discard: true })))
    const found = (await call("gateway_memory_search", { holonId: porto.id, query: "dentist tuesday", topK: 1 }, dora)).data
    expect(found.results.map((r: any) => r.content)).toEqual(["dentist appointment on tuesday"])
    expect(found.searched).toBeLessThanOrEqual(2 * 1_000)
    expect((await call("gateway_memory_get_or_create_holon", { name: "Porto", level: "city" }, dora)).data.items).toBe(10_502)
    // Propagation reads every item, a page at a time: all 5,251 consented ones move up.
    await call("gateway_memory_set_membrane_rule", { holonId: porto.id, allowTags: ["*"] }, dora)
    expect((await call("gateway_memory_propagate", { holonId: porto.id }, dora)).data.propagated).toBe(5_251)
    // Unknown holons, orchestrators and agents are refused before they are counted.
    const counted = await used(eve)
    for (const [tool, args] of [
      ["gateway_memory_record", { holonId: "nowhere", content: "x" }],
      ["gateway_memory_propagate", { holonId: "nowhere" }],
      ["gateway_memory_propagate_up", { holonId: "nowhere" }],
      ["gateway_orchestrator_invoke", { orchestratorId: "nope", input: "hi" }],
      ["gateway_fahrn_evolve_agent_skill", { agentId: "nope", taskCategory: "code", feedback: "x" }]
    ] as const) {
      const refused = await call(tool, args, eve)
      expect([tool, refused.isError, refused.data.error.kind]).toEqual([tool, true, "NotFound"])
    }
    expect(await used(eve)).toBe(counted)
  })

  it("registers orchestrators and invokes them over OpenAI chat and A2A", async () => {
    // Registered endpoints get no credentials from the gateway: an open OpenAI-compatible server.
    const open = await startOpenAiMock()
    open.setScenario({ kind: "text", text: "orchestrated reply" })
    const oa = await call("gateway_orchestrator_register", { name: "chat-agent", url: open.url, protocol: "openai-chat", model: "gpt-4o-mini" })
    const ag = await call("gateway_orchestrator_register", { name: "a2a-agent", url: a2aUrl, protocol: "a2a" })
    expect((await call("gateway_orchestrator_list", {})).data.total).toBe(2)
    expect((await call("gateway_orchestrator_list", {}, bob)).data.total).toBe(0)
    const viaChat = await call("gateway_orchestrator_invoke", { orchestratorId: oa.data.id, input: "hello" })
    expect(viaChat.data).toMatchObject({ protocol: "openai-chat", output: "orchestrated reply" })
    expect(open.requests.at(-1)!.body).toMatchObject({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hello" }] })
    await open.close()
    const viaA2a = await call("gateway_orchestrator_invoke", { orchestratorId: ag.data.id, input: "ping" })
    expect(viaA2a.data).toMatchObject({ protocol: "a2a", output: "A2A agent says: PING" })
    expect(a2aRequests.at(-1)).toMatchObject({ jsonrpc: "2.0", method: "message/send", params: { message: { role: "user", parts: [{ kind: "text", text: "ping" }] } } })
    expect((await call("gateway_orchestrator_invoke", { orchestratorId: ag.data.id, input: "x" }, bob)).isError).toBe(true)
    expect((await call("gateway_orchestrator_register", { name: "x", url: "file:///etc/passwd", protocol: "a2a" })).isError).toBe(true)
    expect((await call("gateway_orchestrator_register", { name: "x", url: "https://example.com", protocol: "smtp" })).isError).toBe(true)
  })
})
