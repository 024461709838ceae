/**
 * Observability end to end through the node host (docs/observability.md): the request id on JWT
 * (Effect routes), API-key (fast lane) and MCP calls, passed to the upstream; JSON log lines with the
 * request id (AIGW_LOG_FORMAT=json, AIGW_LOG_REQUESTS=true); /metrics in the Prometheus text format
 * with route templates as labels; /v1/ready.
 */
import Database from "better-sqlite3"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { type Receiver, startReceiver } from "./support/receiver.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

/** A tiny parser of the Prometheus text exposition format 0.0.4 (throws on a line it cannot read). */
const parsePrometheus = (text: string) => {
  const samples: Array<Sample> = []
  const types = new Map<string, string>()
  for (const line of text.split("\n")) {
    if (line === "") continue
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ")
      types.set(name!, type!)
      continue
    }
    if (line.startsWith("# HELP ")) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`)
    const labels: Record<string, string> = {}
    const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y
    const body = m[2] ?? ""
    let at = 0
    while (at < body.length) {
      labelRe.lastIndex = at
      const l = labelRe.exec(body)
      if (!l) throw new Error(`bad labels: ${body}`)
      labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\"/g, "\"").replace(/\\\\/g, "\\")
      at = labelRe.lastIndex
    }
    const raw = m[3]!
    samples.push({ name: m[1]!, labels, value: raw === "+Inf" ? Infinity : Number(raw) })
    if (Number.isNaN(samples.at(-1)!.value) && raw !== "NaN") throw new Error(`bad value: ${line}`)
  }
  return { samples, types }
}

const valueOf = (samples: ReadonlyArray<Sample>, name: string, labels: Record<string, string> = {}) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)

describe("observability", () => {
  let server: RunningServer
  let openai: MockUpstream
  let user: TestAvatar
  let receiver: Receiver
  const hi = [{ role: "user", content: "Hello" }]
  const upstreamIdOf = (i = -1) => openai.requests.at(i)?.headers["x-request-id"]

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 1 })
    receiver = await startReceiver()
    server = await startServer({
      AIGW_ALLOW_PRIVATE_URLS: "true",
      AIGW_WORKER_INTERVAL_MS: "100",
      AIGW_JOB_POLL_MS: "100",
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: openai.url,
      AIGW_LOG_FORMAT: "json",
      AIGW_LOG_REQUESTS: "true"
    })
    user = await signUp(server, "obs")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
    await receiver?.close()
  })

  describe("request id", () => {
    it("keeps a valid id on a JWT call (Effect route) and sends it upstream", async () => {
      openai.setScenario({ kind: "text", text: "hi", usage: { prompt: 5, completion: 2 } })
      const res = await call(server.url, "POST", "/v1/complete", {
        token: user.token,
        body: { messages: hi, provider: "openai", model: "gpt-4o-mini" },
        headers: { "x-request-id": "jwt-call.1:a_b" }
      })
      expect(res.status).toBe(200)
      expect(res.headers.get("x-request-id")).toBe("jwt-call.1:a_b")
      expect(upstreamIdOf()).toBe("jwt-call.1:a_b")
    })

    it("sends it upstream on an Effect-route stream too", async () => {
      openai.setScenario({ kind: "text", text: "streamed", usage: { prompt: 5, completion: 2 } })
      const res = await fetch(`${server.url}/v1/complete/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${user.token}`, "x-request-id": "jwt-stream-2" },
        body: JSON.stringify({ messages: hi, provider: "openai", model: "gpt-4o-mini" })
      })
      expect(res.status).toBe(200)
      await res.text()
      expect(res.headers.get("x-request-id")).toBe("jwt-stream-2")
      expect(upstreamIdOf()).toBe("jwt-stream-2")
    })

    it("keeps a valid id on an API-key call (fast lane) and sends it upstream, streams included", async () => {
      openai.setScenario({ kind: "text", text: "hi", usage: { prompt: 5, completion: 2 } })
      const res = await call(server.url, "POST", "/openai/v1/chat/completions", {
        apiKey: user.apiKey,
        body: { model: "gpt-4o-mini", messages: hi },
        headers: { "x-request-id": "lane-call-3" }
      })
      expect(res.status).toBe(200)
      expect(res.headers.get("x-request-id")).toBe("lane-call-3")
      expect(upstreamIdOf()).toBe("lane-call-3")
      const stream = await fetch(`${server.url}/v1/complete/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": user.apiKey, "x-request-id": "lane-stream-4" },
        body: JSON.stringify({ messages: hi, provider: "openai", model: "gpt-4o-mini" })
      })
      await stream.text()
      expect(stream.headers.get("x-request-id")).toBe("lane-stream-4")
      expect(upstreamIdOf()).toBe("lane-stream-4")
    })

    it("generates one when absent and replaces an invalid one (lane, Effect routes, errors, unknown routes)", async () => {
      openai.setScenario({ kind: "text", text: "hi", usage: { prompt: 5, completion: 2 } })
      const lane = await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } })
      const generated = lane.headers.get("x-request-id")!
      expect(generated).toMatch(UUID_V7)
      expect(upstreamIdOf()).toBe(generated)
      for (const bad of ["has spaces", "x".repeat(129), "semi;colon"]) {
        const res = await call(server.url, "POST", "/v1/complete", {
          apiKey: user.apiKey,
          body: { messages: hi, provider: "openai", model: "gpt-4o-mini" },
          headers: { "x-request-id": bad }
        })
        expect(res.headers.get("x-request-id")).toMatch(UUID_V7)
        expect(upstreamIdOf()).toBe(res.headers.get("x-request-id"))
      }
      for (const [method, path, headers] of [
        ["GET", "/v1/health", {}],
        ["GET", "/v1/usage", {}],
        ["GET", "/no/such/route", {}],
        ["POST", "/v1/complete", { "x-api-key": "aigw_wrong" }],
        ["GET", "/v1/health", { "x-request-id": "bad id" }]
      ] as const) {
        const res = await fetch(`${server.url}${path}`, { method, headers })
        expect(res.headers.get("x-request-id"), `${method} ${path}`).toMatch(UUID_V7)
      }
      const kept = await fetch(`${server.url}/v1/health`, { headers: { "x-request-id": "health-5" } })
      expect(kept.headers.get("x-request-id")).toBe("health-5")
    })

    it("is answered on /mcp", async () => {
      const res = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "x-request-id": "mcp-call-6" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
        })
      })
      expect(res.status).toBe(200)
      expect(res.headers.get("x-request-id")).toBe("mcp-call-6")
      const anonymous = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${user.apiKey}` },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" })
      })
      expect(anonymous.headers.get("x-request-id")).toMatch(UUID_V7)
    })
  })

  it("writes JSON log lines that carry the request id (access log included)", async () => {
    await call(server.url, "GET", "/v1/health", { headers: { "x-request-id": "log-check-7" } })
    await new Promise((r) => setTimeout(r, 200))
    const lines = server.output().split("\n").filter((l) => l.trim() !== "")
    expect(lines.length).toBeGreaterThan(0)
    const logged = lines.map((l) => {
      try {
        return JSON.parse(l)
      } catch {
        throw new Error(`not a JSON log line: ${l}`)
      }
    })
    for (const l of logged) {
      expect(typeof l.timestamp).toBe("string")
      expect(typeof l.level).toBe("string")
      expect(l).toHaveProperty("message")
    }
    const health = logged.find((l) => l.requestId === "log-check-7")
    expect(health).toMatchObject({ level: "INFO", method: "GET", route: "/v1/health", status: 200 })
    expect(health.message).toMatch(/^GET \/v1\/health 200 /)
    expect(logged.find((l) => l.requestId === "lane-call-3")).toMatchObject({ route: "/openai/v1/chat/completions", status: 200 })
    expect(logged.find((l) => l.requestId === "jwt-call.1:a_b")).toMatchObject({ route: "/v1/complete", status: 200 })
  })

  it("logs a request whose client left before its answer as 499 (fast lane and Effect app)", async () => {
    openai.setScenario({ kind: "hang" })
    // The avatar's context is added by the Effect app: the lane hands that call over.
    const left = [["left-lane-1", {}], ["left-effect-1", { injectAvatarContext: true }]] as const
    for (const [id, extra] of left) {
      const abort = new AbortController()
      const before = openai.requests.length
      const sent = fetch(`${server.url}/v1/complete`, {
        method: "POST",
        signal: abort.signal,
        headers: {
          "content-type": "application/json",
          "x-request-id": id,
          "x-api-key": user.apiKey
        },
        body: JSON.stringify({ messages: hi, provider: "openai", model: "gpt-4o-mini", ...extra })
      }).catch(() => undefined)
      for (let i = 0; i < 100 && openai.requests.length === before; i++) await new Promise((r) => setTimeout(r, 20))
      abort.abort()
      await sent
    }
    openai.setScenario({ kind: "text", text: "hi", usage: { prompt: 5, completion: 2 } })
    let logged: Array<any> = []
    for (let i = 0; i < 50 && logged.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 50))
      logged = server.output().split("\n").filter((l) => l.includes("\"left-")).map((l) => JSON.parse(l)).filter((l) => l.status !== undefined)
    }
    expect(logged.map((l) => [l.requestId, l.route, l.status]).sort()).toEqual([["left-effect-1", "/v1/complete", 499], ["left-lane-1", "/v1/complete", 499]])
  })

  it("serves /metrics in the Prometheus text format with route templates as labels", async () => {
    await call(server.url, "GET", "/v1/video/no-such-job", { token: user.token })
    await call(server.url, "GET", "/v1/video/another-job", { token: user.token })
    await call(server.url, "GET", "/no/such/route/x1")
    const res = await fetch(`${server.url}/metrics`)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    expect(res.headers.get("x-request-id")).toMatch(UUID_V7)
    const { samples, types } = parsePrometheus(await res.text())
    expect(types.get("aigw_http_requests_total")).toBe("counter")
    expect(types.get("aigw_http_request_duration_seconds")).toBe("histogram")
    for (const name of ["aigw_upstream_calls_total", "aigw_upstream_errors_total", "aigw_tokens_total", "aigw_cost_usd_total", "aigw_quota_refusals_total", "aigw_sandbox_refusals_total", "aigw_usage_records_pruned_total"]) {
      expect(types.get(name), name).toBe("counter")
    }
    for (const name of ["aigw_sandbox_runs_active", "aigw_jobs_backlog", "aigw_webhooks_backlog"]) expect(types.get(name), name).toBe("gauge")

    expect(valueOf(samples, "aigw_http_requests_total", { route: "/v1/complete", method: "POST", status: "200" })).toBeGreaterThanOrEqual(4)
    expect(valueOf(samples, "aigw_http_requests_total", { route: "/openai/v1/chat/completions", method: "POST", status: "200" })).toBe(1)
    expect(valueOf(samples, "aigw_http_requests_total", { route: "/v1/complete/stream", method: "POST", status: "200" })).toBe(2)
    expect(valueOf(samples, "aigw_http_requests_total", { route: "/v1/video/:jobId", method: "GET" })).toBe(2)
    expect(valueOf(samples, "aigw_http_requests_total", { route: "/mcp", method: "POST" })).toBe(2)
    expect(valueOf(samples, "aigw_http_requests_total", { route: "unmatched" })).toBeGreaterThanOrEqual(2)
    // Never a raw path as a label.
    expect(samples.some((s) => Object.values(s.labels).some((v) => v.includes("no-such") || v.includes("/no/such")))).toBe(false)
    expect(valueOf(samples, "aigw_http_request_duration_seconds_count", { route: "/openai/v1/chat/completions", method: "POST" })).toBe(1)
    expect(valueOf(samples, "aigw_http_request_duration_seconds_bucket", { route: "/openai/v1/chat/completions", le: "+Inf" })).toBe(1)

    expect(valueOf(samples, "aigw_upstream_calls_total", { provider: "openai", outcome: "ok" })).toBeGreaterThanOrEqual(8)
    expect(valueOf(samples, "aigw_tokens_total", { provider: "openai", direction: "prompt" })).toBeGreaterThanOrEqual(40)
    expect(valueOf(samples, "aigw_tokens_total", { provider: "openai", direction: "completion" })).toBeGreaterThanOrEqual(16)
    expect(valueOf(samples, "aigw_cost_usd_total", { provider: "openai" })).toBeGreaterThan(0)
    expect(valueOf(samples, "aigw_jobs_backlog")).toBe(0)
    expect(valueOf(samples, "aigw_webhooks_backlog")).toBe(0)
  })

  it("counts upstream errors by kind", async () => {
    openai.setScenario({ kind: "error", status: 400, message: "bad request" })
    await call(server.url, "POST", "/v1/complete", { apiKey: user.apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } })
    const { samples } = parsePrometheus(await (await fetch(`${server.url}/metrics`)).text())
    expect(valueOf(samples, "aigw_upstream_errors_total", { provider: "openai", kind: "http" })).toBe(1)
    expect(valueOf(samples, "aigw_upstream_calls_total", { provider: "openai", outcome: "error" })).toBe(1)
  })

  it("counts a stream's attempt when it ends: one that fails after its first chunks is an error, one the client left is cancelled", async () => {
    const count = async (labels: Record<string, string>) =>
      valueOf(parsePrometheus(await (await fetch(`${server.url}/metrics`)).text()).samples, labels.kind ? "aigw_upstream_errors_total" : "aigw_upstream_calls_total", labels) ?? 0
    const stream = (signal?: AbortSignal) =>
      fetch(`${server.url}/v1/complete/stream`, {
        method: "POST",
        ...(signal ? { signal } : {}),
        headers: { "content-type": "application/json", "x-api-key": user.apiKey },
        body: JSON.stringify({ messages: hi, provider: "openai", model: "gpt-4o-mini" })
      })
    const before = { ok: await count({ provider: "openai", outcome: "ok" }), error: await count({ provider: "openai", outcome: "error" }), cancelled: await count({ provider: "openai", outcome: "cancelled" }), protocol: await count({ provider: "openai", kind: "protocol" }) }
    // The upstream answers 200, streams a little, then sends its error event: it was counted as ok when it answered.
    openai.setScenario({ kind: "error", status: 500, message: "overloaded", midStream: true })
    expect(await (await stream()).text()).toContain("overloaded")
    // A stream the upstream holds, left by its client.
    openai.setScenario({ kind: "hang" })
    const abort = new AbortController()
    const sentBefore = openai.requests.length
    const left = stream(abort.signal).then((r) => r.text()).catch(() => undefined)
    for (let i = 0; i < 100 && openai.requests.length === sentBefore; i++) await new Promise((r) => setTimeout(r, 20))
    abort.abort()
    await left
    openai.setScenario({ kind: "text", text: "hi", usage: { prompt: 5, completion: 2 } })
    let cancelled = before.cancelled
    for (let i = 0; i < 50 && cancelled === before.cancelled; i++) {
      await new Promise((r) => setTimeout(r, 20))
      cancelled = await count({ provider: "openai", outcome: "cancelled" })
    }
    expect(cancelled - before.cancelled).toBe(1)
    expect(await count({ provider: "openai", outcome: "error" }) - before.error).toBe(1)
    expect(await count({ provider: "openai", kind: "protocol" }) - before.protocol).toBe(1)
    expect(await count({ provider: "openai", outcome: "ok" })).toBe(before.ok)
  })

  it("sends the submitting request's id with the job's webhook (X-GATEWAY-Request-Id)", async () => {
    openai.setScenario({ kind: "text", text: "item answer", usage: { prompt: 3, completion: 1 } })
    const submit = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: user.apiKey,
      headers: { "x-request-id": "batch-submit-10" },
      body: { requests: [{ messages: hi, provider: "openai", model: "gpt-4o-mini" }], callbackUrl: receiver.url }
    })
    expect(submit.status).toBe(200)
    expect(submit.headers.get("x-request-id")).toBe("batch-submit-10")
    const [hook] = await receiver.waitFor(1, 15_000)
    expect(hook!.headers["x-gateway-request-id"]).toBe("batch-submit-10")
    expect(JSON.parse(hook!.body)).toMatchObject({ jobId: submit.body.result.batchId, status: "completed" })
  })

  it("answers /v1/ready 200 when the database answers and its migrations are applied", async () => {
    const res = await call(server.url, "GET", "/v1/ready")
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok" } })
    // A newer build migrated the database (a rolling deploy): this older replica stays ready.
    const db = new Database(path.join(server.dataDir, "data", "aigw.sqlite"))
    try {
      db.prepare("INSERT INTO aigw_migrations (migration_id, name) SELECT MAX(migration_id) + 1, 'from_a_newer_build' FROM aigw_migrations").run()
    } finally {
      db.close()
    }
    expect((await call(server.url, "GET", "/v1/ready")).body).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok" } })
  })

  it("answers /v1/ready 503 while the database answers reads but takes no write (a full disk, a read-only file)", async () => {
    const db = new Database(path.join(server.dataDir, "data", "aigw.sqlite"))
    try {
      // Every write to the probe's row fails as a full disk's would.
      db.exec("CREATE TRIGGER fail_probe BEFORE UPDATE ON aigw_probe BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
      // The probes' answers are reused for a second (Health.ts PROBE_TTL).
      const afterTtl = () => new Promise((resolve) => setTimeout(resolve, 1_100))
      await afterTtl()
      const refused = await call(server.url, "GET", "/v1/ready")
      expect([refused.status, refused.body]).toEqual([503, { status: "unavailable", checks: { database: "failed", migrations: "ok" } }])
      expect((await call(server.url, "GET", "/v1/health")).status).toBe(200)
      db.exec("DROP TRIGGER fail_probe")
      await afterTtl()
      expect((await call(server.url, "GET", "/v1/ready")).status).toBe(200)
    } finally {
      db.close()
    }
  })
})

describe("a SQLite file removed under the running server", () => {
  it("is not ready: what it writes would be lost at the next start", async () => {
    const server = await startServer({})
    try {
      expect((await call(server.url, "GET", "/v1/ready")).status).toBe(200)
      const file = path.join(server.dataDir, "data", "aigw.sqlite")
      fs.renameSync(file, `${file}.moved`)
      const refused = await call(server.url, "GET", "/v1/ready")
      expect([refused.status, refused.body]).toEqual([503, { status: "unavailable", checks: { database: "failed", migrations: "ok" } }])
      expect(server.output()).toContain("the SQLite database file was removed under the running server")
      fs.renameSync(`${file}.moved`, file)
      expect((await call(server.url, "GET", "/v1/ready")).status).toBe(200)
    } finally {
      await server.stop()
    }
  })
})

describe("observability switched off", () => {
  it("AIGW_METRICS=false: no /metrics; text logs stay text", async () => {
    const server = await startServer({ AIGW_METRICS: "false", AIGW_LOG_REQUESTS: "true" })
    try {
      const res = await call(server.url, "GET", "/metrics")
      expect(res.status).toBe(404)
      expect(res.headers.get("x-request-id")).toMatch(UUID_V7)
      await call(server.url, "GET", "/v1/health", { headers: { "x-request-id": "text-log-8" } })
      await new Promise((r) => setTimeout(r, 200))
      const line = server.output().split("\n").find((l) => l.includes("GET /v1/health 200"))
      expect(line).toBeDefined()
      expect(server.output()).toContain("text-log-8")
      expect(() => JSON.parse(line!)).toThrow()
    } finally {
      await server.stop()
    }
  })
})

describe("OpenTelemetry export", () => {
  it("sends spans over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces", async () => {
    const { createServer } = await import("node:http")
    const received: Array<{ path: string; contentType: string | undefined; body: any }> = []
    const receiver = createServer((req, res) => {
      let text = ""
      req.on("data", (d) => (text += d))
      req.on("end", () => {
        received.push({ path: req.url ?? "", contentType: req.headers["content-type"], body: JSON.parse(text) })
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    const port = (receiver.address() as import("node:net").AddressInfo).port
    const server = await startServer({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_SERVICE_NAME: "aigw-test" })
    try {
      await call(server.url, "GET", "/v1/ready", {
        headers: {
          "x-request-id": "otel-9",
          authorization: "Bearer secret-token-xyz",
          "x-api-key": "aigw_secret-key-xyz",
          "proxy-authorization": "Basic secret-proxy-xyz",
          "x-auth-token": "secret-auth-xyz",
          "cf-access-jwt-assertion": "secret-jwt-xyz",
          dpop: "secret-dpop-xyz",
          referer: "https://app.example.com/reset-password?token=secret-referer-xyz"
        }
      })
      // A one-time token in a query (the verify-email link) and the mail the file mailer logs stay out of the spans.
      await call(server.url, "GET", "/api/avatar/verify-email?token=secret-once-xyz")
      await call(server.url, "POST", "/api/avatar/register", { body: { username: "oteluser", email: "oteluser@example.com", password: "password 123" } })
      const deadline = Date.now() + 15_000
      const spans = () =>
        received.flatMap((r) => (r.body.resourceSpans ?? []).flatMap((rs: any) => (rs.scopeSpans ?? []).flatMap((ss: any) => ss.spans ?? [])))
      // The HTTP server's request span: "http.server GET" with the path among its attributes.
      const readySpan = () => spans().find((s: any) => s.name === "http.server GET" && JSON.stringify(s.attributes ?? []).includes("/v1/ready"))
      while (readySpan() === undefined && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200))
      }
      expect(received.every((r) => r.path === "/v1/traces")).toBe(true)
      expect(received[0]?.contentType).toMatch(/application\/json/)
      expect(readySpan(), [...new Set(spans().map((s: any) => String(s.name)))].join(", ")).toBeDefined()
      expect(readySpan().traceId).toMatch(/^[0-9a-f]{32}$/)
      // Credentials in headers are redacted from span attributes, query values and mailed links are not exported.
      const verifySpan = () => spans().find((s: any) => JSON.stringify(s.attributes ?? []).includes("/api/avatar/verify-email"))
      const registerSpan = () => spans().find((s: any) => JSON.stringify(s.attributes ?? []).includes("/api/avatar/register"))
      while ((verifySpan() === undefined || registerSpan() === undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
      expect(JSON.stringify(verifySpan())).toContain("token=REDACTED")
      expect(registerSpan()).toBeDefined()
      for (const secret of ["secret-token-xyz", "secret-key-xyz", "secret-proxy-xyz", "secret-auth-xyz", "secret-once-xyz", "secret-jwt-xyz", "secret-dpop-xyz", "secret-referer-xyz"]) {
        expect(JSON.stringify(received), secret).not.toContain(secret)
      }
      // The verification mail's link (its token) is in the log only.
      expect(JSON.stringify(received)).not.toMatch(/verify-email\?token=(?!REDACTED)/)
      const resource = received[0]!.body.resourceSpans[0].resource.attributes as Array<{ key: string; value: { stringValue?: string } }>
      expect(resource.find((a) => a.key === "service.name")?.value.stringValue).toBe("aigw-test")

      // A route the fast lane serves with its own Effects (Lane.onLane) has the same server span, under the
      // caller's trace context, as the root of its service spans.
      const who = await signUp(server, "otel")
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const stored = await call(server.url, "POST", "/v1/memory/store", {
        apiKey: who.apiKey,
        body: { content: "Ada drinks green tea.", provider: "local" },
        headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` }
      })
      expect(stored.status).toBe(200)
      const attribute = (s: any, key: string) => (s.attributes ?? []).find((a: any) => a.key === key)?.value
      const laneSpan = () => spans().find((s: any) => s.name === "http.server POST" && attribute(s, "url.path")?.stringValue === "/v1/memory/store")
      const storeSpan = () => spans().find((s: any) => s.name === "Memory.store")
      while ((laneSpan() === undefined || storeSpan() === undefined) && Date.now() < deadline + 15_000) await new Promise((r) => setTimeout(r, 200))
      expect(laneSpan(), [...new Set(spans().map((s: any) => String(s.name)))].join(", ")).toMatchObject({ traceId, parentSpanId: "00f067aa0ba902b7" })
      expect(Number(attribute(laneSpan(), "http.response.status_code")?.intValue)).toBe(200)
      // The attributes the platform's tracer gives the route's span.
      expect(attribute(laneSpan(), "url.full")?.stringValue).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\/memory\/store$/)
      expect(attribute(laneSpan(), "client.address")?.stringValue).toMatch(/127\.0\.0\.1/)
      expect(storeSpan()).toMatchObject({ traceId, parentSpanId: laneSpan().spanId })
      expect(JSON.stringify(laneSpan())).not.toContain(who.apiKey)
    } finally {
      await server.stop()
      await new Promise((resolve) => receiver.close(resolve))
    }
  })
})
