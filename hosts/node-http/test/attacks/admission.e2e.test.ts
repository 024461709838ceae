/**
 * Admission attacks end to end:
 * - a refused request costs no quota: every metered route refuses a request that is wrong only
 *   against the configuration (unknown model or provider, a refused URL, an unusable schema) and
 *   GET /v1/usage still reports the calls made before it;
 * - a caller's JSON-Schema `pattern` cannot block the event loop (ReDoS on /v1/extract);
 * - a database another process keeps locked is waited for off the event loop (health answers
 *   meanwhile), and past the wait a 503 to retry, not a 500;
 * - /v1/health is a readiness check: 503 while PostgreSQL is down.
 */
import Database from "better-sqlite3"
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "../support/accounts.ts"
import { LOOP_BLOCKED_MS, underAttack } from "../support/attack.ts"
import { call, type RunningServer, startServer } from "../support/server.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..")
const messages = [{ role: "user", content: "hi" }]
const unknownModel = "no-such-model"
const unknownProvider = "no-such-provider"
const privateUrl = "http://127.0.0.1:9/hook"

/** One refusal per metered route: [path, body, expected status]. */
const refusals: ReadonlyArray<readonly [string, unknown, number]> = [
  ["/v1/complete", { messages, model: unknownModel }, 404],
  ["/v1/complete", { messages, model: "gpt-4o-mini", maxTokens: 100_000 }, 422],
  ["/v1/complete/stream", { messages, model: unknownModel }, 404],
  ["/v1/complete/tool-result", { messages, model: "gpt-4o-mini" }, 400],
  ["/v1/complete/tool-result", {
    messages: [{ role: "assistant", content: "", toolCalls: [{ id: "c1", name: "f", arguments: "{}" }] }, { role: "tool", toolCallId: "c1", content: "1" }],
    model: unknownModel
  }, 404],
  ["/openai/v1/chat/completions", { messages, model: unknownModel }, 404],
  ["/v1/embeddings", { texts: ["x"], model: unknownModel }, 404],
  ["/v1/translate", { text: "x", targetLanguage: "de", provider: unknownProvider }, 404],
  ["/v1/classify", { text: "x", labels: ["a", "b"], model: unknownModel }, 404],
  ["/v1/extract", { text: "x", schema: { type: "object" }, model: unknownModel }, 404],
  ["/v1/extract", { text: "x", schema: { type: "object", properties: { s: { type: "string", pattern: "(a)\\1" } } } }, 422],
  ["/v1/prompts/optimise", { prompt: "x", model: unknownModel }, 404],
  ["/v1/guardrails/check", { text: "x", provider: "openai" }, 422],
  ["/v1/rerank", { query: "x", documents: ["a"], provider: "openai" }, 422],
  ["/v1/memory/store", { content: "x", provider: unknownProvider }, 404],
  ["/v1/graphrag/query", { query: "x", provider: unknownProvider }, 404],
  ["/v1/orchestrate/crew", { tasks: [{ id: "t", agent: "a", description: "d", expected_output: "o" }], provider: unknownProvider }, 404],
  ["/v1/orchestrate/conversation", { initial_message: "x", model: unknownModel }, 404],
  ["/v1/orchestrate/graph-node", { node_name: "n", provider: unknownProvider }, 404],
  ["/v1/reasoning-network/dispatch", { problem: "x", provider: unknownProvider }, 404],
  ["/v1/images/generate", { prompt: "x", provider: unknownProvider }, 404],
  ["/v1/images/generate", { prompt: "x", width: 512 }, 400],
  ["/v1/moderation", { text: "x", provider: unknownProvider }, 404],
  ["/v1/audio/speech", { text: "x", provider: unknownProvider }, 404],
  ["/v1/batch/submit", { requests: [{ messages }], callbackUrl: privateUrl }, 422],
  ["/v1/video/generate", { prompt: "x", callbackUrl: privateUrl }, 422],
  ["/v1/code/execute", { code: "ls", language: "bash" }, 422],
  // e2b is a catalogued sandbox vendor (code not served): refused for this caller's plan (403), still before counting.
  ["/v1/code/execute", { code: "1", provider: "e2b" }, 403],
  ["/v1/code/execute", { code: "1", provider: "riza" }, 403],
  ["/v1/fine-tuning/jobs", { baseModel: "gpt-4o-mini", trainingData: [{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }], callbackUrl: privateUrl }, 422]
]

describe("a refused request costs no quota", () => {
  let openai: MockUpstream
  let server: RunningServer
  let user: TestAvatar
  const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed as number

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-adm" })
    server = await startServer({ OPENAI_API_KEY: "sk-adm", OPENAI_BASE_URL: openai.url })
    user = await signUp(server, "admission")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  it("on every metered route, with an API key and with a session token", async () => {
    // One admitted call first: the count that every refusal must leave as it is.
    expect((await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: { messages, model: "gpt-4o-mini" } })).status).toBe(200)
    let before = await used()
    expect(before).toBe(1)
    const wrong: Array<string> = []
    for (const credentials of [{ apiKey: user.apiKey }, { token: user.token }]) {
      for (const [route, body, status] of refusals) {
        const res = await call(server.url, "POST", route, { ...credentials, body })
        const what = `${route} ${JSON.stringify(body).slice(0, 60)} (${"token" in credentials ? "session" : "API key"})`
        const after = await used()
        if (after !== before) wrong.push(`${what}: counted`)
        if (res.status !== status) wrong.push(`${what}: ${res.status} ${JSON.stringify(res.body).slice(0, 120)}`)
        // Refusals answer with the day's rate-limit headers too.
        if (res.headers.get("x-ratelimit-remaining") !== String(100 - after)) wrong.push(`${what}: no rate-limit headers`)
        before = after
      }
    }
    expect(wrong).toEqual([])
    expect(await used()).toBe(1)
  }, 120_000)

  it("multipart routes too: a transcription refused for its provider or file costs no quota", async () => {
    const before = await used()
    const send = async (fields: Record<string, string>, file?: Blob) => {
      const form = new FormData()
      for (const [k, v] of Object.entries(fields)) form.set(k, v)
      if (file) form.set("file", file, "a.wav")
      return fetch(`${server.url}/v1/audio/transcriptions`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    }
    expect((await send({ provider: unknownProvider }, new Blob([new Uint8Array(64)]))).status).toBe(404)
    expect((await send({ language: "klingon" }, new Blob([new Uint8Array(64)]))).status).toBe(400)
    expect((await send({})).status).toBe(400)
    expect(await used()).toBe(before)
  })

  it("documents too: an unreadable file is refused before it is counted", async () => {
    const before = await used()
    const upload = async (name: string, bytes: Uint8Array | string, fields: Record<string, string> = {}) => {
      const form = new FormData()
      for (const [k, v] of Object.entries(fields)) form.set(k, v)
      form.set("file", new File([bytes as BlobPart], name))
      const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
      return { status: res.status, body: await res.json() as any }
    }
    const refused = [
      await upload("a.txt", new Uint8Array([0xff, 0xfe, 0xc3])),
      await upload("a.json", "{\"a\": [1, 2"),
      await upload("deep.json", "[".repeat(100_000) + "]".repeat(100_000)),
      await upload("a.pdf", "not a pdf"),
      await upload("a.docx", "not a zip"),
      await upload("a.txt", "hello", { provider: "unstructured" }),
      await upload("a.exe", "MZ")
    ]
    // unstructured is a real parsing vendor now: refused for this caller's plan (403), still before counting.
    expect(refused.map((r) => r.status)).toEqual([400, 400, 400, 400, 400, 403, 422])
    for (const r of refused) expect(r.body.isError).toBe(true)
    expect(await used()).toBe(before)
    // An out-of-range character reference is text, not a 500.
    const html = await upload("a.html", "<p>&#x110000; ok</p>")
    expect(html.status).toBe(200)
    expect(html.body.result.text).toBe("\uFFFD ok")
    expect(await used()).toBe(before + 1)
  })

  it("over MCP too: a metered tool refused for its arguments costs no quota", async () => {
    const before = await used()
    const mcp = (id: number, name: string, args: unknown) =>
      fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${user.apiKey}` },
        body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } })
      }).then((r) => r.json() as Promise<any>)
    const refused = [
      await mcp(1, "gateway_complete", { messages, model: unknownModel }),
      await mcp(2, "gateway_embed", { texts: ["x"], model: unknownModel }),
      await mcp(3, "gateway_orchestrate_conversation", { initial_message: "x", model: unknownModel }),
      await mcp(4, "gateway_generate_image", { prompt: "x", provider: unknownProvider }),
      // Refused for an argument the route checks as well (the tool's check reads every argument its call reads).
      await mcp(6, "gateway_complete", { messages, model: "gpt-4o-mini", maxTokens: 100_000 })
    ]
    for (const r of refused) expect(r.result.isError, JSON.stringify(r)).toBe(true)
    expect(refused.map((r) => r.result.structuredContent.error.kind)).toEqual(["NotFound", "NotFound", "NotFound", "NotFound", "Unprocessable"])
    expect(await used()).toBe(before)
    const admitted = await mcp(5, "gateway_complete", { messages, model: "gpt-4o-mini" })
    expect(admitted.result.isError).toBeFalsy()
    expect(await used()).toBe(before + 1)
  })

  it("an unsupported pattern is a 422 naming it", async () => {
    const res = await call(server.url, "POST", "/v1/extract", {
      apiKey: user.apiKey,
      body: { text: "x", schema: { type: "object", properties: { s: { type: "string", pattern: "^(?=a)b" } } } }
    })
    expect(res.status).toBe(422)
    expect(res.body.message).toContain("^(?=a)b")
  })

  it("a backtracking pattern against the model's answer does not block the event loop (ReDoS)", async () => {
    openai.setScenario({ kind: "text", text: JSON.stringify({ s: `${"a".repeat(32)}!` }) })
    const schema = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
    const { figures, value } = await underAttack(server, () =>
      call(server.url, "POST", "/v1/extract", { apiKey: user.apiKey, body: { text: "x", schema } }))
    expect(value.status).toBe(200)
    expect(value.body.result).toMatchObject({ valid: false, data: { s: `${"a".repeat(32)}!` } })
    expect(value.body.result.errors[0]).toMatch(/pattern/)
    expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
    // A matching answer is still valid.
    openai.setScenario({ kind: "text", text: JSON.stringify({ s: "aaaa" }) })
    const ok = await call(server.url, "POST", "/v1/extract", { apiKey: user.apiKey, body: { text: "x", schema } })
    expect(ok.body.result).toMatchObject({ valid: true })
  }, 60_000)

  it("a metered call while another process keeps SQLite's write lock past the wait: a 503 to retry (not a 500), not counted, health answered throughout; served once the lock goes", async () => {
    const before = await used()
    const other = new Database(path.join(server.dataDir, "data", "aigw.sqlite"))
    try {
      other.exec("BEGIN IMMEDIATE")
      for (const route of ["/v1/complete", "/v1/translate"]) {
        const body = route === "/v1/complete" ? { messages, model: "gpt-4o-mini" } : { text: "x", targetLanguage: "de" }
        const { value: locked, figures } = await underAttack(server, () => call(server.url, "POST", route, { apiKey: user.apiKey, body }))
        expect([route, locked.status, locked.headers.get("retry-after")]).toEqual([route, 503, "1"])
        // The 5 s wait for the lock was spent off the event loop.
        expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
        expect(locked.body).toMatchObject({ isError: true, message: "The database is locked by another process; retry shortly." })
      }
    } finally {
      other.exec("ROLLBACK")
      other.close()
    }
    expect(await used()).toBe(before)
    expect((await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: { messages, model: "gpt-4o-mini" } })).status).toBe(200)
  }, 60_000)

  it("a client that leaves while its call waits for SQLite's write lock is not counted (the fast lane and an Effect route)", async () => {
    const before = await used()
    const other = new Database(path.join(server.dataDir, "data", "aigw.sqlite"))
    other.exec("BEGIN IMMEDIATE")
    try {
      const leave = async (route: string, body: unknown) => {
        const abort = new AbortController()
        const pending = fetch(`${server.url}${route}`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${user.apiKey}` },
          body: JSON.stringify(body),
          signal: abort.signal
        }).then((r) => r.status, () => "left")
        await new Promise((r) => setTimeout(r, 300))
        abort.abort()
        return pending
      }
      expect(await leave("/v1/complete", { messages, model: "gpt-4o-mini" })).toBe("left")
      expect(await leave("/mcp", { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "gateway_complete", arguments: { messages, model: "gpt-4o-mini" } } })).toBe("left")
      await new Promise((r) => setTimeout(r, 200))
    } finally {
      other.exec("ROLLBACK")
      other.close()
    }
    // The waiting admissions find their callers gone once the lock is free.
    await new Promise((r) => setTimeout(r, 300))
    expect(await used()).toBe(before)
  }, 60_000)

  it("while another process keeps SQLite's write lock the server goes on serving; the calls waiting for it are served once it goes", async () => {
    const before = await used()
    const other = new Database(path.join(server.dataDir, "data", "aigw.sqlite"))
    other.exec("BEGIN IMMEDIATE")
    // Released after 3 s: the driver's own wait for it used to hold the event loop that long.
    const release = setTimeout(() => other.exec("ROLLBACK"), 3_000)
    try {
      const { value, figures } = await underAttack(server, () =>
        Promise.all([
          call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: { messages, model: "gpt-4o-mini" } }),
          call(server.url, "POST", "/v1/complete", { token: user.token, body: { messages, model: "gpt-4o-mini" } }),
          call(server.url, "POST", "/openai/v1/chat/completions", { apiKey: user.apiKey, body: { messages, model: "gpt-4o-mini" } }),
          // A write of the avatar API (through the SqlClient, not the metering path).
          call(server.url, "POST", "/v1/keys", { token: user.token, body: { name: "while locked" } })
        ]))
      expect(value.map((r) => r.status)).toEqual([200, 200, 200, 200])
      expect(figures.probes).toBeGreaterThan(10)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
    } finally {
      clearTimeout(release)
      if (other.inTransaction) other.exec("ROLLBACK")
      other.close()
    }
    expect(await used()).toBe(before + 3)
  }, 60_000)
})

describe("/v1/health is readiness: 503 while PostgreSQL is down", () => {
  let server: RunningServer
  let pgDir = ""

  beforeAll(async () => {
    // A private PostgreSQL: this test stops it.
    const out = execFileSync("bash", [path.join(root, ".ci/pg.sh"), "start"], { encoding: "utf8" })
    const env = Object.fromEntries([...out.matchAll(/export (\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]))
    pgDir = env.AIGW_TEST_PG_DIR!
    server = await startServer({ DATABASE_URL: env.AIGW_TEST_PG_URL! })
  }, 120_000)
  afterAll(async () => {
    await server?.stop()
    if (pgDir) execFileSync("bash", [path.join(root, ".ci/pg.sh"), "stop", pgDir])
  })

  it("answers 200 ok while the database answers, 503 unavailable naming it once it stops", async () => {
    const up = await call(server.url, "GET", "/v1/health")
    expect(up.status).toBe(200)
    expect(up.body).toMatchObject({ status: "ok", checks: { database: "ok" } })
    execFileSync("bash", [path.join(root, ".ci/pg.sh"), "stop", pgDir])
    pgDir = ""
    // The probe's answer is cached for 1 s; then the failure shows.
    const deadline = Date.now() + 10_000
    let down = await call(server.url, "GET", "/v1/health")
    while (down.status === 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200))
      down = await call(server.url, "GET", "/v1/health")
    }
    expect(down.status).toBe(503)
    expect(down.body).toMatchObject({ status: "unavailable", checks: { database: "failed" } })
    expect(typeof down.body.version).toBe("string")
    expect(Number.isNaN(Date.parse(down.body.timestamp))).toBe(false)
    // Health stays cheap while the database is down: cached, never waiting on it.
    const started = performance.now()
    for (let i = 0; i < 20; i++) expect((await call(server.url, "GET", "/v1/health")).status).toBe(503)
    expect(performance.now() - started).toBeLessThan(5_000)
  }, 60_000)
})
