/**
 * /mcp through the web-standard handler (Embed.makeWebHandler, what embedders and serverless hosts
 * serve): present when the layer includes Mcp.layerHttp, 404 otherwise.
 */
import { Layer } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as GatewayConfig from "../../src/Config.ts"
import { makeWebHandler } from "../../src/Embed.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import * as Mcp from "../../src/Mcp/index.ts"

const core = Layers.layerMemory.pipe(
  Layer.provideMerge(Mailer.layerMemory),
  Layer.provideMerge(GatewayConfig.layer({ publicUrl: "https://embedded.example.test" }))
)

const rpc = (body: unknown, headers: Record<string, string> = {}) =>
  new Request("http://localhost/mcp", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

describe("MCP in the web handler", () => {
  const withMcp = makeWebHandler(Layer.provideMerge(Mcp.layerHttp, core))
  const without = makeWebHandler(core)
  afterAll(async () => {
    await withMcp.dispose()
    await without.dispose()
  })

  it("serves /mcp and the discovery documents when Mcp.layerHttp is provided", async () => {
    const init = await withMcp.handler(rpc({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }))
    expect(init.status).toBe(200)
    expect(await init.json()).toMatchObject({ id: 1, result: { protocolVersion: "2025-06-18", serverInfo: { name: "aigw" } } })
    const call = await withMcp.handler(rpc({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "gateway_get_usage", arguments: {} } }))
    expect(await call.json()).toMatchObject({ id: 2, result: { isError: true, content: [{ type: "text", text: expect.stringMatching(/^Authentication required/) }] } })
    const card = await withMcp.handler(new Request("http://localhost/.well-known/mcp.json"))
    expect(await card.json()).toMatchObject({ endpoint: "https://embedded.example.test/mcp" })
    const bad = await withMcp.handler(rpc({ jsonrpc: "2.0", id: 3, method: "tools/list" }, { authorization: "Bearer nonsense" }))
    expect(bad.status).toBe(401)
  })

  it("answers 404 envelopes for them without it", async () => {
    for (const request of [rpc({ jsonrpc: "2.0", id: 1, method: "ping" }), new Request("http://localhost/.well-known/agent.json")]) {
      const res = await without.handler(request)
      expect(res.status).toBe(404)
      expect(await res.json()).toMatchObject({ isError: true })
    }
  })
})

describe("the web handler is the application the hosts serve", () => {
  const gateway = makeWebHandler(core)
  afterAll(() => gateway.dispose())

  it("answers with request ids, refuses an invalid Host, serves /metrics and 404s in the path's envelope", async () => {
    const echoed = await gateway.handler(new Request("http://localhost/v1/health", { headers: { "x-request-id": "caller-id-123" } }))
    expect(echoed.headers.get("x-request-id")).toBe("caller-id-123")
    const made = await gateway.handler(new Request("http://localhost/v1/health"))
    expect(made.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
    const host = await gateway.handler(new Request("http://localhost/v1/health", { headers: { host: "a b" } }))
    expect(host.status).toBe(400)
    expect(await host.json()).toMatchObject({ isError: true, message: "Invalid Host header." })
    const metrics = await gateway.handler(new Request("http://localhost/metrics"))
    expect(await metrics.text()).toMatch(/aigw_http_requests_total/)
    const unknown = await gateway.handler(new Request("http://localhost/openai/v1/nope"))
    expect(unknown.status).toBe(404)
    expect(await unknown.json()).toEqual({ error: { message: "No route for GET /openai/v1/nope.", type: "not_found_error", param: null, code: "NotFound" } })
  })
})
