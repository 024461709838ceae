/**
 * Attacks on the HTTP edge of the real node host: an anonymous 90,000-entry JSON-RPC batch on /mcp,
 * 50,000-deep JSON on every JSON route (Effect routes, the fast lane, /mcp), NUL characters in
 * strings, paths and queries (on SQLite, and on PostgreSQL when AIGW_TEST_PG_URL is set), and Host
 * header tricks on the fast lane's hand-off to the Effect app, bodies of millions of wrong items, text that is
 * slow to tokenize, and documents far costlier than their size (JSON of millions of items, long DOCX). The
 * server must answer at once with
 * 400s (JSON-RPC 2.0 errors on /mcp), keep /v1/health fast and its memory bounded, and create nothing.
 */
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPgDatabase, hasPg } from "../../../../packages/core/test/support/databases.ts"
import { signUp, type TestAvatar } from "../support/accounts.ts"
import { docxWithParagraphs } from "../../../../packages/core/test/support/zip.ts"
import { LOOP_BLOCKED_MS, MEMORY_EXPLODED_MB, treeCpuMs, underAttack } from "../support/attack.ts"
import { call, errorMessageOf, jsonRoutes, type RunningServer, startServer } from "../support/server.ts"

const deep = (levels: number) => "[".repeat(levels) + "]".repeat(levels)
const DEEP = deep(50_000)

const rpc = (server: RunningServer, body: string, headers: Record<string, string> = {}) =>
  call(server.url, "POST", "/mcp", { raw: body, headers: { accept: "application/json, text/event-stream", ...headers } })

/** A conformant JSON-RPC 2.0 error: code and message only, nothing internal. */
const expectRpcError = (body: any, id: unknown, code: number | ReadonlyArray<number>) => {
  expect(Object.keys(body).sort()).toEqual(["error", "id", "jsonrpc"])
  expect(body.jsonrpc).toBe("2.0")
  expect(body.id).toEqual(id)
  expect(Object.keys(body.error).sort()).toEqual(["code", "message"])
  expect(Array.isArray(code) ? code : [code]).toContain(body.error.code)
  expect(typeof body.error.message).toBe("string")
}

/** A POST through node:http, which sends the Host header it is given (fetch does not). */
const rawPost = (server: RunningServer, path: string, host: string, body: unknown, apiKey: string) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    const text = JSON.stringify(body)
    const req = http.request(
      {
        host: "127.0.0.1",
        port: server.port,
        method: "POST",
        path,
        headers: { host, "content-type": "application/json", "content-length": Buffer.byteLength(text), "x-api-key": apiKey }
      },
      (res) => {
        let data = ""
        res.on("data", (d) => (data += d))
        res.on("end", () => resolve({ status: res.statusCode!, body: data === "" ? null : JSON.parse(data) }))
      }
    )
    req.on("error", reject)
    req.end(text)
  })

describe("edge attacks", () => {
  let server: RunningServer
  let user: TestAvatar

  beforeAll(async () => {
    server = await startServer()
    user = await signUp(server, "edge")
  })
  afterAll(() => server?.stop())

  describe("/mcp", () => {
    it("refuses an anonymous 90,000-entry batch (9 MB) at once: health stays fast, memory bounded", async () => {
      const entry = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "gateway_complete", arguments: {} } })
      const body = JSON.stringify(Array.from({ length: 90_000 }, (_, i) => entry(i + 1)))
      expect(body.length).toBeGreaterThan(9_000_000)
      const { figures, value } = await underAttack(server, async () => {
        const started = performance.now()
        const res = await rpc(server, body)
        return { res, ms: performance.now() - started }
      })
      console.log(`anonymous 90,000-entry batch: answered in ${value.ms.toFixed(0)} ms`, figures)
      expect(value.res.status).toBe(400)
      expectRpcError(value.res.body, null, -32600)
      // 270,000 objects: past AIGW_MAX_JSON_CONTAINERS, refused before the parse; a batch that parses is held to AIGW_MCP_MAX_BATCH.
      expect(value.res.body.error.message).toBe("Invalid Request: JSON holds more than 100000 objects and arrays.")
      const overBatch = await rpc(server, JSON.stringify(Array.from({ length: 33 }, (_, i) => entry(i + 1))))
      expect([overBatch.status, overBatch.body.error.message]).toEqual([400, expect.stringMatching(/at most 32 messages \(AIGW_MCP_MAX_BATCH\); this one has 33/)])
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
      expect(figures.peakRssMb).toBeLessThan(MEMORY_EXPLODED_MB)
    })

    it("answers a batch at the limit, anonymous calls of tools that need credentials without running them", async () => {
      const batch = Array.from({ length: 32 }, (_, i) => ({
        jsonrpc: "2.0",
        id: `c${i}`,
        method: "tools/call",
        params: i === 0 ? { name: "gateway_health" } : { name: "gateway_complete", arguments: { messages: [{ role: "user", content: "hi" }] } }
      }))
      const res = await rpc(server, JSON.stringify(batch))
      expect(res.status).toBe(200)
      expect(res.body.map((r: any) => r.id)).toEqual(batch.map((b) => b.id))
      expect(res.body[0].result.structuredContent.status).toBe("ok")
      for (const r of res.body.slice(1)) expect(r.result).toMatchObject({ isError: true, structuredContent: { error: { kind: "Unauthorized" } } })
      const over = await rpc(server, JSON.stringify([...batch, { ...batch[0], id: "c32" }]), { "x-api-key": user.apiKey })
      expect(over.status).toBe(400)
      expectRpcError(over.body, null, -32600)
    })

    /** The slowest health answer allowed behind the answers of 16 clients' batches (see below). */
    const QUEUED_BEHIND_MS = 4_000

    it("lists the tools once and answers every tools/list from that: anonymous batches of them keep health fast", async () => {
      // Built anew for each of a batch's 32 tools/list (6-13 ms each): 16 anonymous clients held health 2.4 s.
      const batch = JSON.stringify(Array.from({ length: 32 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "tools/list" })))
      const first = await rpc(server, batch)
      expect(first.status).toBe(200)
      expect(first.body.map((r: any) => r.id)).toEqual(Array.from({ length: 32 }, (_, i) => i))
      const tools = first.body[0].result.tools
      expect(tools.length).toBeGreaterThan(5)
      for (const r of first.body) expect(r.result.tools).toEqual(tools)
      const cpuBefore = treeCpuMs(server)
      const { figures, value } = await underAttack(server, () =>
        Promise.all(Array.from({ length: 16 }, async () => {
          const answers = []
          for (let i = 0; i < 8; i++) answers.push((await rpc(server, batch)).body)
          return answers
        })))
      const cpuPerBatchMs = (treeCpuMs(server) - cpuBefore) / value.flat().length
      console.log(`tools/list batches: ${cpuPerBatchMs.toFixed(1)} ms of the server's CPU per batch`)
      expect(value.flat().every((answers: any) => answers.length === 32 && answers[31].result.tools.length === tools.length)).toBe(true)
      // Built for each entry (the listing's cache turned off, session 49): 78 ms of the server's CPU per batch
      // and health held 7.5 s. Answered from the listing: 23 ms (most of it the 1.26 MB answer's
      // serialisation), and health waits only behind the 16 clients' answers queued in the event loop
      // (0.5-0.85 s on an idle 2-core machine, more on a busy one): the CPU per batch is the steadier measure.
      expect(cpuPerBatchMs).toBeLessThan(50)
      expect(figures.maxHealthMs).toBeLessThan(QUEUED_BEHIND_MS)
    }, 60_000)

    it("refuses a batch another site's page posted as a form (CSRF); takes it from a client in any content type", async () => {
      const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "gateway_health" } })
      const forged = await call(server.url, "POST", "/mcp", { raw: body, headers: { "content-type": "text/plain", "sec-fetch-site": "cross-site" } })
      expect(forged.status).toBe(400)
      expectRpcError(forged.body, null, -32600)
      const plain = await call(server.url, "POST", "/mcp", { raw: body, headers: { "content-type": "text/plain" } })
      expect([plain.status, plain.body.result?.structuredContent?.status]).toEqual([200, "ok"])
    })

    it("answers JSON-RPC 2.0 errors: parse -32700, invalid request -32600, unknown method -32601, invalid params -32602", async () => {
      const parse = await rpc(server, "{\"jsonrpc\": \"2.0\", ")
      expect(parse.status).toBe(400)
      expect(parse.body).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } })
      for (const raw of ["42", "[]", "{\"id\": 1, \"method\": \"ping\"}"]) {
        const invalid = await rpc(server, raw)
        expect(invalid.status, raw).toBe(400)
        expectRpcError(invalid.body, raw.includes("id") ? 1 : null, -32600)
      }
      const unknown = await rpc(server, JSON.stringify({ jsonrpc: "2.0", id: "m", method: "no/such" }), { "x-api-key": user.apiKey })
      expectRpcError(unknown.body, "m", -32601)
      const params = await rpc(server, JSON.stringify({ jsonrpc: "2.0", id: 7, method: "initialize", params: {} }))
      expectRpcError(params.body, 7, -32602)
      const mixed = await rpc(server, JSON.stringify([{ jsonrpc: "2.0", id: 0, method: "ping" }, 5, { jsonrpc: "2.0", id: "s", method: "tools/call", params: 3 }]), {
        "x-api-key": user.apiKey
      })
      expect(mixed.status).toBe(200)
      expect(mixed.body[0]).toEqual({ jsonrpc: "2.0", id: 0, result: {} })
      expectRpcError(mixed.body[1], null, -32600)
      expectRpcError(mixed.body[2], "s", -32602)
    })
  })

  describe("a form from another site's page", () => {
    // The fast lane read such a body as JSON (200, counted) where the routes, Lambda and the lane's own hand-offs refused it.
    it("is refused alike by the fast lane and the routes, before the body is read", async () => {
      const chat = JSON.stringify({ messages: [{ role: "user", content: "hi" }], model: "gpt-4o-mini" })
      for (const path of ["/v1/complete", "/openai/v1/chat/completions", "/v1/embeddings", "/v1/translate", "/v1/images/generate"]) {
        const forged = await call(server.url, "POST", path, { raw: chat, apiKey: user.apiKey, headers: { "content-type": "text/plain", "sec-fetch-site": "cross-site" } })
        expect([path, forged.status, errorMessageOf(path, forged.body)]).toEqual([path, 400, "A page of another site posted this request as a form (text/plain): this route takes application/json."])
        const client = await call(server.url, "POST", path, { raw: chat, apiKey: user.apiKey, headers: { "content-type": "text/plain" } })
        expect(errorMessageOf(path, client.body), path).not.toMatch(/another site/)
      }
    })
  })

  describe("paths", () => {
    it("serves a path only as spelled: another case, doubled or trailing slashes, a ;parameter or an encoded letter is a 404 (a proxy's rule for the path saw none of them)", async () => {
      for (const path of ["/metrics", "/v1/health"]) expect((await call(server.url, "GET", path)).status, path).toBe(200)
      for (const path of ["/METRICS", "/metrics/", "//metrics", "/metrics;x", "/%6detrics", "/%6Detrics", "/v1//health", "/V1/health", "/v1/health/", "/v1/health;jsessionid=1"]) {
        const res = await call(server.url, "GET", path)
        expect([res.status, res.body?.isError ?? res.body?.error], path).toEqual([404, expect.anything()])
      }
      expect((await call(server.url, "GET", "/V1/KEYS", { apiKey: user.apiKey })).status).toBe(404)
      // A reserved character stays encodable where a parameter needs it.
      const resend = await call(server.url, "POST", `/api/avatar/resend-verification-email/${encodeURIComponent("nobody@example.com")}`)
      expect([resend.status, resend.body.isError]).toEqual([200, false])
    })

    it("closes the connection after a 413 instead of reading the rest of the declared body", async () => {
      // node read all of a declared 2 GB after the 413 to reach the next request (2 GB pushed on one connection).
      const outcome = await new Promise<{ answer: string; written: number }>((resolve) => {
        let answer = ""
        let written = 0
        const chunk = Buffer.alloc(1 << 20, 0x61)
        const socket = net.connect(server.port, "127.0.0.1", () => {
          socket.write("POST /api/avatar/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000000000\r\n\r\n")
          const pump = () => {
            while (!socket.destroyed && written < 1_000_000_000 && socket.write(chunk)) written += chunk.length
            if (!socket.destroyed && written < 1_000_000_000) socket.once("drain", () => (written += chunk.length, pump()))
          }
          // The body follows once the 413 is in (it is answered from the declared length): pushed at once, the
          // server's reset of the closed connection could reach this socket before the answer was read (a busy machine).
          let pumping = false
          const start = () => {
            if (!pumping) (pumping = true), pump()
          }
          socket.once("data", start)
          setTimeout(start, 2_000)
        })
        socket.setEncoding("utf8")
        socket.on("data", (d) => (answer += d))
        socket.on("error", () => undefined)
        socket.on("close", () => resolve({ answer, written }))
        setTimeout(() => socket.destroy(), 20_000)
      })
      expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 [^]*connection: close/i)
      expect(outcome.written).toBeLessThan(200_000_000)
    }, 30_000)

    it("keeps every header line, the 2,001st too: padding drops no header a proxy or client sent after it", async () => {
      // node dropped every line after the 2,000th without a word (a proxy's X-Forwarded-For appended last, here the key).
      const answer = await new Promise<string>((resolve, reject) => {
        let text = ""
        const socket = net.connect(server.port, "127.0.0.1", () =>
          socket.write(`GET /v1/usage HTTP/1.1\r\nHost: x\r\n${"a:\r\n".repeat(2_100)}x-api-key: ${user.apiKey}\r\nConnection: close\r\n\r\n`))
        socket.setEncoding("utf8")
        socket.on("data", (d) => (text += d))
        socket.on("end", () => resolve(text))
        socket.on("error", reject)
      })
      expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    })
  })

  describe("HTTP/1.1 pipelining", () => {
    const NOPE = "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
    /** Writes `count` pipelined `request`s on a socket; `reading`: the answers are read (counted), else never read. Ends after `waitMs` or at its close. */
    const pipeline = (count: number, request: string, reading: boolean, waitMs: number) =>
      new Promise<{ closed: boolean; answers: number }>((resolve) => {
        let answers = 0
        const socket = net.connect(server.port, "127.0.0.1", () => socket.write(request.repeat(count)))
        if (reading) socket.on("data", (d: Buffer) => (answers += d.toString("latin1").match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0))
        else socket.pause()
        const timer = setTimeout(() => {
          socket.destroy()
          resolve({ closed: false, answers })
        }, waitMs)
        socket.on("close", () => {
          clearTimeout(timer)
          resolve({ closed: true, answers })
        })
        socket.on("error", () => undefined)
      })

    /** The slowest health answer allowed while node parses what the connections sent (see below). */
    const NODE_PARSE_BLOCKED_MS = 5_000

    it("closes a connection with more requests in flight than the bound, unhandled: health stays fast, memory bounded", async () => {
      // 16 connections of 3,000 requests each, never read: health waited 40-65 s and the server grew to 1.3 GB.
      const { figures, value } = await underAttack(server, () =>
        Promise.all([...Array.from({ length: 15 }, () => pipeline(3_000, NOPE, false, 4_000)), pipeline(3_000, NOPE, true, 4_000)]))
      // The connection that reads sees it closed after the answers within the bound, not 3,000 of them.
      expect(value[15]).toMatchObject({ closed: true })
      expect(value[15]!.answers).toBeLessThanOrEqual(32)
      // What holds the loop here is node's own parse of each connection's first read (about 2,000 of these
      // requests, each made a request and a response before the gateway sees it and drops it, and aborted at
      // the close): well under a second on an idle 2-core machine, past 1.5 s on a busy one. Handled, they
      // held it 40-65 s, so this bound still tells a bounded connection from an unbounded one.
      expect(figures.maxHealthMs).toBeLessThan(NODE_PARSE_BLOCKED_MS)
      expect(figures.peakRssMb - figures.baselineRssMb).toBeLessThan(MEMORY_EXPLODED_MB)
      // One listener per connection for the answers waiting behind others, not one per request.
      expect(server.output()).not.toContain("MaxListenersExceededWarning")
    }, 60_000)

    it("answers a connection that pipelines within the bound, in order", async () => {
      const within = await pipeline(31, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", true, 1_000)
      expect(within).toEqual({ closed: false, answers: 31 })
    }, 30_000)
  })

  describe("deep JSON", () => {
    it("answers 50,000-deep JSON with 400 on every JSON route and /mcp, health fast, no stack in the log", async () => {
      const routes = await jsonRoutes(server)
      expect(routes.length).toBeGreaterThan(30)
      const logBefore = server.output().length
      const { figures, value } = await underAttack(server, async () => {
        const answers: Array<{ route: string; status: number; body: any }> = []
        for (const r of routes) {
          const res = await call(server.url, r.method, r.path, { raw: DEEP, apiKey: user.apiKey })
          answers.push({ route: `${r.method} ${r.path}`, status: res.status, body: res.body })
        }
        // Anonymous routes without credentials, the fast lane with them (an API key).
        for (const path of ["/api/avatar/register", "/api/avatar/authenticate"]) {
          const res = await call(server.url, "POST", path, { raw: DEEP })
          answers.push({ route: `anonymous POST ${path}`, status: res.status, body: res.body })
        }
        return answers
      })
      for (const { body, route, status } of value) {
        expect(status, route).toBe(400)
        expect(errorMessageOf(route, body), route).toBe("Invalid request body: JSON nested deeper than 64 levels.")
      }
      for (const headers of [{}, { "x-api-key": user.apiKey }] as Array<Record<string, string>>) {
        const mcp = await rpc(server, DEEP, headers)
        expect(mcp.status).toBe(400)
        expectRpcError(mcp.body, null, [-32700, -32600])
        expect(mcp.body.error.message).toMatch(/nested deeper than 64 levels/)
      }
      // 64 levels are fine (the limit), 65 are not.
      expect((await call(server.url, "POST", "/v1/estimate", { raw: deep(64), apiKey: user.apiKey })).body.message).toMatch(/^Invalid request body: Expected/)
      expect((await call(server.url, "POST", "/v1/estimate", { raw: deep(65), apiKey: user.apiKey })).body.message).toMatch(/deeper than 64/)
      console.log(`50,000-deep JSON on ${value.length} routes`, figures)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
      expect(server.output().slice(logBefore)).not.toMatch(/Maximum call stack|RangeError|unexpected failure/)
    })
  })

  describe("bodies of many wrong items", () => {
    // Each body is a few megabytes of items the schema refuses. Before, every item was decoded and described
    // (a 400 KB body held the event loop for 10 s) and the 400 echoed the whole value.
    const many = (n: number, item: unknown) => Array.from({ length: n }, () => item)
    const chatMessage = { role: "user", content: "hi" }
    const cases: ReadonlyArray<{ readonly name: string; readonly path: string; readonly body: unknown; readonly problem: RegExp }> = [
      { name: "chat: 1,000,000 numbers as messages", path: "/openai/v1/chat/completions", body: { model: "auto", messages: many(1_000_000, 1) }, problem: /messages: holds at most 1000 items/ },
      {
        name: "chat: 1,000,000 numbers as a message's parts",
        path: "/openai/v1/chat/completions",
        body: { model: "auto", messages: [{ role: "user", content: many(1_000_000, 1) }] },
        problem: /messages: holds more than 10000 content parts in all/
      },
      { name: "chat: 1,000,000 numbers as stop", path: "/openai/v1/chat/completions", body: { model: "auto", messages: [chatMessage], stop: many(1_000_000, 1) }, problem: /stop: / },
      {
        name: "chat: 50,000 tool calls of the wrong shape",
        path: "/openai/v1/chat/completions",
        body: { model: "auto", messages: [{ role: "assistant", content: null, tool_calls: many(50_000, { x: 1 }) }, chatMessage] },
        problem: /messages: holds more than 4096 tool calls in all/
      },
      {
        name: "anthropic: 1,000,000 numbers as a message's blocks",
        path: "/anthropic/v1/messages",
        body: { model: "auto", max_tokens: 10, messages: [{ role: "user", content: many(1_000_000, 1) }] },
        problem: /messages: holds more than 10000 content blocks in all/
      },
      {
        name: "anthropic: 9,000 unexpected fields",
        path: "/anthropic/v1/messages",
        body: { model: "auto", max_tokens: 10, messages: [chatMessage], ...Object.fromEntries(Array.from({ length: 9_000 }, (_, i) => [`f${i}`, 1])) },
        problem: /f0/
      },
      // Past 10,000 members in one object (each name is hashed into it): refused before the parse.
      {
        name: "anthropic: 300,000 unexpected fields",
        path: "/anthropic/v1/messages",
        body: { model: "auto", max_tokens: 10, messages: [chatMessage], ...Object.fromEntries(Array.from({ length: 300_000 }, (_, i) => [`f${i}`, 1])) },
        problem: /^Invalid request body: JSON holds an object of more than 10000 members\.$/
      },
      { name: "complete: 90,000 wrong messages", path: "/v1/complete", body: { messages: many(90_000, { x: 1 }) }, problem: /messages: holds at most 1000 items/ },
      // Valid items in valid counts per message: 450,000 tool calls took 4 s to decode, 740 × 500 parts 1.3 s.
      {
        name: "complete: 90,000 tool calls in one message",
        path: "/v1/complete",
        body: { messages: [chatMessage, { role: "assistant", toolCalls: many(90_000, { id: "a", name: "f" }) }] },
        problem: /messages: holds more than 4096 tool calls in all/
      },
      {
        name: "complete: 4,000 tool calls in one message",
        path: "/v1/complete",
        body: { messages: [chatMessage, { role: "assistant", toolCalls: many(4_000, { id: "a", name: "f" }) }] },
        problem: /messages\.1\.toolCalls: holds at most 128 items/
      },
      {
        name: "complete: 500 messages of 128 tool calls",
        path: "/v1/complete",
        body: { messages: many(500, { role: "assistant", toolCalls: many(128, { id: "a", name: "f" }) }) },
        problem: /messages: holds more than 4096 tool calls in all/
      },
      {
        name: "chat: 150 messages of 500 parts",
        path: "/openai/v1/chat/completions",
        body: { model: "auto", messages: many(150, { role: "user", content: many(500, { type: "text", text: "x" }) }) },
        problem: /messages: holds more than 10000 content parts in all/
      },
      {
        name: "anthropic: 150 messages of 500 blocks",
        path: "/anthropic/v1/messages",
        body: { model: "auto", max_tokens: 10, messages: many(150, { role: "user", content: many(500, { type: "text", text: "x" }) }) },
        problem: /messages: holds more than 10000 content blocks in all/
      },
      { name: "embeddings: 1,000,000 numbers as texts", path: "/v1/embeddings", body: { texts: many(1_000_000, 1) }, problem: /texts holds at most 2048 strings/ },
      { name: "a 3 MB string where a number goes", path: "/v1/complete", body: { messages: [chatMessage], temperature: "x".repeat(3_000_000) }, problem: /temperature: / },
      // Past AIGW_MAX_JSON_CONTAINERS (3.5 million `{}` held the event loop 3 s): refused before the parse, on each edge.
      { name: "3,000,000 empty objects (fast lane)", path: "/openai/v1/chat/completions", body: { model: "auto", messages: [chatMessage], x: many(3_000_000, {}) }, problem: /^Invalid request body: JSON holds more than 100000 objects and arrays\.$/ },
      { name: "3,000,000 empty arrays (Effect route)", path: "/api/avatar/authenticate", body: { a: many(3_000_000, []) }, problem: /^Invalid request body: JSON holds more than 100000 objects and arrays\.$/ }
    ]

    it("answers each with a short 400 at once, counting nothing, health fast", async () => {
      const before = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
      const { figures, value } = await underAttack(server, async () => {
        const answers: Array<{ name: string; status: number; message: string; ms: number }> = []
        for (const c of cases) {
          const started = performance.now()
          const res = await call(server.url, "POST", c.path, { raw: JSON.stringify(c.body), apiKey: user.apiKey })
          answers.push({ name: c.name, status: res.status, message: String(errorMessageOf(c.path, res.body)), ms: performance.now() - started })
        }
        const started = performance.now()
        const tool = await rpc(
          server,
          JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "gateway_complete", arguments: { messages: many(1_000_000, 1) } } }),
          { "x-api-key": user.apiKey }
        )
        answers.push({ name: "mcp", status: tool.status, message: tool.body.result?.content?.[0]?.text ?? JSON.stringify(tool.body), ms: performance.now() - started })
        return answers
      })
      console.log("bodies of many wrong items", value.map(({ message, ...a }) => ({ ...a, message: message.slice(0, 100) })), figures)
      for (const [i, c] of cases.entries()) {
        const answer = value[i]!
        expect(answer.status, c.name).toBe(400)
        expect(answer.message, c.name).toMatch(c.problem)
        expect(answer.message.length, c.name).toBeLessThan(600)
      }
      const tool = value.at(-1)!
      expect(tool.status).toBe(200)
      expect(tool.message).toMatch(/^Invalid arguments for gateway_complete: messages: holds at most 1000 items$/)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
      const after = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
      expect(after.body).toEqual(before.body)
    })
  })

  describe("text that is slow to tokenize", () => {
    // The tokenizer is quadratic in a run without spaces and slow on random words: 80 KB of one letter took
    // 4.7 s, and 1.2 MB of random words 9.5 s, on the event loop.
    const randomWords = (n: number) =>
      Array.from({ length: n }, () => Array.from({ length: 1 + (Math.random() * 9 | 0) }, () => String.fromCharCode(97 + (Math.random() * 26 | 0))).join("")).join(" ")
    // A message holds at most 2,000,000 characters.
    const texts = { "2 × 1.9 MB of one letter": ["a".repeat(1_900_000), 2], "2 × 1.8 MB of random words": [randomWords(300_000), 2], "1,000 × 4 KB of one letter": ["b".repeat(4_000), 1_000] } as const

    it("counts them on count_tokens without holding the event loop", async () => {
      const { figures, value } = await underAttack(server, async () => {
        const answers: Array<{ name: string; status: number; tokens: number; ms: number }> = []
        for (const [name, [text, times]] of Object.entries(texts)) {
          const messages = Array.from({ length: times }, () => ({ role: "user", content: text }))
          const started = performance.now()
          const res = await call(server.url, "POST", "/anthropic/v1/messages/count_tokens", { body: { model: "auto", messages }, apiKey: user.apiKey })
          answers.push({ name, status: res.status, tokens: res.body.input_tokens, ms: performance.now() - started })
        }
        return answers
      })
      console.log("text that is slow to tokenize", value, figures)
      for (const a of value) {
        expect(a.status, a.name).toBe(200)
        expect(a.tokens, a.name).toBeGreaterThan(0)
      }
      // One letter is 8 to a token (o200k); random words about one token per 2 characters.
      expect(value[0]!.tokens).toBeGreaterThan(400_000)
      expect(value[0]!.tokens).toBeLessThan(600_000)
      expect(value[1]!.tokens).toBeGreaterThan(1_000_000)
      expect(value[2]!.tokens).toBeGreaterThan(400_000)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
    })
  })

  describe("bodies that made the server work far past their size", () => {
    // Each was measured before its fix (docs/security.md): superlinear work on the event loop.
    const parse = async (name: string, type: string, text: string) => {
      const form = new FormData()
      form.append("file", new File([text], name, { type }))
      const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
      return { status: res.status, body: await res.json() as any }
    }
    const tool = async (name: string, args: Record<string, unknown>) =>
      (await rpc(server, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }), { "x-api-key": user.apiKey })).body.result

    it("answers each at once: guardrails, HTML and CSV documents, extraction schemas, local rerank, classification and sentiment", async () => {
      const { figures, value } = await underAttack(server, async () => {
        const timed = async <A>(name: string, f: () => Promise<A>) => {
          const started = performance.now()
          const result = await f()
          return { name, result, ms: Math.round(performance.now() - started) }
        }
        return [
          await timed("guardrails: 100,000 letters", () => call(server.url, "POST", "/v1/guardrails/check", { body: { text: "a".repeat(100_000) }, apiKey: user.apiKey })),
          await timed("guardrails: a@ and 99,998 letters", () => call(server.url, "POST", "/v1/guardrails/check", { body: { text: `a@${"a".repeat(99_998)}` }, apiKey: user.apiKey })),
          await timed("html: 1 MB of <", () => parse("x.html", "text/html", "<".repeat(1_000_000))),
          await timed("html: 200,000 unclosed <br and <!--", () => parse("x.html", "text/html", "<br<!--".repeat(200_000))),
          await timed("csv: 1,000,001 empty rows", () => parse("x.csv", "text/csv", "\n".repeat(1_000_001))),
          await timed("csv: 1,000,001 empty fields", () => parse("x.csv", "text/csv", ",".repeat(1_000_000))),
          await timed("extract: 3,000 patternProperties", () =>
            call(server.url, "POST", "/v1/extract", {
              body: { text: "x", schema: { type: "object", patternProperties: Object.fromEntries(Array.from({ length: 3_000 }, (_, i) => [`^k${i}$`, { type: "string" }])) } },
              apiKey: user.apiKey
            })),
          await timed("rerank: 1,000 documents of 9,900 characters of distinct words", () => {
            // A map of every word of every document: 2.1 s on the event loop (health 1.95 s).
            const words = (n: number) => Array.from({ length: n }, () => Math.random().toString(36).slice(2, 8)).join(" ")
            const documents = Array.from({ length: 1_000 }, () => words(1_414))
            return call(server.url, "POST", "/v1/rerank", { body: { provider: "local", query: words(1_428), documents, topN: 3 }, apiKey: user.apiKey })
          }),
          await timed("classify: 100,000 letters", () => tool("gateway_ml_classify_task", { text: "a".repeat(100_000) })),
          await timed("sentiment: 20,000 characters of punctuation", () => tool("gateway_ml_sentiment", { text: "!?.".repeat(6_666) }))
        ]
      })
      console.log("bodies that made the server work", value.map(({ ms, name, result }) => ({ name, ms, status: (result as any).status ?? "mcp" })), figures)
      const [guard1, guard2, html1, html2, csv, csvFields, extract, rerank, classify, sentiment] = value.map((v) => v.result as any)
      expect(guard1.status).toBe(200)
      expect(guard2.status).toBe(200)
      expect(html1.status).toBe(200)
      expect(html1.body.result.text).toBe("<".repeat(1_000_000))
      expect(html2.status).toBe(200)
      expect(csv.status).toBe(400)
      expect(csv.body.message).toMatch(/more than 200000 CSV rows or 1000000 fields/)
      expect(csvFields.status).toBe(400)
      expect(extract.status).toBe(400)
      expect(extract.body.message).toMatch(/schema holds more than 2000 values/)
      expect(rerank.status).toBe(200)
      expect(rerank.body.result.results).toHaveLength(3)
      expect(classify.isError).toBe(false)
      expect(sentiment.isError).toBe(false)
      // A sentence every three characters: the answer lists the first 100 (it was 6 MB for 100,000 characters).
      expect(sentiment.structuredContent.sentences).toHaveLength(100)
      expect(sentiment.structuredContent.sentenceCount).toBeGreaterThan(6_000)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
    })

    it("lets health in between the analyses of a batch (each takes a turn of the event loop of its own)", async () => {
      // 32 analyses back to back in one turn held the event loop for seconds (a batch of 32 of 100,000
      // characters: 35 s); each now waits for its own turn.
      const analyst = await signUp(server, "analyst")
      const calls = Array.from({ length: 32 }, (_, id) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "gateway_ml_sentiment", arguments: { text: "!?.".repeat(6_666) } } }))
      const { figures, value } = await underAttack(server, async () => (await rpc(server, JSON.stringify(calls), { "x-api-key": analyst.apiKey })).body)
      console.log("a batch of 32 sentiment analyses", figures)
      expect(value).toHaveLength(32)
      for (const answer of value) expect(answer.result.isError).toBe(false)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
    })
  })

  describe("documents that made the server work far past their size", () => {
    const DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    const upload = async (name: string, type: string, body: string | Buffer) => {
      const form = new FormData()
      form.append("file", new File([typeof body === "string" ? body : new Uint8Array(body)], name, { type }))
      const started = performance.now()
      const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
      return { status: res.status, body: await res.json() as any, ms: Math.round(performance.now() - started) }
    }

    it("refuses a JSON document of more than 1,000,000 items before parsing it, and parses one at the bound", async () => {
      // 10 MB of [0,0,…]: 4.9 million items parsed, printed and answered held the event loop 2.2 s.
      const { figures, value } = await underAttack(server, async () => [
        await upload("big.json", "application/json", `[${"0,".repeat(4_900_000)}0]`),
        await upload("bound.json", "application/json", `[${"0,".repeat(999_999)}0]`)
      ])
      console.log("JSON documents", value.map(({ body, ...v }) => ({ ...v, message: body.message })), figures)
      const [big, bound] = value
      expect(big!.status).toBe(400)
      expect(big!.body.message).toMatch(/more than 1000000 array items and object members/)
      expect(bound!.status).toBe(200)
      expect(bound!.body.result.data).toHaveLength(1_000_000)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
    })

    it("refuses a multipart body of 200,000 parts before parsing it, counting none against quota", async () => {
      // The form parser took 1.25 s for 300,000 fields, all on the event loop.
      const before = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
      const boundary = "b"
      const body = `--${boundary}\r\nContent-Disposition: form-data; name=""\r\n\r\n\r\n`.repeat(200_000) + `--${boundary}--\r\n`
      expect(body.length).toBeLessThan(10 * 1024 * 1024)
      const { figures, value } = await underAttack(server, async () => {
        const started = performance.now()
        const res = await fetch(`${server.url}/v1/documents/parse`, {
          method: "POST",
          headers: { "x-api-key": user.apiKey, "content-type": `multipart/form-data; boundary=${boundary}` },
          body
        })
        return { status: res.status, body: await res.json() as any, ms: Math.round(performance.now() - started) }
      })
      console.log("multipart of 200,000 parts", value, figures)
      expect(value.status).toBe(400)
      expect(value.body.message).toBe("The multipart/form-data body holds more than 1000 parts.")
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
      expect((await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body).toEqual(before.body)
    })

    it("refuses a Content-Type the part counter and the form parser would read apart (a list of types): such a body of 200,000 parts was parsed whole", async () => {
      const before = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
      const body = `--b\r\nContent-Disposition: form-data; name=""\r\n\r\n\r\n`.repeat(200_000) + `--b--\r\n`
      const { figures, value } = await underAttack(server, () =>
        Promise.all(["multipart/form-data; boundary=a, multipart/form-data; boundary=b", "multipart/form-data; boundary=b,", "multipart/form-data; boundary=b, */*", "multipart/form-datax, multipart/form-data; boundary=b"].map(async (type) => {
          const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey, "content-type": type }, body })
          return [type, res.status, ((await res.json()) as any).message]
        })))
      for (const [type, status, message] of value) expect([type, status, message]).toEqual([type, 400, "The request must be multipart/form-data, with one Content-Type naming its boundary."])
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
      expect((await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body).toEqual(before.body)
      // The type's name in any case, a quoted boundary holding a comma: one type, read alike, taken.
      const form = (type: string) => fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey, "content-type": type }, body: `--a,b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--a,b--\r\n` })
      expect((await form('Multipart/Form-Data; boundary="a,b"')).status).toBe(200)
    })

    it("refuses a form whose text field is not UTF-8 (400 naming it, nothing counted), as a JSON body's text is refused: it was read with U+FFFD in place of its bytes", async () => {
      const before = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
      const body = Buffer.concat([
        Buffer.from(`--b\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n`),
        Buffer.from(`--b\r\nContent-Disposition: form-data; name="provider"\r\n\r\n`),
        Buffer.from([0x6c, 0x6f, 0x63, 0x61, 0x6c, 0xe9]),
        Buffer.from("\r\n--b--\r\n")
      ])
      const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey, "content-type": "multipart/form-data; boundary=b" }, body })
      expect([res.status, ((await res.json()) as any).message]).toEqual([400, 'Invalid request body: the form field "provider" is not valid UTF-8.'])
      expect((await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body).toEqual(before.body)
    })

    it("reads a long DOCX in a sandbox process, not the gateway's, and answers 422 naming the memory limit for one past it", async () => {
      // mammoth builds a DOM of the whole document: 9 MB of XML took 4.5 s of the gateway's CPU and 730 MB.
      const long = docxWithParagraphs(20_000)
      const huge = docxWithParagraphs(150_000)
      expect(huge.length).toBeLessThan(10 * 1024 * 1024)
      const { figures, value } = await underAttack(server, async () => [await upload("long.docx", DOCX, long), await upload("huge.docx", DOCX, huge)])
      console.log("DOCX documents", value.map(({ body, ...v }) => ({ ...v, message: body.message, characters: body.result?.characters })), figures)
      const [parsed, refused] = value
      expect(parsed!.status).toBe(200)
      expect(parsed!.body.result.text).toMatch(/^Paragraph 0 \S+/)
      expect(parsed!.body.result.text).toContain("Paragraph 19999 ")
      expect(refused!.status).toBe(422)
      expect(refused!.body.message).toMatch(/could not be read within the sandbox's limits: .*AIGW_SANDBOX_MEMORY_MB/)
      expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
      // The gateway's own process: the documents' DOMs live in the sandbox's.
      expect(figures.peakServerRssMb - figures.baselineRssMb).toBeLessThan(150)
    })
  })

  nulSuite(() => ({ server, user }))

  describe("requests node's parser refuses, and repeated headers", () => {
    /** Sends `text` as it is on a new connection; resolves with the status line's code, the headers and the body. */
    const rawExchange = (text: string) =>
      new Promise<{ status: number; head: string; body: string }>((resolve, reject) => {
        const socket = net.connect(server.port, "127.0.0.1")
        let got = ""
        socket.on("data", (d) => (got += d.toString("latin1")))
        socket.on("error", reject)
        socket.on("close", () => {
          const [head = "", body = ""] = got.split("\r\n\r\n")
          resolve({ status: Number(head.split(" ")[1]), head, body })
        })
        socket.end(text)
      })
    const chat = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
    const post = (path: string, headers: string, body = chat) =>
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${headers}content-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`

    it("answers them with their status in the envelope of the request's path, counting nothing, and stays up", async () => {
      const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
      const before = await used()
      const key = `x-api-key: ${user.apiKey}\r\n`
      // Two Host lines (RFC 9112 §3.2), on the lane's route and on an Effect route.
      for (const path of ["/openai/v1/chat/completions", "/v1/complete"]) {
        const twice = await rawExchange(post(path, `host: evil.example\r\n${key}`))
        expect([path, twice.status]).toEqual([path, 400])
        expect(twice.body).toContain("Invalid Host header.")
      }
      // HTTP/1.1 without Host: 400 in the envelope (RFC 9112 §3.2); HTTP/1.0 may go without.
      const hostless = await rawExchange(`GET /v1/health HTTP/1.1\r\nconnection: close\r\n\r\n`)
      expect(hostless.status).toBe(400)
      expect(JSON.parse(hostless.body)).toMatchObject({ isError: true, message: "Invalid Host header." })
      const laneHostless = await rawExchange(post("/openai/v1/chat/completions", key).replace("host: 127.0.0.1\r\n", ""))
      expect(laneHostless.status).toBe(400)
      expect(JSON.parse(laneHostless.body).error).toMatchObject({ message: "Invalid Host header." })
      expect((await rawExchange(`GET /v1/health HTTP/1.0\r\n\r\n`)).status).toBe(200)
      // Two API keys are no API key.
      const keys = await rawExchange(post("/openai/v1/chat/completions", `${key}x-api-key: aigw_other\r\n`))
      expect(keys.status).toBe(401)
      // Both credential headers must name one credential: a key beside a different (or broken) bearer is no credential.
      for (const path of ["/v1/usage", "/openai/v1/models"]) {
        const both = (authorization: string) => fetch(`${server.url}${path}`, { headers: { "x-api-key": user.apiKey, authorization } }).then((r) => r.status)
        expect([path, await both("Bearer garbage"), await both(`Bearer ${user.apiKey}`)]).toEqual([path, 401, 200])
      }
      const laneBoth = await rawExchange(post("/openai/v1/chat/completions", `${key}authorization: Bearer aigw_someone_else\r\n`))
      expect(laneBoth.status).toBe(401)
      // A 401 names the scheme it takes (RFC 9110 §11.6.1), on the lane and on the Effect path, in every API.
      expect(keys.head).toMatch(/www-authenticate: Bearer realm="aigw"/i)
      for (const path of ["/v1/usage", "/api/avatar/0190a0a0-0000-7000-8000-000000000000", "/openai/v1/models"]) {
        const res = await fetch(`${server.url}${path}`, { headers: { "x-api-key": "aigw_wrong" } })
        expect([path, res.status, res.headers.get("www-authenticate")]).toEqual([path, 401, 'Bearer realm="aigw"'])
      }
      // Headers past node's limit: 431, in the gateway's envelope, or OpenAI's on its path.
      const big = `x-filler: ${"a".repeat(20_000)}\r\n`
      const gateway = await rawExchange(post("/v1/complete", big + key))
      expect(gateway.status).toBe(431)
      expect(gateway.head).toMatch(/content-type: application\/json/i)
      expect(JSON.parse(gateway.body)).toMatchObject({ isError: true, message: expect.stringMatching(/^The request could not be read: its header section is larger/) })
      const openai = await rawExchange(post("/openai/v1/chat/completions", big + key))
      expect(openai.status).toBe(431)
      expect(JSON.parse(openai.body).error).toMatchObject({ type: "invalid_request_error", message: expect.stringMatching(/^The request could not be read/) })
      // Not an HTTP method; conflicting framing; an expectation the server cannot meet.
      const method = await rawExchange(`FOO /v1/complete HTTP/1.1\r\nhost: 127.0.0.1\r\n${key}content-length: 0\r\n\r\n`)
      expect(method.status).toBe(400)
      expect(JSON.parse(method.body)).toMatchObject({ isError: true, message: expect.stringMatching(/method/) })
      const framing = await rawExchange(post("/v1/complete", `${key}transfer-encoding: chunked\r\n`))
      expect(framing.status).toBe(400)
      expect(JSON.parse(framing.body).isError).toBe(true)
      const expectation = await rawExchange(post("/api/avatar/authenticate", "expect: 200-ok\r\n", "{}"))
      expect(expectation.status).toBe(417)
      expect(JSON.parse(expectation.body)).toMatchObject({ isError: true, isWarning: false, message: "Expect: 200-ok is not supported; only 100-continue is." })
      expect(await used()).toBe(before)
      expect((await call(server.url, "GET", "/v1/health")).status).toBe(200)
    })
  })

  describe("methods", () => {
    it("answers a served path asked with another method 405 with Allow, in the path's envelope; an unknown path 404", async () => {
      for (const [method, path, allow] of [
        ["PUT", "/v1/complete", "POST"],
        ["DELETE", "/openai/v1/chat/completions", "POST"],
        ["GET", "/anthropic/v1/messages", "POST"],
        ["POST", "/v1/health", "GET"],
        ["PATCH", "/v1/keys", "GET, POST"],
        ["POST", "/v1/batch/123/status", "GET"],
        ["POST", "/api/avatar/0190a0a0-0000-7000-8000-000000000000", "GET, PUT, DELETE"],
        // A static path beside a parameter's: its own methods, as the router routes it.
        ["POST", "/api/avatar/verify-email", "GET"],
        // ... also with a method the parameter's route takes: never a profile read of "register" (401 or "id must be a UUID").
        ["GET", "/api/avatar/register", "POST"],
        ["DELETE", "/api/avatar/authenticate", "POST"],
        ["PUT", "/api/avatar/reset-password", "GET, POST"],
        ["DELETE", "/api/avatar/verify-email", "GET"],
        ["GET", "/v1/video/generate", "POST"]
      ] as const) {
        const res = await fetch(`${server.url}${path}`, { method, headers: { "x-api-key": user.apiKey } })
        expect([method, path, res.status, res.headers.get("allow")?.split(", ").sort().join(", ")]).toEqual([method, path, 405, allow.split(", ").sort().join(", ")])
        const text = JSON.stringify(await res.json())
        expect(text).toContain(`${method} is not served on ${path}`)
      }
      const openai = await fetch(`${server.url}/openai/v1/chat/completions`, { method: "GET" })
      expect(await openai.json()).toMatchObject({ error: { code: "MethodNotAllowed", type: "invalid_request_error" } })
      const anthropic = await fetch(`${server.url}/anthropic/v1/messages`, { method: "GET" })
      expect(await anthropic.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
      // A path the router refuses as sent, asked with a method its pattern takes: no 405 naming that very method.
      for (const [method, path, status] of [["GET", "/v1/video/%ZZ", 400], ["GET", "/v1/batch/%/status", 400], ["GET", `/v1/fine-tuning/jobs/${"a".repeat(500)}`, 404], ["GET", `/api/avatar/${"a".repeat(101)}`, 404]] as const) {
        const res = await fetch(`${server.url}${path}`, { method, headers: { "x-api-key": user.apiKey } })
        expect([path, res.status, res.headers.get("allow")]).toEqual([path, status, null])
        expect(JSON.stringify(await res.json())).not.toContain("is not served on")
      }
      const unknown = await fetch(`${server.url}/v1/nowhere`, { method: "POST" })
      expect(unknown.status).toBe(404)
      expect(unknown.headers.get("allow")).toBeNull()
      expect(unknown.headers.get("x-ratelimit-limit")).toBeNull()
      // A caller's answers carry its day's rate-limit headers, these too.
      for (const [method, path, status] of [["POST", "/v1/nowhere", 404], ["PUT", "/v1/complete", 405], ["GET", "/anthropic/v1/nope", 404]] as const) {
        const res = await fetch(`${server.url}${path}`, { method, headers: { "x-api-key": user.apiKey } })
        expect([path, res.status, res.headers.get("x-ratelimit-plan"), res.headers.get("x-ratelimit-limit")]).toEqual([path, status, "Free", expect.stringMatching(/^\d+$/)])
      }
    })
  })

  describe("Host header on the fast lane", () => {
    const keyNames = async () => ((await call(server.url, "GET", "/v1/keys", { apiKey: user.apiKey })).body.result as Array<{ name: string }>).map((k) => k.name)

    it("never builds the hand-off URL from Host: tricks create no key and no avatar", async () => {
      const messages = [{ role: "user", content: "hi" }]
      // injectAvatarContext makes the lane hand the request to the Effect app.
      const key = await rawPost(server, "/v1/complete", "127.0.0.1/v1/keys?x=", { name: "smuggled", messages, injectAvatarContext: true }, user.apiKey)
      expect(key.status).toBe(400)
      expect(key.body.message).toBe("Invalid Host header.")
      expect(await keyNames()).not.toContain("smuggled")

      const username = `smuggled_${Math.random().toString(36).slice(2, 8)}`
      const avatar = { username, email: `${username}@example.com`, password: "password 123", messages, injectAvatarContext: true }
      const reg = await rawPost(server, "/v1/complete", "x/api/avatar/register#", avatar, user.apiKey)
      expect(reg.status).toBe(400)
      const again = await call(server.url, "POST", "/api/avatar/register", { body: { username, email: avatar.email, password: avatar.password } })
      expect(again.body.isError, "the username must still be free").toBe(false)
    })

    it("answers 400 to an invalid Host before the credentials, on the lane's routes and the Effect app's alike, counting nothing", async () => {
      const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
      const before = await used()
      const chat = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }
      for (const [path, key] of [["/openai/v1/chat/completions", user.apiKey], ["/openai/v1/chat/completions", "aigw_nope"], ["/v1/keys", user.apiKey]] as const) {
        for (const host of ["a b", "user@evil.example", "evil.example/path?x"]) {
          const res = await rawPost(server, path, host, { ...chat, name: "never" }, key)
          expect([path, host, res.status]).toEqual([path, host, 400])
          expect(JSON.stringify(res.body)).toContain("Invalid Host header.")
        }
      }
      expect(await used()).toBe(before)
    })

    it("answers 400 to an invalid Host, and hands off on the request's own path with a valid one", async () => {
      const bad = await rawPost(server, "/v1/complete", "bad host", { messages: [{ role: "user", content: "hi" }], injectAvatarContext: true }, user.apiKey)
      expect(bad.status).toBe(400)
      expect(bad.body).toMatchObject({ isError: true, message: "Invalid Host header." })
      // A hand-off reaches /v1/complete's Effect route (its decode error), whatever the (valid) Host says.
      const handed = await rawPost(server, "/v1/complete", "gateway.example.test", { messages: [], injectAvatarContext: true }, user.apiKey)
      expect(handed.status).toBe(400)
      expect(handed.body.message).toMatch(/^Invalid request body: messages/)
      // Its query is read as the route's: /v1/complete takes none.
      const queried = await rawPost(server, "/v1/complete?x=1", "gateway.example.test", { messages: [], injectAvatarContext: true }, user.apiKey)
      expect([queried.status, queried.body.message]).toEqual([400, "Invalid query: x: is unexpected"])
    })
  })
})

/** NUL characters in JSON strings, path parameters and query values: 400 before any database sees them. */
function nulSuite(target: () => { server: RunningServer; user: TestAvatar }) {
  describe("NUL characters", () => {
    it("refuses \\u0000 and literal NUL in the named fields with a 400 envelope, and writes nothing", async () => {
      const { server, user } = target()
      const nul = "a\u0000b"
      const u = `nul_${Math.random().toString(36).slice(2, 8)}`
      const cases: Array<{ method: string; path: string; body: Record<string, unknown>; auth?: boolean }> = [
        { method: "POST", path: "/api/avatar/register", body: { username: nul, email: `${u}@example.com`, password: "password 123" } },
        { method: "POST", path: "/api/avatar/register", body: { username: u, email: `${u}${nul}@example.com`, password: "password 123" } },
        { method: "POST", path: "/api/avatar/register", body: { username: u, email: `${u}@example.com`, password: "password 123", title: nul } },
        { method: "POST", path: "/api/avatar/authenticate", body: { username: nul, password: "password 123" } },
        { method: "PUT", path: `/api/avatar/${user.id}`, body: { title: nul }, auth: true },
        { method: "PUT", path: `/api/avatar/${user.id}`, body: { description: nul }, auth: true },
        { method: "POST", path: "/v1/keys", body: { name: nul }, auth: true },
        { method: "POST", path: "/v1/memory/store", body: { content: nul }, auth: true }
      ]
      for (const c of cases) {
        const text = JSON.stringify(c.body)
        // The escape as JSON sends it, and the raw byte.
        for (const raw of [text, text.replace("\\u0000", "\u0000")]) {
          const res = await call(server.url, c.method, c.path, { raw, ...(c.auth ? { apiKey: user.apiKey } : {}) })
          expect(res.status, `${c.method} ${c.path} ${text}`).toBe(400)
          expect(res.body.message, c.path).toBe("Invalid request body: NUL characters (\\u0000) are not accepted.")
        }
      }
      // An escaped backslash before "u0000" is not a NUL.
      const fine = await call(server.url, "PUT", `/api/avatar/${user.id}`, { body: { description: "C:\\u0000" }, apiKey: user.apiKey })
      expect(fine.status).toBe(200)
      expect((await call(server.url, "POST", "/api/avatar/register", { body: { username: u, email: `${u}@example.com`, password: "password 123" } })).body.isError).toBe(false)
      const keys = (await call(server.url, "GET", "/v1/keys", { apiKey: user.apiKey })).body.result as Array<{ name: string }>
      expect(keys.some((k) => k.name.includes("\u0000"))).toBe(false)
    })

    it("refuses an escaped half of a surrogate pair with a 400, on the lane and the Effect path, uncounted", async () => {
      // UTF-8 cannot hold it: stored, "a\ud800b" became "a\ufffd\ufffd\ufffdb", and two different passwords one.
      const { server, user } = target()
      const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
      const before = await used()
      const lone = "Invalid request body: a \\u escape of half a UTF-16 surrogate pair (\\uD800 to \\uDFFF without its other half) is no character: send valid Unicode."
      for (const [method, path, body, auth] of [
        ["PUT", `/api/avatar/${user.id}`, { title: "a\ud800b" }, true],
        ["POST", "/api/avatar/authenticate", { username: user.username, password: "pass\udc00word 123" }, false],
        ["POST", "/v1/complete", { messages: [{ role: "user", content: "hi \ud83d" }] }, true],
        ["POST", "/openai/v1/chat/completions", { model: "gpt-4o-mini", messages: [{ role: "user", content: "\ude00" }] }, true]
      ] as const) {
        const res = await call(server.url, method, path, { raw: JSON.stringify(body), ...(auth ? { apiKey: user.apiKey } : {}) })
        expect([res.status, res.body.message ?? res.body.error?.message], path).toEqual([400, lone])
      }
      expect(await used()).toBe(before)
      // A whole pair is a character like any other.
      const emoji = await call(server.url, "PUT", `/api/avatar/${user.id}`, { raw: JSON.stringify({ title: "\ud83d\ude00" }), apiKey: user.apiKey })
      expect([emoji.status, emoji.body.result?.title]).toEqual([200, "\u{1F600}"])
    })

    it("refuses NUL in path parameters and query values with 400", async () => {
      const { server, user } = target()
      for (const path of ["/v1/batch/a%00b/status?provider=openai", "/v1/batch/abc/status?provider=open%00ai", "/v1/video/a%00b", "/api/avatar/verify-email?token=a%00b"]) {
        const res = await call(server.url, "GET", path, { apiKey: user.apiKey })
        expect(res.status, path).toBe(400)
        expect(res.body.message, path).toBe("Invalid path or query: NUL characters (\\u0000) are not accepted.")
      }
      const resend = await call(server.url, "POST", "/api/avatar/resend-verification-email/a%00b%40example.com")
      expect(resend.status).toBe(400)
      // The fast lane's routes too (an API key: the lane serves them), uncounted, with the day's rate-limit headers.
      const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
      const before = await used()
      const body = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }
      for (const path of ["/openai/v1/chat/completions?a=%00", "/v1/complete?x=%00", "/v1/moderation?%00=1"]) {
        const res = await call(server.url, "POST", path, { body: { ...body, text: "hi" }, apiKey: user.apiKey })
        expect(res.status, path).toBe(400)
        expect(res.body.message ?? res.body.error.message, path).toBe("Invalid path or query: NUL characters (\\u0000) are not accepted.")
        expect(res.headers.get("x-ratelimit-limit"), path).not.toBeNull()
      }
      expect(await used()).toBe(before)
    })
  })
}

describe.skipIf(!hasPg)("edge attacks on PostgreSQL", () => {
  let server: RunningServer
  let user: TestAvatar
  beforeAll(async () => {
    server = await startServer({ DATABASE_URL: await freshPgDatabase() })
    user = await signUp(server, "edgepg")
  })
  afterAll(() => server?.stop())

  nulSuite(() => ({ server, user }))

  it("logs no database failure for them", () => {
    expect(server.output()).not.toMatch(/invalid byte sequence|unexpected failure/)
  })
})
