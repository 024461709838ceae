/**
 * Quota end to end: headers on every authenticated answer, 429 with Retry-After at the limit,
 * what-if usage that never raises the enforced limit, API-key lifecycle, and exact admission
 * under load from two node processes sharing one PostgreSQL; a usage record for every admitted call,
 * kept for AIGW_USAGE_RETENTION_DAYS when it is set.
 */
import Database from "better-sqlite3"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../../packages/core/src/Catalog/Catalog.ts"
import { uuidv7 } from "../../../packages/core/src/Storage/Sql/ids.ts"
import { freshPgDatabase, hasPg } from "../../../packages/core/test/support/databases.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const secondsToMidnight = () => {
  const now = new Date()
  return Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000)
}
const complete = { messages: [{ role: "user", content: "hi" }], provider: "openai", model: "gpt-4o-mini" }

describe("quota, keys and headers (SQLite)", () => {
  let server: RunningServer
  let mock: MockUpstream
  let user: TestAvatar

  beforeAll(async () => {
    mock = await startOpenAiMock({ apiKey: "sk-q" })
    server = await startServer({ ...adminEnv, OPENAI_API_KEY: "sk-q", OPENAI_BASE_URL: mock.url, AIGW_PLAN_LIMITS: "{\"Free\":3,\"Gold\":7}" })
    user = await signUp(server, "quota")
  })
  afterAll(async () => {
    await server?.stop()
    await mock?.close()
  })

  it("admits up to the limit, then 429 with Retry-After to the next UTC midnight", async () => {
    for (let i = 1; i <= 3; i++) {
      const res = await call(server.url, "POST", "/v1/complete", { body: complete, apiKey: user.apiKey })
      expect(res.status).toBe(200)
      expect(res.headers.get("x-ratelimit-limit")).toBe("3")
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(3 - i))
    }
    const refused = await call(server.url, "POST", "/v1/complete", { body: complete, apiKey: user.apiKey })
    expect(refused.status).toBe(429)
    expect(refused.body).toMatchObject({ isError: true, result: null })
    expect(refused.body.message).toMatch(/resets/)
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(Math.abs(retryAfter - secondsToMidnight())).toBeLessThanOrEqual(2)
    expect(refused.headers.get("x-ratelimit-remaining")).toBe("0")
    const reset = Number(refused.headers.get("x-ratelimit-reset"))
    expect(reset % 86400).toBe(0)
    expect(reset * 1000).toBeGreaterThan(Date.now())
    // Non-metered endpoints still answer, with the headers.
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.status).toBe(200)
    expect(usage.body.result).toMatchObject({ dailyCallsUsed: 3, dailyCallLimit: 3, remainingCallsToday: 0, karmaMultiplier: 1 })
    expect(usage.headers.get("x-ratelimit-plan")).toBe("Free")
    expect(usage.headers.get("x-karma-multiplier")).toBe("1.00")
  })

  it("what-if usage previews another plan/karma but never raises the enforced limit", async () => {
    const preview = await call(server.url, "GET", "/v1/usage?plan=Gold&karma=1000", { apiKey: user.apiKey })
    expect(preview.body.result).toMatchObject({ dailyCallLimit: 28, karmaMultiplier: 4.12, plan: "Gold", whatIf: true, enforced: { plan: "Free", dailyCallLimit: 3 } })
    expect(preview.headers.get("x-ratelimit-limit")).toBe("3")
    expect((await call(server.url, "POST", "/v1/complete", { body: complete, apiKey: user.apiKey })).status).toBe(429)
    for (const q of ["plan=Platinum", "karma=abc", "karma=1.5", "plan=", "karma=0x10", "karma=0b11", "karma=1e3", "karma=+5", "karma=%205"]) {
      const bad = await call(server.url, "GET", `/v1/usage?${q}`, { apiKey: user.apiKey })
      expect(bad.status, q).toBe(400)
      expect(bad.body.isError).toBe(true)
    }
  })

  it("karma raises the enforced limit through the multiplier (Admin sets karma and plan)", async () => {
    const other = await signUp(server, "karma")
    const admin = await adminToken(server)
    await call(server.url, "PUT", `/api/avatar/${other.id}`, { token: admin, body: { karmaTotal: 100 } })
    const res = await call(server.url, "GET", "/v1/usage", { apiKey: other.apiKey })
    expect(res.headers.get("x-karma-multiplier")).toBe("1.90")
    expect(res.headers.get("x-ratelimit-limit")).toBe("5")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${other.id}/plan`, { token: admin, body: { plan: "Gold" } })
    expect(plan.body).toMatchObject({ isError: false, result: { plan: "Gold" } })
    expect((await call(server.url, "GET", "/v1/usage", { apiKey: other.apiKey })).headers.get("x-ratelimit-plan")).toBe("Gold")
    expect((await call(server.url, "PUT", `/v1/admin/avatars/${other.id}/plan`, { apiKey: other.apiKey, body: { plan: "Enterprise" } })).status).toBe(403)
    expect((await call(server.url, "PUT", `/v1/admin/avatars/${other.id}/plan`, { token: admin, body: { plan: "Diamond" } })).status).toBe(400)
  })

  it("API keys: created once, listed without secrets, revoked keys are refused", async () => {
    const created = await call(server.url, "POST", "/v1/keys", { token: user.token, body: { name: "laptop" } })
    expect(created.body.result.key).toMatch(/^aigw_/)
    const list = await call(server.url, "GET", "/v1/keys", { token: user.token })
    expect(list.body.result.some((k: any) => k.id === created.body.result.id)).toBe(true)
    expect(JSON.stringify(list.body)).not.toContain(created.body.result.key)
    expect((await call(server.url, "GET", "/v1/usage", { token: created.body.result.key })).status).toBe(200)
    expect((await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}`, { apiKey: user.apiKey })).status).toBe(200)
    expect((await call(server.url, "GET", "/v1/usage", { apiKey: created.body.result.key })).status).toBe(401)
    expect((await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}`, { apiKey: user.apiKey })).status).toBe(404)
    const stranger = await signUp(server, "stranger")
    expect((await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}`, { apiKey: stranger.apiKey })).status).toBe(404)
    // stopJobs: with a session, for a key revoked before too (once); with a key, 403; a value other than true or false, 400.
    expect((await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}?stopJobs=true`, { apiKey: user.apiKey })).status).toBe(403)
    expect((await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}?stopJobs=yes`, { token: user.token })).status).toBe(400)
    const stop = await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}?stopJobs=true`, { token: user.token })
    expect([stop.status, stop.body.result]).toEqual([200, { id: created.body.result.id, revoked: true, jobsStopped: true }])
    expect((await call(server.url, "DELETE", `/v1/keys/${created.body.result.id}?stopJobs=true`, { token: user.token })).status).toBe(404)
  })

  it("every gateway endpoint except health needs credentials (401 envelope)", async () => {
    for (const [method, path] of [["GET", "/v1/models"], ["GET", "/v1/providers"], ["GET", "/v1/usage"], ["GET", "/v1/openserv/models"], ["POST", "/v1/estimate"], ["GET", "/v1/keys"]] as const) {
      const res = await call(server.url, method, path, method === "POST" ? { body: {} } : {})
      expect(res.status, path).toBe(401)
      expect(res.body).toMatchObject({ isError: true, result: null })
      expect(res.body.message).toMatch(/Authorization: Bearer/)
    }
    expect((await call(server.url, "GET", "/v1/models", { token: "garbage" })).status).toBe(401)
    expect((await call(server.url, "GET", "/v1/health")).status).toBe(200)
  })

  it("catalogues and estimate answer per the spec and refuse bad input", async () => {
    const models = await call(server.url, "GET", "/v1/models", { apiKey: user.apiKey })
    expect(models.body.result.total).toBe(models.body.result.models.length)
    expect(models.body.result.total).toBeGreaterThanOrEqual(23)
    expect(Object.keys(models.body.result.models[0]).sort()).toEqual(
      ["contextWindow", "id", "inputPer1kUSD", "minPlanLabel", "name", "outputPer1kUSD", "providerName", "supportsFunctions", "supportsVision"]
    )
    const free = await call(server.url, "GET", "/v1/models?plan=Free", { apiKey: user.apiKey })
    expect(free.body.result.models.every((m: any) => m.minPlanLabel === "Free")).toBe(true)
    expect(free.body.result.total).toBeLessThan(models.body.result.total)
    expect((await call(server.url, "GET", "/v1/models?plan=Mythril", { apiKey: user.apiKey })).status).toBe(400)
    const one = await call(server.url, "GET", "/v1/models/gpt-4o-mini", { apiKey: user.apiKey })
    expect(one.body.result).toMatchObject({ id: "gpt-4o-mini", providerName: "OpenAI" })
    expect((await call(server.url, "GET", "/v1/models/nope", { apiKey: user.apiKey })).status).toBe(404)
    // A query parameter a route of the gateway's API does not take is refused by name, on the Effect path and on the lane, counting nothing.
    const used = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    for (const [method, path] of [["GET", "/v1/models/gpt-4o-mini?x=1"], ["GET", "/v1/providers?verbose=true"], ["POST", "/v1/complete?stream=true"], ["POST", "/v1/embeddings?dimensions=8"], ["GET", "/v1/openserv/models?x=1"]] as const) {
      const res = await call(server.url, method, path, { apiKey: user.apiKey, ...(method === "POST" ? { body: { messages: [{ role: "user", content: "hi" }], texts: ["a"] } } : {}) })
      expect([path, res.status, res.body.message]).toEqual([path, 400, `Invalid query: ${path.split("?")[1]!.split("=")[0]}: is unexpected`])
    }
    expect((await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed).toBe(used)
    // The probes ignore a query: monitors add cache-busting parameters.
    for (const probe of ["/v1/health?ts=1", "/v1/ready?ts=1"]) expect([probe, (await call(server.url, "GET", probe)).status]).toEqual([probe, 200])
    const providers = await call(server.url, "GET", "/v1/providers", { apiKey: user.apiKey })
    expect(providers.body.result.total).toBe(data.providers.length)
    const openai = providers.body.result.providers.find((p: any) => p.id === "openai")
    expect(openai).toMatchObject({ configured: true, status: "up" })
    expect(providers.body.result.providers.find((p: any) => p.id === "mistral")).toMatchObject({ configured: false, status: "unknown" })
    const openserv = await call(server.url, "GET", "/v1/openserv/models", { apiKey: user.apiKey })
    expect(Array.isArray(openserv.body)).toBe(true)
    expect(openserv.body[0].id).toMatch(/^aigw\//)
    expect(openserv.body.every((m: any) => m.capabilities.includes("chat"))).toBe(true)

    const estimate = await call(server.url, "POST", "/v1/estimate", { apiKey: user.apiKey, body: { provider: "openai", model: "gpt-4o-mini", promptTokens: 2000, completionTokens: 1000 } })
    expect(estimate.body.result.estimatedUSD).toBeCloseTo(2 * 0.00015 + 0.0006, 12)
    expect(estimate.body.result.note).toMatch(/gpt-4o-mini/)
    const noCompletion = await call(server.url, "POST", "/v1/estimate", { apiKey: user.apiKey, body: { provider: "openai", model: "gpt-4o-mini", promptTokens: 1000 } })
    expect(noCompletion.body.result.estimatedUSD).toBeCloseTo(0.00015, 12)
    const bad: Array<[unknown, number]> = [
      [{ provider: "openai", model: "gpt-4o-mini", promptTokens: -1 }, 400],
      [{ provider: "openai", model: "gpt-4o-mini", promptTokens: 1.5 }, 400],
      [{ provider: "openai", model: "gpt-4o-mini", promptTokens: 1e300 }, 400],
      [{ provider: "openai", model: "gpt-4o-mini", promptTokens: "100" }, 400],
      [{ provider: "openai", promptTokens: 1 }, 400],
      [{ provider: "nope", model: "gpt-4o-mini", promptTokens: 1 }, 404],
      [{ provider: "openai", model: "claude-haiku-4-5", promptTokens: 1 }, 404]
    ]
    for (const [body, status] of bad) {
      const res = await call(server.url, "POST", "/v1/estimate", { apiKey: user.apiKey, body })
      expect(res.status, JSON.stringify(body)).toBe(status)
      expect(res.body.isError).toBe(true)
    }
  })
})

describe.skipIf(!hasPg)("two gateway processes on one PostgreSQL", () => {
  const servers: Array<RunningServer> = []
  let mock: MockUpstream
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
    await mock?.close()
  })

  it("admit exactly 50 of 200 concurrent calls against a limit of 50", async () => {
    mock = await startOpenAiMock({ apiKey: "sk-pg" })
    const env = { DATABASE_URL: await freshPgDatabase(), OPENAI_API_KEY: "sk-pg", OPENAI_BASE_URL: mock.url, AIGW_PLAN_LIMITS: "{\"Free\":50}", JWT_SECRET: "a-shared-secret-of-at-least-32-bytes!!" }
    servers.push(await startServer(env))
    servers.push(await startServer(env))
    const user = await signUp(servers[0]!, "pg")
    const statuses = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        call(servers[i % 2]!.url, "POST", "/v1/complete", { body: complete, apiKey: user.apiKey }).then((r) => r.status))
    )
    expect(statuses.filter((s) => s === 200).length).toBe(50)
    expect(statuses.filter((s) => s === 429).length).toBe(150)
    const usage = await call(servers[1]!.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result.dailyCallsUsed).toBe(50)
  })
})

describe("every admitted call leaves a usage record", () => {
  let server: RunningServer
  let mock: MockUpstream
  let user: TestAvatar

  beforeAll(async () => {
    mock = await startOpenAiMock({ apiKey: "sk-r" })
    server = await startServer({ OPENAI_API_KEY: "sk-r", OPENAI_BASE_URL: mock.url })
    user = await signUp(server, "records")
  })
  afterAll(async () => {
    await server?.stop()
    await mock?.close()
  })

  it("a call no upstream answered is recorded as failed, with no tokens: engine calls and vendor calls alike", async () => {
    mock.setScenario({ kind: "error", status: 400, message: "refused upstream" })
    const failed = [
      await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: complete }),
      await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body: { texts: ["x"], provider: "openai", model: "text-embedding-3-small" } }),
      await call(server.url, "POST", "/v1/images/generate", { apiKey: user.apiKey, body: { prompt: "x", provider: "openai" } }),
      await call(server.url, "POST", "/v1/moderation", { apiKey: user.apiKey, body: { text: "x", provider: "openai" } })
    ]
    expect(failed.map((r) => r.status)).toEqual([502, 502, 502, 502])
    mock.setScenario({ kind: "text", text: "fine" })
    expect((await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: complete })).status).toBe(200)
    const db = new Database(path.join(server.dataDir, "data", "aigw.sqlite"), { readonly: true })
    try {
      const rows = db.prepare("SELECT capability, provider, ok, prompt_tokens + completion_tokens AS tokens, cost_usd FROM usage_events WHERE avatar_id = ? ORDER BY at, id").all(user.id)
      expect(rows).toEqual([
        { capability: "chat", provider: "openai", ok: 0, tokens: 0, cost_usd: 0 },
        { capability: "embeddings", provider: "openai", ok: 0, tokens: 0, cost_usd: 0 },
        { capability: "images", provider: "openai", ok: 0, tokens: 0, cost_usd: 0 },
        { capability: "moderation", provider: "openai", ok: 0, tokens: 0, cost_usd: 0 },
        expect.objectContaining({ capability: "chat", provider: "openai", ok: 1 })
      ])
    } finally {
      db.close()
    }
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result.dailyCallsUsed).toBe(5)
  })
})

describe("usage records older than AIGW_USAGE_RETENTION_DAYS are deleted", () => {
  let server: RunningServer | undefined
  let mock: MockUpstream

  beforeAll(async () => {
    mock = await startOpenAiMock({ apiKey: "sk-k" })
  })
  afterAll(async () => {
    await server?.stop()
    await mock?.close()
  })

  it("at start, the records only: today's call and the daily totals stay", async () => {
    const env = { OPENAI_API_KEY: "sk-k", OPENAI_BASE_URL: mock.url }
    server = await startServer(env)
    const user = await signUp(server, "retained")
    expect((await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: complete })).status).toBe(200)
    await server.stop()
    const file = path.join(server.dataDir, "data", "aigw.sqlite")
    const db = new Database(file)
    const day = 86_400_000
    try {
      // Records of earlier calls, as the gateway writes them (time-ordered ids of their `at`), with their days' totals.
      const insert = db.prepare(`INSERT INTO usage_events (id, avatar_id, day, provider, model, capability, prompt_tokens, completion_tokens,
        cost_usd, latency_ms, estimated, ok, at) VALUES (?, ?, ?, 'openai', 'gpt-4o-mini', 'chat', 10, 5, 0.5, 3, 0, 1, ?)`)
      const totals = db.prepare("INSERT INTO daily_usage (avatar_id, day, calls, tokens, spend_usd) VALUES (?, ?, 1, 15, 0.5)")
      for (const age of [45, 31, 29]) {
        const at = Date.now() - age * day
        const dayOf = new Date(at).toISOString().slice(0, 10)
        insert.run(uuidv7(at), user.id, dayOf, at)
        totals.run(user.id, dayOf)
      }
    } finally {
      db.close()
    }
    server = await startServer({ ...env, AIGW_USAGE_RETENTION_DAYS: "30" }, { dataDir: server.dataDir })
    const ages = () => {
      const reader = new Database(file, { readonly: true })
      try {
        const now = Date.now()
        return {
          records: reader.prepare("SELECT at FROM usage_events WHERE avatar_id = ? ORDER BY at").all(user.id).map((r: any) => Math.round((now - r.at) / day)),
          days: (reader.prepare("SELECT COUNT(*) AS n FROM daily_usage WHERE avatar_id = ?").get(user.id) as any).n
        }
      } finally {
        reader.close()
      }
    }
    const logged = "usage retention: 2 usage record(s) older than 30 day(s) deleted (AIGW_USAGE_RETENTION_DAYS)"
    // The log line comes through a pipe after the delete: wait for both, boundedly.
    for (let i = 0; i < 100 && (ages().records.length > 2 || !server.output().includes(logged)); i++) await new Promise((r) => setTimeout(r, 50))
    expect(ages()).toEqual({ records: [29, 0], days: 4 })
    expect(server.output()).toContain(logged)
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result.dailyCallsUsed).toBe(1)
  })
})
