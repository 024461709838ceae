/**
 * External memory end to end on the real node host: POST /v1/memory/store and /v1/memory/query
 * with `provider: "mem0"` against a local mock of the mem0 Platform API, the MCP tools
 * gateway_memory_external_add / _search / _list_providers over /mcp, and the isolation of two
 * avatars' memories at the vendor.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MemoryVendorMock, startMemoryVendorMock } from "../../../packages/core/test/support/mockMemoryVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const MEM0_KEY = "m0-e2e-key"

describe("external memory vendors (mem0)", () => {
  let server: RunningServer
  let mem0: MemoryVendorMock
  let alice: TestAvatar
  let bob: TestAvatar
  let free: TestAvatar
  const clients: Array<Client> = []

  const connect = async (token: string) => {
    const client = new Client({ name: "aigw-memory-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
    clients.push(client)
    return client
  }
  const tool = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as any

  beforeAll(async () => {
    mem0 = await startMemoryVendorMock("mem0", { apiKey: MEM0_KEY })
    server = await startServer({ ...adminEnv, MEM0_API_KEY: MEM0_KEY, MEM0_BASE_URL: mem0.url, LETTA_API_KEY: "letta-key-without-agent" })
    ;[alice, bob, free] = await Promise.all([signUp(server, "memalice"), signUp(server, "membob"), signUp(server, "memfree")])
    const admin = await adminToken(server)
    for (const a of [alice, bob]) {
      const plan = await call(server.url, "PUT", `/v1/admin/avatars/${a.id}/plan`, { token: admin, body: { plan: "Bronze" } })
      expect(plan.body.isError).toBe(false)
    }
  })
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
    await server?.stop()
    await mem0?.close()
  })

  it("stores and queries through mem0 with provider, scoped by avatar and userId", async () => {
    const stored = await call(server.url, "POST", "/v1/memory/store", { apiKey: alice.apiKey, body: { content: "I live in Porto near the river", provider: "mem0" } })
    expect(stored.status).toBe(200)
    expect(stored.body.result).toEqual({
      memoryId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      userId: alice.id,
      provider: "mem0",
      embedder: "mem0",
      dimensions: null,
      createdAtUtc: expect.stringMatching(/Z$/)
    })
    const sent = mem0.requests.at(-1)!
    expect(sent.path).toBe("/v1/memories/")
    expect(sent.headers.authorization).toBe(`Token ${MEM0_KEY}`)
    expect(sent.body).toMatchObject({ user_id: `aigw-${alice.id}`, messages: [{ role: "user", content: "I live in Porto near the river" }], infer: false, async_mode: false })

    await call(server.url, "POST", "/v1/memory/store", { apiKey: alice.apiKey, body: { content: "Customer 7 lives in Porto too", userId: "customer-7", provider: "mem0" } })
    expect(mem0.requests.at(-1)!.body.user_id).toMatch(new RegExp(`^aigw-${alice.id}-[0-9a-f]{16}$`))

    const q = await call(server.url, "POST", "/v1/memory/query", { apiKey: alice.apiKey, body: { query: "where do I live", provider: "mem0", topK: 3 } })
    expect(q.status).toBe(200)
    expect(q.body.result).toEqual({
      userId: alice.id,
      provider: "mem0",
      results: [{ memoryId: stored.body.result.memoryId, content: "I live in Porto near the river", score: expect.any(Number), embedder: "mem0", createdAtUtc: expect.stringMatching(/Z$/) }],
      searched: 1
    })
    expect(mem0.requests.at(-1)!.body).toEqual({ query: "where do I live", filters: { user_id: `aigw-${alice.id}` }, top_k: 3 })
    const customer = await call(server.url, "POST", "/v1/memory/query", { apiKey: alice.apiKey, body: { query: "Porto", userId: "customer-7", provider: "mem0" } })
    expect(customer.body.result.results.map((r: any) => r.content)).toEqual(["Customer 7 lives in Porto too"])
    // The local store knows nothing of what mem0 keeps: auto stays local.
    const local = await call(server.url, "POST", "/v1/memory/query", { apiKey: alice.apiKey, body: { query: "Porto" } })
    expect(local.body.result).toMatchObject({ provider: "local", results: [] })
  })

  it("keeps two avatars apart: the same query and userId reach only one's own memories", async () => {
    await call(server.url, "POST", "/v1/memory/store", { apiKey: bob.apiKey, body: { content: "Bob's locker code is 1234", userId: "shared-name", provider: "mem0" } })
    await call(server.url, "POST", "/v1/memory/store", { apiKey: alice.apiKey, body: { content: "Alice's locker code is 9876", userId: "shared-name", provider: "mem0" } })
    const asBob = await call(server.url, "POST", "/v1/memory/query", { apiKey: bob.apiKey, body: { query: "locker code", userId: "shared-name", provider: "mem0" } })
    expect(asBob.body.result.results.map((r: any) => r.content)).toEqual(["Bob's locker code is 1234"])
    const asAlice = await call(server.url, "POST", "/v1/memory/query", { apiKey: alice.apiKey, body: { query: "locker code", userId: "shared-name", provider: "mem0" } })
    expect(asAlice.body.result.results.map((r: any) => r.content)).toEqual(["Alice's locker code is 9876"])
    // Naming another avatar takes an admin.
    expect((await call(server.url, "POST", "/v1/memory/query", { apiKey: bob.apiKey, body: { query: "locker", provider: "mem0", avatarId: alice.id } })).status).toBe(403)
  })

  it("refuses before calling the vendor: plan too low, vendor not configured, unknown provider", async () => {
    const before = mem0.requests.length
    const low = await call(server.url, "POST", "/v1/memory/store", { apiKey: free.apiKey, body: { content: "x", provider: "mem0" } })
    expect(low.status).toBe(403)
    expect(low.body.message).toMatch(/Provider mem0 needs plan Bronze/)
    const zep = await call(server.url, "POST", "/v1/memory/query", { apiKey: alice.apiKey, body: { query: "x", provider: "zep" } })
    expect(zep.status).toBe(422)
    expect(zep.body.message).toMatch(/ZEP_API_KEY/)
    const letta = await call(server.url, "POST", "/v1/memory/store", { apiKey: alice.apiKey, body: { content: "x", provider: "letta" } })
    expect(letta.status).toBe(422)
    expect(letta.body.message).toMatch(/LETTA_AGENT_ID/)
    expect(mem0.requests.length).toBe(before)
  })

  it("maps a vendor failure to a 502 naming mem0", async () => {
    mem0.failNext(500, { error: "internal error", details: { message: "database unavailable" } })
    const res = await call(server.url, "POST", "/v1/memory/store", { apiKey: alice.apiKey, body: { content: "x", provider: "mem0" } })
    expect(res.status).toBe(502)
    expect(res.body.message).toMatch(/mem0 answered HTTP 500: internal error/)
  })

  it("MCP: lists the vendors, adds and searches through mem0 in the caller's own scope", async () => {
    const [aliceMcp, bobMcp] = await Promise.all([connect(alice.token), connect(bob.token)])
    const listed = await tool(aliceMcp, "gateway_memory_external_list_providers", {})
    expect(listed.isError).toBe(false)
    expect(listed.structuredContent).toMatchObject({ total: 4, configured: 1 })
    const byId = Object.fromEntries(listed.structuredContent.providers.map((p: any) => [p.id, p]))
    expect(Object.keys(byId).sort()).toEqual(["letta", "mem0", "supermemory", "zep"])
    expect(byId.mem0).toMatchObject({ configured: true, minPlan: "Bronze" })
    expect(byId.letta).toMatchObject({ configured: false, missing: expect.stringMatching(/LETTA_AGENT_ID/) })

    const added = await tool(aliceMcp, "gateway_memory_external_add", { provider: "mem0", text: "Alice waters the ferns on Sundays", metadata: { room: "kitchen", weekly: true } })
    expect(added.isError, JSON.stringify(added.content)).toBe(false)
    expect(added.structuredContent).toEqual({ provider: "mem0", memoryId: expect.any(String), userId: alice.id, createdAtUtc: expect.stringMatching(/Z$/) })
    expect(mem0.requests.at(-1)!.body).toMatchObject({ user_id: `aigw-${alice.id}`, metadata: { room: "kitchen", weekly: true } })

    // auto: the first configured vendor (mem0 here).
    const found = await tool(aliceMcp, "gateway_memory_external_search", { query: "ferns Sundays", limit: 2 })
    expect(found.isError).toBe(false)
    expect(found.structuredContent).toMatchObject({ provider: "mem0", userId: alice.id })
    expect(found.structuredContent.results).toEqual([
      { id: added.structuredContent.memoryId, text: "Alice waters the ferns on Sundays", score: 1, metadata: { room: "kitchen", weekly: true }, createdAt: expect.stringMatching(/Z$/) }
    ])
    // The same memories as /v1/memory/query with that provider and no userId.
    const viaHttp = await call(server.url, "POST", "/v1/memory/query", { apiKey: alice.apiKey, body: { query: "ferns", provider: "mem0" } })
    expect(viaHttp.body.result.results.map((r: any) => r.content)).toContain("Alice waters the ferns on Sundays")

    const bobSees = await tool(bobMcp, "gateway_memory_external_search", { provider: "mem0", query: "ferns Sundays" })
    expect(bobSees.structuredContent.results).toEqual([])

    const refused = await tool(aliceMcp, "gateway_memory_external_add", { provider: "letta", text: "x" })
    expect(refused).toMatchObject({ isError: true, structuredContent: { error: { kind: "Unprocessable" } } })
    expect(refused.content[0].text).toMatch(/LETTA_AGENT_ID/)
    const local = await tool(aliceMcp, "gateway_memory_external_search", { provider: "openai", query: "x" })
    expect(local).toMatchObject({ isError: true })
    expect(local.content[0].text).toMatch(/Provider openai cannot serve memory here; supported: mem0, zep, letta, supermemory/)
  })
})
