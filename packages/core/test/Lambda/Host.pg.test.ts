/**
 * The Lambda host end to end on PostgreSQL, invoked with the AWS documentation's sample events
 * (adapted per call): cold start on an unmigrated database -> clear 503, the migrate function,
 * register -> verify -> authenticate -> API key -> complete across HTTP API 2.0, REST API 1.0 and
 * Function URL events against a mock OpenAI upstream, SSE buffered and streamed (Function URL
 * RESPONSE_STREAM), a base64 request body, one runtime per container, and the scheduled handler.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { type Drainer, type LambdaHost, makeLambdaHost } from "../../src/Lambda/Host.ts"
import { freshPgDatabase, hasPg } from "../support/databases.ts"
import { LANGFUSE_KEY, type ObservabilityMock, startObservabilityMock } from "../support/mockObservability.ts"
import { type MockUpstream, startOpenAiMock } from "../support/mockUpstreams.ts"
import { scratchDir } from "../support/scratch.ts"
import { type Call, fixture, functionUrlEvent, json, RecordingStream, sseData, v1Event, v2Event, verificationToken } from "./support/events.ts"

describe.skipIf(!hasPg)("Lambda host on PostgreSQL", () => {
  let upstream: MockUpstream
  let langfuse: ObservabilityMock
  let host: LambdaHost
  let dataDir: string
  const drained: Array<{ name: string; deadlineMs: number; at: number }> = []
  let failDrainer = false
  let slowDrainer = false
  let interrupted = false
  const testDrainers: ReadonlyArray<Drainer> = [
    {
      name: "first",
      drain: (deadlineMs) =>
        Effect.suspend(() => {
          drained.push({ name: "first", deadlineMs, at: Date.now() })
          // A step that takes longer than the invocation has: cut off at the deadline, and told so.
          return slowDrainer ? Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void (interrupted = true)))) : Effect.void
        })
    },
    {
      name: "second",
      drain: (deadlineMs) =>
        Effect.suspend(() => {
          drained.push({ name: "second", deadlineMs, at: Date.now() })
          return failDrainer ? Effect.fail(new Error("upstream poll refused")) : Effect.void
        })
    }
  ]
  const user = { username: `lambda_${Math.random().toString(36).slice(2, 9)}`, password: "password 123", email: "" }
  let jwt = ""
  let apiKey = ""
  const hi = [{ role: "user", content: "Hello" }]

  beforeAll(async () => {
    user.email = `${user.username}@example.com`
    upstream = await startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 150 })
    langfuse = await startObservabilityMock("langfuse")
    dataDir = scratchDir("aigw-lambda-")
    host = makeLambdaHost({
      env: {
        DATABASE_URL: await freshPgDatabase(),
        JWT_SECRET: "lambda-test-secret-0123456789abcdef",
        AIGW_DATA_DIR: dataDir,
        PUBLIC_URL: "https://gateway.example.com",
        OPENAI_API_KEY: "sk-openai",
        OPENAI_BASE_URL: upstream.url,
        LANGFUSE_API_KEY: LANGFUSE_KEY,
        LANGFUSE_BASE_URL: langfuse.url
      },
      drainers: testDrainers,
      drainMarginMs: 1_000
    })
  })
  afterAll(async () => {
    await host?.dispose()
    await upstream?.close()
    await langfuse?.close()
  })

  const v2 = (call: Call) => host.handler(v2Event(call))
  const v1 = (call: Call) => host.handler(v1Event(call))
  const url = (call: Call) => host.handler(functionUrlEvent(call))

  it("cold start on an unmigrated database: 503 saying to run migrate; migrate; the next call starts", async () => {
    const before = await v2({ method: "GET", path: "/v1/health" })
    expect(before.statusCode).toBe(503)
    expect(json(before).message).toMatch(/^gateway failed to start: the database schema is not up to date \(at migration 0, this build needs \d+\): invoke the migrate function first$/)

    const migrated = await host.migrate()
    expect(migrated.applied).toContain("0001_accounts_usage")
    expect(Number(migrated.applied.at(-1)!.slice(0, 4))).toBe(migrated.latest)
    expect((await host.migrate()).applied).toEqual([])

    const after = await v2({ method: "GET", path: "/v1/health" })
    expect(after.statusCode).toBe(200)
  })

  it("register (HTTP API 2.0) -> verify (REST API 1.0) -> authenticate (Function URL) -> API key", async () => {
    const reg = await v2({ method: "POST", path: "/api/avatar/register", body: { username: user.username, email: user.email, password: user.password } })
    expect(reg.statusCode).toBe(200)
    expect(json(reg).isError).toBe(false)

    const token = verificationToken(dataDir, user.email)
    expect(fs.readdirSync(path.join(dataDir, "mail")).some((f) => fs.readFileSync(path.join(dataDir, "mail", f), "utf8").includes("https://gateway.example.com/"))).toBe(true)
    const verify = await v1({ method: "GET", path: `/api/avatar/verify-email?token=${encodeURIComponent(token)}` })
    expect(verify.statusCode).toBe(200)
    expect(json(verify).isError).toBe(false)

    const auth = await url({ method: "POST", path: "/api/avatar/authenticate", body: { username: user.username, password: user.password } })
    const authBody = json(auth)
    expect(authBody.isError).toBe(false)
    jwt = authBody.result.jwtToken
    expect(jwt).toMatch(/^ey/)

    const key = await v2({ method: "POST", path: "/v1/keys", token: jwt, body: { name: "lambda" } })
    expect(key.statusCode).toBe(200)
    apiKey = json(key).result.key
    expect(apiKey).toBeTruthy()
  })

  it("completes through each event type, with quota headers in the right result fields", async () => {
    upstream.setScenario({ kind: "text", text: "Hello from Lambda", usage: { prompt: 5, completion: 3 } })
    const body = { messages: hi, provider: "openai", model: "gpt-4o-mini" }

    const rest = await v1({ method: "POST", path: "/v1/complete", apiKey, body })
    expect(rest.statusCode).toBe(200)
    expect(json(rest).result).toMatchObject({ provider: "openai", content: "Hello from Lambda", usage: { totalTokens: 8 } })
    expect("multiValueHeaders" in rest && rest.multiValueHeaders["x-ratelimit-limit"]).toEqual([rest.headers["x-ratelimit-limit"]])
    expect(rest.headers["x-ratelimit-plan"]).toBe("Free")

    const http = await v2({ method: "POST", path: "/v1/complete", token: jwt, body })
    expect(json(http).result.content).toBe("Hello from Lambda")
    expect(http.headers["x-ratelimit-remaining"]).toBeDefined()
    expect("multiValueHeaders" in http).toBe(false)

    const fn = await url({ method: "POST", path: "/openai/v1/chat/completions", apiKey, body: { model: "gpt-4o-mini", messages: hi } })
    expect(fn.statusCode).toBe(200)
    expect(json(fn).choices[0].message.content).toBe("Hello from Lambda")

    const usage = json(await v2({ method: "GET", path: "/v1/usage", apiKey }))
    expect(usage.result.dailyCallsUsed).toBeGreaterThanOrEqual(3)
  })

  it("answers made outside the application carry a caller's rate-limit headers; paths are routed as the node host routes them", async () => {
    // TRACE cannot travel as a web Request: the host answers it, as the node host does, with the caller's headers.
    const trace = await v2({ method: "TRACE", path: "/v1/complete", apiKey })
    expect([trace.statusCode, trace.headers["allow"], trace.headers["x-ratelimit-plan"]]).toEqual([405, "POST", "Free"])
    expect(trace.headers["x-ratelimit-remaining"]).toMatch(/^\d+$/)
    const dotted = await v1({ method: "GET", path: "/v1/x/../health", apiKey })
    expect([dotted.statusCode, dotted.headers["x-ratelimit-limit"]]).toEqual([404, expect.stringMatching(/^\d+$/)])
    expect((await v2({ method: "TRACE", path: "/v1/complete" })).headers["x-ratelimit-limit"]).toBeUndefined()
    // Repeated slashes, a leading // too, are no route, as on the node host (a path is served as spelled).
    for (const path of ["//v1/health", "/v1//health", "/V1/health", "/v1/health;x"]) expect([path, (await v2({ method: "GET", path })).statusCode]).toEqual([path, 404])
    expect((await v2({ method: "GET", path: "/v1/health" })).statusCode).toBe(200)
  })

  it("each invocation sends its usage to the exporters before it returns (buffered and streamed)", async () => {
    const generations = () =>
      langfuse.requests.flatMap((r) => r.status === 207 ? r.body.batch : []).filter((e: any) => e.type === "generation-create").map((e: any) => e.body.usageDetails)
    upstream.setScenario({ kind: "text", text: "exported", usage: { prompt: 7, completion: 9 } })
    await v1({ method: "POST", path: "/v1/complete", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } })
    expect(generations()).toContainEqual({ input: 7, output: 9, total: 16 })
    upstream.setScenario({ kind: "text", text: "streamed export", usage: { prompt: 11, completion: 13 } })
    await host.streamingHandler(functionUrlEvent({ method: "POST", path: "/v1/complete/stream", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), new RecordingStream())
    expect(generations()).toContainEqual({ input: 11, output: 13, total: 24 })
  })

  it("serves the MCP endpoint: tools/list and an authenticated tool call over JSON-RPC", async () => {
    const rpc = (body: unknown, auth?: string) =>
      v2({ method: "POST", path: "/mcp", body, headers: { accept: "application/json, text/event-stream", ...(auth ? { authorization: `Bearer ${auth}` } : {}) } })
    const list = await rpc({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }, jwt)
    expect(list.statusCode).toBe(200)
    expect(json(list).result.tools.map((t: any) => t.name)).toContain("gateway_complete")
    const usage = await rpc({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "gateway_get_usage", arguments: {} } }, apiKey)
    expect(json(usage).result).toMatchObject({ isError: false })
    expect(json(usage).result.structuredContent.dailyCallLimit).toBeGreaterThan(0)
    const anon = await rpc({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "gateway_get_usage", arguments: {} } })
    expect(json(anon).result.isError).toBe(true)
  })

  it("a base64-encoded request body (binary media type) reaches the route intact", async () => {
    upstream.setScenario({ kind: "text", text: "décodé ✓" })
    const content = "Héllo — ünïcode ✓"
    const rest = await v1({ method: "POST", path: "/v1/complete", apiKey, base64: true, body: { messages: [{ role: "user", content }], provider: "openai", model: "gpt-4o-mini" } })
    expect(rest.statusCode).toBe(200)
    expect(json(rest).result.content).toBe("décodé ✓")
    const sent = upstream.requests.at(-1)!.body as { messages: Array<{ content: string }> }
    expect(sent.messages.at(-1)!.content).toBe(content)
  })

  it("buffered invocation returns the whole SSE stream in one result", async () => {
    upstream.setScenario({ kind: "text", text: "one two three four", usage: { prompt: 2, completion: 4 } })
    const result = await v2({ method: "POST", path: "/v1/complete/stream", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } })
    expect(result.statusCode).toBe(200)
    expect(result.headers["content-type"]).toMatch(/^text\/event-stream/)
    expect(result.isBase64Encoded).toBe(false)
    const chunks = sseData(result.body).map((f) => JSON.parse(f))
    expect(chunks.length).toBeGreaterThan(2)
    expect(chunks.slice(0, -1).map((c) => c.content).join("")).toBe("one two three four")
    expect(chunks.at(-1)).toMatchObject({ done: true, promptTokens: 2, completionTokens: 4, provider: "openai" })
  })

  it("a buffered request still running when the invocation's time is nearly out is cut off: 504 in its envelope, the upstream call closed", async () => {
    const closedBefore = upstream.closedSockets
    upstream.setScenario({ kind: "hang" })
    // 2.6 s left: the answer is due ANSWER_MARGIN_MS before that, so at 1.6 s.
    const context = { getRemainingTimeInMillis: () => 2_600 }
    const started = performance.now()
    const gateway = await host.handler(v2Event({ method: "POST", path: "/v1/complete", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), context)
    const took = performance.now() - started
    expect(gateway.statusCode).toBe(504)
    expect(json(gateway)).toMatchObject({ isError: true, result: null })
    expect(json(gateway).message).toMatch(/did not finish within this Lambda function's time \(3 s left when it started\)\. Raise the function's Timeout/)
    expect(took).toBeGreaterThanOrEqual(1_550)
    expect(took).toBeLessThan(2_600)
    expect(gateway.headers["x-request-id"]).toBeTruthy()
    // The call was admitted before the cut, so counted: its answer carries the caller's day, as the application's do.
    expect([gateway.headers["x-ratelimit-plan"], gateway.headers["x-karma-multiplier"]]).toEqual(["Free", expect.stringMatching(/^\d+\.\d\d$/)])
    expect(gateway.headers["x-ratelimit-remaining"]).toMatch(/^\d+$/)
    // The OpenAI surface answers in its own error shape; a buffered stream is cut the same way.
    const openai = await host.handler(v1Event({ method: "POST", path: "/openai/v1/chat/completions", apiKey, body: { model: "gpt-4o-mini", messages: hi } }), context)
    expect(openai.statusCode).toBe(504)
    expect(json(openai).error).toMatchObject({ type: "api_error", code: "UpstreamTimeout" })
    const stream = await host.handler(v2Event({ method: "POST", path: "/v1/complete/stream", apiKey, headers: { "x-request-id": "cut-stream-1" }, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), context)
    expect(stream.statusCode).toBe(504)
    expect(stream.headers["x-request-id"]).toBe("cut-stream-1")
    // Each cut-off request closed its upstream connection.
    for (let i = 0; i < 50 && upstream.closedSockets < closedBefore + 3; i++) await new Promise((r) => setTimeout(r, 20))
    expect(upstream.closedSockets).toBeGreaterThanOrEqual(closedBefore + 3)
    // With time enough, the same call is answered.
    upstream.setScenario({ kind: "text", text: "in time", usage: { prompt: 1, completion: 2 } })
    const answered = await host.handler(v2Event({ method: "POST", path: "/v1/complete", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), context)
    expect(json(answered).result.content).toBe("in time")
  })

  it("a stream still running near the end of the invocation's time ends with its error chunk, in its own format (streamed and buffered)", async () => {
    // 40 pieces 150 ms apart: about 6 s of answer against 5 s left, so each stream stops at 3 s (a
    // second before the 4 s cut) with what it sent and its error. The four run side by side.
    const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ")
    upstream.setScenario({ kind: "text", text: words, usage: { prompt: 2, completion: 40 }, pieces: 40 })
    const context = { getRemainingTimeInMillis: () => 5_000 }
    // The stopped streams' usage is estimated by the tokenizer: loaded here first, so that its first load
    // (part of the second kept before the cut) does not eat the test's margins on a busy machine.
    await v2({ method: "POST", path: "/anthropic/v1/messages/count_tokens", apiKey, body: { model: "gpt-4o-mini", messages: hi } })
    const closedBefore = upstream.closedSockets
    const usageBefore = json(await v2({ method: "GET", path: "/v1/usage", apiKey })).result
    const timed = async <A>(f: () => Promise<A>) => {
      const started = performance.now()
      const value = await f()
      return { value, took: performance.now() - started }
    }
    const streamed = (path: string, body: unknown) =>
      timed(async () => {
        const stream = new RecordingStream()
        await host.streamingHandler(functionUrlEvent({ method: "POST", path, apiKey, body }), stream, context)
        return stream.parts()
      })
    const [gateway, openai, anthropic, buffered] = await Promise.all([
      streamed("/v1/complete/stream", { messages: hi, provider: "openai", model: "gpt-4o-mini" }),
      streamed("/openai/v1/chat/completions", { model: "gpt-4o-mini", messages: hi, stream: true }),
      streamed("/anthropic/v1/messages", { model: "gpt-4o-mini", max_tokens: 100, messages: hi, stream: true }),
      timed(() => host.handler(v2Event({ method: "POST", path: "/v1/complete/stream", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), context))
    ])
    for (const { took } of [gateway, openai, anthropic, buffered]) {
      expect(took).toBeGreaterThanOrEqual(2_950)
      expect(took).toBeLessThan(4_000)
    }
    expect(gateway.value.metadata.statusCode).toBe(200)
    const chunks = sseData(gateway.value.body).map((f) => JSON.parse(f))
    const sent = chunks.slice(0, -1).map((c) => c.content).join("")
    expect(sent.length).toBeGreaterThan(0)
    expect(words.startsWith(sent)).toBe(true)
    expect(sent).not.toBe(words)
    expect(chunks.at(-1)).toMatchObject({
      done: true,
      finishReason: "error",
      errorCode: "UpstreamTimeout",
      error: expect.stringMatching(/did not finish within this Lambda function's time \(5 s left when it started\)\. Raise the function's Timeout\.$/)
    })
    // The OpenAI and Anthropic surfaces end with their own error events.
    const openaiEvents = sseData(openai.value.body)
    expect(openaiEvents.at(-1)).toBe("[DONE]")
    expect(JSON.parse(openaiEvents.at(-2)!).error).toMatchObject({ type: "api_error", code: "UpstreamTimeout", message: expect.stringMatching(/did not finish within this Lambda function's time/) })
    expect(anthropic.value.body).toMatch(/event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"The request did not finish within this Lambda function's time/)
    // Buffered: the stream's text so far and its error, with status 200, before the cut's 504 could come.
    expect(buffered.value.statusCode).toBe(200)
    expect(sseData(buffered.value.body).map((f) => JSON.parse(f)).at(-1)).toMatchObject({ done: true, error: expect.stringMatching(/or use the streaming function for long answers\.$/) })
    // Each stopped stream closed its upstream connection, and counted as a call.
    for (let i = 0; i < 50 && upstream.closedSockets < closedBefore + 4; i++) await new Promise((r) => setTimeout(r, 20))
    expect(upstream.closedSockets).toBeGreaterThanOrEqual(closedBefore + 4)
    const usageAfter = json(await v2({ method: "GET", path: "/v1/usage", apiKey })).result
    expect(usageAfter.dailyCallsUsed - usageBefore.dailyCallsUsed).toBe(4)
  })

  it("RESPONSE_STREAM: a request whose status is still unknown near the end of the invocation's time is answered 504 in its envelope", async () => {
    upstream.setScenario({ kind: "hang" })
    const stream = new RecordingStream()
    const started = performance.now()
    await host.streamingHandler(functionUrlEvent({ method: "POST", path: "/openai/v1/chat/completions", apiKey, body: { model: "gpt-4o-mini", messages: hi, stream: true } }), stream, { getRemainingTimeInMillis: () => 2_600 })
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_550)
    expect(stream.parts().metadata.statusCode).toBe(504)
    expect(stream.parts().metadata.headers["x-ratelimit-plan"]).toBe("Free")
    expect(JSON.parse(stream.parts().body).error).toMatchObject({ type: "api_error", code: "UpstreamTimeout", message: expect.stringMatching(/Raise the function's Timeout\.$/) })
    // Cut off during a cold start (the runtime takes longer than the 50 ms before the cut): answered 504, and
    // the request is not started once the runtime is ready.
    upstream.setScenario({ kind: "text", text: "too late", usage: { prompt: 1, completion: 2 } })
    await host.dispose()
    const requestsBefore = upstream.requests.length
    const cold = new RecordingStream()
    await host.streamingHandler(functionUrlEvent({ method: "POST", path: "/openai/v1/chat/completions", apiKey, body: { model: "gpt-4o-mini", messages: hi, stream: true } }), cold, { getRemainingTimeInMillis: () => 100 })
    expect(cold.parts().metadata.statusCode).toBe(504)
    await host.warm()
    await new Promise((r) => setTimeout(r, 200))
    expect(upstream.requests.length).toBe(requestsBefore)
  })

  it("a buffered answer over Lambda's 6 MB result limit is a 502 in its envelope naming the limit; the streaming function sends it whole", async () => {
    // 1.6 million "é", 3.2 MB in UTF-8: /v1/complete carries them twice (`content` and `message.content`),
    // 6.4 MB, over the limit though its 3.2 million characters alone would fit (so the result is measured);
    // the OpenAI surface once, under it.
    const big = "é".repeat(1_600_000)
    upstream.setScenario({ kind: "text", text: big, usage: { prompt: 1, completion: 800_000 } })
    const buffered = await v2({ method: "POST", path: "/v1/complete", apiKey, headers: { "x-request-id": "too-large-1" }, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } })
    expect(buffered.statusCode).toBe(502)
    expect(buffered.headers["x-request-id"]).toBe("too-large-1")
    // The call was made and counted: the application's rate-limit headers stay on the answer that replaces its own.
    expect([buffered.headers["x-ratelimit-plan"], buffered.headers["x-ratelimit-remaining"]]).toEqual(["Free", expect.stringMatching(/^\d+$/)])
    expect(json(buffered)).toMatchObject({ isError: true, result: null })
    expect(json(buffered).message).toMatch(/^The answer is 6\.4 MB as this Lambda function's result, over the 6 MB \(6,291,456 bytes\) a buffered Lambda function may return\. Use the streaming function/)
    const openai = await host.handler(v1Event({ method: "POST", path: "/openai/v1/chat/completions", apiKey, body: { model: "gpt-4o-mini", messages: hi } }))
    expect(openai.statusCode).toBe(200)
    expect(json(openai).choices[0].message.content).toBe(big)
    const streamed = new RecordingStream()
    await host.streamingHandler(functionUrlEvent({ method: "POST", path: "/v1/complete", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), streamed)
    expect(streamed.parts().metadata.statusCode).toBe(200)
    expect(JSON.parse(streamed.parts().body).result.content).toBe(big)
    // A body longer than the limit is over it without being measured: its size is given as a lower bound.
    upstream.setScenario({ kind: "text", text: "word ".repeat(1_400_000), usage: { prompt: 1, completion: 1_400_000 } })
    const twice = await host.handler(v1Event({ method: "POST", path: "/openai/v1/chat/completions", apiKey, body: { model: "gpt-4o-mini", messages: hi } }))
    expect(twice.statusCode).toBe(502)
    expect(json(twice).error).toMatchObject({ type: "api_error", code: "UpstreamFailed", message: expect.stringMatching(/^The answer is at least 7\.0 MB as this Lambda function's result/) })
  })

  it("RESPONSE_STREAM: prelude first, then SSE frames as the upstream produces them", async () => {
    upstream.setScenario({ kind: "text", text: "alpha beta gamma delta", usage: { prompt: 2, completion: 4 } })
    const stream = new RecordingStream()
    const started = Date.now()
    await host.streamingHandler(functionUrlEvent({ method: "POST", path: "/v1/complete/stream", apiKey, body: { messages: hi, provider: "openai", model: "gpt-4o-mini" } }), stream)
    const { metadata, body } = stream.parts()
    expect(metadata).toMatchObject({ statusCode: 200, headers: { "content-type": expect.stringMatching(/^text\/event-stream/) }, cookies: [] })
    expect(metadata.headers["x-ratelimit-limit"]).toBeDefined()
    const chunks = sseData(body).map((f) => JSON.parse(f))
    expect(chunks.slice(0, -1).map((c) => c.content).join("")).toBe("alpha beta gamma delta")
    expect(chunks.at(-1)).toMatchObject({ done: true, completionTokens: 4 })
    // Frames were written over time (the mock waits 150 ms between frames), not all at the end.
    const dataWrites = stream.writes.filter((w) => w.bytes.includes("data: "))
    expect(dataWrites.length).toBeGreaterThan(2)
    expect(dataWrites.at(-1)!.at - dataWrites[0]!.at).toBeGreaterThan(250)
    expect(dataWrites[0]!.at - started).toBeLessThan(stream.endedAt - started - 250)
  })

  it("RESPONSE_STREAM of a plain JSON answer and of an error keeps status and envelope", async () => {
    const ok = new RecordingStream()
    await host.streamingHandler(functionUrlEvent({ method: "GET", path: "/v1/usage", apiKey }), ok)
    expect(ok.parts().metadata.statusCode).toBe(200)
    expect(JSON.parse(ok.parts().body).isError).toBe(false)
    const unauthorized = new RecordingStream()
    await host.streamingHandler(functionUrlEvent({ method: "GET", path: "/v1/usage" }), unauthorized)
    expect(unauthorized.parts().metadata.statusCode).toBe(401)
    expect(JSON.parse(unauthorized.parts().body).isError).toBe(true)
  })

  it("one runtime per container: built on the first invocation, reused by the next ones", async () => {
    await host.dispose() // as a fresh container
    const log = vi.spyOn(console, "log")
    try {
      const results = await Promise.all([1, 2, 3].map(() => url({ method: "GET", path: "/v1/health" })))
      for (let i = 0; i < 3; i++) results.push(await v1({ method: "GET", path: "/v1/health" }))
      expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200])
      const builds = log.mock.calls.map((c) => c.join(" ")).filter((l) => l.includes("aigw: runtime ready"))
      expect(builds).toHaveLength(1)
    } finally {
      log.mockRestore()
    }
  })

  it("scheduled: runs the drainers in order with a deadline inside the time budget; a failure is reported", async () => {
    const context = { getRemainingTimeInMillis: () => 30_000 }
    const started = Date.now()
    const summary = await host.scheduled(fixture("scheduled-event"), context)
    expect(summary.drainers.map((d) => [d.name, d.ok])).toEqual([["first", true], ["second", true]])
    expect(drained.map((d) => d.name)).toEqual(["first", "second"])
    const deadline = drained[0]!.deadlineMs
    expect(deadline).toBeGreaterThanOrEqual(started + 29_000 - 50)
    expect(deadline).toBeLessThanOrEqual(Date.now() + 29_000)

    failDrainer = true
    await expect(host.scheduled(fixture("scheduled-event"), context)).rejects.toThrow("drainers failed: second (upstream poll refused)")

    failDrainer = false
    slowDrainer = true
    const before = Date.now()
    const cut = await host.scheduled(fixture("scheduled-event"), { getRemainingTimeInMillis: () => 2_500 })
    // Budget 2.5 s, margin 1 s: the drain ends at its deadline, not when the step would.
    expect(Date.now() - before).toBeLessThan(2_400)
    expect(cut.drainers[0]).toMatchObject({ name: "first", ok: true, cutOff: true })
    expect(interrupted).toBe(true)
    expect(cut.drainers[1]).toMatchObject({ name: "second", skipped: true })
    slowDrainer = false

    drained.length = 0
    const none = await host.scheduled(fixture("scheduled-event"), { getRemainingTimeInMillis: () => 500 })
    expect(none.drainers.map((d) => d.skipped)).toEqual([true, true])
    expect(drained).toEqual([])
  })
})
