/**
 * The provider registry against the catalogue: every endpoint type the catalogue lists for a
 * provider is served by the code the routes run (routing accepts the provider for it, media has a
 * default model, jobs find their client), and every provider module belongs to a catalogued
 * provider that offers what it declares.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as Catalog from "../../src/Catalog/Catalog.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as OpenAiCompatible from "../../src/Providers/OpenAiCompatible.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import { endpointTypes, moduleIds, servedBy } from "../../src/Providers/Registry.ts"
import { endpointTypesOf } from "../../src/Providers/Served.ts"
import * as Routing from "../../src/Routing.ts"

const TOP_PLAN = "Enterprise" as const

/** Routing over a catalogue where every provider is configured. */
const routing = Effect.runSync(
  Effect.provide(
    Routing.Routing,
    Routing.layer.pipe(
      Layer.provide(Layer.merge(Catalog.layer, ProviderHealth.layer)),
      Layer.provide(GatewayConfig.layer({
        providerEnv: (id) => ({ apiKey: Option.some(Redacted.make(`key-${id}`)), baseUrl: Option.some(`https://${id}.example/v1`) }),
        // Providers whose credentials need more than a key (Served.credentials).
        setting: (name) => Option.fromNullable(({ WATSONX_PROJECT_ID: "project-1", LETTA_AGENT_ID: "agent-1", KLING_SECRET_KEY: "kling-secret", HEYGEN_VOICE_ID: "voice-1" } as Record<string, string>)[name])
      }))
    )
  )
)

const NO_MODEL = /has no catalogued (chat|embeddings|rerank) model/

describe("provider registry", () => {
  it("serves every endpoint type the catalogue lists, through the code the routes run", () => {
    let checked = 0
    for (const p of Catalog.data.providers) {
      const served = servedBy(p)
      for (const type of p.capabilities) {
        checked++
        if (type === "chat" || type === "embeddings" || type === "rerank") {
          // Routing accepts the provider; only a missing catalogued model may still refuse (issue 15's work).
          const found = routing.targets({ kind: type, provider: p.id, model: "auto", plan: TOP_PLAN, needsTools: false, contextTokens: 0 })
          if (!Array.isArray(found)) expect([p.id, type, (found as Routing.RoutingError).message]).toEqual([p.id, type, expect.stringMatching(NO_MODEL)])
          expect(served[type === "chat" ? "chat" : type === "embeddings" ? "embeddings" : "rerank"]).toBeDefined()
          continue
        }
        const chosen = Effect.runSync(Effect.either(routing.providerFor(type, p.id, TOP_PLAN)))
        expect([p.id, type, chosen._tag]).toEqual([p.id, type, "Right"])
        if (type === "images" || type === "moderation" || type === "speech" || type === "transcription") {
          expect([p.id, type, served[type]?.defaultModel]).toEqual([p.id, type, expect.any(String)])
        }
        if (type === "video") expect(served.video).toBeDefined()
        if (type === "memory") expect(served.memory).toBeDefined()
        if (type === "finetune") expect(served.fineTuning).toBeDefined()
      }
    }
    expect(checked).toBeGreaterThan(50)
  })

  it("lists no endpoint type a provider does not offer, and only what its declaration serves", () => {
    for (const p of Catalog.data.providers) {
      for (const type of p.capabilities) expect([p.id, p.offers.includes(type)]).toEqual([p.id, true])
      expect(p.capabilities).toEqual(endpointTypes(p))
      expect(endpointTypesOf(servedBy(p))).toEqual(expect.arrayContaining([...p.capabilities]))
    }
  })

  it("has modules only for catalogued providers, each offering what its module declares", () => {
    for (const id of moduleIds()) {
      const p = Catalog.data.providers.find((x) => x.id === id)
      expect([id, p !== undefined]).toEqual([id, true])
      const own = endpointTypesOf({ ...servedBy(p!), chat: undefined, embeddings: undefined, batchApi: undefined })
      for (const type of own) expect([id, type, p!.offers.includes(type)]).toEqual([id, type, true])
    }
    for (const id of Object.keys(OpenAiCompatible.providers)) {
      expect([id, Catalog.data.providers.find((x) => x.id === id)?.adapter]).toEqual([id, "openai"])
    }
  })

  it("refuses an endpoint type the upstream offers but aigw does not serve, saying so", () => {
    const unserved = Catalog.data.providers.find((p) => p.offers.includes("chat") && !p.capabilities.includes("chat"))!
    const found = routing.targets({ provider: unserved.id, model: "auto", plan: TOP_PLAN, needsTools: false, contextTokens: 0 })
    expect((found as Routing.RoutingError).message).toMatch(/has no chat completions adapter yet/)
  })
})
