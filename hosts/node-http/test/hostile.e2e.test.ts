/**
 * Hostile input across the whole API: every POST/PUT route from the generated OpenAPI document
 * gets malformed JSON, wrong types and an oversized body; every authenticated route is refused
 * without credentials. The server must answer envelopes with fitting statuses and stay up.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("hostile input on every route", () => {
  let server: RunningServer
  let user: TestAvatar
  let routes: Array<{ method: string; path: string; auth: boolean }> = []

  beforeAll(async () => {
    server = await startServer({ AIGW_MAX_BODY_BYTES: "100000" })
    user = await signUp(server, "hostile")
    const doc = (await call(server.url, "GET", "/openapi.json")).body
    routes = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({
        method: method.toUpperCase(),
        path: path.replace(/\{(\w+)\}/g, (_, p: string) => (p === "id" || p.endsWith("Id") ? crypto.randomUUID() : "x")).replace("{*}", "x"),
        auth: Array.isArray(op.security)
      }))
    )
    expect(routes.length).toBeGreaterThan(40)
  })
  afterAll(() => server?.stop())

  const envelope = (body: any, path: string) => {
    expect(typeof body, path).toBe("object")
    // The vendor surfaces answer in their vendor's error shape: OpenAI's, or Anthropic's `{ type: "error", error }`.
    if (path.startsWith("/openai/")) expect(body.error.message, path).toBeTruthy()
    else if (path.startsWith("/anthropic/")) expect([body.type, typeof body.error.message], path).toEqual(["error", "string"])
    else {
      expect(body.isError, path).toBe(true)
      expect(typeof body.message, path).toBe("string")
      expect(body.result, path).toBeNull()
    }
    expect(JSON.stringify(body), path).not.toMatch(/at .*\.ts:\d+|node_modules|Error: /)
  }

  it("answers malformed JSON on every POST/PUT route with a 400 envelope", async () => {
    const writes = routes.filter((r) => r.method === "POST" || r.method === "PUT")
    expect(writes.length).toBeGreaterThan(30)
    for (const r of writes) {
      const res = await call(server.url, r.method, r.path, { raw: "{\"broken\": [1, 2", apiKey: user.apiKey })
      expect(res.status, `${r.method} ${r.path}`).toBe(400)
      envelope(res.body, r.path)
    }
  })

  it("answers wrong JSON types with a 400 envelope naming the problem", async () => {
    for (const r of routes.filter((x) => x.method === "POST" && !x.path.includes("resend-verification"))) {
      for (const raw of ["[]", "42", "\"text\"", "null"]) {
        const res = await call(server.url, r.method, r.path, { raw, apiKey: user.apiKey })
        expect([400, 404, 422], `${r.method} ${r.path} ${raw}`).toContain(res.status)
        envelope(res.body, r.path)
      }
    }
  })

  it("answers oversized bodies with 413 envelopes", async () => {
    const big = JSON.stringify({ text: "x".repeat(150_000) })
    for (const r of routes.filter((x) => x.method === "POST").slice(0, 60)) {
      const res = await call(server.url, r.method, r.path, { raw: big, apiKey: user.apiKey })
      expect([400, 413], `${r.method} ${r.path}`).toContain(res.status)
      envelope(res.body, r.path)
    }
  })

  it("refuses every authenticated route without credentials (401 envelope)", async () => {
    for (const r of routes.filter((x) => x.auth)) {
      const res = await call(server.url, r.method, r.path, r.method === "GET" || r.method === "DELETE" ? {} : { body: {} })
      expect(res.status, `${r.method} ${r.path}`).toBe(401)
      envelope(res.body, r.path)
    }
  })

  it("is still up and healthy", async () => {
    const res = await call(server.url, "GET", "/v1/health")
    expect(res.body.status).toBe("ok")
  })
})
