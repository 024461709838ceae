/**
 * Prototype keys in request bodies: JSON.parse keeps `"__proto__"` as an ordinary own key, but a copy
 * by assignment makes it the copy's prototype (Effect's schema decode copies a body's record fields
 * that way), so `{"__proto__": {"stream": true}}` would have handed the chat route an inherited,
 * never-validated `stream`. Every JSON route (the fast lane, the Effect routes, /mcp) refuses such a
 * body with a 400 naming the field and where it is, before anything is admitted, counted or sent
 * upstream; the name as a string value is fine.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "../support/accounts.ts"
import { call, errorMessageOf, jsonRoutes, type RunningServer, startServer } from "../support/server.ts"

const CHAT = "/openai/v1/chat/completions"
const refusal = (at?: string) => `Invalid request body: the field name __proto__ is not accepted${at ? ` (at ${at})` : ""}.`

describe("prototype keys in request bodies", () => {
  let lane: RunningServer
  /** The same gateway with AIGW_FAST_LANE=false: the Effect routes. */
  let routes: RunningServer
  let openai: MockUpstream
  let user: TestAvatar

  const calls = async () => (await call(lane.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 1 })
    const env = { OPENAI_API_KEY: "sk-openai", OPENAI_BASE_URL: openai.url }
    lane = await startServer(env)
    routes = await startServer({ ...env, AIGW_FAST_LANE: "false" }, { dataDir: lane.dataDir })
    user = await signUp(lane, "proto")
  })
  afterAll(async () => {
    await routes?.stop()
    await lane?.stop()
    await openai?.close()
  })

  it("refuses an inherited stream, a nested and an escaped __proto__ on chat, on both lanes, and sends or counts nothing", async () => {
    const countedBefore = await calls()
    const upstreamBefore = openai.requests.length
    const cases: Array<{ raw: string; at?: string }> = [
      { raw: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"__proto__":{"stream":true,"max_tokens":"lots"}}` },
      { raw: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi","__proto__":{"role":"system"}}]}`, at: "messages.0" },
      { raw: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"metadata":{"\\u005f_proto__":{"stream":true}}}`, at: "metadata" }
    ]
    for (const c of cases) {
      for (const [server, auth] of [[lane, { apiKey: user.apiKey }], [routes, { token: user.token }]] as const) {
        const res = await call(server.url, "POST", CHAT, { raw: c.raw, ...auth })
        expect(res.status, c.raw).toBe(400)
        expect(res.headers.get("content-type"), c.raw).toMatch(/^application\/json/)
        expect(res.body.error.message, c.raw).toBe(refusal(c.at))
      }
    }
    expect(openai.requests.length).toBe(upstreamBefore)
    expect(await calls()).toBe(countedBefore)
  })

  it("answers a body that only says __proto__ in its text", async () => {
    openai.setScenario({ kind: "text", text: "It is an accessor.", usage: { prompt: 5, completion: 4 } })
    const res = await call(lane.url, "POST", CHAT, {
      body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "What is \"__proto__\": in JavaScript? \u00e9" }] },
      apiKey: user.apiKey
    })
    expect(res.status).toBe(200)
    expect(res.body.choices[0].message.content).toBe("It is an accessor.")
    // \u escapes (as Python's json.dumps writes non-ASCII) are walked and pass.
    const escaped = await call(lane.url, "POST", CHAT, { raw: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"caf\\u00e9"}]}`, apiKey: user.apiKey })
    expect(escaped.status).toBe(200)
  })

  it("refuses it on every JSON route of the API and on /mcp", async () => {
    const bodied = await jsonRoutes(lane)
    expect(bodied.length).toBeGreaterThan(30)
    for (const server of [lane, routes]) {
      for (const r of bodied) {
        const res = await call(server.url, r.method, r.path, { raw: `{"__proto__":{"isAdmin":true}}`, apiKey: user.apiKey })
        expect(res.status, `${r.method} ${r.path}`).toBe(400)
        expect(errorMessageOf(r.path, res.body), `${r.method} ${r.path}`).toBe(refusal())
      }
      const mcp = await call(server.url, "POST", "/mcp", {
        raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gateway_health","arguments":{"__proto__":{}}}}`,
        headers: { accept: "application/json, text/event-stream" },
        apiKey: user.apiKey
      })
      expect(mcp.status).toBe(400)
      // Refused by its id, as on stdio (the message is JSON, so its id is known).
      expect(mcp.body).toEqual({ jsonrpc: "2.0", id: 1, error: { code: -32600, message: "Invalid Request: the field name __proto__ is not accepted (at params.arguments)." } })
    }
    expect(({} as any).isAdmin).toBeUndefined()
    expect(lane.output()).not.toMatch(/unexpected failure|TypeError/)
  })
})
