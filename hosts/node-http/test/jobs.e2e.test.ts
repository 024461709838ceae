/**
 * Durable jobs and signed webhooks end to end: batch through the gateway, signature checks,
 * retries until acknowledged, delivery after a kill -9, exactly-once delivery with two
 * processes on PostgreSQL, SSRF refusals and hostile bodies.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verify } from "../../../packages/core/src/Webhooks/Signature.ts"
import { freshPgDatabase, hasPg } from "../../../packages/core/test/support/databases.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { mailedToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { type Receiver, startReceiver } from "./support/receiver.ts"
import { call, freePort, type RunningServer, startServer } from "./support/server.ts"

const SECRET = "whsec_test_secret"
const fast = {
  WEBHOOK_SECRET: SECRET,
  AIGW_ALLOW_PRIVATE_URLS: "true",
  AIGW_WEBHOOK_RETRY_BASE_MS: "100",
  AIGW_WORKER_INTERVAL_MS: "100",
  AIGW_JOB_POLL_MS: "100"
}
const batch = (callbackUrl: string, n = 2) => ({
  requests: Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `item ${i}` }], provider: "openai", model: "gpt-4o-mini" })),
  callbackUrl
})
const waitForStatus = async (server: RunningServer, user: TestAvatar, id: string, status: string, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const res = await call(server.url, "GET", `/v1/batch/${id}/status`, { apiKey: user.apiKey })
    if (res.body.result?.status === status) return res.body.result
    if (Date.now() > deadline) throw new Error(`batch ${id} not ${status}: ${JSON.stringify(res.body)}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe("batch jobs and webhooks", () => {
  let mock: MockUpstream
  let receiver: Receiver
  let server: RunningServer
  let user: TestAvatar

  beforeAll(async () => {
    mock = await startOpenAiMock({ apiKey: "sk-j" })
    receiver = await startReceiver()
    server = await startServer({ ...fast, OPENAI_API_KEY: "sk-j", OPENAI_BASE_URL: mock.url })
    user = await signUp(server, "jobs")
  })
  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
    await mock?.close()
  })

  it("runs a batch, reports per-item results and POSTs a signed webhook", async () => {
    mock.queue({ kind: "text", text: "first answer" }, { kind: "error", status: 400, message: "item refused" })
    const submit = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(receiver.url) })
    expect(submit.status).toBe(200)
    expect(submit.body.result).toMatchObject({ jobType: "batch", status: "queued", total: 2 })
    const id = submit.body.result.batchId
    const [hook] = await receiver.waitFor(1)
    expect(verify(SECRET, hook!.body, hook!.headers["x-gateway-signature"] as string)).toBe(true)
    expect(hook!.headers["x-gateway-event"]).toBe("batch")
    expect(hook!.headers["x-gateway-delivery"]).toBeTruthy()
    const payload = JSON.parse(hook!.body)
    expect(payload).toMatchObject({ jobId: id, jobType: "batch", status: "completed", error: null })
    expect(payload.completedAtUtc).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(payload.result).toMatchObject({ total: 2, completed: 1, failed: 1 })
    const status = await waitForStatus(server, user, id, "completed")
    expect(status.result.items[0]).toMatchObject({ index: 0, ok: true })
    expect(status.result.items[0].result.content).toBe("first answer")
    expect(status.result.items[1]).toMatchObject({ index: 1, ok: false })
    expect(status.result.items[1].error).toMatch(/item refused/)
    expect(status.webhook).toMatchObject({ status: "delivered", attempts: 1 })
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result.dailyCallsUsed).toBe(2)
  })

  it("keeps at most MAX_BATCH_RESULT_CHARS of answers: one past it is an item that says so", async () => {
    // Answers of 6 MB: each item's result (its text as content and as message.content) is about 12 MB of JSON.
    const long = "y".repeat(6_000_000)
    mock.queue({ kind: "text", text: long }, { kind: "text", text: long }, { kind: "text", text: "short" })
    const seen = receiver.received.length
    const submit = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(receiver.url, 3) })
    const status = await waitForStatus(server, user, submit.body.result.batchId, "completed", 60_000)
    expect(status.result).toMatchObject({ total: 3, completed: 2, failed: 1 })
    const [first, second, third] = status.result.items
    expect(first).toMatchObject({ index: 0, ok: true })
    expect(first.result.content).toHaveLength(6_000_000)
    expect(second).toMatchObject({ index: 1, ok: false })
    expect(second.error).toMatch(/^the answer \(\d+ characters\) was not kept: a batch keeps at most 16777216 characters of answers; the call was made and counted$/)
    expect(third).toMatchObject({ index: 2, ok: true, result: { content: "short" } })
    // The status answer carries the kept answer once (about 12 MB), not the one that was not kept.
    const raw = await fetch(`${server.url}/v1/batch/${submit.body.result.batchId}/status`, { headers: { "x-api-key": user.apiKey } })
    expect((await raw.text()).length).toBeLessThan(13_000_000)
    // Its webhook, delivered after the job completed, arrives here, not in the next test's receiver.
    await receiver.waitFor(seen + 1)
  })

  it("retries a failing receiver with backoff until it acknowledges, once", async () => {
    receiver.received.length = 0
    receiver.failNext(3)
    const submit = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(receiver.url, 1) })
    const id = submit.body.result.batchId
    const deliveries = await receiver.waitFor(4)
    await new Promise((r) => setTimeout(r, 500))
    expect(receiver.received.map((r) => r.status)).toEqual([500, 500, 500, 204])
    expect(new Set(receiver.received.map((r) => r.headers["x-gateway-delivery"])).size).toBe(1)
    expect(receiver.received.map((r) => r.headers["x-gateway-attempt"])).toEqual(["1", "2", "3", "4"])
    expect(new Set(deliveries.map((d) => d.body)).size).toBe(1)
    const status = await waitForStatus(server, user, id, "completed")
    expect(status.webhook).toMatchObject({ status: "delivered", attempts: 4 })
  })

  it("stops a batch whose avatar's password is reset during a step: no item starts after it, no webhook", async () => {
    const owner = await signUp(server, "inflight")
    mock.setScenario({ kind: "text", text: "slow answer", frameDelayMs: 1_500 })
    try {
      const before = mock.requests.length
      const submit = await call(server.url, "POST", "/v1/batch/submit", { apiKey: owner.apiKey, body: batch(receiver.url, 8) })
      const id = submit.body.result.batchId as string
      // The step's first four items are at the upstream (four at a time) when the owner takes the account back.
      for (const deadline = Date.now() + 5_000; mock.requests.length - before < 4 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20))
      expect(mock.requests.length - before).toBe(4)
      await call(server.url, "POST", "/api/avatar/forgot-password", { body: { email: owner.email } })
      const token = mailedToken(server.dataDir, owner.email, "reset-password")
      const password = "taken back 1"
      expect((await call(server.url, "POST", "/api/avatar/reset-password", { body: { token, password, confirmPassword: password } })).body.isError).toBe(false)
      const jwt = (await call(server.url, "POST", "/api/avatar/authenticate", { body: { username: owner.username, password } })).body.result.jwtToken as string
      for (const deadline = Date.now() + 10_000; ;) {
        const status = (await call(server.url, "GET", `/v1/batch/${id}/status`, { token: jwt })).body.result
        if (status.status !== "queued" && status.status !== "running") {
          expect([status.status, status.error]).toEqual(["cancelled", "the avatar's password was reset after the job was submitted, revoking the keys and sessions that could have submitted it: the job was stopped"])
          break
        }
        if (Date.now() > deadline) throw new Error(`batch ${id} still ${status.status}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      await new Promise((r) => setTimeout(r, 500))
      expect(mock.requests.length - before).toBe(4)
      expect(receiver.received.filter((r) => JSON.parse(r.body).jobId === id)).toEqual([])
    } finally {
      mock.setScenario({ kind: "text", text: "Hello from mock" })
    }
  })

  it("shows jobs only to their owner (others get 404)", async () => {
    const submit = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(receiver.url, 1) })
    const stranger = await signUp(server, "stranger")
    const res = await call(server.url, "GET", `/v1/batch/${submit.body.result.batchId}/status`, { apiKey: stranger.apiKey })
    expect(res.status).toBe(404)
    expect((await call(server.url, "GET", `/v1/batch/${submit.body.result.batchId}/status?provider=anthropic`, { apiKey: user.apiKey })).status).toBe(404)
    expect((await call(server.url, "GET", `/v1/batch/${crypto.randomUUID()}/status`, { apiKey: user.apiKey })).status).toBe(404)
  })

  it("refuses hostile bodies with 400 and creates no job", async () => {
    const before = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    for (const body of [
      { requests: [] },
      { requests: "x" },
      { requests: [{ messages: [] }] },
      { requests: [{ messages: [{ role: "user", content: "x" }], temperature: 9 }] },
      { requests: Array.from({ length: 101 }, () => ({ messages: [{ role: "user", content: "x" }] })) },
      { requests: [{ messages: [{ role: "user", content: "x" }] }], callbackUrl: 42 }
    ]) {
      const res = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body })
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400)
      expect(res.body.isError).toBe(true)
    }
    // A request the gateway would refuse as a call is refused with the batch, before anything is counted.
    for (const [body, status, message] of [
      [{ requests: [{ messages: [{ role: "user", content: "x" }] }], provider: "nope" }, 404, /^Unknown provider nope/],
      [{ requests: [{ messages: [{ role: "user", content: "x" }] }, { messages: [{ role: "user", content: "x" }], provider: "nope" }] }, 404, /^Unknown provider nope/],
      [{ requests: [{ messages: [{ role: "user", content: "x" }], model: "nope-model" }] }, 404, /^Unknown model nope-model/],
      [{ requests: [{ messages: [{ role: "user", content: "x" }], provider: "mistral" }] }, 422, /MISTRAL_API_KEY/],
      // An item for another avatar would be run and billed as the caller.
      [{ requests: [{ messages: [{ role: "user", content: "x" }], avatarId: "0193a5a0-0000-7000-8000-000000000001" }] }, 400, /requests\.0\.avatarId: a batch runs as one avatar/]
    ] as const) {
      const res = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body })
      expect([res.status, res.body.message], JSON.stringify(body).slice(0, 120)).toEqual([status, expect.stringMatching(message)])
    }
    const after = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    expect(after).toBe(before)
  })
})

describe("SSRF guard on callbackUrl (no AIGW_ALLOW_PRIVATE_URLS)", () => {
  let server: RunningServer
  let user: TestAvatar
  beforeAll(async () => {
    server = await startServer({ OPENAI_API_KEY: "x" })
    user = await signUp(server, "ssrf")
  })
  afterAll(() => server?.stop())

  it.each([
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:8080/hook",
    "http://localhost:8080/hook",
    "http://10.0.0.8/hook",
    "http://[::1]/hook",
    "file:///etc/passwd",
    "gopher://example.com/"
  ])("refuses %s with 422 and creates no job", async (url) => {
    const res = await call(server.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(url, 1) })
    expect(res.status).toBe(422)
    expect(res.body.isError).toBe(true)
    expect(res.body.message).toMatch(/callbackUrl refused/)
  })
})

describe("delivery survives kill -9 while the receiver is down", () => {
  it("delivers after the gateway restarts", async () => {
    const mock = await startOpenAiMock({ apiKey: "sk-k" })
    const port = await freePort()
    const env = { ...fast, OPENAI_API_KEY: "sk-k", OPENAI_BASE_URL: mock.url }
    const first = await startServer(env)
    try {
      const user = await signUp(first, "crash")
      const submit = await call(first.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(`http://127.0.0.1:${port}/hook`, 1) })
      const id = submit.body.result.batchId
      await waitForStatus(first, user, id, "completed")
      await new Promise((r) => setTimeout(r, 300)) // at least one refused attempt
      await first.kill()
      const receiver = await startReceiver(port)
      const second = await startServer(env, { dataDir: first.dataDir })
      try {
        const [hook] = await receiver.waitFor(1, 30_000)
        expect(JSON.parse(hook!.body)).toMatchObject({ jobId: id, status: "completed" })
        expect(verify(SECRET, hook!.body, hook!.headers["x-gateway-signature"] as string)).toBe(true)
        const status = await waitForStatus(second, user, id, "completed")
        expect(status.webhook.status).toBe("delivered")
        expect(status.webhook.attempts).toBeGreaterThan(1)
      } finally {
        await second.stop()
        await receiver.close()
      }
    } finally {
      await mock.close()
    }
  })
})

describe("a gateway batch step cut off by a stop", () => {
  it("keeps the answers that came: after the restart only the unanswered item is called again", async () => {
    // An upstream that answers at once, but holds items marked SLOW while `holding`.
    const seen: Array<string> = []
    let holding = true
    const held: Array<http.ServerResponse> = []
    const upstream = http.createServer((req, res) => {
      let text = ""
      req.on("data", (d) => (text += d))
      req.on("end", () => {
        const content = String(JSON.parse(text).messages?.at(-1)?.content ?? "")
        seen.push(content)
        if (holding && content.includes("SLOW")) return void held.push(res)
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({
          id: "c", object: "chat.completion", created: 1, model: "gpt-4o-mini",
          choices: [{ index: 0, message: { role: "assistant", content: `answer to ${content}` }, finish_reason: "stop" }],
          usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }
        }))
      })
    })
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
    const env = { ...fast, OPENAI_API_KEY: "sk-cut", OPENAI_BASE_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`, AIGW_SHUTDOWN_GRACE_SECONDS: "1" }
    const first = await startServer(env)
    try {
      const user = await signUp(first, "cutoff")
      const requests = ["FAST-1", "SLOW", "FAST-2"].map((content) => ({ messages: [{ role: "user", content }], provider: "openai", model: "gpt-4o-mini" }))
      const submit = await call(first.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: { requests } })
      const id = submit.body.result.batchId
      for (let i = 0; i < 200 && seen.length < 3; i++) await new Promise((r) => setTimeout(r, 50))
      await new Promise((r) => setTimeout(r, 300))
      expect(await first.stop()).toBe(0)
      holding = false
      for (const res of held) res.destroy()
      const second = await startServer(env, { dataDir: first.dataDir })
      try {
        const status = await waitForStatus(second, user, id, "completed", 30_000)
        expect(status.result.items.map((i: any) => [i.index, i.ok])).toEqual([[0, true], [1, true], [2, true]])
        // Each fast item was called once; only the one the stop cut off was called again.
        expect(seen.filter((c) => c === "FAST-1")).toHaveLength(1)
        expect(seen.filter((c) => c === "FAST-2")).toHaveLength(1)
        expect(seen.filter((c) => c === "SLOW")).toHaveLength(2)
      } finally {
        await second.stop()
      }
    } finally {
      upstream.closeAllConnections()
      upstream.close()
    }
  }, 90_000)
})

describe.skipIf(!hasPg)("two processes on one PostgreSQL", () => {
  it("run each job once and deliver each webhook exactly once", async () => {
    const mock = await startOpenAiMock({ apiKey: "sk-2" })
    const receiver = await startReceiver()
    const env = { ...fast, OPENAI_API_KEY: "sk-2", OPENAI_BASE_URL: mock.url, DATABASE_URL: await freshPgDatabase(), JWT_SECRET: "shared-secret-shared-secret-shared-secret" }
    const servers = [await startServer(env), await startServer(env)]
    try {
      const user = await signUp(servers[0]!, "twin")
      const ids: Array<string> = []
      for (let i = 0; i < 8; i++) {
        const res = await call(servers[i % 2]!.url, "POST", "/v1/batch/submit", { apiKey: user.apiKey, body: batch(receiver.url, 1) })
        ids.push(res.body.result.batchId)
      }
      await receiver.waitFor(8)
      await new Promise((r) => setTimeout(r, 1500))
      const jobIds = receiver.received.map((r) => JSON.parse(r.body).jobId)
      expect(jobIds.sort()).toEqual([...ids].sort())
      expect(new Set(receiver.received.map((r) => r.headers["x-gateway-delivery"])).size).toBe(8)
      // Each one-item batch reached the upstream once: no job ran in both processes.
      expect(mock.requests.filter((r) => r.path.endsWith("/chat/completions"))).toHaveLength(8)
      for (const id of ids) expect((await call(servers[0]!.url, "GET", `/v1/batch/${id}/status`, { apiKey: user.apiKey })).body.result.status).toBe("completed")
    } finally {
      await Promise.all(servers.map((s) => s.stop()))
      await receiver.close()
      await mock.close()
    }
  })
})
