/** POST /v1/embeddings end to end: routing, result shape, usage, hostile input. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startGeminiMock, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("embeddings", () => {
  let openai: MockUpstream
  let gemini: MockUpstream
  let server: RunningServer
  let user: TestAvatar

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-e" })
    gemini = await startGeminiMock({ apiKey: "g-e" })
    server = await startServer({ OPENAI_API_KEY: "sk-e", OPENAI_BASE_URL: openai.url, GOOGLE_API_KEY: "g-e", GOOGLE_BASE_URL: gemini.url })
    user = await signUp(server, "emb")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
    await gemini?.close()
  })

  it("embeds on the named provider and records usage", async () => {
    const res = await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body: { texts: ["one", "two"], provider: "openai", model: "text-embedding-3-small" } })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "openai", model: "text-embedding-3-small", dimensions: 8, usage: { estimated: false } })
    expect(res.body.result.embeddings).toHaveLength(2)
    expect(res.headers.get("x-ratelimit-remaining")).toBe("99")
    const gem = await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body: { texts: ["one"], provider: "google", model: "gemini-embedding-001" } })
    expect(gem.body.result).toMatchObject({ provider: "google", usage: { estimated: true } })
    expect(gem.body.result.usage.promptTokens).toBeGreaterThan(0)
  })

  it("routes auto to an embedding model", async () => {
    const res = await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body: { texts: ["auto please"] } })
    expect(res.body.isError).toBe(false)
    expect(["openai", "google"]).toContain(res.body.result.provider)
  })

  it("embeds in the gateway's own process with provider local (DESIGN.md §7): no upstream, no cost, the embedder named", async () => {
    const sent = openai.requests.length + gemini.requests.length
    const res = await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body: { texts: ["the cat sat", "the cat sat", "stock prices fell"], provider: "local", model: "hash" } })
    expect(res.status).toBe(200)
    const r = res.body.result
    expect(r).toMatchObject({ provider: "local", model: "local:hash-256", dimensions: 256, costUSD: 0, costKnown: true })
    expect(r.embeddings).toHaveLength(3)
    expect(r.embeddings[0]).toEqual(r.embeddings[1])
    const norm = Math.hypot(...r.embeddings[2])
    expect(norm).toBeCloseTo(1, 3)
    expect(openai.requests.length + gemini.requests.length).toBe(sent)
    const refused = await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body: { texts: ["x"], provider: "local", model: "text-embedding-3-small" } })
    expect([refused.status, refused.body.message]).toEqual([422, expect.stringMatching(/^Provider local embeds with auto .* or hash/)])
  })

  it("refuses bad input", async () => {
    const cases: Array<[unknown, number]> = [
      [{}, 400],
      [{ texts: [] }, 400],
      [{ texts: "one" }, 400],
      [{ texts: [1, 2] }, 400],
      [{ texts: ["x"], model: "gpt-4o-mini" }, 422],
      [{ texts: ["x"], model: "nope" }, 404],
      [{ texts: ["x"], provider: "jina" }, 422],
      [{ texts: ["x"], provider: "cohere" }, 403]
    ]
    for (const [body, status] of cases) {
      const res = await call(server.url, "POST", "/v1/embeddings", { apiKey: user.apiKey, body })
      expect(res.status, JSON.stringify(body)).toBe(status)
      expect(res.body.isError).toBe(true)
    }
  })
})
