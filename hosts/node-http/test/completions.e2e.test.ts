/**
 * Completions end to end through the node host, against mock upstreams that speak the
 * providers' wire formats: routing, fallback, the stream contract, disconnects, tool loops,
 * quota headers and 429, hostile input, and the OpenAI-compatible surface via the openai SDK.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../../packages/core/src/Catalog/Catalog.ts"
import { type MockUpstream, startAnthropicMock, startGeminiMock, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const sseChunks = (text: string) =>
  text.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => JSON.parse(b.slice(6)))

describe("completions", () => {
  let server: RunningServer
  let openai: MockUpstream
  let anthropic: MockUpstream
  let gemini: MockUpstream
  let slow: MockUpstream
  let user: TestAvatar
  const post = (path: string, body: unknown, who: TestAvatar = user) => call(server.url, "POST", path, { body, apiKey: who.apiKey })
  const hi = [{ role: "user", content: "Hello" }]

  beforeAll(async () => {
    ;[openai, anthropic, gemini, slow] = await Promise.all([
      startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 1 }),
      startAnthropicMock({ apiKey: "sk-anthropic", chunkDelayMs: 1 }),
      startGeminiMock({ apiKey: "g-key", chunkDelayMs: 1 }),
      startOpenAiMock({ apiKey: "sk-groq", chunkDelayMs: 1_000 })
    ])
    server = await startServer({
      ...adminEnv,
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: openai.url,
      ANTHROPIC_API_KEY: "sk-anthropic",
      ANTHROPIC_BASE_URL: anthropic.url,
      GOOGLE_API_KEY: "g-key",
      GOOGLE_BASE_URL: gemini.url,
      GROQ_API_KEY: "sk-groq",
      GROQ_BASE_URL: slow.url
    })
    user = await signUp(server, "comp")
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([openai, anthropic, gemini, slow].map((m) => m?.close()))
  })

  it("completes on a named provider with the result, usage, cost and rate-limit headers", async () => {
    openai.setScenario({ kind: "text", text: "Hello from OpenAI", usage: { prompt: 12, completion: 4 } })
    const res = await post("/v1/complete", { messages: hi, provider: "openai", model: "gpt-4o-mini", temperature: 0.2, maxTokens: 64 })
    expect(res.status).toBe(200)
    expect(res.body.isError).toBe(false)
    expect(res.body.result).toMatchObject({
      provider: "openai",
      model: "gpt-4o-mini",
      content: "Hello from OpenAI",
      message: { role: "assistant", content: "Hello from OpenAI", toolCalls: [] },
      finishReason: "stop",
      usage: { promptTokens: 12, completionTokens: 4, totalTokens: 16, estimated: false }
    })
    expect(res.body.result.costUSD).toBeCloseTo(12 / 1000 * 0.00015 + 4 / 1000 * 0.0006, 12)
    for (const h of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-plan", "x-karma-multiplier"]) {
      expect(res.headers.get(h), h).not.toBeNull()
    }
    expect(res.headers.get("x-ratelimit-plan")).toBe("Free")
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result.dailyTokensUsed).toBeGreaterThanOrEqual(16)
    expect(usage.body.result.dailyCallsUsed).toBeGreaterThanOrEqual(1)
    expect(usage.body.result.monthlySpendUSD).toBeGreaterThan(0)
  })

  it("routes auto to the cheapest capable configured model on Free", async () => {
    const res = await post("/v1/complete", { messages: hi })
    expect(res.body.isError).toBe(false)
    const configured = new Set(["openai", "google", "groq"]) // anthropic needs Bronze
    const price = (m: (typeof data.models)[number]) => m.inputPer1kUSD + m.outputPer1kUSD
    const cheapest = data.models
      .filter((m) => m.kind === "chat" && m.minPlan === "Free" && configured.has(m.provider))
      .sort((a, b) => price(a) - price(b) || b.quality - a.quality)[0]!
    expect(res.body.result.model).toBe(cheapest.id)
  })

  it("falls back to the next candidate on a 5xx, not on a 400", async () => {
    const target = { provider: "openai" }
    openai.queue({ kind: "error", status: 503, message: "overloaded now" })
    const ok = await post("/v1/complete", { messages: hi, ...target, routing: { preference: "cost" } })
    expect(ok.body.isError).toBe(false)
    expect(ok.body.result.fallbacks).toHaveLength(1)
    expect(ok.body.result.fallbacks[0].error).toContain("overloaded now")
    const before = openai.requests.length
    openai.queue({ kind: "error", status: 400, message: "bad parameter x" })
    const bad = await post("/v1/complete", { messages: hi, ...target })
    expect(bad.status).toBe(502)
    expect(bad.body).toMatchObject({ isError: true, result: null })
    expect(bad.body.message).toContain("bad parameter x")
    expect(openai.requests.length).toBe(before + 1)
  })

  it("passes an upstream's short Retry-After on with the 502 of its rate limit, on the route and the lane", async () => {
    for (const [path, body] of [
      ["/v1/complete", { messages: hi, provider: "openai", model: "gpt-4o-mini" }],
      ["/openai/v1/chat/completions", { messages: hi, provider: "openai", model: "gpt-4o-mini" }]
    ] as const) {
      openai.queue({ kind: "error", status: 429, message: "Rate limit reached", retryAfter: "2" })
      const limited = await post(path, body)
      expect([path, limited.status, limited.headers.get("retry-after"), limited.headers.get("x-should-retry")]).toEqual([path, 502, "2", null])
      // A wait past a minute is the upstream's own (a daily limit): not passed on.
      openai.queue({ kind: "error", status: 429, message: "Daily limit reached", retryAfter: "86400" })
      expect((await post(path, body)).headers.get("retry-after")).toBeNull()
    }
  })

  it("streams chunks with the spec's contract and the upstream's token counts", async () => {
    openai.setScenario({ kind: "text", text: "one two three four", usage: { prompt: 7, completion: 4 } })
    const res = await fetch(`${server.url}/v1/complete/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ messages: hi, provider: "openai", model: "gpt-4o-mini" })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/)
    expect(res.headers.get("x-ratelimit-limit")).not.toBeNull()
    const chunks = sseChunks(await res.text())
    expect(chunks.length).toBeGreaterThan(2)
    for (const c of chunks.slice(0, -1)) expect(c).toMatchObject({ done: false })
    expect(chunks.slice(0, -1).map((c) => c.content).join("")).toBe("one two three four")
    expect(chunks.at(-1)).toMatchObject({ content: "", done: true, promptTokens: 7, completionTokens: 4, provider: "openai" })
    expect(openai.requests.at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
  })

  it("streams from Anthropic and Gemini too, and ends a broken stream with an error chunk", async () => {
    const bronze = await signUp(server, "bronze")
    await call(server.url, "PUT", `/v1/admin/avatars/${bronze.id}/plan`, { token: await adminToken(server), body: { plan: "Bronze" } })
    anthropic.setScenario({ kind: "text", text: "Claude says hi", usage: { prompt: 5, completion: 3 } })
    const a = await fetch(`${server.url}/v1/complete/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": bronze.apiKey },
      body: JSON.stringify({ messages: hi, provider: "anthropic", model: "claude-haiku-4-5" })
    })
    const ac = sseChunks(await a.text())
    expect(ac.slice(0, -1).map((c) => c.content).join("")).toBe("Claude says hi")
    expect(ac.at(-1)).toMatchObject({ done: true, promptTokens: 5, completionTokens: 3 })

    gemini.setScenario({ kind: "error", status: 500, message: "mid-stream failure", midStream: true })
    const g = await fetch(`${server.url}/v1/complete/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ messages: hi, provider: "google", model: "gemini-2.5-flash" })
    })
    const gc = sseChunks(await g.text())
    expect(gc.at(-1)).toMatchObject({ done: true, content: "" })
    expect(gc.at(-1).error).toMatch(/mid-stream failure/)
    gemini.setScenario({ kind: "text", text: "Hello from mock" })
  })

  it("a client that disconnects mid-stream cancels the upstream and usage is still recorded", async () => {
    slow.setScenario({ kind: "text", text: "a b c d e f g h i j k l m n o p q r s t u v w x y z", usage: { prompt: 3, completion: 26 } })
    const before = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyTokensUsed
    const controller = new AbortController()
    const res = await fetch(`${server.url}/v1/complete/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ messages: hi, provider: "groq", model: "llama-3.1-8b-instant" }),
      signal: controller.signal
    })
    const reader = res.body!.getReader()
    const first = await reader.read()
    expect(new TextDecoder().decode(first.value)).toContain("data: ")
    controller.abort()
    const deadline = Date.now() + 5000
    while (slow.closedSockets === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(slow.closedSockets).toBeGreaterThan(0)
    // Recording happens as the interrupted stream is finalised: poll for it.
    let after = before
    for (const until = Date.now() + 5000; after === before && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 100))
      after = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyTokensUsed
    }
    expect(after).toBeGreaterThan(before)
  })

  it("a client that leaves a stream before any of its answer came is charged no tokens, as without streaming", async () => {
    slow.setScenario({ kind: "text", text: "a b c d e f g h", usage: { prompt: 3, completion: 8 } })
    const usage = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result
    const before = await usage()
    const closed = slow.closedSockets
    const controller = new AbortController()
    // The upstream answers 200 and its role chunk at once, its first words a second later; the gateway answers
    // its client's head at once and the first words when they come, so the client leaves before them.
    const leaving = fetch(`${server.url}/v1/complete/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ messages: hi, provider: "groq", model: "llama-3.1-8b-instant" }),
      signal: controller.signal
    }).then((res) => res.body!.getReader().read()).catch((e: Error) => e.name)
    await new Promise((r) => setTimeout(r, 300))
    controller.abort()
    expect(await leaving).toBe("AbortError")
    for (const until = Date.now() + 5000; slow.closedSockets === closed && Date.now() < until;) await new Promise((r) => setTimeout(r, 50))
    await new Promise((r) => setTimeout(r, 300))
    const after = await usage()
    expect([after.dailyCallsUsed, after.dailyTokensUsed, after.monthlySpendUSD]).toEqual([before.dailyCallsUsed + 1, before.dailyTokensUsed, before.monthlySpendUSD])
  })

  for (const [provider, model, mock] of [["openai", "gpt-4o-mini", () => openai], ["anthropic", "claude-haiku-4-5", () => anthropic], ["google", "gemini-2.5-flash", () => gemini]] as const) {
    it(`runs a tool loop on ${provider} through /v1/complete and /v1/complete/tool-result`, async () => {
      const who = provider === "anthropic" ? await (async () => {
        const b = await signUp(server, "tools")
        await call(server.url, "PUT", `/v1/admin/avatars/${b.id}/plan`, { token: await adminToken(server), body: { plan: "Bronze" } })
        return b
      })() : user
      const tools = [{ type: "function", function: { name: "get_time", description: "Current time in a city", parameters: { type: "object", properties: { city: { type: "string" } } } } }]
      mock().setScenario({ kind: "tool", name: "get_time", arguments: { city: "Rome" }, id: "call_rome" })
      const first = await post("/v1/complete", { messages: [{ role: "user", content: "Time in Rome?" }], provider, model, tools }, who)
      expect(first.body.result.finishReason).toBe("tool_calls")
      const call0 = first.body.result.toolCalls[0]
      expect(call0.name).toBe("get_time")
      mock().setScenario({ kind: "text", text: "It is noon in Rome." })
      const second = await post("/v1/complete/tool-result", {
        provider,
        model,
        tools,
        messages: [
          { role: "user", content: "Time in Rome?" },
          { role: "assistant", content: "", toolCalls: [call0] },
          { role: "tool", toolCallId: call0.id, content: "{\"time\":\"12:00\"}" }
        ]
      }, who)
      expect(second.body).toMatchObject({ isError: false, result: { content: "It is noon in Rome.", provider } })
    })
  }

  it("refuses hostile and impossible requests with clear envelopes and charges no quota", async () => {
    const used = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    const cases: Array<[unknown, number, RegExp]> = [
      [{ messages: [] }, 400, /at least one message/],
      [{ messages: [{ role: "wizard", content: "x" }] }, 400, /role/],
      [{ messages: hi, temperature: 3 }, 400, /temperature/],
      [{ messages: hi, maxTokens: 10_000_000 }, 400, /maxTokens/],
      [{ messages: hi, maxTokens: 1.5 }, 400, /maxTokens/],
      [{ messages: hi, tools: [{ type: "function", function: { name: "bad name!" } }] }, 400, /tool names/],
      [{ messages: hi, tools: "nope" }, 400, /tools/],
      [{ messages: [{ role: "tool", content: "x", toolCallId: "a" }] }, 400, /role/],
      [{ messages: "hello" }, 400, /messages/],
      [{ messages: hi, provider: "no-such-provider" }, 404, /Unknown provider/],
      [{ messages: hi, model: "no-such-model" }, 404, /Unknown model/],
      [{ messages: hi, provider: "mistral" }, 422, /MISTRAL_API_KEY/],
      [{ messages: hi, provider: "anthropic" }, 403, /plan Bronze/],
      [{ messages: hi, model: "gpt-5.5" }, 403, /plan Gold/],
      [{ messages: hi, provider: "openai", model: "gpt-4o-mini", maxTokens: 900_000 }, 422, /maxTokens/],
      [{ messages: hi, avatarId: crypto.randomUUID() }, 403, /avatarId/],
      [{ messages: hi, avatarId: "not-a-uuid" }, 400, /avatarId/],
      // A field the gateway does not take is refused by name, at any depth, not dropped.
      [{ messages: hi, temprature: 0.2 }, 400, /^Invalid request body: temprature: is unexpected/],
      [{ messages: hi, routing: { preferance: "quality" } }, 400, /^Invalid request body: routing\.preferance: is unexpected/],
      [{ messages: hi, tools: [{ type: "function", function: { name: "f" }, cache: true }] }, 400, /tools\.0\.cache: is unexpected/],
      [{ messages: hi, model: "openai/" }, 400, /names no model after its provider/],
      // The spec's message content is a string: only an assistant message (one that makes tool calls) may go without it.
      [{ messages: [{ role: "user", content: null }] }, 400, /^messages\.0\.content: a user message needs its content \(a string\)$/],
      [{ messages: [{ role: "system" }, ...hi] }, 400, /^messages\.0\.content: a system message needs its content/],
      [{ messages: [...hi, { role: "assistant" }] }, 400, /^messages\.1\.content: an assistant message needs its content \(a string\) or tool calls$/],
      [null, 400, /^Invalid request body: Expected an object, actual null$/]
    ]
    for (const [body, status, pattern] of cases) {
      const res = await post("/v1/complete", body)
      expect(res.status, JSON.stringify(body)).toBe(status)
      expect(res.body.isError).toBe(true)
      expect(res.body.message).toMatch(pattern)
    }
    const malformed = await call(server.url, "POST", "/v1/complete", { raw: "{\"messages\": [", apiKey: user.apiKey })
    expect(malformed.status).toBe(400)
    expect(malformed.body).toMatchObject({ isError: true, result: null })
    const orphan = await post("/v1/complete/tool-result", { messages: [{ role: "user", content: "x" }, { role: "tool", toolCallId: "nope", content: "1" }] })
    expect(orphan.status).toBe(400)
    expect(orphan.body.message).toMatch(/answers no earlier assistant tool call/)
    expect((await call(server.url, "POST", "/v1/complete", { body: { messages: hi } })).status).toBe(401)
    expect((await call(server.url, "POST", "/v1/complete", { body: { messages: hi }, apiKey: "aigw_wrong" })).status).toBe(401)
    const after = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    // Only requests that passed validation were admitted (routing refusals count: they are real calls).
    expect(after - used).toBeLessThanOrEqual(9)
  })

  it("forwards a tool function's strict and a message's name on /v1/complete, as the OpenAI surface does", async () => {
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} }, strict: true } }]
    const res = await post("/v1/complete", { provider: "openai", model: "gpt-4o-mini", messages: [{ role: "user", content: "Hello", name: "ann" }], tools })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const sent = openai.requests.at(-1)!.body as any
    expect(sent.tools[0].function).toMatchObject({ name: "get_weather", strict: true })
    expect(sent.messages.at(-1)).toMatchObject({ role: "user", content: "Hello", name: "ann" })
  })

  it("lets an Admin act for another avatar and charges that avatar", async () => {
    const token = await adminToken(server)
    const other = await signUp(server, "actee")
    const res = await call(server.url, "POST", "/v1/complete", { token, body: { messages: hi, provider: "openai", model: "gpt-4o-mini", avatarId: other.id } })
    expect(res.body.isError).toBe(false)
    expect(res.headers.get("x-ratelimit-plan")).toBe("Free")
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: other.apiKey })
    expect(usage.body.result.dailyCallsUsed).toBe(1)
  })

  // A twins review: batch items and the avatar API take an avatar id in either case (a UUID's hex digits name one
  // id); acting for an avatar took only lower case, and refused a User's own id in upper case with 403.
  it("takes avatarId in either case: a caller's own, and an Admin's for another avatar", async () => {
    const own = await post("/v1/complete", { messages: hi, provider: "openai", model: "gpt-4o-mini", avatarId: user.id.toUpperCase() })
    expect(own.status, JSON.stringify(own.body)).toBe(200)
    const other = await signUp(server, "actee")
    const res = await call(server.url, "POST", "/v1/complete", { token: await adminToken(server), body: { messages: hi, provider: "openai", model: "gpt-4o-mini", avatarId: other.id.toUpperCase() } })
    expect(res.body.isError, JSON.stringify(res.body)).toBe(false)
    expect((await call(server.url, "GET", "/v1/usage", { apiKey: other.apiKey })).body.result.dailyCallsUsed).toBe(1)
  })

  it("serves the OpenAI-compatible surface to the official openai SDK", async () => {
    const client = new OpenAI({ apiKey: user.apiKey, baseURL: `${server.url}/openai/v1`, maxRetries: 0 })
    openai.setScenario({ kind: "text", text: "SDK hello", usage: { prompt: 8, completion: 2 } })
    const plain = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
    expect(plain.choices[0]!.message.content).toBe("SDK hello")
    expect(plain.usage).toMatchObject({ prompt_tokens: 8, completion_tokens: 2, total_tokens: 10 })

    const stream = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } })
    let text = ""
    let usage: unknown
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ""
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe("SDK hello")
    expect(usage).toMatchObject({ prompt_tokens: 8, completion_tokens: 2 })

    openai.setScenario({ kind: "tool", name: "lookup", arguments: { q: "x" }, id: "call_sdk" })
    const tools = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "look it up" }],
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } } } }]
    })
    expect(tools.choices[0]!.finish_reason).toBe("tool_calls")
    expect(tools.choices[0]!.message.tool_calls![0]).toMatchObject({ id: "call_sdk", type: "function", function: { name: "lookup" } })

    const models = await client.models.list()
    expect(models.data.map((m) => m.id)).toContain("gpt-4o-mini")

    const bad = new OpenAI({ apiKey: "aigw_nope", baseURL: `${server.url}/openai/v1`, maxRetries: 0 })
    await expect(bad.chat.completions.create({ model: "auto", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 401 })
    await expect(client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 404 })
    openai.setScenario({ kind: "text", text: "Hello from mock" })
  })
})
