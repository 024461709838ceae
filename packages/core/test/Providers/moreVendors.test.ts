/**
 * Pinecone Inference (embeddings, rerank) and NLP Cloud (chatbot, embeddings) over the real
 * transport against mocks of their wire formats (support/mockMoreVendors.ts): the requests each
 * sends, the answers read back, refusals by name, hostile answers; and the page-extraction vendors
 * (Tavily, Exa, Firecrawl, Jina's Reader) listed as not serving `extract`, with the reason.
 */
import { Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { ChatRequest, Target } from "../../src/Providers/Chat.ts"
import { postJsonNow } from "../../src/Providers/internal/http.ts"
import { endpointTypes, notServed, servedBy } from "../../src/Providers/Registry.ts"
import { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { type MoreVendor, type MoreVendorMock, startMoreVendorMock, vectorOf } from "../support/mockMoreVendors.ts"
import { collect, complete, embed } from "../support/wires.ts"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

const KEY = "more-key"
const mocks = new Map<MoreVendor, MoreVendorMock>()

const targetOf = (vendor: MoreVendor, model: string, kind: "chat" | "embeddings" | "rerank", key = KEY): Target => {
  const entry = data.providers.find((p) => p.id === vendor)!
  return {
    provider: { ...entry, endpoint: mocks.get(vendor)!.url, apiKey: Option.some(Redacted.make(key)), configured: true, settings: {}, missing: undefined },
    model: uncataloguedModel(vendor, model, kind)
  }
}

const rerank = async (target: Target, query: string, documents: ReadonlyArray<string>, topN: number) => {
  const wire = servedBy(target.provider).rerank!
  const { body, headers, url } = wire.request(target, query, documents, topN)
  try {
    return wire.result(target.provider.id, await postJsonNow(target.provider.id, url, headers, body, new Cancel()), documents.length)
  } catch (e) {
    if (e instanceof UpstreamError) return e
    throw e
  }
}

beforeAll(async () => {
  mocks.set("pinecone", await startMoreVendorMock("pinecone", KEY))
  mocks.set("nlp-cloud", await startMoreVendorMock("nlp-cloud", KEY))
})
afterAll(async () => {
  for (const m of mocks.values()) await m.close()
})

describe("Pinecone Inference", () => {
  it("serves embeddings and rerank, as the catalogue offers", () => {
    expect(endpointTypes(data.providers.find((p) => p.id === "pinecone")!)).toEqual(["embeddings", "rerank"])
  })

  it("embeds passages with its key in Api-Key and the API version, reading data[].values and usage", async () => {
    const result = await embed(targetOf("pinecone", "multilingual-e5-large", "embeddings"), ["red apples", "green pears"])
    expect(result).toEqual(Either.right({ vectors: [vectorOf("red apples"), vectorOf("green pears")], promptTokens: 4 }))
    const sent = mocks.get("pinecone")!.requests.at(-1)!
    expect(sent.path).toBe("/embed")
    expect(sent.headers["api-key"]).toBe(KEY)
    expect(sent.headers["x-api-key"]).toBeUndefined()
    expect(sent.body).toEqual({ model: "multilingual-e5-large", parameters: { input_type: "passage", truncate: "END" }, inputs: [{ text: "red apples" }, { text: "green pears" }] })
  })

  it("reranks documents sent as {text}, best first, billed in rerank units", async () => {
    const documents = ["green pears", "red apples and plums", "red cars"]
    const result = await rerank(targetOf("pinecone", "bge-reranker-v2-m3", "rerank"), "red apples", documents, 2)
    expect(result).toEqual({ ranked: [{ index: 1, score: 1 }, { index: 2, score: 0.5 }], tokens: undefined, searchUnits: 1 })
    expect(servedBy({ id: "pinecone", adapter: "bespoke" }).rerank!.billing).toBe("searches")
    expect(mocks.get("pinecone")!.requests.at(-1)!.body).toEqual({
      model: "bge-reranker-v2-m3",
      query: "red apples",
      documents: documents.map((text) => ({ text })),
      top_n: 2,
      return_documents: false
    })
  })

  it("maps its error shape and a wrong key to a clean UpstreamError", async () => {
    const result = await embed(targetOf("pinecone", "multilingual-e5-large", "embeddings", "wrong"), ["a"])
    expect(Either.isLeft(result) && result.left).toMatchObject({ provider: "pinecone", status: 401 })
  })

  it("answers hostile replies (a sparse model's answer, bad JSON, wrong rerank indexes) with protocol errors", async () => {
    const mock = mocks.get("pinecone")!
    mock.rawNext(JSON.stringify({ data: [{ sparse_values: [0.1], sparse_indices: [3] }], usage: { total_tokens: 1 } }))
    const sparse = await embed(targetOf("pinecone", "pinecone-sparse-english-v0", "embeddings"), ["a"])
    expect(Either.isLeft(sparse) && sparse.left.message).toMatch(/embedding 0 is not a vector of 1 to 16384 finite numbers/)
    mock.rawNext("{not json")
    const bad = await embed(targetOf("pinecone", "multilingual-e5-large", "embeddings"), ["a"])
    expect(Either.isLeft(bad)).toBe(true)
    mock.rawNext(JSON.stringify({ data: [{ index: 7, score: 0.3 }] }))
    const wrong = await rerank(targetOf("pinecone", "bge-reranker-v2-m3", "rerank"), "q", ["a", "b"], 2)
    expect(wrong).toBeInstanceOf(UpstreamError)
  })
})

describe("NLP Cloud", () => {
  const chat = (messages: ChatRequest["messages"], more: Partial<ChatRequest> = {}): ChatRequest => ({ model: "finetuned-llama-3-70b", messages, ...more })
  const target = () => targetOf("nlp-cloud", "finetuned-llama-3-70b", "chat")
  const conversation: ChatRequest["messages"] = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hi" },
    { role: "assistant", content: "Hello!" },
    { role: "user", content: "Name a fruit." }
  ]

  it("serves chat and embeddings; classify and translate are listed as not served", () => {
    const p = data.providers.find((x) => x.id === "nlp-cloud")!
    expect(endpointTypes(p)).toEqual(["chat", "embeddings"])
    expect(notServed(p).map((n) => n.type)).toEqual(["classify", "translate"])
  })

  it("sends the conversation as input, context and history to the model's chatbot path, with its Token key", async () => {
    const result = await complete(target(), chat(conversation))
    expect(result).toEqual(Either.right({
      content: `finetuned-llama-3-70b answers "Name a fruit." after 1 turns (context: Be brief.)`,
      toolCalls: [],
      finishReason: "stop",
      usage: undefined
    }))
    const sent = mocks.get("nlp-cloud")!.requests.at(-1)!
    expect(sent.path).toBe("/v1/gpu/finetuned-llama-3-70b/chatbot")
    expect(sent.headers.authorization).toBe(`Token ${KEY}`)
    expect(sent.body).toEqual({ input: "Name a fruit.", context: "Be brief.", history: [{ input: "Hi", response: "Hello!" }] })
  })

  it("joins consecutive messages of one role into one turn", async () => {
    await complete(target(), chat([{ role: "user", content: "a" }, { role: "user", content: "b" }, { role: "assistant", content: "c" }, { role: "assistant", content: "d" }, { role: "user", content: "e" }]))
    expect(mocks.get("nlp-cloud")!.requests.at(-1)!.body).toEqual({ input: "e", history: [{ input: "a\n\nb", response: "c\n\nd" }] })
  })

  it("delivers a streamed call's answer (the API has no streaming) as one chunk", async () => {
    const result = await collect(target(), chat(conversation))
    expect(result).toEqual(Either.right([
      { _tag: "Text", text: `finetuned-llama-3-70b answers "Name a fruit." after 1 turns (context: Be brief.)` },
      { _tag: "Finish", reason: "stop" }
    ]))
  })

  it("a stream whose answer is not the chatbot's JSON fails with a protocol error", async () => {
    mocks.get("nlp-cloud")!.rawNext("{\"unexpected\": true}")
    const result = await collect(target(), chat(conversation))
    expect(Either.isLeft(result) && result.left.message).toMatch(/no response text/)
  })

  it("refuses by name what the chatbot API cannot carry", () => {
    const unsupported = servedBy({ id: "nlp-cloud", adapter: "bespoke" }).chat!.unsupported!
    const user = [{ role: "user" as const, content: "hi" }]
    expect(unsupported(chat(user, { tools: [{ name: "f", parameters: {} }] }))).toMatch(/^tools is not supported by the NLP Cloud chatbot/)
    expect(unsupported(chat(user, { responseFormat: { type: "json_object" } }))).toMatch(/^response_format json_object/)
    expect(unsupported(chat(user, { temperature: 0.2 }))).toMatch(/^temperature/)
    expect(unsupported(chat(user, { maxTokens: 10 }))).toMatch(/^max_tokens/)
    expect(unsupported(chat([{ role: "user", content: "", parts: [{ type: "image", url: "https://x/y.png" }] }]))).toMatch(/^image parts/)
    expect(unsupported(chat([...user, { role: "assistant", content: "ok" }]))).toMatch(/does not end with a user message/)
    expect(unsupported(chat(user, { extra: { logprobs: true } }))).toMatch(/^logprobs/)
    expect(unsupported(chat(conversation))).toBeUndefined()
  })

  it("embeds sentences on the model's embeddings path", async () => {
    const result = await embed(targetOf("nlp-cloud", "paraphrase-multilingual-mpnet-base-v2", "embeddings"), ["one", "two"])
    expect(result).toEqual(Either.right({ vectors: [vectorOf("one"), vectorOf("two")], promptTokens: undefined }))
    const sent = mocks.get("nlp-cloud")!.requests.at(-1)!
    expect(sent.path).toBe("/v1/gpu/paraphrase-multilingual-mpnet-base-v2/embeddings")
    expect(sent.body).toEqual({ sentences: ["one", "two"] })
  })

  it("maps its {detail} errors to a clean UpstreamError", async () => {
    const result = await complete(targetOf("nlp-cloud", "m", "chat", "wrong"), chat([{ role: "user", content: "hi" }]))
    expect(Either.isLeft(result) && result.left).toMatchObject({ provider: "nlp-cloud", status: 401 })
    expect(Either.isLeft(result) && result.left.message).toContain("Invalid token")
  })
})

describe("page-extraction vendors", () => {
  it.each(["tavily", "exa", "firecrawl", "jina"])("%s: extract is listed as not served, saying why", (id) => {
    const p = data.providers.find((x) => x.id === id)!
    expect(endpointTypes(p)).not.toContain("extract")
    const reason = notServed(p).find((n) => n.type === "extract")!.reason
    expect(reason).toMatch(/fetches web pages by URL/)
    expect(reason).toContain("POST /v1/extract")
  })
})
