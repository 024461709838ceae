/**
 * OpenAI-compatible providers that differ from the reference: what each sends (Mistral's field
 * names and stream options, Azure OpenAI's v1 and deployment URLs with the api-key header, local
 * servers without a key), against the OpenAI wire-format mock.
 */
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data, uncataloguedModel } from "../../src/Catalog/Catalog.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import { type MockUpstream, startOpenAiMock } from "../support/mockUpstreams.ts"
import { collect, complete, embed } from "../support/wires.ts"

const hi = [{ role: "user" as const, content: "hi" }]

describe("OpenAI-compatible quirks", () => {
  let mock: MockUpstream
  beforeAll(async () => {
    mock = await startOpenAiMock({ chunkDelayMs: 1 })
  })
  afterAll(() => mock.close())

  const target = (id: string, model: string, options: { key?: string; settings?: Record<string, string>; endpoint?: string } = {}): Target => {
    const entry = data.providers.find((p) => p.id === id)!
    const provider: ConfiguredProvider = {
      ...entry,
      endpoint: options.endpoint ?? mock.url,
      apiKey: options.key === undefined ? Option.none() : Option.some(Redacted.make(options.key)),
      settings: options.settings ?? {},
      configured: true,
      missing: undefined
    }
    return { provider, model: uncataloguedModel(id, model, "chat") }
  }

  it("Mistral: random_seed for seed, and no stream_options (it refuses unknown fields)", async () => {
    const t = target("mistral", "mistral-small-latest", { key: "k" })
    expect((await complete(t, { model: "mistral-small-latest", messages: hi, seed: 7 }))._tag).toBe("Right")
    const plain = mock.requests.at(-1)!.body as Record<string, unknown>
    expect(plain).toMatchObject({ random_seed: 7 })
    expect(plain).not.toHaveProperty("seed")
    expect((await collect(t, { model: "mistral-small-latest", messages: hi }))._tag).toBe("Right")
    const streamed = mock.requests.at(-1)!.body as Record<string, unknown>
    expect(streamed).toMatchObject({ stream: true })
    expect(streamed).not.toHaveProperty("stream_options")
  })

  it("Azure OpenAI: the v1 API with the deployment as model, and the api-key header", async () => {
    const t = target("azure-openai", "prod-gpt4o", { key: "az-key" })
    expect((await complete(t, { model: "prod-gpt4o", messages: hi, maxTokens: 9 }))._tag).toBe("Right")
    const sent = mock.requests.at(-1)!
    expect(sent.path).toBe("/v1/chat/completions")
    expect(sent.headers["api-key"]).toBe("az-key")
    expect(sent.headers.authorization).toBeUndefined()
    expect(sent.body).toMatchObject({ model: "prod-gpt4o", max_completion_tokens: 9 })
  })

  it("Azure OpenAI: deployment URLs with the api-version when AZURE_OPENAI_API_VERSION is set", async () => {
    // The deployment API sits under /openai: the mock's /v1 base stands in for it (a /v1 suffix is dropped).
    const base = mock.url.replace(/\/v1$/, "")
    const t = target("azure-openai", "prod gpt", { key: "az-key", settings: { AZURE_OPENAI_API_VERSION: "2024-10-21" }, endpoint: `${base}/v1` })
    await complete(t, { model: "prod gpt", messages: hi })
    const chat = mock.requests.at(-1)!
    expect(chat.path).toBe("/deployments/prod%20gpt/chat/completions")
    expect(chat.query).toEqual({ "api-version": "2024-10-21" })
    expect(chat.headers["api-key"]).toBe("az-key")
    await embed({ ...t, model: uncataloguedModel("azure-openai", "embed-dep", "embeddings") }, ["a"])
    const embedding = mock.requests.at(-1)!
    expect(embedding.path).toBe("/deployments/embed-dep/embeddings")
    expect(embedding.query).toEqual({ "api-version": "2024-10-21" })
  })

  it("local servers: configured without a key, and no Authorization header is sent", async () => {
    for (const id of ["ollama", "vllm", "lmstudio", "llamacpp"]) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(entry.baseUrl).toMatch(/^http:\/\/localhost:\d+\/v1$/)
      expect((await complete(target(id, "llama3.2"), { model: "llama3.2", messages: hi }))._tag).toBe("Right")
      expect(mock.requests.at(-1)!.headers.authorization).toBeUndefined()
      // With a key (a server started with --api-key), it is sent as a bearer token.
      await complete(target(id, "llama3.2", { key: "local-key" }), { model: "llama3.2", messages: hi })
      expect(mock.requests.at(-1)!.headers.authorization).toBe("Bearer local-key")
    }
  })
})
