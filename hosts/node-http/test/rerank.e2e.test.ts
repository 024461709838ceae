/**
 * POST /v1/rerank end to end with Cohere configured against a mock speaking Cohere v2: a named
 * provider, `auto` (an upstream rerank model the plan allows, else BM25), `local`, refusals,
 * upstream errors, and the usage and cost recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startVendorMock, type VendorMock } from "../../../packages/core/test/support/mockVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const documents = ["Paris is the capital of France.", "Berlin has techno clubs.", "The capital of Germany is Berlin.", "Cats purr."]
const query = "capital of Germany"

describe("rerank through providers", () => {
  let cohere: VendorMock
  let server: RunningServer
  let free: TestAvatar
  let bronze: TestAvatar
  const rerank = (user: TestAvatar, body: Record<string, unknown>) => call(server.url, "POST", "/v1/rerank", { apiKey: user.apiKey, body: { query, documents, ...body } })

  beforeAll(async () => {
    cohere = await startVendorMock("cohere", "co-e2e")
    server = await startServer({ ...adminEnv, COHERE_API_KEY: "co-e2e", COHERE_BASE_URL: cohere.url })
    free = await signUp(server, "rrfree")
    bronze = await signUp(server, "rrbronze")
    await call(server.url, "PUT", `/v1/admin/avatars/${bronze.id}/plan`, { token: await adminToken(server), body: { plan: "Bronze" } })
  })
  afterAll(async () => {
    await server?.stop()
    await cohere?.close()
  })

  it("reranks with Cohere when named: the model's ranking, search units, cost per search, usage recorded", async () => {
    const res = await rerank(bronze, { provider: "cohere", topN: 2 })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({
      provider: "cohere",
      model: "rerank-v3.5",
      results: [{ index: 2, document: documents[2], score: 1 }, { index: 0, document: documents[0] }],
      usage: { searchUnits: 1 },
      costKnown: true,
      fallbacks: []
    })
    expect(res.body.result.costUSD).toBeCloseTo(0.002, 10)
    expect(cohere.requests.at(-1)).toMatchObject({ path: "/v2/rerank", body: { model: "rerank-v3.5", query, documents, top_n: 2 } })
    const usage = await call(server.url, "GET", "/v1/usage", { apiKey: bronze.apiKey })
    expect(usage.body.result.monthlySpendUSD).toBeCloseTo(0.002, 10)
  })

  it("auto takes the upstream rerank model the plan allows, else BM25 in-process; local is BM25", async () => {
    const before = cohere.requests.length
    const upstream = await rerank(bronze, { topN: 1 })
    expect(upstream.body.result).toMatchObject({ provider: "cohere", results: [{ index: 2 }] })
    expect(cohere.requests.length).toBe(before + 1)
    // Cohere needs plan Bronze: a Free caller's auto rerank runs BM25.
    const bm25 = await rerank(free, { topN: 1 })
    expect(bm25.body.result).toMatchObject({ provider: "local", model: "bm25", costUSD: 0, costKnown: true, results: [{ index: 2 }] })
    expect(bm25.body.result.usage).toBeUndefined()
    const local = await rerank(bronze, { provider: "local" })
    expect(local.body.result).toMatchObject({ provider: "local", model: "bm25" })
    expect(local.body.result.results).toHaveLength(4)
    expect(cohere.requests.length).toBe(before + 1)
  })

  it("refuses what it cannot serve, naming why", async () => {
    const plan = await rerank(free, { provider: "cohere" })
    expect(plan.status).toBe(403)
    expect(plan.body.message).toMatch(/plan Bronze/)
    const unconfigured = await rerank(bronze, { provider: "jina" })
    expect(unconfigured.status).toBe(422)
    expect(unconfigured.body.message).toMatch(/JINA_API_KEY/)
    const noRerank = await rerank(bronze, { provider: "openai" })
    expect(noRerank.status).toBe(422)
    expect(noRerank.body.message).toMatch(/does not offer reranking/)
    const localModel = await rerank(bronze, { provider: "local", model: "rerank-v3.5" })
    expect(localModel.status).toBe(422)
    expect(localModel.body.message).toMatch(/bm25 only/)
    // A model the catalogue does not list is forwarded as named on its provider, cost unknown.
    const named = await rerank(bronze, { provider: "cohere", model: "rerank-v4.0-fast", topN: 1 })
    expect(named.body.result).toMatchObject({ provider: "cohere", model: "rerank-v4.0-fast", costUSD: 0, costKnown: false })
    expect(cohere.requests.at(-1)!.body.model).toBe("rerank-v4.0-fast")
  })

  it("answers an upstream failure with a 502 naming the provider's message", async () => {
    cohere.failNext(400, "invalid request: too many documents")
    const res = await rerank(bronze, { provider: "cohere" })
    expect(res.status).toBe(502)
    expect(res.body.message).toMatch(/too many documents/)
  })
})
