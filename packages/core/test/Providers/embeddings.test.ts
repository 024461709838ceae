/** Embedding adapters against the OpenAI, Gemini, Jina, Mixedbread and Nomic wire-format mocks. */
import { Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { type MockUpstream, startGeminiMock, startOpenAiMock } from "../support/mockUpstreams.ts"
import { startVendorMock, type VendorMock } from "../support/mockVendors.ts"
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

/** The embedding vendors that are bespoke providers, against mocks speaking their APIs (support/mockVendors.ts). */
const vendors = [
  { vendor: "jina", model: "jina-embeddings-v3", path: "/v1/embeddings", body: { input: ["alpha", "beta", "alpha"] }, tokens: 12 },
  { vendor: "mixedbread", model: "mixedbread-ai/mxbai-embed-large-v1", path: "/v1/embeddings", body: { input: ["alpha", "beta", "alpha"] }, tokens: 12 },
  { vendor: "nomic", model: "nomic-embed-text-v1.5", path: "/v1/embedding/text", body: { texts: ["alpha", "beta", "alpha"], task_type: "search_document" }, tokens: 9 }
] as const

for (const v of vendors) {
  describe(`${v.vendor} embeddings`, () => {
    let mock: VendorMock
    let target: Target
    beforeAll(async () => {
      mock = await startVendorMock(v.vendor, "k-2")
      const entry = data.providers.find((p) => p.id === v.vendor)!
      // No catalogued model (no list price found): a provider-named call forwards the model as named.
      target = { provider: { ...entry, endpoint: mock.url, apiKey: Option.some(Redacted.make("k-2")), configured: true, settings: {}, missing: undefined }, model: uncataloguedModel(v.vendor, v.model, "embeddings") }
    })
    afterAll(() => mock.close())

    it("is served, sends the texts in its wire format and returns one vector per text, in order", async () => {
      expect(data.providers.find((p) => p.id === v.vendor)!.capabilities).toContain("embeddings")
      const result = Either.getOrThrow(await embed(target, ["alpha", "beta", "alpha"]))
      expect(result.vectors).toHaveLength(3)
      expect(result.vectors[0]).toEqual(result.vectors[2])
      expect(result.vectors[0]).not.toEqual(result.vectors[1])
      expect(result.promptTokens).toBe(v.tokens)
      const sent = mock.requests.at(-1)!
      expect(sent.path).toBe(v.path)
      expect(sent.headers.authorization).toBe("Bearer k-2")
      expect(sent.body).toEqual({ model: v.model, ...v.body })
    })

    it("maps upstream errors and wrong answers", async () => {
      mock.failNext(401, "invalid api key")
      const denied = await embed(target, ["x"])
      expect(denied._tag === "Left" && denied.left).toMatchObject({ status: 401, retryable: false, message: expect.stringContaining("invalid api key") })
      mock.rawNext("application/json", JSON.stringify({ embeddings: [[1]], data: [{ embedding: [1] }] }))
      const short = await embed(target, ["x", "y"])
      expect(short._tag === "Left" && short.left).toMatchObject({ kind: "protocol", message: expect.stringContaining("expected 2 embeddings") })
    })
  })
}
