import { describe, expect, it } from "vitest"
import { data, validate } from "../../src/Catalog/Catalog.ts"
import { modelData } from "../../src/Catalog/models.data.ts"
import { providerData } from "../../src/Catalog/providers.data.ts"

describe("catalogue data", () => {
  it("validates: 103 providers, at least 23 models over several providers", () => {
    expect(data.providers.length).toBe(103)
    expect(data.models.length).toBeGreaterThanOrEqual(23)
    expect(new Set(data.models.map((m) => m.provider)).size).toBeGreaterThanOrEqual(8)
    for (const id of ["openai", "anthropic", "google", "mistral", "groq", "together-ai"]) {
      expect(data.providers.some((p) => p.id === id)).toBe(true)
    }
  })
  it("rejects a bad entry with its problem named", () => {
    const broken = [...providerData, { ...providerData[0], id: "Bad Id" }]
    expect(() => validate(broken, modelData)).toThrow(/id/)
    expect(() => validate([...providerData, providerData[0]], modelData)).toThrow(/duplicate provider id openai/)
    expect(() => validate(providerData, [...modelData, { ...modelData[0], id: "x", provider: "nope" }])).toThrow(/unknown provider nope/)
    expect(() => validate(providerData, [{ ...modelData[0], inputPer1kUSD: -1 }])).toThrow()
  })
  it("every chat model's price is positive; embedding and rerank models have no output price", () => {
    for (const m of data.models) {
      expect(m.inputPer1kUSD).toBeGreaterThan(0)
      if (m.kind === "embeddings" || m.kind === "rerank") expect(m.outputPer1kUSD).toBe(0)
      else expect(m.outputPer1kUSD).toBeGreaterThan(0)
    }
  })
})

describe("GET /v1/providers' baseUrl", () => {
  it("shows an operator's base URL, which can carry no user, password, query or fragment", async () => {
    const { Effect, Exit, Layer, Option, Redacted } = await import("effect")
    const Catalog = await import("../../src/Catalog/Catalog.ts")
    const { listProviders } = await import("../../src/Catalog/Queries.ts")
    const GatewayConfig = await import("../../src/Config.ts")
    const ProviderHealth = await import("../../src/Providers/ProviderHealth.ts")
    const listing = (baseUrl: string) => {
      const config = GatewayConfig.layer({
        providerEnv: (id) => ({ apiKey: Option.some(Redacted.make(`key-${id}`)), baseUrl: id === "openai" ? Option.some(baseUrl) : Option.none() })
      })
      return Effect.runPromiseExit(Effect.provide(listProviders, Layer.merge(Catalog.layer, ProviderHealth.layer).pipe(Layer.provide(config))))
    }
    const listed = await listing("http://10.0.0.5:8080/v1")
    if (!Exit.isSuccess(listed)) throw new Error("expected the listing")
    expect(listed.value.providers.find((p) => p.id === "openai")!.baseUrl).toBe("http://10.0.0.5:8080/v1")
    // Once listed without them; now the start refuses them (StartupError.test.ts), so none is ever shown.
    expect(Exit.isFailure(await listing("http://user:s3cr3t@10.0.0.5:8080/v1?token=abc#frag"))).toBe(true)
  })
})

describe("GatewayConfig.providersFromEnv (embedding)", () => {
  it("configures the providers an environment names, as the hosts read them; an empty value is unset", async () => {
    const { Effect, Layer } = await import("effect")
    const Catalog = await import("../../src/Catalog/Catalog.ts")
    const GatewayConfig = await import("../../src/Config.ts")
    const env = { OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: "http://127.0.0.1:9/v1", TOGETHER_AI_API_KEY: "", GROQ_API_KEY: "gsk" }
    const catalog = await Effect.runPromise(Effect.provide(Catalog.Catalog, Catalog.layer.pipe(Layer.provide(GatewayConfig.layer({ ...GatewayConfig.providersFromEnv(env) })))))
    const configured = catalog.providers.filter((p) => p.configured).map((p) => p.id)
    expect(configured).toContain("openai")
    expect(configured).toContain("groq")
    expect(configured).not.toContain("together-ai")
    expect(catalog.providers.find((p) => p.id === "openai")!.endpoint).toBe("http://127.0.0.1:9/v1")
    // GatewayConfig.layer alone configures none (tests stay off the network).
    const bare = await Effect.runPromise(Effect.provide(Catalog.Catalog, Catalog.layer.pipe(Layer.provide(GatewayConfig.layer()))))
    expect(bare.providers.filter((p) => p.configured).map((p) => p.id)).not.toContain("openai")
    expect(bare.providers.filter((p) => p.configured).map((p) => p.id)).not.toContain("groq")
  })
})
