/**
 * The OpenAI surface translated to other wire formats, end to end through the node host: tool
 * choice, image parts, response format and sampling options sent to /openai/v1/chat/completions
 * for Anthropic and Gemini reach their mock upstreams in those providers' formats (plain and
 * streamed); a field a provider cannot honour is a 400 naming it, never sent and never counted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startAnthropicMock, startGeminiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const PATH = "/openai/v1/chat/completions"
const png = "data:image/png;base64,iVBORw0KGgo="
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
  }
}
const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
const lookAt = (url: string) => [{ role: "user", content: [{ type: "text", text: "Where is this?" }, { type: "image_url", image_url: { url } }] }]

describe("translation across wire formats (OpenAI surface)", () => {
  let server: RunningServer
  let anthropic: MockUpstream
  let gemini: MockUpstream
  let user: TestAvatar
  /** API-key calls take the fast lane, JWT calls the Effect route: both must translate and refuse alike. */
  const post = (body: unknown, via: "key" | "jwt" = "key") =>
    call(server.url, "POST", PATH, via === "key" ? { body, apiKey: user.apiKey } : { body, token: user.token })
  const callsUsed = async () => (await call(server.url, "GET", "/v1/usage", { apiKey: user.apiKey })).body.result.dailyCallsUsed as number

  beforeAll(async () => {
    ;[anthropic, gemini] = await Promise.all([
      startAnthropicMock({ apiKey: "sk-anthropic", chunkDelayMs: 1 }),
      startGeminiMock({ apiKey: "g-key", chunkDelayMs: 1 })
    ])
    server = await startServer({
      ...adminEnv,
      ANTHROPIC_API_KEY: "sk-anthropic",
      ANTHROPIC_BASE_URL: anthropic.url,
      GOOGLE_API_KEY: "g-key",
      GOOGLE_BASE_URL: gemini.url
    })
    user = await signUp(server, "translate")
    // Anthropic's models need Bronze.
    await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Bronze" } })
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([anthropic, gemini].map((m) => m?.close()))
  })

  it("Anthropic: tool_choice, parallel_tool_calls, image parts, top_p and stop reach the Messages API translated", async () => {
    anthropic.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Paris" }, id: "toolu_e2e" })
    const res = await post({
      model: "claude-haiku-4-5",
      provider: "anthropic",
      messages: lookAt(png),
      tools: [weather],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      top_p: 0.5,
      stop: "END"
    })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.choices[0].message.tool_calls[0]).toMatchObject({ id: "toolu_e2e", function: { name: "get_weather" } })
    const body = anthropic.requests.at(-1)!.body as any
    expect(body.tool_choice).toEqual({ type: "tool", name: "get_weather", disable_parallel_tool_use: true })
    expect(body).toMatchObject({ top_p: 0.5, stop_sequences: ["END"] })
    expect(body.messages[0].content).toEqual([
      { type: "text", text: "Where is this?" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }
    ])
  })

  it("Anthropic: response_format json_schema becomes output_config.format, the answer the JSON text (JWT route too)", async () => {
    anthropic.setScenario({ kind: "text", text: "{\"city\":\"Paris\"}" })
    const res = await post({
      model: "claude-haiku-4-5",
      provider: "anthropic",
      messages: lookAt("https://example.com/eiffel.jpg"),
      response_format: { type: "json_schema", json_schema: { name: "place", schema, strict: true } }
    }, "jwt")
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(JSON.parse(res.body.choices[0].message.content)).toEqual({ city: "Paris" })
    const body = anthropic.requests.at(-1)!.body as any
    expect(body.output_config).toEqual({ format: { type: "json_schema", schema } })
    expect(body.messages[0].content[1]).toEqual({ type: "image", source: { type: "url", url: "https://example.com/eiffel.jpg" } })
  })

  it("Gemini: tool_choice, https image, response_format, seed and penalties reach generateContent translated", async () => {
    gemini.setScenario({ kind: "text", text: "{\"city\":\"Oslo\"}" })
    const res = await post({
      model: "gemini-2.5-flash",
      provider: "google",
      messages: lookAt("https://example.com/fjord.png"),
      tools: [weather],
      tool_choice: "none",
      response_format: { type: "json_object" },
      seed: 7,
      presence_penalty: 0.5
    })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.choices[0].message.content).toBe("{\"city\":\"Oslo\"}")
    const body = gemini.requests.at(-1)!.body as any
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "NONE" } })
    expect(body.generationConfig).toEqual({ responseMimeType: "application/json", seed: 7, presencePenalty: 0.5 })
    expect(body.contents[0].parts).toEqual([{ text: "Where is this?" }, { fileData: { mimeType: "image/png", fileUri: "https://example.com/fjord.png" } }])
  })

  it("Gemini: a stream carries the same translation (toolConfig, image parts, top_p)", async () => {
    gemini.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Bergen" } })
    const res = await fetch(`${server.url}${PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({
        model: "gemini-2.5-flash",
        provider: "google",
        stream: true,
        messages: lookAt(png),
        tools: [weather],
        tool_choice: { type: "function", function: { name: "get_weather" } },
        top_p: 0.25
      })
    })
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text).toContain("get_weather")
    expect(text).toContain("data: [DONE]")
    const sent = gemini.requests.at(-1)!
    expect(sent.path).toContain(":streamGenerateContent")
    expect((sent.body as any).toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } })
    expect((sent.body as any).generationConfig).toEqual({ topP: 0.25 })
    expect((sent.body as any).contents[0].parts[1]).toEqual({ inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } })
  })

  it("a field the provider cannot honour is a 400 naming it, sent nowhere and not counted", async () => {
    // The field named in the message, and in OpenAI's `param` (null where no one field is the cause).
    const refused: ReadonlyArray<[Record<string, unknown>, string, string | null]> = [
      [{ model: "claude-haiku-4-5", provider: "anthropic", logprobs: true }, "logprobs", "logprobs"],
      [{ model: "claude-haiku-4-5", provider: "anthropic", seed: 3 }, "seed", "seed"],
      [{ model: "claude-haiku-4-5", provider: "anthropic", response_format: { type: "json_object" } }, "response_format json_object", "response_format"],
      [{ model: "claude-haiku-4-5", provider: "anthropic", tools: [{ ...weather, function: { ...weather.function, strict: true } }] }, "tools[].function.strict", "tools[].function.strict"],
      [{ model: "gemini-2.5-flash", provider: "google", tools: [weather], parallel_tool_calls: false }, "parallel_tool_calls=false", "parallel_tool_calls"],
      [{ model: "gemini-2.5-flash", provider: "google", messages: lookAt("https://example.com/image?id=1") }, "send a data: URL", "image_url"]
    ]
    const sentBefore = anthropic.requests.length + gemini.requests.length
    const usedBefore = await callsUsed()
    for (const via of ["key", "jwt"] as const) {
      for (const [fields, name, param] of refused) {
        const res = await post({ messages: [{ role: "user", content: "Hi" }], ...fields }, via)
        expect(res.status, `${via} ${name}: ${JSON.stringify(res.body)}`).toBe(400)
        expect(JSON.stringify(res.body)).toContain(name)
        expect([name, res.body.error.param]).toEqual([name, param])
      }
    }
    expect(anthropic.requests.length + gemini.requests.length).toBe(sentBefore)
    expect(await callsUsed()).toBe(usedBefore)
  })
})
