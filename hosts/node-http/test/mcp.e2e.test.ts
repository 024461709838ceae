/**
 * MCP over streamable HTTP at /mcp of the real node host, with the official
 * @modelcontextprotocol/sdk client: the shared tool suite, credentials (JWT, API key, none,
 * invalid), per-request callers under concurrency, the transport's answers (202, 405, 413),
 * the same data as the HTTP endpoints, and the discovery documents.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { callTool, expectConversationStoppedByRevocation, mcpToolSuite, TOOL_NAMES } from "../../../packages/core/test/Mcp/support/suite.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, revokeSignUpKey, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const PUBLIC_URL = "https://gateway.example.test"

describe("MCP over streamable HTTP", () => {
  let server: RunningServer
  let upstream: MockUpstream
  let gold: TestAvatar
  let free: TestAvatar
  const clients: Array<Client> = []
  let goldClient: Client
  let anonymous: Client
  let freeClient: Client

  const connect = async (headers: Record<string, string>) => {
    const client = new Client({ name: "aigw-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers } }))
    clients.push(client)
    return client
  }

  beforeAll(async () => {
    upstream = await startOpenAiMock({ apiKey: "sk-openai-mcp", chunkDelayMs: 1 })
    server = await startServer({
      ...adminEnv,
      OPENAI_API_KEY: "sk-openai-mcp",
      OPENAI_BASE_URL: upstream.url,
      AIGW_PLAN_LIMITS: '{"Free":2}',
      AIGW_MAX_BODY_BYTES: "200000",
      PUBLIC_URL
    })
    ;[gold, free] = await Promise.all([signUp(server, "mcpgold"), signUp(server, "mcpfree")])
    const admin = await adminToken(server)
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${gold.id}/plan`, { token: admin, body: { plan: "Gold" } })
    expect(plan.body.isError).toBe(false)
    ;[goldClient, anonymous, freeClient] = await Promise.all([
      connect({ authorization: `Bearer ${gold.token}` }),
      connect({}),
      connect({ "x-api-key": free.apiKey })
    ])
  })
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
    await server?.stop()
    await upstream?.close()
  })

  it("negotiates protocol 2025-06-18 and names the server", async () => {
    expect(goldClient.getServerVersion()).toMatchObject({ name: "aigw", version: "1.0.0" })
    expect(goldClient.getServerCapabilities()).toMatchObject({ tools: { listChanged: false } })
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
      })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-06-18", serverInfo: { name: "aigw" } } })
  })

  mcpToolSuite({
    client: () => goldClient,
    username: () => gold.username,
    anonymous: () => anonymous,
    freeClient: () => freeClient,
    upstream: () => upstream
  })

  describe("credentials", () => {
    it("accepts a JWT or an API key as bearer token, and X-Api-Key", async () => {
      const viaKey = await connect({ authorization: `Bearer ${gold.apiKey}` })
      const viaHeader = await connect({ "x-api-key": gold.apiKey })
      for (const client of [goldClient, viaKey, viaHeader]) {
        const r = await callTool(client, "gateway_get_avatar_context", {})
        expect(r.structuredContent).toMatchObject({ id: gold.id, username: gold.username })
      }
    })

    it("refuses invalid credentials with 401 before any MCP processing", async () => {
      await expect(connect({ authorization: "Bearer not-a-valid-token" })).rejects.toThrow(/401|Invalid or expired credentials/)
      const res = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": "aigw_revoked_or_unknown" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} })
      })
      expect(res.status).toBe(401)
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm="aigw", error="invalid_token"/)
      expect(await res.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { message: "Invalid or expired credentials." } })
    })

    it("gives an authenticated caller's answers its day's rate-limit headers as they stand after the calls, an anonymous one's none", async () => {
      const rpc = (headers: Record<string, string>, body: unknown) =>
        fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }, body: JSON.stringify(body) })
      const day = (res: Response) => ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-plan", "x-karma-multiplier"].map((h) => res.headers.get(h))
      const listed = await rpc({ "x-api-key": gold.apiKey }, { jsonrpc: "2.0", id: 1, method: "tools/list" })
      expect(listed.status).toBe(200)
      const [limit, remaining, reset, plan, karma] = day(listed)
      expect([plan, karma]).toEqual(["Gold", expect.stringMatching(/^\d+(\.\d+)?$/)])
      expect(Number(reset)).toBeGreaterThan(Date.now() / 1000)
      // A metered call in the same answer is counted in its headers.
      const called = await rpc({ "x-api-key": gold.apiKey }, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "gateway_complete", arguments: { messages: [{ role: "user", content: "hi" }] } } })
      expect((await called.json()).result.isError).toBe(false)
      expect([day(called)[0], Number(day(called)[1])]).toEqual([limit, Number(remaining) - 1])
      // A refusal before the body is read carries them too; an anonymous answer has none.
      expect(day(await rpc({ "x-api-key": gold.apiKey, "sec-fetch-site": "cross-site", "content-type": "text/plain" }, {}))[3]).toBe("Gold")
      expect(day(await rpc({}, { jsonrpc: "2.0", id: 3, method: "tools/list" }))).toEqual([null, null, null, null, null])
    })

    it("runs each call as the caller of its own HTTP request, under concurrency", async () => {
      const pairs = Array.from({ length: 24 }, (_, i): readonly [Client, TestAvatar | null] =>
        i % 3 === 0 ? [anonymous, null] : i % 3 === 1 ? [goldClient, gold] : [freeClient, free])
      const results = await Promise.all(pairs.map(([client]) => callTool(client, "gateway_get_avatar_context", {})))
      results.forEach((r, i) => {
        const who = pairs[i]![1]
        if (who === null) expect(r.isError).toBe(true)
        else expect(r.structuredContent).toMatchObject({ id: who.id, username: who.username })
      })
    })
  })

  describe("transport", () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

    it("refuses a protocol version it does not speak (400), and a protocol method it does not serve with -32601", async () => {
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })
      const old = await post(ping, { "mcp-protocol-version": "1999-01-01" })
      expect(old.status).toBe(400)
      expect(await old.json()).toMatchObject({ id: null, error: { code: -32600, message: expect.stringMatching(/MCP-Protocol-Version 1999-01-01 is not supported/) } })
      for (const version of ["2025-06-18", "2025-03-26", "2024-11-05"]) expect((await post(ping, { "mcp-protocol-version": version })).status).toBe(200)
      const unserved = await post(JSON.stringify([
        { jsonrpc: "2.0", id: 2, method: "logging/setLevel", params: { level: "info" } },
        { jsonrpc: "2.0", id: 3, method: "resources/subscribe", params: { uri: "x:y" } }
      ]), { authorization: `Bearer ${gold.token}` })
      expect(await unserved.json()).toEqual([
        { jsonrpc: "2.0", id: 2, error: { code: -32601, message: "Method not found: logging/setLevel" } },
        { jsonrpc: "2.0", id: 3, error: { code: -32601, message: "Method not found: resources/subscribe" } }
      ])
    })

    it("answers 202 to notifications, 405 to GET and DELETE, 413 to oversized bodies, 400 to bodies it cannot read as sent", async () => {
      const note = await post(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }))
      expect(note.status).toBe(202)
      expect(await note.text()).toBe("")
      for (const method of ["GET", "DELETE"]) {
        const res = await fetch(`${server.url}/mcp`, { method, headers: { accept: "text/event-stream" } })
        expect(res.status, method).toBe(405)
        expect(res.headers.get("allow")).toBe("POST")
      }
      const big = await post(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "gateway_ml_sentiment", arguments: { text: "x".repeat(300_000) } } }), {
        authorization: `Bearer ${gold.token}`
      })
      expect(big.status).toBe(413)
      expect(await big.json()).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: expect.stringMatching(/^Invalid Request: Request body exceeds the limit of \d+ bytes \(AIGW_MAX_BODY_BYTES\)\.$/) }
      })
      // A body that cannot be read as sent is an invalid request (400, -32600), as a stdio line is.
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 8, method: "ping" })
      for (const headers of [{ "content-encoding": "gzip" }, { "content-type": "application/json; charset=klingon" }] as Array<Record<string, string>>) {
        const refused = await post(ping, headers)
        expect(refused.status).toBe(400)
        expect((await refused.json()).error.code).toBe(-32600)
      }
      expect((await callTool(goldClient, "gateway_health", {})).isError).toBe(false)
    })
  })

  describe("one implementation", () => {
    it("answers the catalogue, estimate and usage tools with the data of the HTTP endpoints", async () => {
      const key = { apiKey: gold.apiKey }
      const models = await call(server.url, "GET", "/v1/models?plan=Silver", key)
      expect((await callTool(goldClient, "gateway_list_models", { plan: "Silver" })).structuredContent).toEqual(models.body.result)
      const detail = await call(server.url, "GET", "/v1/models/gpt-4o-mini", key)
      expect((await callTool(goldClient, "gateway_get_model", { modelId: "gpt-4o-mini" })).structuredContent).toEqual(detail.body.result)
      const openserv = await call(server.url, "GET", "/v1/openserv/models", key)
      expect((await callTool(goldClient, "gateway_list_openserv_models", {})).structuredContent).toEqual({ total: openserv.body.length, models: openserv.body })
      const body = { provider: "openai", model: "gpt-4o-mini", promptTokens: 1234, completionTokens: 56 }
      const estimate = await call(server.url, "POST", "/v1/estimate", { ...key, body })
      expect((await callTool(goldClient, "gateway_estimate_cost", body)).structuredContent).toEqual(estimate.body.result)
      const providers = await call(server.url, "GET", "/v1/providers", key)
      expect((await callTool(goldClient, "gateway_list_providers", {})).structuredContent).toEqual(providers.body.result)
      const usage = await call(server.url, "GET", "/v1/usage?plan=Silver&karma=10", key)
      expect((await callTool(goldClient, "gateway_get_usage", { plan: "Silver", karma: 10 })).structuredContent).toEqual(usage.body.result)
    })
  })

  describe("discovery", () => {
    it("serves /.well-known/mcp.json with endpoint, transport, auth and tools (URLs from PUBLIC_URL)", async () => {
      const res = await fetch(`${server.url}/.well-known/mcp.json`)
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toMatch(/^application\/json/)
      const card = await res.json()
      expect(card).toMatchObject({
        name: "aigw",
        version: "1.0.0",
        protocolVersion: "2025-06-18",
        endpoint: `${PUBLIC_URL}/mcp`,
        transport: { type: "streamable-http", endpoint: `${PUBLIC_URL}/mcp` },
        authentication: { required: false, schemes: ["bearer", "apiKey"], securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
        capabilities: { tools: { listChanged: false } }
      })
      expect(card.tools.map((t: any) => t.name).sort()).toEqual(TOOL_NAMES)
    })

    it("serves /.well-known/agent.json as an agent card with one skill per tool", async () => {
      const card = await (await fetch(`${server.url}/.well-known/agent.json`)).json()
      expect(card).toMatchObject({
        name: "aigw",
        url: `${PUBLIC_URL}/mcp`,
        version: "1.0.0",
        capabilities: { streaming: false, pushNotifications: false },
        securitySchemes: { bearer: { type: "http", scheme: "bearer" }, apiKey: { type: "apiKey", in: "header", name: "X-Api-Key" } }
      })
      expect(card.description.length).toBeGreaterThan(40)
      expect(card.skills.map((s: any) => s.id).sort()).toEqual(TOOL_NAMES)
      for (const s of card.skills) expect(s).toMatchObject({ name: expect.any(String), description: expect.any(String), tags: expect.any(Array) })
      const other = await fetch(`${server.url}/.well-known/other.json`)
      expect(other.status).toBe(404)
    })
  })

  it("stops a tool that makes many model calls once the key of its /mcp request is revoked: the conversation ends before its next call", async () => {
    const talker = await signUp(server, "mcpconv")
    const client = await connect({ "x-api-key": talker.apiKey })
    await expectConversationStoppedByRevocation(client, upstream, () => revokeSignUpKey(server.url, talker))
  })
})

