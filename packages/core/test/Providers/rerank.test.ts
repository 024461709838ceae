/**
 * The rerank wires (Cohere, Voyage, Jina, Mixedbread) through the engine (ProviderCalls.rerank)
 * against mocks speaking each vendor's rerank API: the request each sends, the ranking read back,
 * the usage recorded (tokens, or Cohere's search units priced per search), fallback, hostile answers.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import * as ProviderCalls from "../../src/Engine/ProviderCalls.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"
import { Metering } from "../../src/Storage/Metering.ts"
import type { UsageEvent } from "../../src/Storage/UsageStore.ts"
import { startVendorMock, type Vendor, type VendorMock } from "../support/mockVendors.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

const documents = ["Paris is the capital of France.", "Berlin has techno clubs.", "The capital of Germany is Berlin.", "Cats purr."]
const query = "capital of Germany"

const cases: ReadonlyArray<{ vendor: Vendor; model: string; path: string; sent: Record<string, unknown>; tokens: number; searchUnits?: number; cost?: number }> = [
  { vendor: "cohere", model: "rerank-v3.5", path: "/v2/rerank", sent: { documents, top_n: 2 }, tokens: 0, searchUnits: 1, cost: 0.002 },
  { vendor: "voyage", model: "rerank-2.5", path: "/v1/rerank", sent: { documents, top_k: 2 }, tokens: 3 * 4 + 18, cost: (30 / 1000) * 0.00005 },
  { vendor: "jina", model: "jina-reranker-v2-base-multilingual", path: "/v1/rerank", sent: { documents, top_n: 2 }, tokens: 42 },
  { vendor: "mixedbread", model: "mixedbread-ai/mxbai-rerank-large-v2", path: "/v1/reranking", sent: { input: documents, top_k: 2 }, tokens: 40 }
]

describe("rerank wires through the engine", () => {
  const recorded: Array<UsageEvent> = []
  const mocks = new Map<Vendor, VendorMock>()
  let engine: Effect.Effect.Success<typeof ProviderCalls.ProviderCalls>
  const avatar = { id: "avatar-1" } as AvatarRecord

  const targetOf = (vendor: Vendor, model: string): Target => {
    const entry = data.providers.find((p) => p.id === vendor)!
    return {
      provider: { ...entry, endpoint: mocks.get(vendor)!.url, apiKey: Option.some(Redacted.make(`${vendor}-key`)), configured: true, settings: {}, missing: undefined },
      model: data.models.find((m) => m.id === model && m.provider === vendor) ?? uncataloguedModel(vendor, model, "rerank")
    }
  }
  const rerank = (targets: ReadonlyArray<Target>, topN = 2) => engine.rerank({ avatar, targets, cancel: new Cancel(), query, documents, topN })

  beforeAll(async () => {
    for (const c of cases) mocks.set(c.vendor, await startVendorMock(c.vendor, `${c.vendor}-key`))
    const metering = Layer.succeed(Metering, {
      avatarOfKey: async () => undefined,
      activeAvatar: async () => undefined,
      admit: async () => 1,
      callsOn: async () => 0,
      record: async (e) => void recorded.push(e)
    })
    engine = await Effect.runPromise(Effect.provide(ProviderCalls.ProviderCalls, ProviderCalls.layer.pipe(Layer.provide(Layer.merge(ProviderHealth.layer, metering)))))
  })
  afterAll(async () => {
    for (const m of mocks.values()) await m.close()
  })

  for (const c of cases) {
    it(`${c.vendor}: sends its rerank request, reads the ranking, records usage`, async () => {
      const result = await rerank([targetOf(c.vendor, c.model)])
      expect(result.results.map((r) => r.index)).toEqual([2, 0])
      expect(result.results[0]).toEqual({ index: 2, document: documents[2], score: 1 })
      expect(result).toMatchObject({ provider: c.vendor, model: c.model, costKnown: c.cost !== undefined, fallbacks: [] })
      const sent = mocks.get(c.vendor)!.requests.at(-1)!
      expect(sent.path).toBe(c.path)
      expect(sent.headers.authorization).toBe(`Bearer ${c.vendor}-key`)
      expect(sent.body).toEqual({ model: c.model, query, ...c.sent })
      const usage = recorded.at(-1)!
      expect(usage).toMatchObject({ avatarId: "avatar-1", provider: c.vendor, model: c.model, capability: "rerank", completionTokens: 0, ok: true })
      expect(usage.costUSD).toBeCloseTo(c.cost ?? 0, 12)
      expect(result.costUSD).toBe(usage.costUSD)
      if (c.vendor === "cohere") {
        // Cohere reports search units, not tokens: the tokens are the gateway's count.
        expect(result.usage).toMatchObject({ searchUnits: 1, estimated: true })
        expect(usage.promptTokens).toBeGreaterThan(0)
      } else {
        expect(result.usage).toEqual({ totalTokens: c.tokens, estimated: false })
        expect(usage).toMatchObject({ promptTokens: c.tokens, estimated: false })
      }
    })
  }

  it("takes Cohere's search units as not reported when the documents could not bill so many", async () => {
    const answer = (units: number) => JSON.stringify({ results: [{ index: 2, relevance_score: 0.9 }, { index: 0, relevance_score: 0.1 }], meta: { billed_units: { search_units: units } } })
    const cohere = mocks.get("cohere")!
    // 1e9 units on four short documents recorded $2,000,000.
    cohere.rawNext("application/json", answer(1e9))
    const hostile = await rerank([targetOf("cohere", "rerank-v3.5")])
    expect([hostile.usage.searchUnits, hostile.usage.estimated, hostile.costUSD]).toEqual([1, true, 0.002])
    expect(recorded.at(-1)!.costUSD).toBe(0.002)
    // Within the bound (a hundredth of the documents' characters, at least one) a count is believed.
    cohere.rawNext("application/json", answer(1))
    expect((await rerank([targetOf("cohere", "rerank-v3.5")])).usage).toMatchObject({ searchUnits: 1 })
  })

  it("falls back to the next target after a retryable failure", async () => {
    mocks.get("cohere")!.failNext(503, "service unavailable")
    const result = await rerank([targetOf("cohere", "rerank-v3.5"), targetOf("voyage", "rerank-2.5")], 1)
    expect(result).toMatchObject({ provider: "voyage", results: [{ index: 2 }] })
    expect(result.fallbacks).toEqual([{ provider: "cohere", model: "rerank-v3.5", error: expect.stringContaining("service unavailable") }])
  })

  it("refuses hostile answers: not JSON, no results, an index out of range", async () => {
    const jina = mocks.get("jina")!
    jina.rawNext("application/json", "not json")
    await expect(rerank([targetOf("jina", "jina-reranker-v2-base-multilingual")])).rejects.toMatchObject({ _tag: "UpstreamFailed" })
    jina.rawNext("application/json", JSON.stringify({ usage: {} }))
    await expect(rerank([targetOf("jina", "jina-reranker-v2-base-multilingual")])).rejects.toMatchObject({ message: expect.stringContaining("no results array") })
    jina.rawNext("application/json", JSON.stringify({ results: [{ index: 9, relevance_score: 0.5 }] }))
    await expect(rerank([targetOf("jina", "jina-reranker-v2-base-multilingual")])).rejects.toMatchObject({ message: expect.stringContaining("index below 4") })
    // The same document three times was answered as three results.
    jina.rawNext("application/json", JSON.stringify({ results: [0, 0, 0].map((index) => ({ index, relevance_score: 0.5 })) }))
    await expect(rerank([targetOf("jina", "jina-reranker-v2-base-multilingual")])).rejects.toMatchObject({ message: expect.stringContaining("ranks document 0 more than once") })
    mocks.get("mixedbread")!.failNext(401, "invalid api key")
    await expect(rerank([targetOf("mixedbread", "mixedbread-ai/mxbai-rerank-large-v2")])).rejects.toMatchObject({ status: 401, message: expect.stringContaining("invalid api key") })
  })
})
