/**
 * The OpenAI-compatible surface (/openai/v1) driven by the real clients: the official `openai`
 * SDK and LangChain's ChatOpenAI. The gateway's OpenAI upstream is a scripted mock that records
 * the exact body it receives and answers chat in OpenAI's documented format (JSON matching the
 * requested schema, tool calls for offered tools, extra answer fields a test asks for); the other
 * OpenAI routes it passes to the shared wire-format mock (embeddings, moderations, images).
 */
import { ChatOpenAI } from "@langchain/openai"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { z } from "zod"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const KEY = "sk-openai"

/** A value of a JSON schema's shape (first enum value, first anyOf branch): what a model asked for that schema answers. */
const sampleOf = (schema: any): unknown => {
  if (schema === undefined || schema === null) return null
  if (Array.isArray(schema.enum)) return schema.enum[0]
  if (Array.isArray(schema.anyOf)) return sampleOf(schema.anyOf[0])
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  switch (type) {
    case "object":
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, sampleOf(v)]))
    case "array":
      return [sampleOf(schema.items)]
    case "string":
      return "sample"
    case "number":
    case "integer":
      return 42
    case "boolean":
      return true
    default:
      return null
  }
}

interface Extras {
  /** Fields added to the answer body, its choice and its message (plain answers). */
  body?: Record<string, unknown>
  choice?: Record<string, unknown>
  message?: Record<string, unknown>
  /** reasoning_content deltas streamed before the content. */
  reasoning?: ReadonlyArray<string>
  /** Fields added to the delta and the choice of the first streamed content chunk. */
  delta?: Record<string, unknown>
  streamChoice?: Record<string, unknown>
  /** Fields added to every streamed chunk (beside id, created, model and system_fingerprint). */
  chunk?: Record<string, unknown>
  /** Fields added to the usage (plain answers and the streamed usage chunk). */
  usage?: Record<string, unknown>
}

interface Scripted {
  readonly url: string
  /** Bodies of the chat requests, in order. */
  readonly chats: Array<any>
  extras: Extras
  close(): Promise<void>
}

const readJson = async (req: IncomingMessage) => {
  const parts: Array<Buffer> = []
  for await (const p of req) parts.push(p as Buffer)
  const text = Buffer.concat(parts).toString("utf8")
  return text === "" ? undefined : JSON.parse(text)
}

/**
 * The scripted OpenAI upstream: POST /v1/chat/completions answered here (plain or SSE), every
 * other request passed to `rest` as it came.
 */
const startScripted = async (rest: MockUpstream): Promise<Scripted> => {
  const state: Scripted = { url: "", chats: [], extras: {}, close: async () => {} }
  const answerOf = (body: any) => {
    const tools: Array<any> = Array.isArray(body.tools) ? body.tools : []
    const last = body.messages?.at(-1)
    const chosen = typeof body.tool_choice === "object" && body.tool_choice !== null ? body.tool_choice.function?.name : undefined
    const tool = last?.role === "tool" || body.tool_choice === "none" ? undefined : tools.find((t) => t.function.name === chosen) ?? tools[0]
    if (tool) return { tool: { id: "call_scripted", name: tool.function.name, arguments: JSON.stringify(sampleOf(tool.function.parameters)) } }
    const format = body.response_format
    if (format?.type === "json_schema") return { text: JSON.stringify(sampleOf(format.json_schema.schema)) }
    return { text: format?.type === "json_object" ? "{}" : "Hello from the scripted upstream" }
  }
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readJson(req)
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        const headers = { "content-type": String(req.headers["content-type"] ?? "application/json"), authorization: String(req.headers.authorization ?? "") }
        const upstream = await fetch(new URL(req.url ?? "/", new URL(rest.url).origin), { method: req.method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
        res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" })
        return res.end(Buffer.from(await upstream.arrayBuffer()))
      }
      state.chats.push(body)
      if (req.headers.authorization !== `Bearer ${KEY}`) {
        res.writeHead(401, { "content-type": "application/json" })
        return res.end(JSON.stringify({ error: { message: "Incorrect API key provided", type: "invalid_request_error", param: null, code: "invalid_api_key" } }))
      }
      const answer = answerOf(body)
      const { extras } = state
      const base = { id: "chatcmpl-scripted", created: 1_700_000_000, model: body.model, system_fingerprint: "fp_scripted" }
      const usage = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12, ...extras.usage }
      const finish = answer.tool ? "tool_calls" : "stop"
      const wireCall = answer.tool && { id: answer.tool.id, type: "function", function: { name: answer.tool.name, arguments: answer.tool.arguments } }
      if (body.stream !== true) {
        res.writeHead(200, { "content-type": "application/json" })
        return res.end(JSON.stringify({
          ...extras.body,
          ...base,
          object: "chat.completion",
          choices: [{
            index: 0,
            logprobs: null,
            ...extras.choice,
            message: { role: "assistant", content: answer.text ?? null, refusal: null, ...extras.message, ...(wireCall ? { tool_calls: [wireCall] } : {}) },
            finish_reason: finish
          }],
          usage
        }))
      }
      res.writeHead(200, { "content-type": "text/event-stream" })
      const frame = (delta: Record<string, unknown>, finishReason: string | null = null, choice?: Record<string, unknown>) =>
        res.write(`data: ${JSON.stringify({ ...base, ...extras.chunk, object: "chat.completion.chunk", choices: [{ index: 0, ...choice, delta, logprobs: null, finish_reason: finishReason }] })}\n\n`)
      frame({ role: "assistant", content: "" })
      for (const r of extras.reasoning ?? []) frame({ reasoning_content: r })
      if (answer.text !== undefined) {
        for (const [i, piece] of (answer.text.match(/.{1,6}/gs) ?? []).entries()) frame({ ...(i === 0 ? extras.delta : {}), content: piece }, null, i === 0 ? extras.streamChoice : undefined)
      }
      if (wireCall) frame({ tool_calls: [{ index: 0, ...wireCall }] })
      frame({}, finish)
      if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ ...base, ...extras.chunk, object: "chat.completion.chunk", choices: [], usage })}\n\n`)
      res.end("data: [DONE]\n\n")
    })().catch((e) => {
      res.writeHead(500)
      res.end(String(e))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return Object.assign(state, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  })
}

const weatherTool = {
  type: "function" as const,
  function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }
}
const citySchema = {
  name: "city_facts",
  strict: true,
  schema: {
    type: "object",
    properties: { city: { type: "string" }, population: { type: "integer" } },
    required: ["city", "population"],
    additionalProperties: false
  }
}

/** The OpenAI request fields the issue listed, each as a client sends it. */
const fullRequest = {
  model: "gpt-4o-mini",
  messages: [{ role: "system" as const, content: "Answer in JSON." }, { role: "user" as const, content: "Facts about Oslo?" }],
  response_format: { type: "json_schema" as const, json_schema: citySchema },
  seed: 7,
  tools: [weatherTool],
  tool_choice: "none" as const,
  parallel_tool_calls: false,
  top_p: 0.9,
  stop: ["END"],
  logprobs: true,
  top_logprobs: 2,
  frequency_penalty: 0.5,
  presence_penalty: -0.25,
  logit_bias: { "50256": -100 },
  user: "end-user-42",
  metadata: { team: "reach" },
  reasoning_effort: "low" as const,
  temperature: 0.3
}

describe("OpenAI surface with the official clients", () => {
  let server: RunningServer
  /** The same gateway (same data) with AIGW_FAST_LANE=false: every request takes the Effect route. */
  let routeServer: RunningServer
  let shared: MockUpstream
  let upstream: Scripted
  let user: TestAvatar
  const client = (who: { apiKey: string }, base = server) => new OpenAI({ apiKey: who.apiKey, baseURL: `${base.url}/openai/v1`, maxRetries: 0 })
  const usage = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result

  beforeAll(async () => {
    shared = await startOpenAiMock({ apiKey: KEY, chunkDelayMs: 1 })
    upstream = await startScripted(shared)
    const env = { ...adminEnv, OPENAI_API_KEY: KEY, OPENAI_BASE_URL: upstream.url }
    server = await startServer(env)
    routeServer = await startServer({ ...env, AIGW_FAST_LANE: "false" }, { dataDir: server.dataDir })
    user = await signUp(server, "oai")
  })
  afterAll(async () => {
    await routeServer?.stop()
    await server?.stop()
    await upstream?.close()
    await shared?.close()
  })

  it("forwards every request field unchanged, on the API-key and the JWT path, lane on and off", async () => {
    const paths = [
      ["API key, fast lane", client({ apiKey: user.apiKey })],
      ["JWT, fast lane", client({ apiKey: user.token })],
      ["API key, lane off", client({ apiKey: user.apiKey }, routeServer)],
      ["JWT, lane off", client({ apiKey: user.token }, routeServer)]
    ] as const
    const answers = []
    for (const [name, c] of paths) {
      const answer = await c.chat.completions.create(fullRequest)
      expect([name, upstream.chats.at(-1)]).toEqual([name, fullRequest])
      expect(JSON.parse(answer.choices[0]!.message.content!)).toEqual({ city: "sample", population: 42 })
      answers.push({ ...answer, id: "X", created: 0 })
    }
    for (const a of answers.slice(1)) expect(a).toEqual(answers[0])
  })

  it("forwards a named tool_choice, a tool's strict and a message's unmapped fields as sent", async () => {
    const strictTool = { ...weatherTool, function: { ...weatherTool.function, strict: true } }
    const answer = await client(user).chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Weather in Oslo?", name: "ada" }],
      tools: [strictTool],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: true,
      service_tier: "default",
      store: false
    })
    expect(upstream.chats.at(-1)).toMatchObject({
      messages: [{ role: "user", content: "Weather in Oslo?", name: "ada" }],
      tools: [strictTool],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: true,
      service_tier: "default",
      store: false
    })
    expect(answer.choices[0]!.message.tool_calls![0]).toMatchObject({ type: "function", function: { name: "get_weather", arguments: "{\"city\":\"sample\"}" } })
    // An earlier refusal goes back as OpenAI wrote it: content null beside the refusal.
    await client(user).chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }, { role: "assistant", content: null, refusal: "no" }, { role: "user", content: "please" }]
    })
    expect((upstream.chats.at(-1) as any).messages[1]).toEqual({ role: "assistant", content: null, refusal: "no" })
  })

  it("takes back what it answered: text parts back to back, empty annotations, the SDK's parsed copies, tools null", async () => {
    const first = await client(user).chat.completions.create({
      model: "gpt-4o-mini",
      tools: null as any,
      messages: [{ role: "user", content: [{ type: "text", text: "Context: the sky is blue.\n" }, { type: "text", text: "Question: what colour is it?" }] }]
    })
    expect((upstream.chats.at(-1) as any).messages[0]).toEqual({ role: "user", content: "Context: the sky is blue.\nQuestion: what colour is it?" })
    expect((upstream.chats.at(-1) as any).tools).toBeUndefined()
    // The message as the SDK's helpers keep it: annotations [], parsed, and each call's parsed_arguments.
    const assistant = {
      ...first.choices[0]!.message,
      annotations: [],
      parsed: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}", parsed_arguments: { city: "Oslo" } } }]
    }
    await client(user).chat.completions.create({
      model: "gpt-4o-mini",
      tools: [weatherTool],
      messages: [{ role: "user", content: "hi" }, assistant as any, { role: "tool", tool_call_id: "call_1", content: "sunny" }]
    })
    const sent = (upstream.chats.at(-1) as any).messages[1]
    expect(sent).toMatchObject({ role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] })
    expect(sent).not.toHaveProperty("annotations")
    expect(sent).not.toHaveProperty("parsed")
    expect(sent.tool_calls[0].function).not.toHaveProperty("parsed_arguments")
  })

  it("answers the upstream's other usage counts (audio, predicted output) beside its own, in JSON and streams", async () => {
    upstream.extras = {
      usage: {
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 4 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 1, accepted_prediction_tokens: 2, rejected_prediction_tokens: 1 }
      }
    }
    const details = { completion_tokens_details: { audio_tokens: 1, accepted_prediction_tokens: 2, rejected_prediction_tokens: 1 }, prompt_tokens_details: { audio_tokens: 4 } }
    const answer = await client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
    expect(answer.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12, ...details })
    const stream = await client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } })
    let usage: unknown
    for await (const chunk of stream) usage = chunk.usage ?? usage
    expect(usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 3, ...details })
    upstream.extras = {}
  })

  it("returns the upstream's logprobs, refusal, annotations and system_fingerprint; streams reasoning_content", async () => {
    const logprobs = { content: [{ token: "No", logprob: -0.01, bytes: [78, 111], top_logprobs: [] }], refusal: null }
    const annotations = [{ type: "url_citation", url_citation: { url: "https://example.com/", title: "Example", start_index: 0, end_index: 3 } }]
    upstream.extras = { choice: { logprobs }, message: { refusal: "I can't help with that.", annotations } }
    const answer = await client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], logprobs: true })
    expect(answer.choices[0]!.logprobs).toEqual(logprobs)
    expect(answer.choices[0]!.message.refusal).toBe("I can't help with that.")
    expect(answer.choices[0]!.message.annotations).toEqual(annotations)
    expect(answer.system_fingerprint).toBe("fp_scripted")

    upstream.extras = { reasoning: ["Let me think. ", "Done."] }
    const stream = await client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true })
    let reasoning = ""
    let text = ""
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined
      reasoning += delta?.reasoning_content ?? ""
      text += delta?.content ?? ""
    }
    expect(reasoning).toBe("Let me think. Done.")
    expect(text).toBe("Hello from the scripted upstream")
    upstream.extras = {}
  })

  it("names the model that answers on every streamed chunk, as the JSON answer does, for `auto` and provider/model calls", async () => {
    for (const model of ["auto", "openai/gpt-4o-mini"]) {
      const models = new Set<string>()
      for await (const chunk of await client(user).chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], stream: true })) models.add(chunk.model)
      const answered = await client(user).chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] })
      expect([...models], model).toEqual([answered.model])
      expect(answered.model).not.toBe("auto")
    }
  })

  it("streams each upstream chunk's own fields (system_fingerprint, service_tier, obfuscation) and an event's text with its other fields in one chunk", async () => {
    upstream.extras = { chunk: { service_tier: "default", obfuscation: "pad" }, delta: { annotations: [] }, streamChoice: { x_choice: 1 } }
    const chat = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } }
    for (const gateway of [server, routeServer]) {
      const res = await fetch(`${gateway.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": user.apiKey },
        body: JSON.stringify(chat)
      })
      const chunks = (await res.text()).split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)))
      // The gateway's own role chunk goes out before the upstream sent anything; every later chunk carries the upstream's fields.
      const [opening, ...rest] = chunks
      expect(opening.choices[0].delta).toEqual({ role: "assistant", content: "" })
      expect(rest.length).toBeGreaterThan(3)
      for (const c of rest) expect([c.system_fingerprint, c.service_tier, c.obfuscation]).toEqual(["fp_scripted", "default", "pad"])
      // The first content event's delta and choice fields in the chunk of its text, as the upstream sent them.
      expect(rest[0].choices[0]).toMatchObject({ x_choice: 1, delta: { annotations: [], content: "Hello " } })
      expect(rest.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello from the scripted upstream")
      expect(rest.at(-2).choices[0].finish_reason).toBe("stop")
      expect(rest.at(-1).usage).toEqual({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 })
    }
    upstream.extras = {}
  })

  it("leaves an upstream field named __proto__ out, in answers and streams, and keeps the rest", async () => {
    // Relayed, it reached clients that merge answers into objects (where it becomes the prototype): the gateway refuses it on input too.
    upstream.extras = JSON.parse(`{"body":{"__proto__":{"b":1}},"choice":{"__proto__":{"c":2}},"message":{"__proto__":{"m":3}},"delta":{"__proto__":{"d":4}},"streamChoice":{"__proto__":{"s":5}},"chunk":{"__proto__":{"k":6}}}`)
    const own = (o: unknown) => Object.prototype.hasOwnProperty.call(o, "__proto__") ? Object.getOwnPropertyDescriptor(o, "__proto__")!.value : "missing"
    const chat = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }
    for (const gateway of [server, routeServer]) {
      const plain = await call(gateway.url, "POST", "/openai/v1/chat/completions", { body: chat, apiKey: user.apiKey })
      expect(plain.status).toBe(200)
      expect([own(plain.body), own(plain.body.choices[0]), own(plain.body.choices[0].message)]).toEqual(["missing", "missing", "missing"])
      expect(plain.body.choices[0].message.content).toBe("Hello from the scripted upstream")

      const res = await fetch(`${gateway.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": user.apiKey },
        body: JSON.stringify({ ...chat, stream: true })
      })
      const chunks = (await res.text()).split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)))
      for (const c of chunks) expect([own(c), own(c.choices[0] ?? {}), own(c.choices[0]?.delta ?? {})]).toEqual(["missing", "missing", "missing"])
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello from the scripted upstream")
    }
    upstream.extras = {}
  })

  it("passes image_url parts (https and data:) to an OpenAI upstream as sent", async () => {
    const content = [
      { type: "text" as const, text: "What is in these?" },
      { type: "image_url" as const, image_url: { url: "https://example.com/cat.png", detail: "low" as const } },
      { type: "image_url" as const, image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }
    ]
    await client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content }] })
    expect(upstream.chats.at(-1).messages).toEqual([{ role: "user", content }])
  })

  it("refuses n > 1 and a field no wire carries with a 400 naming them, before any upstream call", async () => {
    const before = upstream.chats.length
    const refusal = client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], n: 2 })
    await expect(refusal).rejects.toMatchObject({ status: 400 })
    await expect(refusal).rejects.toThrow(/\bn\b/)
    // A field on a tool beside type and function is carried by no wire: refused by name too, never dropped.
    const tagged = client(user).chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
      tools: [{ ...weatherTool, cache_control: { type: "ephemeral" } } as OpenAI.ChatCompletionTool]
    })
    await expect(tagged).rejects.toMatchObject({ status: 400, error: { param: "tools.[0].cache_control" } })
    await expect(tagged).rejects.toThrow(/tools\.0\.cache_control: is unexpected/)
    expect(upstream.chats.length).toBe(before)
  })

  it("forwards a model outside the catalogue named with provider or as openai/<model>, and records its usage", async () => {
    for (const [request, sentModel] of [
      [{ model: "ft:gpt-4o-mini:acme::abc123", provider: "openai" }, "ft:gpt-4o-mini:acme::abc123"],
      [{ model: "openai/gpt-4.1-nano" }, "gpt-4.1-nano"]
    ] as const) {
      const before = await usage()
      // The openai client sends extra body fields as they are (here the gateway's `provider`).
      const answer = await client(user).chat.completions.create({ messages: [{ role: "user", content: "hi" }], ...request } as OpenAI.ChatCompletionCreateParamsNonStreaming)
      expect(upstream.chats.at(-1).model).toBe(sentModel)
      expect(upstream.chats.at(-1)).not.toHaveProperty("provider")
      expect(answer.usage).toEqual({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 })
      const after = await usage()
      expect(after.dailyCallsUsed - before.dailyCallsUsed).toBe(1)
      expect(after.dailyTokensUsed - before.dailyTokensUsed).toBe(12)
      // No price is known for it: the call costs nothing on the spend counter.
      expect(after.monthlySpendUSD).toBe(before.monthlySpendUSD)
    }
  })

  it("embeds with float and base64 encodings, lane on and off alike", async () => {
    const floats = await client(user).embeddings.create({ model: "text-embedding-3-small", input: ["one", "two"], encoding_format: "float" })
    expect(floats.object).toBe("list")
    expect(floats.data.map((d) => d.index)).toEqual([0, 1])
    expect(floats.data[0]!.embedding).toHaveLength(8)
    expect(floats.model).toBe("text-embedding-3-small")
    expect(floats.usage.total_tokens).toBeGreaterThan(0)
    // The SDK asks for base64 by default and decodes it: the same vectors, to float32 precision.
    const decoded = await client(user).embeddings.create({ model: "text-embedding-3-small", input: ["one", "two"] })
    decoded.data.forEach((d, i) => d.embedding.forEach((v, j) => expect(v).toBeCloseTo(floats.data[i]!.embedding[j]!, 6)))
    const raw = await call(routeServer.url, "POST", "/openai/v1/embeddings", { apiKey: user.apiKey, body: { model: "text-embedding-3-small", input: "one", encoding_format: "base64" } })
    const bytes = Buffer.from(raw.body.data[0].embedding, "base64")
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    const vector = Array.from({ length: bytes.byteLength / 4 }, (_, i) => view.getFloat32(i * 4, true))
    vector.forEach((v, j) => expect(v).toBeCloseTo(floats.data[0]!.embedding[j]!, 6))

    for (const [body, field, param] of [
      [{ model: "text-embedding-3-small", input: [[1, 2, 3]] }, /token-id input/, "input"],
      [{ model: "text-embedding-3-small", input: "x", dimensions: 4 }, /dimensions/, "dimensions"],
      [{ model: "text-embedding-3-small", input: "x", user: "u" }, /user/, "user"],
      [{ model: "text-embedding-3-small", input: "x", encoding_format: "int8" }, /encoding_format/, "encoding_format"]
    ] as const) {
      const res = await call(server.url, "POST", "/openai/v1/embeddings", { apiKey: user.apiKey, body })
      expect(res.status).toBe(400)
      expect(res.body.error.message).toMatch(field)
      expect(res.body.error.param).toBe(param)
    }
    // The chat surface's own refusals name their field as OpenAI's param too.
    const hi = [{ role: "user", content: "hi" }]
    for (const [body, param] of [
      [{ model: "gpt-4o-mini", messages: hi, max_tokens: 10, max_completion_tokens: 11 }, "max_completion_tokens"],
      [{ model: "gpt-4o-mini", messages: hi, stream_options: { include_usage: true } }, "stream_options"]
    ] as const) {
      const res = await call(server.url, "POST", "/openai/v1/chat/completions", { apiKey: user.apiKey, body })
      expect([res.status, res.body.error.param]).toEqual([400, param])
    }
  })

  it("retrieves a model, and answers 404 in OpenAI's shape for an unknown one", async () => {
    expect(await client(user).models.retrieve("gpt-4o-mini")).toEqual({ id: "gpt-4o-mini", object: "model", created: 0, owned_by: "openai" })
    const missing = client(user).models.retrieve("no-such-model")
    await expect(missing).rejects.toMatchObject({ status: 404 })
    await expect(missing).rejects.toThrow(/no-such-model/)
    // As a chat call names it; and the list holds every model retrieve answers (embeddings too).
    expect(await client(user).models.retrieve("openai/gpt-4o-mini")).toMatchObject({ id: "gpt-4o-mini", owned_by: "openai" })
    await expect(client(user).models.retrieve("anthropic/gpt-4o-mini")).rejects.toMatchObject({ status: 404 })
    const listed = []
    for await (const m of client(user).models.list()) listed.push(m.id)
    expect(listed).toEqual(expect.arrayContaining(["auto", "gpt-4o-mini", "text-embedding-3-small"]))
  })

  it("refuses an empty embeddings input, as OpenAI does, before counting it", async () => {
    const used = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed
    const before = await used()
    for (const input of ["", ["a", ""], []]) {
      const res = await call(server.url, "POST", "/openai/v1/embeddings", { apiKey: user.apiKey, body: { model: "text-embedding-3-small", input } })
      expect(res.status).toBe(400)
      expect(res.body.error.message).toBe("input must not be empty, nor hold an empty string")
    }
    expect(await used()).toBe(before)
  })

  it("names the field a 400 is about in the error's param, as OpenAI does", async () => {
    const refused = (body: Record<string, unknown>) => client(user).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], ...body } as any)
    await expect(refused({ temperature: 3 })).rejects.toMatchObject({ status: 400, param: "temperature", code: "BadRequest", type: "invalid_request_error" })
    await expect(refused({ messages: [{ role: "user", content: "hi" }, { role: "user", content: [{ type: "text", text: 5 }] }] }))
      .rejects.toMatchObject({ status: 400, param: "messages.[1].content.[0].text" })
    const raw = await call(server.url, "POST", "/openai/v1/chat/completions", { apiKey: user.apiKey, body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream_options: {} } })
    expect(raw.status).toBe(400)
    expect(raw.body.error).toEqual({ message: expect.stringMatching(/stream_options/), type: "invalid_request_error", param: "stream_options", code: "BadRequest" })
  })

  it("moderates one text or several, one result each", async () => {
    const one = await client(user).moderations.create({ input: "I will attack and kill them" })
    expect(one.model).toBe("omni-moderation-latest")
    expect(one.results).toHaveLength(1)
    expect(one.results[0]).toMatchObject({ flagged: true, categories: { violence: true, hate: false }, category_scores: { violence: 0.91 } })
    // The SDK's Moderation type requires it: each category was judged on text (a client reading it got a TypeError).
    expect(one.results[0]!.category_applied_input_types.violence).toEqual(["text"])
    expect(Object.keys(one.results[0]!.category_applied_input_types).sort()).toEqual(Object.keys(one.results[0]!.categories).sort())
    const two = await client(user).moderations.create({ model: "omni-moderation-latest", input: ["Have a lovely day", "I hate this"] })
    expect(two.results.map((r) => r.flagged)).toEqual([false, true])
    expect(shared.requests.at(-1)!.body).toMatchObject({ model: "omni-moderation-latest" })
    const before = (await usage()).dailyCallsUsed
    const refused = await call(server.url, "POST", "/openai/v1/moderations", { apiKey: user.apiKey, body: { input: "x", user: "u1" } })
    expect(refused.status).toBe(400)
    expect(refused.body.error.message).toMatch(/^user is not supported/)
    expect((await usage()).dailyCallsUsed).toBe(before)
    // OpenAI's multi-modal form: text parts are one input, one result; an image part is refused by name, uncounted.
    const parts = await client(user).moderations.create({ input: [{ type: "text", text: "I will attack " }, { type: "text", text: "and kill them" }] })
    expect(parts.results).toHaveLength(1)
    expect(shared.requests.at(-1)!.body).toMatchObject({ input: "I will attack and kill them" })
    const counted = (await usage()).dailyCallsUsed
    const image = await call(server.url, "POST", "/openai/v1/moderations", {
      apiKey: user.apiKey,
      body: { input: [{ type: "text", text: "x" }, { type: "image_url", image_url: { url: "https://example.com/a.png" } }] }
    })
    expect([image.status, image.body.error.param]).toEqual([400, "input"])
    expect(image.body.error.message).toContain("image_url parts are not supported")
    const empty = await call(server.url, "POST", "/openai/v1/moderations", { apiKey: user.apiKey, body: { input: [{ type: "text", text: "" }] } })
    expect([empty.status, empty.body.error.message]).toEqual([400, "Invalid request: input's text parts hold no text"])
    expect((await usage()).dailyCallsUsed).toBe(counted)
  })

  it("refuses a streamed image before the upstream makes it: the gateway answers images whole", async () => {
    const before = shared.requests.length
    const refused = await call(server.url, "POST", "/openai/v1/images/generations", { apiKey: user.apiKey, body: { model: "gpt-image-1", prompt: "a fox", stream: true, partial_images: 2 } })
    expect(refused.status).toBe(400)
    expect(refused.body.error.message).toContain("stream is not supported on images")
    expect(shared.requests.length).toBe(before)
  })

  it("generates images, forwarding quality, style, response_format and user", async () => {
    const urls = await client(user).images.generate({ model: "dall-e-3", prompt: "a lighthouse at dusk", n: 2, size: "1024x1024" })
    expect(urls.data).toHaveLength(2)
    expect(urls.data![0]).toEqual({ url: "https://images.mock.openai.test/0.png", revised_prompt: "a lighthouse at dusk" })
    const b64 = await client(user).images.generate({ model: "dall-e-3", prompt: "a fox", size: "1024x1792", quality: "hd", style: "vivid", response_format: "b64_json", user: "end-user-42" })
    expect(shared.requests.at(-1)!.body).toEqual({ model: "dall-e-3", prompt: "a fox", n: 1, size: "1024x1792", quality: "hd", style: "vivid", response_format: "b64_json", user: "end-user-42" })
    expect(Buffer.from(b64.data![0]!.b64_json!, "base64").toString()).toBe("PNG:a fox:0:1024x1792")
  })

  describe("LangChain ChatOpenAI", () => {
    const model = () => new ChatOpenAI({ model: "gpt-4o-mini", apiKey: user.apiKey, maxRetries: 0, configuration: { baseURL: `${server.url}/openai/v1` } })

    it("withStructuredOutput returns the parsed object (zod schema and JSON schema)", async () => {
      const City = z.object({ city: z.string(), population: z.number() })
      const fromZod = await model().withStructuredOutput(City).invoke("Facts about Oslo?")
      expect(fromZod).toEqual({ city: "sample", population: 42 })
      expect(upstream.chats.at(-1).response_format ?? upstream.chats.at(-1).tools).toBeDefined()

      const fromJson = await model().withStructuredOutput({ title: "city_facts", ...citySchema.schema }, { method: "functionCalling" }).invoke("Facts about Oslo?")
      expect(fromJson).toEqual({ city: "sample", population: 42 })
      expect(upstream.chats.at(-1).tool_choice).toMatchObject({ type: "function", function: { name: "city_facts" } })
    })

    it("bindTools gets tool_calls back", async () => {
      const reply = await model().bindTools([weatherTool]).invoke("Weather in Oslo?")
      expect(reply.tool_calls).toEqual([expect.objectContaining({ name: "get_weather", args: { city: "sample" }, id: "call_scripted" })])
      expect(upstream.chats.at(-1).tools).toEqual([weatherTool])
    })

    it("streams", async () => {
      let text = ""
      for await (const chunk of await model().stream("hi")) text += chunk.content as string
      expect(text).toBe("Hello from the scripted upstream")
      expect(upstream.chats.at(-1).stream).toBe(true)
    })
  })
})
