/**
 * The Anthropic-compatible surface (POST /anthropic/v1/messages) through the node host with the
 * official `@anthropic-ai/sdk` client, against mock upstreams that speak OpenAI's and Anthropic's
 * wire formats: plain answers, system prompts, tools and tool results, images, streams (text and
 * tool input deltas), Anthropic-shaped errors, quota headers, and fields it cannot carry.
 */
import Anthropic from "@anthropic-ai/sdk"
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startAnthropicMock, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const weatherTool = {
  name: "get_weather",
  description: "Weather of a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
}
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

describe("Anthropic-compatible surface", () => {
  let server: RunningServer
  let openai: MockUpstream
  let anthropic: MockUpstream
  let user: TestAvatar
  let bronze: TestAvatar
  const client = (apiKey: string) => new Anthropic({ apiKey, baseURL: `${server.url}/anthropic`, maxRetries: 0 })
  const lastBody = (mock: MockUpstream) => mock.requests.at(-1)!.body as any

  beforeAll(async () => {
    ;[openai, anthropic] = await Promise.all([
      startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 1 }),
      startAnthropicMock({ apiKey: "sk-anthropic", chunkDelayMs: 1 })
    ])
    server = await startServer({
      ...adminEnv,
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: openai.url,
      ANTHROPIC_API_KEY: "sk-anthropic",
      ANTHROPIC_BASE_URL: anthropic.url
    })
    ;[user, bronze] = await Promise.all([signUp(server, "anth"), signUp(server, "anthbronze")])
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${bronze.id}/plan`, { token: await adminToken(server), body: { plan: "Bronze" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([openai, anthropic].map((m) => m?.close()))
  })

  it("answers messages.create with a Message, usage and the rate-limit headers", async () => {
    openai.setScenario({ kind: "text", text: "Hello from OpenAI", usage: { prompt: 12, completion: 4 } })
    const { data, request_id, response } = await client(user.apiKey)
      .messages.create({ model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "Hello" }] })
      .withResponse()
    // The SDK reads the id from Anthropic's `request-id` header (it was null: only x-request-id was sent).
    expect(request_id).toBe(response.headers.get("x-request-id"))
    expect(request_id).toMatch(/^[0-9a-f-]{36}$/)
    const refused = await client(user.apiKey).messages.create({ model: "no-such-model", max_tokens: 8, messages: [{ role: "user", content: "x" }] }).then(() => undefined, (e) => e)
    expect(refused.requestID).toMatch(/^[0-9a-f-]{36}$/)
    expect(data).toMatchObject({
      type: "message",
      role: "assistant",
      model: "gpt-4o-mini",
      content: [{ type: "text", text: "Hello from OpenAI" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 4 }
    })
    expect(data.id).toMatch(/^msg_[0-9a-f]{32}$/)
    expect((data as unknown as { provider: string }).provider).toBe("openai")
    for (const h of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-plan"]) expect(response.headers.get(h), h).not.toBeNull()
    const sent = lastBody(openai)
    expect(sent.messages).toEqual([{ role: "user", content: "Hello" }])
    expect(sent.max_tokens ?? sent.max_completion_tokens).toBe(64)
    // The call is counted like any other.
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })
    expect(usage.body.result.dailyTokensUsed).toBeGreaterThanOrEqual(16)
  })

  it("carries system (string or blocks), sampling, stop sequences and metadata.user_id to an OpenAI-format upstream", async () => {
    openai.setScenario({ kind: "text", text: "ok" })
    await client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 32,
      system: "You are terse.",
      temperature: 0.3,
      top_p: 0.9,
      stop_sequences: ["END"],
      metadata: { user_id: "user-42" },
      messages: [{ role: "user", content: [{ type: "text", text: "Hi " }, { type: "text", text: "there" }] }]
    } as Anthropic.MessageCreateParamsNonStreaming) // this SDK version no longer types temperature and top_p; the API takes them
    const sent = lastBody(openai)
    expect(sent.messages).toEqual([{ role: "system", content: "You are terse." }, { role: "user", content: "Hi there" }])
    expect(sent).toMatchObject({ temperature: 0.3, top_p: 0.9, stop: ["END"], user: "user-42" })
    await client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 32,
      system: [{ type: "text", text: "Rule one." }, { type: "text", text: " Rule two." }],
      messages: [{ role: "user", content: "Hi" }]
    })
    expect(lastBody(openai).messages[0]).toEqual({ role: "system", content: "Rule one. Rule two." })
  })

  it("answers a tool call as a tool_use block, and carries tools and tool_choice", async () => {
    openai.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Oslo" }, id: "call_oslo" })
    const message = await client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 64,
      tools: [weatherTool],
      tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
      messages: [{ role: "user", content: "Weather in Oslo?" }]
    })
    expect(message.stop_reason).toBe("tool_use")
    expect(message.content).toEqual([{ type: "tool_use", id: "call_oslo", name: "get_weather", input: { city: "Oslo" } }])
    const sent = lastBody(openai)
    expect(sent.tools).toEqual([{ type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: weatherTool.input_schema } }])
    expect(sent.tool_choice).toEqual({ type: "function", function: { name: "get_weather" } })
    expect(sent.parallel_tool_calls).toBe(false)
    await client(user.apiKey).messages.create({ model: "gpt-4o-mini", max_tokens: 64, tools: [weatherTool], tool_choice: { type: "any" }, messages: [{ role: "user", content: "x" }] })
    expect(lastBody(openai).tool_choice).toBe("required")
  })

  it("continues a tool loop: tool_use and tool_result blocks become tool calls and tool messages", async () => {
    openai.setScenario({ kind: "text", text: "It is sunny in Oslo." })
    const message = await client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 64,
      tools: [weatherTool],
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: [{ type: "text", text: "Let me check." }, { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "sunny, 21C" }] }, { type: "text", text: "Thanks!" }] }
      ]
    })
    expect(message.content).toEqual([{ type: "text", text: "It is sunny in Oslo." }])
    expect(lastBody(openai).messages).toEqual([
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: "Let me check.", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] },
      { role: "tool", tool_call_id: "toolu_1", content: "sunny, 21C" },
      { role: "user", content: "Thanks!" }
    ])
    // A tool_result that answers no earlier tool_use is refused before the upstream is called.
    const before = openai.requests.length
    await expect(client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 64,
      messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_nope", content: "42" }] }]
    })).rejects.toBeInstanceOf(Anthropic.BadRequestError)
    expect(openai.requests.length).toBe(before)
  })

  it("sends image blocks (base64 and url) as image parts", async () => {
    openai.setScenario({ kind: "text", text: "A pixel." })
    await client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 64,
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
          { type: "image", source: { type: "url", url: "https://example.com/cat.png" } }
        ]
      }]
    })
    expect(lastBody(openai).messages).toEqual([{
      role: "user",
      content: [
        { type: "text", text: "What is this?" },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
        { type: "image_url", image_url: { url: "https://example.com/cat.png" } }
      ]
    }])
  })

  it("streams text with the Anthropic event sequence; finalMessage() has the text and usage", async () => {
    openai.setScenario({ kind: "text", text: "one two three", usage: { prompt: 5, completion: 3 } })
    const stream = client(user.apiKey).messages.stream({ model: "gpt-4o-mini", max_tokens: 64, messages: [{ role: "user", content: "Count" }] })
    const types: Array<string> = []
    const texts: Array<string> = []
    let start: Anthropic.MessageStartEvent | undefined
    stream.on("streamEvent", (e) => {
      types.push(e.type)
      if (e.type === "message_start") start = structuredClone(e)
    })
    stream.on("text", (t) => texts.push(t))
    const final = await stream.finalMessage()
    expect(texts.join("")).toBe("one two three")
    expect(texts.length).toBeGreaterThan(1)
    expect(final).toMatchObject({ role: "assistant", content: [{ type: "text", text: "one two three" }], stop_reason: "end_turn", usage: { input_tokens: 5, output_tokens: 3 } })
    expect(types[0]).toBe("message_start")
    // An OpenAI-format upstream reports the input only at the end: message_start has 0, message_delta the count.
    expect(start!.message.usage).toMatchObject({ input_tokens: 0, output_tokens: 0 })
    expect(types[1]).toBe("content_block_start")
    expect(new Set(types.slice(2, -3))).toEqual(new Set(["content_block_delta"]))
    expect(types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"])
  })

  it("streams a tool call as a tool_use block with input_json_delta events", async () => {
    openai.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Bergen" }, id: "call_bergen" })
    const stream = client(user.apiKey).messages.stream({ model: "gpt-4o-mini", max_tokens: 64, tools: [weatherTool], messages: [{ role: "user", content: "Weather?" }] })
    const partials: Array<string> = []
    stream.on("inputJson", (delta) => partials.push(delta))
    const final = await stream.finalMessage()
    expect(partials.join("")).toBe("{\"city\":\"Bergen\"}")
    expect(final.content).toEqual([{ type: "tool_use", id: "call_bergen", name: "get_weather", input: { city: "Bergen" } }])
    expect(final.stop_reason).toBe("tool_use")
  })

  it("maps errors to the SDK's error classes with Anthropic's error shape", async () => {
    const hi = [{ role: "user" as const, content: "Hi" }]
    await expect(client("aigw_not_a_key").messages.create({ model: "gpt-4o-mini", max_tokens: 8, messages: hi })).rejects.toBeInstanceOf(Anthropic.AuthenticationError)
    const unknown = client(user.apiKey).messages.create({ model: "no-such-model", max_tokens: 8, messages: hi })
    await expect(unknown).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    const missing = await client(user.apiKey).messages.create({ model: "gpt-4o-mini", messages: hi } as never).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(Anthropic.BadRequestError)
    expect((missing as Error).message).toContain("max_tokens")
    // The raw bodies: { type: "error", error: { type, message } }, rate-limit headers included.
    const raw = await call(server.url, "POST", "/anthropic/v1/messages", { apiKey: user.apiKey, body: { model: "gpt-4o-mini", messages: hi } })
    expect(raw.status).toBe(400)
    expect(raw.body).toEqual({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("max_tokens") } })
    const notFound = await call(server.url, "POST", "/anthropic/v1/messages", { apiKey: user.apiKey, body: { model: "no-such-model", max_tokens: 8, messages: hi } })
    expect(notFound.body.error.type).toBe("not_found_error")
    expect(notFound.headers.get("x-ratelimit-limit")).not.toBeNull()
    const anonymous = await call(server.url, "POST", "/anthropic/v1/messages", { body: { model: "gpt-4o-mini", max_tokens: 8, messages: hi } })
    expect([anonymous.status, anonymous.body.type, anonymous.body.error.type]).toEqual([401, "error", "authentication_error"])
    const noRoute = await call(server.url, "GET", "/anthropic/v1/nothing", { apiKey: user.apiKey })
    expect([noRoute.status, noRoute.body.error?.type]).toEqual([404, "not_found_error"])
    openai.setScenario({ kind: "error", status: 500, message: "upstream exploded" })
    await expect(client(user.apiKey).messages.create({ model: "gpt-4o-mini", max_tokens: 8, messages: hi })).rejects.toMatchObject({ status: 502 })
  })

  it("refuses what it cannot carry with a 400 naming the field or block, before counting the call", async () => {
    const before = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    const base = { model: "gpt-4o-mini", max_tokens: 16 }
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...base, messages: [{ role: "user", content: "x" }], thinking: { type: "enabled", budget_tokens: 1024 } }, "thinking"],
      [{ ...base, messages: [{ role: "user", content: "x" }], top_k: 5 }, "top_k"],
      [{ ...base, messages: [{ role: "user", content: "x" }, { role: "assistant", content: [{ type: "thinking", thinking: "t", signature: "s" }, { type: "text", text: "y" }] }, { role: "user", content: "z" }] }, "thinking blocks in assistant messages"],
      [{ ...base, messages: [{ role: "user", content: [{ type: "text", text: "x", cache_control: { type: "persistent" } }] }] }, "cache_control"],
      [{ ...base, messages: [{ role: "user", content: [{ type: "document", source: { type: "text", media_type: "text/plain", data: "x" } }] }] }, "document"],
      [{ ...base, messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search_20250305", name: "web_search" }] }, "web_search_20250305"],
      [{
        ...base,
        messages: [
          { role: "user", content: "x" },
          { role: "assistant", content: [{ type: "tool_use", id: "t", name: "get_weather", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "boom", is_error: true }] }
        ],
        tools: [weatherTool]
      }, "is_error: true on a tool_result is not supported"],
      [{ ...base, messages: [{ role: "user", content: "x" }], temperature: 1.5 }, "temperature"]
    ]
    for (const [body, named] of cases) {
      const res = await call(server.url, "POST", "/anthropic/v1/messages", { apiKey: user.apiKey, body })
      expect([res.status, res.body.error?.type], named).toEqual([400, "invalid_request_error"])
      expect(res.body.error.message, named).toContain(named)
    }
    const after = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    expect(after).toBe(before)
  })

  it("accepts cache_control for an OpenAI-format upstream as a hint that changes nothing (OpenAI caches prompts itself)", async () => {
    openai.setScenario({ kind: "text", text: "cached?" })
    const message = await client(user.apiKey).messages.create({
      model: "gpt-4o-mini",
      max_tokens: 16,
      system: [{ type: "text", text: "Long rules.", cache_control: { type: "ephemeral" } }],
      tools: [{ ...weatherTool, cache_control: { type: "ephemeral", ttl: "1h" } }],
      messages: [{ role: "user", content: [{ type: "text", text: "Hi", cache_control: { type: "ephemeral" } }] }]
    }, { headers: { "anthropic-beta": "prompt-caching-2024-07-31" } })
    expect(message.content).toEqual([{ type: "text", text: "cached?" }])
    const sent = openai.requests.at(-1)!
    expect(JSON.stringify(sent.body)).not.toContain("cache")
    expect(sent.headers["anthropic-beta"]).toBeUndefined()
    expect((sent.body as any).messages).toEqual([
      { role: "system", content: [{ type: "text", text: "Long rules." }] },
      { role: "user", content: [{ type: "text", text: "Hi" }] }
    ])
  })

  it("carries structured output (output_config.format, the SDKs' messages.parse) to an Anthropic upstream as it is and to an OpenAI-format one as its json_schema answer; refuses what it does not map", async () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
    anthropic.setScenario({ kind: "text", text: "{\"city\":\"Paris\"}" })
    const message = { max_tokens: 64, messages: [{ role: "user" as const, content: "Where is the Louvre?" }], output_config: { format: { type: "json_schema", schema } } }
    const claude = await client(bronze.apiKey).messages.create({ model: "claude-haiku-4-5", provider: "anthropic", ...message } as never) as Anthropic.Message
    expect(claude.content[0]).toEqual({ type: "text", text: "{\"city\":\"Paris\"}" })
    expect(anthropic.requests.at(-1)!.body).toMatchObject({ output_config: { format: { type: "json_schema", schema } } })
    openai.setScenario({ kind: "text", text: "{\"city\":\"Paris\"}" })
    await client(user.apiKey).messages.create({ model: "gpt-4o-mini", ...message } as never)
    expect(lastBody(openai).response_format).toMatchObject({ type: "json_schema", json_schema: { name: "output", schema } })
    const refused = await call(server.url, "POST", "/anthropic/v1/messages", { apiKey: user.apiKey, body: { model: "gpt-4o-mini", ...message, output_config: { ...message.output_config, effort: "high" } } })
    expect([refused.status, refused.body.error.message]).toEqual([400, expect.stringContaining("effort")])
  })

  it("serves a Claude Code-like session against an Anthropic upstream: cache breakpoints, thinking streamed back, beta header, thinking blocks sent back", async () => {
    anthropic.setScenario({ kind: "text", text: "Done thinking." })
    const claude = client(bronze.apiKey)
    const system = [
      { type: "text" as const, text: "You are Claude Code." },
      { type: "text" as const, text: "Project instructions.", cache_control: { type: "ephemeral" as const } }
    ]
    const tools = [{ ...weatherTool, cache_control: { type: "ephemeral" as const, ttl: "1h" as const } }]
    const first = {
      model: "claude-haiku-4-5",
      provider: "anthropic",
      max_tokens: 4096,
      thinking: { type: "enabled" as const, budget_tokens: 1024 },
      system,
      tools,
      messages: [{ role: "user" as const, content: [{ type: "text" as const, text: "Plan the change.", cache_control: { type: "ephemeral" as const } }] }]
    }
    const stream = claude.messages.stream(first as never, { headers: { "anthropic-beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14" } })
    const thoughts: Array<string> = []
    const signatures: Array<string> = []
    const starts: Array<Anthropic.MessageStartEvent> = []
    // Copied when it comes: the SDK accumulates the message's usage into that event's object.
    stream.on("streamEvent", (e) => e.type === "message_start" && starts.push(structuredClone(e)))
    stream.on("thinking", (delta) => thoughts.push(delta))
    stream.on("signature", (signature) => signatures.push(signature))
    const final = await stream.finalMessage()
    const sent = anthropic.requests.at(-1)!
    expect(sent.headers["anthropic-beta"]).toBe("interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14")
    const { provider: _pinned, ...asSent } = first
    expect(sent.body).toEqual({ ...asSent, stream: true })
    expect(final.content[0]).toMatchObject({ type: "thinking", thinking: "Considering 1 message(s).", signature: expect.stringMatching(/^sig_/) })
    expect(final.content[1]).toEqual({ type: "text", text: "Done thinking." })
    expect(thoughts.join("")).toBe("Considering 1 message(s).")
    expect(signatures).toEqual([(final.content[0] as Anthropic.ThinkingBlock).signature])
    expect(final.usage).toMatchObject({ cache_creation_input_tokens: 9, cache_read_input_tokens: 0 })
    // message_start carries the input counts of the upstream's own message_start (clients such as LangChain read them there).
    expect(starts).toHaveLength(1)
    expect(starts[0]!.message.usage).toMatchObject({ input_tokens: final.usage.input_tokens, output_tokens: 0, cache_creation_input_tokens: 9, cache_read_input_tokens: 0 })
    expect(final.usage.input_tokens).toBeGreaterThan(0)
    // The next turn sends the thinking block back, as Claude Code does; the upstream checks its signature.
    const second = await claude.messages.create({
      ...first,
      messages: [...first.messages, { role: "assistant" as const, content: final.content }, { role: "user" as const, content: "Go on." }]
    } as never)
    expect(second.content.map((b) => b.type)).toEqual(["thinking", "text"])
    expect(second.usage).toMatchObject({ cache_read_input_tokens: 9 })
    expect((anthropic.requests.at(-1)!.body as any).messages[1].content[0]).toEqual(final.content[0])
    // top_k and adaptive thinking reach the upstream as sent.
    await claude.messages.create({ model: "claude-haiku-4-5", provider: "anthropic", max_tokens: 64, top_k: 5, thinking: { type: "adaptive" }, messages: [{ role: "user", content: "x" }] } as never)
    expect(anthropic.requests.at(-1)!.body).toMatchObject({ top_k: 5, thinking: { type: "adaptive" } })
  })

  it("counts tokens with count_tokens (the gateway's estimate; not counted against the quota)", async () => {
    const before = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    const counted = await client(user.apiKey).messages.countTokens({
      model: "gpt-4o-mini",
      system: "You are terse.",
      tools: [weatherTool],
      messages: [{ role: "user", content: "How is the weather in Oslo today?" }]
    })
    expect(counted.input_tokens).toBeGreaterThan(20)
    const after = (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    expect(after).toBe(before)
    const anonymous = await call(server.url, "POST", "/anthropic/v1/messages/count_tokens", { body: { model: "m", messages: [{ role: "user", content: "x" }] } })
    expect(anonymous.status).toBe(401)
    // A model the Messages request would refuse as unknown is refused here too.
    const unknown = await call(server.url, "POST", "/anthropic/v1/messages/count_tokens", { apiKey: user.apiKey, body: { model: "nope", messages: [{ role: "user", content: "x" }] } })
    expect(unknown.status).toBe(404)
    expect(unknown.body).toMatchObject({ type: "error", error: { type: "not_found_error", message: expect.stringMatching(/^Unknown model nope/) } })
  })

  it("lists and retrieves models as the SDK's models.list and models.retrieve call them, paged", async () => {
    const anthropicClient = client(user.apiKey)
    const first = await anthropicClient.models.list({ limit: 3 })
    expect(first.data.map((m) => m.id)[0]).toBe("auto")
    expect(first.data).toHaveLength(3)
    expect(first.data[1]).toMatchObject({ type: "model", created_at: "1970-01-01T00:00:00Z" })
    // The SDK's auto-pagination walks every page (after_id) to the end.
    const all: Array<string> = []
    for await (const m of anthropicClient.models.list({ limit: 50 })) all.push(m.id)
    expect(all).toContain("claude-haiku-4-5")
    expect(all).toContain("gpt-4o-mini")
    expect(new Set(all).size).toBe(all.length)
    const before = await call(server.url, "GET", `/anthropic/v1/models?before_id=${encodeURIComponent(all[4]!)}&limit=2`, { apiKey: user.apiKey })
    expect(before.body).toMatchObject({ data: [{ id: all[2] }, { id: all[3] }], has_more: true, first_id: all[2], last_id: all[3] })
    expect(await anthropicClient.models.retrieve("claude-haiku-4-5")).toMatchObject({ type: "model", id: "claude-haiku-4-5" })
    expect((await anthropicClient.models.retrieve("openai/gpt-4o-mini")).id).toBe("gpt-4o-mini")
    await expect(anthropicClient.models.retrieve("no-such-model")).rejects.toMatchObject({ status: 404 })
    const unknownCursor = await call(server.url, "GET", "/anthropic/v1/models?after_id=nope", { apiKey: user.apiKey })
    expect([unknownCursor.status, unknownCursor.body.error.type]).toEqual([400, "invalid_request_error"])
    for (const limit of ["0", "1001", "0x10", "1e2", "%202", "2.5"]) {
      const badLimit = await call(server.url, "GET", `/anthropic/v1/models?limit=${limit}`, { apiKey: user.apiKey })
      expect(badLimit.status, limit).toBe(400)
    }
  })

  it("refuses a Thread as Anthropic refuses what a Thread cannot carry, so the SDK's toolRunner goes on without one", async () => {
    const raw = await call(server.url, "POST", "/anthropic/v1/messages", {
      apiKey: user.apiKey,
      body: { model: "gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "x" }], thread: { type: "create" } }
    })
    expect(raw.status).toBe(400)
    expect(raw.body.error).toMatchObject({ type: "invalid_request_error", details: { error_code: "thread_unsupported_request", unsupported: ["thread"] } })
    openai.setScenario({ kind: "text", text: "done without a thread" })
    const tool = betaTool({ name: "noop", description: "does nothing", inputSchema: { type: "object", properties: {} }, run: async () => "ok" })
    const runner = client(user.apiKey).beta.messages.toolRunner({ model: "gpt-4o-mini", max_tokens: 32, messages: [{ role: "user", content: "hi" }], tools: [tool] })
    const texts: Array<string> = []
    for await (const message of runner) for (const block of message.content) if (block.type === "text") texts.push(block.text)
    expect(texts).toEqual(["done without a thread"])
  })

  it("accepts the gateway key as a Bearer token too", async () => {
    openai.setScenario({ kind: "text", text: "bearer ok" })
    const bearer = new Anthropic({ apiKey: null, authToken: user.apiKey, baseURL: `${server.url}/anthropic`, maxRetries: 0 })
    const message = await bearer.messages.create({ model: "gpt-4o-mini", max_tokens: 8, messages: [{ role: "user", content: "Hi" }] })
    expect(message.content).toEqual([{ type: "text", text: "bearer ok" }])
    const jwt = new Anthropic({ apiKey: null, authToken: user.token, baseURL: `${server.url}/anthropic`, maxRetries: 0 })
    expect((await jwt.messages.create({ model: "gpt-4o-mini", max_tokens: 8, messages: [{ role: "user", content: "Hi" }] })).content[0]).toMatchObject({ text: "bearer ok" })
  })

  it("reaches an Anthropic upstream faithfully with provider: anthropic (system, tools, tool loop, images, stream)", async () => {
    anthropic.setScenario({ kind: "text", text: "Claude here", usage: { prompt: 9, completion: 2 } })
    const claude = client(bronze.apiKey)
    const request = {
      model: "claude-haiku-4-5",
      provider: "anthropic",
      max_tokens: 100,
      system: "Be brief.",
      temperature: 0.5,
      top_p: 0.8,
      stop_sequences: ["STOP"],
      tools: [weatherTool],
      tool_choice: { type: "auto" as const },
      metadata: { user_id: "end-user-7" },
      messages: [
        { role: "user" as const, content: [{ type: "text" as const, text: "Weather and this image?" }, { type: "image" as const, source: { type: "base64" as const, media_type: "image/png" as const, data: PNG } }] },
        { role: "assistant" as const, content: [{ type: "tool_use" as const, id: "toolu_9", name: "get_weather", input: { city: "Oslo" } }] },
        { role: "user" as const, content: [{ type: "tool_result" as const, tool_use_id: "toolu_9", content: "rainy" }] },
        { role: "assistant" as const, content: [{ type: "tool_use" as const, id: "toolu_10", name: "get_weather", input: { city: "Atlantis" } }] },
        // A failed tool, as the SDK's toolRunner reports one: Anthropic takes the flag.
        { role: "user" as const, content: [{ type: "tool_result" as const, tool_use_id: "toolu_10", content: "no such city", is_error: true }] }
      ]
    }
    const message = await claude.messages.create(request as never)
    expect(message).toMatchObject({ model: "claude-haiku-4-5", content: [{ type: "text", text: "Claude here" }], usage: { input_tokens: 9, output_tokens: 2 } })
    const sent = anthropic.requests.at(-1)!
    expect(sent.path).toBe("/v1/messages")
    expect(sent.headers["x-api-key"]).toBe("sk-anthropic")
    // What the SDK sent, without the gateway's own `provider` field, is what Anthropic got.
    const { provider: _pinned, ...asSent } = request
    expect(sent.body).toMatchObject(asSent)
    anthropic.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Tromsø" }, id: "toolu_stream" })
    const final = await claude.messages.stream({ model: "claude-haiku-4-5", provider: "anthropic", max_tokens: 50, tools: [weatherTool], messages: [{ role: "user", content: "Weather?" }] } as never).finalMessage()
    expect(final.content).toEqual([{ type: "tool_use", id: "toolu_stream", name: "get_weather", input: { city: "Tromsø" } }])
    expect(final.stop_reason).toBe("tool_use")
    expect((anthropic.requests.at(-1)!.body as any).stream).toBe(true)
  })

  it("answers a stream's status and headers at once, and message_start with the first piece of the answer", async () => {
    // An upstream that accepts at once and then takes its time between events (a model thinking before its first token).
    anthropic.setScenario({ kind: "text", text: "slow answer", usage: { prompt: 21, completion: 2 }, frameDelayMs: 400 })
    const started = performance.now()
    const res = await fetch(`${server.url}/anthropic/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": bronze.apiKey, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "claude-haiku-4-5", provider: "anthropic", max_tokens: 50, stream: true, messages: [{ role: "user", content: "hi" }] })
    })
    const headersAt = performance.now() - started
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    const first = new TextDecoder().decode((await reader.read()).value)
    const firstAt = performance.now() - started
    await reader.cancel()
    // The first text_delta is the upstream's fourth event (message_start, content_block_start, ping, delta): 1.2 s in.
    expect(firstAt).toBeGreaterThan(1000)
    expect(headersAt).toBeLessThan(firstAt - 600)
    expect(first.startsWith("event: message_start\n")).toBe(true)
    expect(JSON.parse(first.split("\n")[1]!.slice(6)).message.usage).toMatchObject({ input_tokens: 21, output_tokens: 0 })
  })

  it("reports an upstream failure mid-stream as an error event", async () => {
    openai.setScenario({ kind: "error", status: 400, message: "bad request upstream", midStream: true })
    const res = await fetch(`${server.url}/anthropic/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey, "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "gpt-4o-mini", max_tokens: 16, stream: true, messages: [{ role: "user", content: "Hi" }] })
    })
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text.startsWith("event: message_start\n")).toBe(true)
    const last = text.trim().split("\n\n").at(-1)!
    expect(last.split("\n")[0]).toBe("event: error")
    expect(JSON.parse(last.split("\n")[1]!.slice(6))).toMatchObject({ type: "error", error: { type: "api_error" } })
    openai.setScenario({ kind: "error", status: 400, message: "bad request upstream", midStream: true })
    const stream = client(user.apiKey).messages.stream({ model: "gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "Hi" }] })
    await expect(stream.finalMessage()).rejects.toBeInstanceOf(Anthropic.APIError)
  })
})
