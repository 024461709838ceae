/** Embedding adapters against the OpenAI and Gemini wire-format mocks. */
import { Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { type MockUpstream, startGeminiMock, startOpenAiMock } from "../support/mockUpstreams.ts"
import { embed } from "../support/wires.ts"

const cases = [
  { provider: "openai", model: "text-embedding-3-small", start: startOpenAiMock, path: "/v1/embeddings" },
  { provider: "voyage", model: "voyage-4-lite", start: startOpenAiMock, path: "/v1/embeddings" },
  { provider: "google", model: "gemini-embedding-001", start: startGeminiMock, path: "/v1beta/models/gemini-embedding-001:batchEmbedContents" }
] as const

for (const c of cases) {
  describe(`${c.provider} embeddings`, () => {
    let mock: MockUpstream
    let target: Target
    beforeAll(async () => {
      mock = await c.start({ apiKey: "k-1" })
      const entry = data.providers.find((p) => p.id === c.provider)!
      target = { provider: { ...entry, endpoint: mock.url, apiKey: Option.some(Redacted.make("k-1")), configured: true, settings: {}, missing: undefined }, model: data.models.find((m) => m.id === c.model)! }
    })
    afterAll(() => mock.close())

    it("sends the texts and returns one vector per text, in order", async () => {
      const result = Either.getOrThrow(await embed(target, ["alpha", "beta", "alpha"]))
      expect(result.vectors).toHaveLength(3)
      expect(result.vectors[0]).toEqual(result.vectors[2])
      expect(result.vectors[0]).not.toEqual(result.vectors[1])
      const sent = mock.requests.at(-1)!
      expect(sent.path).toBe(c.path)
      const body = sent.body as any
      if (c.provider === "google") {
        expect(body.requests.map((r: any) => r.content.parts[0].text)).toEqual(["alpha", "beta", "alpha"])
        expect(body.requests[0].model).toBe(`models/${c.model}`)
        expect(result.promptTokens).toBeUndefined()
      } else {
        expect(body).toMatchObject({ model: c.model, input: ["alpha", "beta", "alpha"] })
        expect(result.promptTokens).toBeGreaterThan(0)
      }
    })

    it("maps upstream errors", async () => {
      mock.setScenario({ kind: "error", status: 503, message: "busy" })
      const result = await embed(target, ["x"])
      expect(result._tag === "Left" && result.left).toMatchObject({ status: 503, retryable: true })
      mock.setScenario({ kind: "text", text: "ok" })
    })
  })
}
