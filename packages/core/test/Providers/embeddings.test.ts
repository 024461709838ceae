/** Embedding adapters against the OpenAI, Gemini, Jina, Mixedbread and Nomic wire-format mocks. */
import { Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { type MockUpstream, startGeminiMock, startOpenAiMock } from "../support/mockUpstreams.ts"
import { startVendorMock, type VendorMock } from "../support/mockVendors.ts"
import { embed } from "../support/wires.ts"
import { checked, openAiEmbeddings } from "../../src/Providers/Embeddings.ts"
import { UpstreamError } from "../../src/Providers/UpstreamError.ts"

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

describe("embedding vectors of any vendor", () => {
  const problem = (r: unknown) => (r instanceof UpstreamError ? r.message.replace("v sent an unexpected answer: ", "") : "ok")

  it("are finite numbers, one length for all, from 1 to 16,384 dimensions", () => {
    expect(problem(checked("v", [[0.1, 0.2], [0.3, 0.4]], 2, 3))).toBe("ok")
    // `1e400` parses as Infinity: a client got `null` for it, and the call was charged.
    expect(problem(checked("v", [[JSON.parse("1e400"), 0.5]], 1, 3))).toBe("embedding 0 is not a vector of 1 to 16384 finite numbers")
    expect(problem(checked("v", [[]], 1, 3))).toBe("embedding 0 is not a vector of 1 to 16384 finite numbers")
    expect(problem(checked("v", [[0.1], [0.1, 0.2, 0.3]], 2, 3))).toBe("embedding 1 has 3 dimensions where embedding 0 has 1")
    expect(problem(checked("v", [new Array(7_000_000).fill(0.1)], 1, 3))).toBe("embedding 0 is not a vector of 1 to 16384 finite numbers")
    expect(problem(checked("v", [["0.1"]], 1, 3))).toBe("embedding 0 is not a vector of 1 to 16384 finite numbers")
    expect(problem(checked("v", [[0.1]], 2, 3))).toBe("expected 2 embeddings")
  })

  it("of the OpenAI format are put in the order of their index, each index once", () => {
    const result = (data: unknown) => openAiEmbeddings.result("v", { data, usage: { prompt_tokens: 2 } }, 2)
    expect(result([{ index: 1, embedding: [2] }, { index: 0, embedding: [1] }])).toEqual({ vectors: [[1], [2]], promptTokens: 2 })
    expect(result([{ embedding: [1] }, { embedding: [2] }])).toEqual({ vectors: [[1], [2]], promptTokens: 2 })
    expect(problem(result([{ index: 0, embedding: [1] }, { index: 0, embedding: [2] }]))).toBe("an embedding's index 0 is not one of 0 to 1, each once")
    expect(problem(result([{ index: 0, embedding: [1] }, { index: 5, embedding: [2] }]))).toBe("an embedding's index 5 is not one of 0 to 1, each once")
  })
})
