/**
 * Pinecone Inference and NLP Cloud end to end through the node host, each against a mock of its
 * API (packages/core/test/support/mockMoreVendors.ts): POST /v1/rerank and /v1/embeddings through
 * Pinecone, POST /v1/complete (plain and streamed) through NLP Cloud's chatbot API with a refusal
 * by name, and GET /v1/providers saying why the page-extraction vendors do not serve `extract`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MoreVendorMock, startMoreVendorMock } from "../../../packages/core/test/support/mockMoreVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

describe("Pinecone and NLP Cloud", () => {
  let pinecone: MoreVendorMock
  let nlpCloud: MoreVendorMock
  let server: RunningServer
  let user: TestAvatar
  const post = (path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })

  beforeAll(async () => {
    ;[pinecone, nlpCloud] = await Promise.all([startMoreVendorMock("pinecone", "pc-e2e"), startMoreVendorMock("nlp-cloud", "nlp-e2e")])
    server = await startServer({
      ...adminEnv,
      PINECONE_API_KEY: "pc-e2e",
      PINECONE_BASE_URL: pinecone.url,
      NLP_CLOUD_API_KEY: "nlp-e2e",
      NLP_CLOUD_BASE_URL: nlpCloud.url
    })
    user = await signUp(server, "morevendors")
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
    expect(plan.status).toBe(200)
  })
  afterAll(async () => {
    await server?.stop()
    await Promise.all([pinecone?.close(), nlpCloud?.close()])
  })

  it("reranks through Pinecone: its ranking in the gateway's result, documents sent as {text} with its key in Api-Key", async () => {
    const documents = ["green pears", "red apples and plums"]
    const res = await post("/v1/rerank", { provider: "pinecone", model: "bge-reranker-v2-m3", query: "red apples", documents, topN: 2 })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "pinecone", model: "bge-reranker-v2-m3" })
    expect(res.body.result.results.map((r: { index: number; document: string }) => [r.index, r.document])).toEqual([[1, documents[1]], [0, documents[0]]])
    const sent = pinecone.requests.at(-1)!
    expect(sent.headers["api-key"]).toBe("pc-e2e")
    expect(sent.body).toMatchObject({ documents: documents.map((text) => ({ text })), top_n: 2 })
  })

  it("embeds through Pinecone with its default model when none is named", async () => {
    const res = await post("/v1/embeddings", { provider: "pinecone", texts: ["a", "b"] })
    expect(res.status).toBe(200)
    expect(res.body.result.embeddings).toHaveLength(2)
    expect(pinecone.requests.at(-1)!.body).toMatchObject({ model: "multilingual-e5-large", inputs: [{ text: "a" }, { text: "b" }] })
  })

  it("completes through NLP Cloud's chatbot API, plain and streamed", async () => {
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello!" }, { role: "user", content: "Name a fruit." }]
    const res = await post("/v1/complete", { provider: "nlp-cloud", model: "finetuned-llama-3-70b", messages })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ provider: "nlp-cloud", model: "finetuned-llama-3-70b", content: `finetuned-llama-3-70b answers "Name a fruit." after 1 turns (context: Be brief.)` })
    expect(nlpCloud.requests.at(-1)!.path).toBe("/v1/gpu/finetuned-llama-3-70b/chatbot")
    const stream = await fetch(`${server.url}/v1/complete/stream`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": user.apiKey },
      body: JSON.stringify({ provider: "nlp-cloud", model: "finetuned-llama-3-70b", messages })
    })
    const text = await stream.text()
    expect(stream.status).toBe(200)
    expect(text).toContain("answers \\\"Name a fruit.\\\"")
    expect(text).toContain('"done":true')
    expect(text).not.toContain('"error"')
  })

  it("refuses what NLP Cloud's chatbot cannot carry with a 400 naming it, before calling it", async () => {
    const before = nlpCloud.requests.length
    const res = await post("/v1/complete", { provider: "nlp-cloud", model: "finetuned-llama-3-70b", messages: [{ role: "user", content: "hi" }], temperature: 0.3 })
    expect(res.status).toBe(400)
    expect(res.body.message).toContain("temperature is not supported by the NLP Cloud chatbot")
    expect(nlpCloud.requests.length).toBe(before)
  })

  it("lists extract as not served for Tavily, Exa and Firecrawl, saying why", async () => {
    const res = await call(server.url, "GET", "/v1/providers", { apiKey: user.apiKey })
    expect(res.status).toBe(200)
    for (const id of ["tavily", "exa", "firecrawl"]) {
      const p = res.body.result.providers.find((x: { id: string }) => x.id === id)
      expect(p.endpointTypes).toEqual([])
      expect(p.notServed).toEqual([{ type: "extract", reason: expect.stringContaining("fetches web pages by URL") }])
    }
  })
})
