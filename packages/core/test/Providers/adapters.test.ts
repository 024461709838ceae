/**
 * Adapter conformance: each wire family against a mock server that speaks the provider's
 * documented format; asserts what the adapter sent and what it made of the answers.
 */
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { type MockUpstream, startAnthropicMock, startGeminiMock, startOpenAiMock } from "../support/mockUpstreams.ts"
import { collect, complete } from "../support/wires.ts"

const families = [
  { provider: "openai", model: "gpt-4o-mini", start: startOpenAiMock, path: "/v1/chat/completions" },
  { provider: "groq", model: "llama-3.3-70b-versatile", start: startOpenAiMock, path: "/v1/chat/completions" },
  { provider: "anthropic", model: "claude-haiku-4-5", start: startAnthropicMock, path: "/v1/messages" },
  { provider: "google", model: "gemini-2.5-flash", start: startGeminiMock, path: "/v1beta/models/gemini-2.5-flash:generateContent" }
] as const

const weather = {
  name: "get_weather",
  description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
}

for (const f of families) {
  describe(`${f.provider} adapter (${data.providers.find((p) => p.id === f.provider)!.adapter} wire format)`, () => {
    let mock: MockUpstream
    let target: Target
    beforeAll(async () => {
      mock = await f.start({ apiKey: "sk-test-123", chunkDelayMs: 1 })
      const entry = data.providers.find((p) => p.id === f.provider)!
      target = {
        provider: { ...entry, endpoint: mock.url, apiKey: Option.some(Redacted.make("sk-test-123")), configured: true, settings: {}, missing: undefined },
        model: data.models.find((m) => m.id === f.model)!
      }
    })
    afterAll(() => mock.close())

    it("plain completion: request shape, auth, answer and usage", async () => {
      mock.setScenario({ kind: "text", text: "Hi there", usage: { prompt: 21, completion: 3 } })
      const result = await complete(target, {
        model: f.model,
        messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
        temperature: 0.5,
        maxTokens: 50
      })
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      expect(result.right).toMatchObject({ content: "Hi there", finishReason: "stop", usage: { promptTokens: 21, completionTokens: 3 } })
      const sent = mock.requests.at(-1)!
      expect(sent.path).toBe(f.path)
      const body = sent.body as any
      if (target.provider.adapter === "openai") {
        expect(sent.headers.authorization).toBe("Bearer sk-test-123")
        expect(body.messages[0]).toEqual({ role: "system", content: "Be brief." })
        expect(body[f.provider === "openai" ? "max_completion_tokens" : "max_tokens"]).toBe(50)
        expect(body.model).toBe(f.model)
      } else if (target.provider.adapter === "anthropic") {
        expect(sent.headers["x-api-key"]).toBe("sk-test-123")
        expect(sent.headers["anthropic-version"]).toBe("2023-06-01")
        expect(body.system).toBe("Be brief.")
        expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Hello" }] }])
        expect(body.max_tokens).toBe(50)
      } else {
        expect(sent.headers["x-goog-api-key"]).toBe("sk-test-123")
        expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }] })
        expect(body.contents).toEqual([{ role: "user", parts: [{ text: "Hello" }] }])
        expect(body.generationConfig).toEqual({ temperature: 0.5, maxOutputTokens: 50 })
      }
    })

    it("tool call and tool-result round trip", async () => {
      mock.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Paris" }, id: "call_abc" })
      const first = await complete(target, { model: f.model, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weather] })
      expect(first._tag).toBe("Right")
      if (first._tag !== "Right") return
      expect(first.right.finishReason).toBe("tool_calls")
      expect(first.right.toolCalls).toHaveLength(1)
      const call = first.right.toolCalls[0]!
      expect(call.name).toBe("get_weather")
      expect(JSON.parse(call.arguments)).toEqual({ city: "Paris" })
      const toolsSent = (mock.requests.at(-1)!.body as any)
      if (target.provider.adapter === "openai") expect(toolsSent.tools[0].function.name).toBe("get_weather")
      if (target.provider.adapter === "anthropic") expect(toolsSent.tools[0].input_schema.required).toEqual(["city"])
      if (target.provider.adapter === "gemini") {
        expect(toolsSent.tools[0].functionDeclarations[0].name).toBe("get_weather")
        expect(toolsSent.tools[0].functionDeclarations[0].parameters.additionalProperties).toBeUndefined()
      }

      mock.setScenario({ kind: "text", text: "It is sunny." })
      const second = await complete(target, {
        model: f.model,
        tools: [weather],
        messages: [
          { role: "user", content: "Weather in Paris?" },
          { role: "assistant", content: "", toolCalls: [call] },
          { role: "tool", content: "{\"temp\":21}", toolCallId: call.id }
        ]
      })
      expect(second._tag === "Right" && second.right.content).toBe("It is sunny.")
      const body = mock.requests.at(-1)!.body as any
      if (target.provider.adapter === "openai") {
        expect(body.messages[1].tool_calls[0]).toMatchObject({ id: call.id, type: "function", function: { name: "get_weather" } })
        expect(body.messages[2]).toEqual({ role: "tool", tool_call_id: call.id, content: "{\"temp\":21}" })
      } else if (target.provider.adapter === "anthropic") {
        expect(body.messages[1].content[0]).toMatchObject({ type: "tool_use", id: call.id, name: "get_weather", input: { city: "Paris" } })
        expect(body.messages[2]).toEqual({ role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "{\"temp\":21}" }] })
      } else {
        expect(body.contents[1]).toEqual({ role: "model", parts: [{ functionCall: { name: "get_weather", args: { city: "Paris" } } }] })
        expect(body.contents[2]).toEqual({ role: "user", parts: [{ functionResponse: { name: "get_weather", response: { content: { temp: 21 } } } }] })
      }
    })

    it("streams text deltas, finish reason and usage", async () => {
      mock.setScenario({ kind: "text", text: "Streaming works fine today", usage: { prompt: 9, completion: 6 } })
      const result = await collect(target, { model: f.model, messages: [{ role: "user", content: "Hi" }] })
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      const text = result.right.filter((e) => e._tag === "Text").map((e) => (e as any).text).join("")
      expect(text).toBe("Streaming works fine today")
      expect(result.right.filter((e) => e._tag === "Text").length).toBeGreaterThan(1)
      expect(result.right.find((e) => e._tag === "Finish")).toEqual({ _tag: "Finish", reason: "stop" })
      const usage = Object.assign({}, ...result.right.filter((e) => e._tag === "Usage").map((e) => (e as any).usage))
      expect(usage).toEqual({ promptTokens: 9, completionTokens: 6 })
      const body = mock.requests.at(-1)!.body as any
      if (target.provider.adapter === "openai") expect(body.stream_options).toEqual({ include_usage: true })
      if (target.provider.adapter === "gemini") expect(mock.requests.at(-1)!.path).toContain(":streamGenerateContent")
    })

    it("streams tool calls", async () => {
      mock.setScenario({ kind: "tool", name: "get_weather", arguments: { city: "Oslo" }, id: "call_s1" })
      const result = await collect(target, { model: f.model, messages: [{ role: "user", content: "Oslo?" }], tools: [weather] })
      expect(result._tag).toBe("Right")
      if (result._tag !== "Right") return
      const deltas = result.right.filter((e) => e._tag === "ToolCallDelta") as Array<any>
      expect(deltas[0].name).toBe("get_weather")
      expect(JSON.parse(deltas.map((d) => d.arguments).join(""))).toEqual({ city: "Oslo" })
      expect(result.right.find((e) => e._tag === "Finish")).toEqual({ _tag: "Finish", reason: "tool_calls" })
    })

    it("maps upstream errors: 429/5xx retryable, 400 not, with the provider's message", async () => {
      for (const [status, retryable] of [[429, true], [500, true], [503, true], [400, false]] as const) {
        mock.setScenario({ kind: "error", status, message: `boom ${status}` })
        const result = await complete(target, { model: f.model, messages: [{ role: "user", content: "x" }] })
        expect(result._tag).toBe("Left")
        if (result._tag !== "Left") continue
        expect(result.left).toMatchObject({ status, retryable, kind: "http" })
        expect(result.left.message).toContain(`boom ${status}`)
      }
    })

    it("rejects a wrong key with the provider's auth error (not retryable)", async () => {
      const wrong = { ...target, provider: { ...target.provider, apiKey: Option.some(Redacted.make("wrong")) } }
      const result = await complete(wrong, { model: f.model, messages: [{ role: "user", content: "x" }] })
      expect(result._tag === "Left" && result.left.retryable).toBe(false)
      expect(result._tag === "Left" && [400, 401, 403].includes(result.left.status ?? 0)).toBe(true)
    })

    it("a mid-stream error ends the stream with a failure", async () => {
      mock.setScenario({ kind: "error", status: 500, message: "exploded", midStream: true })
      const result = await collect(target, { model: f.model, messages: [{ role: "user", content: "x" }] })
      expect(result._tag).toBe("Left")
    })

    it("connection refused is a retryable connect error", async () => {
      const dead = { ...target, provider: { ...target.provider, endpoint: "http://127.0.0.1:9" } }
      const result = await complete(dead, { model: f.model, messages: [{ role: "user", content: "x" }] })
      expect(result._tag === "Left" && result.left).toMatchObject({ kind: "connect", retryable: true })
    })
  })
}
