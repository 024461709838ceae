/**
 * Attacks through what the gateway reads from outside, against the real node host: a hostile
 * upstream (provider, orchestrator, webhook receiver) answers with gzip bombs (1 GiB of zeros,
 * about 1 MB on the wire, written lazily) or stalls mid-body, and a user uploads a DOCX whose
 * document.xml inflates to 200 MiB. The gateway must stay responsive (/v1/health fast), keep its
 * memory bounded and answer with the documented envelopes (502 naming the limit, 413, 504).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { GiB, sendGzipBomb } from "../../../../packages/core/test/support/bombs.ts"
import { docxBomb } from "../../../../packages/core/test/support/zip.ts"
import { signUp, type TestAvatar } from "../support/accounts.ts"
import { type AttackFigures, LOOP_BLOCKED_MS, MEMORY_EXPLODED_MB, underAttack } from "../support/attack.ts"
import { call, type RunningServer, startServer } from "../support/server.ts"

const LIMIT = 32 * 1024 * 1024
const PATH = "/openai/v1/chat/completions"
const hi = [{ role: "user", content: "Hello" }]

const completion = JSON.stringify({
  id: "chatcmpl-1", object: "chat.completion", created: 0, model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
})

const expectHeld = (what: string, figures: AttackFigures) => {
  expect(figures.maxHealthMs, `${what}: /v1/health blocked`).toBeLessThan(LOOP_BLOCKED_MS)
  expect(figures.peakRssMb - figures.baselineRssMb, `${what}: memory`).toBeLessThan(MEMORY_EXPLODED_MB)
}

describe("outbound replies under attack", () => {
  let hostile: http.Server
  let hostileUrl: string
  /** What the hostile provider does with the next chat calls. */
  let provider: "ok" | "bomb" | "stall" = "ok"
  let hooks = 0
  let server: RunningServer
  let user: TestAvatar
  let mcp: Client

  beforeAll(async () => {
    hostile = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c) => chunks.push(c))
      req.on("end", () => {
        if (req.url === "/orch") return void sendGzipBomb(res, GiB)
        if (req.url === "/hook") {
          hooks++
          return void sendGzipBomb(res, GiB)
        }
        if (req.url === "/v1/moderations") {
          // 90,000 categories, every one flagged: each name was looked up in the flagged list (200,000 held the loop 34 s).
          // (Past 100,000 members in one object the answer is refused before it is parsed: JsonText.UPSTREAM_JSON_LIMITS.)
          const names = Array.from({ length: 90_000 }, (_, i) => `c${i}`)
          return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
            id: "modr-1",
            model: "omni-moderation-latest",
            results: [{ flagged: true, categories: Object.fromEntries(names.map((n) => [n, true])), category_scores: Object.fromEntries(names.map((n) => [n, 0.9])) }]
          }))
        }
        const stream = JSON.parse(Buffer.concat(chunks).toString() || "{}").stream === true
        if (provider === "bomb") return void sendGzipBomb(res, GiB, stream ? "text/event-stream" : "application/json")
        if (provider === "stall") {
          res.writeHead(200, { "content-type": "application/json" })
          return void res.write("{\"id\":\"chatcmpl-1\",") // and nothing more
        }
        res.writeHead(200, { "content-type": "application/json" }).end(completion)
      })
    })
    await new Promise<void>((resolve) => hostile.listen(0, "127.0.0.1", resolve))
    hostileUrl = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`
    server = await startServer({
      OPENAI_API_KEY: "sk-hostile",
      OPENAI_BASE_URL: `${hostileUrl}/v1`,
      AIGW_ALLOW_PRIVATE_URLS: "true",
      AIGW_WORKER_INTERVAL_MS: "100",
      AIGW_JOB_POLL_MS: "100"
    })
    user = await signUp(server, "outbound")
    mcp = new Client({ name: "aigw-attack", version: "1.0.0" })
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { "x-api-key": user.apiKey } } }))
  })
  afterAll(async () => {
    await mcp?.close().catch(() => undefined)
    // A server whose loop is blocked does not answer SIGTERM.
    if (server) await Promise.race([server.stop(), new Promise((r) => setTimeout(r, 10_000)).then(() => server.kill())])
    hostile?.closeAllConnections()
    hostile?.close()
  })

  /** A fast-lane chat call; status 0 when no whole answer came within `timeoutMs`. */
  const chat = (body: Record<string, unknown>, timeoutMs = 60_000) =>
    fetch(`${server.url}${PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: hi, ...body }),
      signal: AbortSignal.timeout(timeoutMs)
    }).then(async (res) => ({ status: res.status, text: await res.text() })).catch((e) => ({ status: 0, text: String(e) }))

  it("cuts a provider's gzip bomb (JSON and stream, 1 GiB inflated each) at the limit with 502 naming it", async () => {
    provider = "bomb"
    const { figures, value: [json, stream] } = await underAttack(server, () => Promise.all([chat({}), chat({ stream: true })]))
    provider = "ok"
    expectHeld("provider gzip bomb", figures)
    expect(json.status).toBe(502)
    expect(JSON.parse(json.text).error.message).toContain(`the reply exceeded ${LIMIT} bytes (AIGW_MAX_UPSTREAM_RESPONSE_BYTES)`)
    // The stream had started (200): the failure is its last event.
    expect(stream.status).toBe(200)
    expect(stream.text).toContain(`the reply exceeded ${LIMIT} bytes`)
    expect((await chat({})).status).toBe(200)
  }, 150_000)

  it("cuts four concurrent orchestrator gzip bombs at the limit with an error naming it", async () => {
    const registered = await mcp.callTool({ name: "gateway_orchestrator_register", arguments: { name: "bomb", url: `${hostileUrl}/orch`, protocol: "http-json" } }) as any
    expect(registered.isError).toBeFalsy()
    const orchestratorId = JSON.parse(registered.content[0].text).id ?? JSON.parse(registered.content[0].text).result?.id
    const { figures, value } = await underAttack(server, () =>
      Promise.all(Array.from({ length: 4 }, () => mcp.callTool({ name: "gateway_orchestrator_invoke", arguments: { orchestratorId, input: "hi" } }, undefined, { timeout: 100_000 }).catch((e) => ({ isError: true, content: [{ text: String(e) }] })) as Promise<any>))
    )
    expectHeld("4 orchestrator gzip bombs", figures)
    for (const result of value) {
      expect(result.isError).toBe(true)
      expect(result.content[0].text).toContain(`the reply exceeded ${LIMIT} bytes (AIGW_MAX_UPSTREAM_RESPONSE_BYTES)`)
    }
  }, 150_000)

  it("refuses a moderation answer of 90,000 categories with a 502 naming the bound", async () => {
    // Each category name was looked up in the list of flagged ones: 34 s on the event loop (32.6 s of health).
    const { figures, value } = await underAttack(server, async () => {
      const started = performance.now()
      const res = await call(server.url, "POST", "/openai/v1/moderations", { body: { input: "x" }, apiKey: user.apiKey })
      return { res, ms: performance.now() - started }
    })
    console.log(`moderation of 90,000 categories: ${Math.round(value.ms)} ms`)
    expect(value.res.status).toBe(502)
    expect(value.res.body.error.message).toMatch(/the moderation answer names more than 1000 categories/)
    expectHeld("moderation of 90,000 categories", figures)
  })

  it("refuses a DOCX whose document.xml inflates to 200 MiB with 413 naming the limit", async () => {
    const bomb = await docxBomb(200 * 1024 * 1024)
    const upload = async () => {
      const form = new FormData()
      form.append("file", new File([new Uint8Array(bomb)], "bomb.docx", { type: "application/vnd.openxmlformats-officedocument.wordprocessingml.document" }))
      const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form, signal: AbortSignal.timeout(100_000) })
      return { status: res.status, body: await res.json() as any }
    }
    const { figures, value } = await underAttack(server, upload)
    console.log(`docx bomb: ${bomb.length} bytes uploaded`)
    expectHeld("docx bomb", figures)
    expect(value.status).toBe(413)
    expect(value.body.message).toMatch(/AIGW_MAX_INFLATED_BYTES/)
  }, 150_000)

  it("does not read a webhook receiver's gzip bomb answer", async () => {
    const submit = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: user.apiKey,
      body: { requests: [{ messages: hi, provider: "openai", model: "gpt-4o-mini" }], callbackUrl: `${hostileUrl}/hook` }
    })
    expect(submit.status).toBe(200)
    const { figures } = await underAttack(server, async () => {
      const deadline = Date.now() + 30_000
      while (hooks === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
      await new Promise((r) => setTimeout(r, 1_000))
    })
    expect(hooks).toBeGreaterThan(0)
    expectHeld("webhook receiver gzip bomb", figures)
  }, 60_000)

  it("answers 504 (not 500) when a provider stalls mid-body until the deadline", async () => {
    provider = "stall"
    const { figures, value } = await underAttack(server, () => chat({}, 150_000), 1_000)
    provider = "ok"
    expectHeld("stalled provider body", figures)
    expect(value.status).toBe(504)
    expect(JSON.parse(value.text).error.message).toMatch(/did not answer in time/)
  }, 180_000)
})
