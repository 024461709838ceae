/**
 * Model resolution: a provider-named call forwards any model (uncatalogued: no price), `provider/model`
 * names the provider, aliases and operator models (AIGW_MODELS) resolve, `auto` keeps to priced
 * catalogue models, a provider with no catalogued model uses its documented default, and bad
 * operator entries stop the start with the entry named.
 */
import { Effect, Either, Layer, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as Catalog from "../../src/Catalog/Catalog.ts"
import { defaultModelData } from "../../src/Catalog/defaultModels.data.ts"
import { estimateCost } from "../../src/Catalog/Queries.ts"
import * as GatewayConfig from "../../src/Config.ts"
import { costKnown, costOf } from "../../src/Cost.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import * as Routing from "../../src/Routing.ts"

const configured = (options: Partial<GatewayConfig.GatewayOptions> = {}) =>
  GatewayConfig.layer({
    providerEnv: (id) => ({ apiKey: Option.some(Redacted.make(`key-${id}`)), baseUrl: Option.some(`https://${id}.example/v1`) }),
    ...options
  })

const services = (options: Partial<GatewayConfig.GatewayOptions> = {}) =>
  Effect.runSync(
    Effect.provide(
      Effect.all({ routing: Routing.Routing, catalog: Catalog.Catalog }),
      Routing.layer.pipe(Layer.provideMerge(Layer.merge(Catalog.layer, ProviderHealth.layer)), Layer.provide(configured(options)))
    )
  )

const needs = (model: string, provider = "auto", kind: "chat" | "embeddings" = "chat") => ({
  kind,
  provider,
  model,
  plan: "Enterprise" as const,
  needsTools: false,
  contextTokens: 10
})

const targetsOf = (found: ReturnType<Routing.Routing["Type"]["targets"]>) => {
  if (!Array.isArray(found)) throw new Error(`routing refused: ${(found as Routing.RoutingError).message}`)
  return found.map((t) => ({ provider: t.provider.id, model: t.model.id, priced: costKnown(t.model) }))
}

describe("model resolution", () => {
  const { catalog, routing } = services()

  it("forwards a model outside the catalogue when the provider is named, without a price", () => {
    expect(targetsOf(routing.targets(needs("o4-mini", "openai")))).toEqual([{ provider: "openai", model: "o4-mini", priced: false }])
    expect(targetsOf(routing.targets(needs("my-gpt4o-deployment", "azure-openai")))).toEqual([
      { provider: "azure-openai", model: "my-gpt4o-deployment", priced: false }
    ])
    // A slash in the model is part of the id when the provider is named.
    expect(targetsOf(routing.targets(needs("anthropic/claude-sonnet-4.5", "openrouter")))).toEqual([
      { provider: "openrouter", model: "anthropic/claude-sonnet-4.5", priced: false }
    ])
    const [target] = routing.targets(needs("o4-mini", "openai")) as ReadonlyArray<{ model: Catalog.ModelEntry }>
    expect(costOf(target!.model, 1000, 1000)).toBe(0)
  })

  it("holds another spelling of a catalogued model to that model's plan", () => {
    const on = (plan: "Free" | "Bronze" | "Silver" | "Gold") => (model: string, provider = "auto") => routing.targets({ ...needs(model, provider), plan })
    const free = on("Free")
    const silver = on("Silver")
    // gpt-5.5 and claude-opus-4-6 are Gold models: a Silver caller used to reach them as GPT-5.5 or a dated
    // snapshot, forwarded as uncatalogued models of a provider of a lower plan.
    for (const [model, provider, of] of [
      ["gpt-5.5", "openai", "gpt-5.5"],
      ["GPT-5.5", "openai", "gpt-5.5"],
      ["openai/GPT-5.5", "auto", "gpt-5.5"],
      ["gpt-5.5-2026-04-23", "openai", "gpt-5.5-2026-04-23"],
      ["gpt-5.5-latest", "openai", "gpt-5.5-latest"],
      ["anthropic/claude-opus-4-6-20260205", "auto", "claude-opus-4-6-20260205"],
      ["claude-opus-4-6@20260205", "anthropic", "claude-opus-4-6@20260205"],
      ["Claude-Opus-4-6", "anthropic", "claude-opus-4-6"],
      // A fine-tune of the model, also after a vendor path.
      ["ft:gpt-5.5:acme::abc123", "openai", "ft:gpt-5.5:acme::abc123"],
      ["openai/ft:GPT-5.5-2026-04-23:acme::abc123", "auto", "ft:GPT-5.5-2026-04-23:acme::abc123"],
      ["openai/ft:gpt-5.5:acme::x", "openrouter", "openai/ft:gpt-5.5:acme::x"],
      // The model after a vendor path on an aggregator.
      ["anthropic/claude-opus-4-6", "openrouter", "anthropic/claude-opus-4-6"]
    ] as const) {
      expect(silver(model, provider), model).toMatchObject({ _tag: "Forbidden", message: `Model ${of} needs plan Gold or higher (yours: Silver).` })
    }
    // Another case of a catalogued id is that model, priced; a snapshot is forwarded as named, unpriced.
    expect(targetsOf(on("Gold")("GPT-5.5", "openai"))).toEqual([{ provider: "openai", model: "gpt-5.5", priced: true }])
    expect(targetsOf(on("Gold")("gpt-5.5-2026-04-23", "openai"))).toEqual([{ provider: "openai", model: "gpt-5.5-2026-04-23", priced: false }])
    // A name that goes on with words is another model (xAI's cheap grok-4-fast beside its Gold grok-4):
    // forwarded at the provider's plan, as every uncatalogued model is.
    expect(targetsOf(on("Bronze")("grok-4-fast-reasoning", "xai"))).toEqual([{ provider: "xai", model: "grok-4-fast-reasoning", priced: false }])
    expect(targetsOf(silver("gpt-5.5-pro", "openai"))).toEqual([{ provider: "openai", model: "gpt-5.5-pro", priced: false }])
    expect(targetsOf(free("o4-mini", "openai"))).toEqual([{ provider: "openai", model: "o4-mini", priced: false }])
    expect(targetsOf(free("gpt-5.55", "openai"))).toEqual([{ provider: "openai", model: "gpt-5.55", priced: false }])
    expect(targetsOf(free("ft:o4-mini:acme::x1", "openai"))).toEqual([{ provider: "openai", model: "ft:o4-mini:acme::x1", priced: false }])
    // Characters no model id has are refused, not forwarded: white space, zero-width and look-alike characters.
    for (const model of [" gpt-5.5", "gpt-5.5 ", "openai/ gpt-5.5", "gpt-5.5\u200b", "gpt\u20105.5", "ｇｐｔ-5.5", "gpt-5.5\t"]) {
      expect(free(model, model.startsWith("openai/") ? "auto" : "openai"), JSON.stringify(model)).toMatchObject({
        _tag: "BadRequest",
        param: "model",
        message: expect.stringMatching(/holds a character no model id has/)
      })
    }
  })

  it("reads provider/model when no provider is named, and keeps catalogue prices for a catalogued model", () => {
    expect(targetsOf(routing.targets(needs("openrouter/anthropic/claude-sonnet-4.5")))).toEqual([
      { provider: "openrouter", model: "anthropic/claude-sonnet-4.5", priced: false }
    ])
    const catalogued = catalog.models.find((m) => m.provider === "openai" && m.kind === "chat")!
    expect(targetsOf(routing.targets(needs(`openai/${catalogued.id}`)))).toEqual([{ provider: "openai", model: catalogued.id, priced: true }])
  })

  it("reads provider/auto as the provider with model auto, and refuses a provider/ that names no model", () => {
    expect(targetsOf(routing.targets(needs("openai/auto")))).toEqual(targetsOf(routing.targets(needs("auto", "openai"))))
    expect(targetsOf(routing.targets(needs("openai/auto", "auto", "embeddings")))).toEqual(targetsOf(routing.targets(needs("auto", "openai", "embeddings"))))
    for (const model of ["openai/", "openai/ ", "openai/\t"]) {
      const refused = routing.targets(needs(model)) as Routing.RoutingError
      expect(refused).toMatchObject({ _tag: "BadRequest", param: "model", message: expect.stringMatching(/names no model after its provider: name one, or openai\/auto/) })
    }
    // With the provider named, the whole name is the upstream's model (an OpenRouter id has a slash of its own).
    expect(targetsOf(routing.targets(needs("openai/auto", "openrouter")))).toEqual([{ provider: "openrouter", model: "openai/auto", priced: false }])
  })

  it("refuses an unknown model without a provider, saying how to name one, and an unknown provider", () => {
    const unknown = routing.targets(needs("gpt-4.1-nano")) as Routing.RoutingError
    expect(unknown._tag).toBe("NotFound")
    expect(unknown.message).toMatch(/Unknown model gpt-4.1-nano.*name its provider/)
    const badProvider = routing.targets(needs("x", "no-such-provider")) as Routing.RoutingError
    expect(badProvider.message).toMatch(/Unknown provider no-such-provider/)
  })

  it("never picks an unpriced model for auto, and uses a provider's documented default when it has no catalogued model", () => {
    const auto = targetsOf(routing.targets(needs("auto")))
    expect(auto.length).toBeGreaterThan(3)
    expect(auto.every((t) => t.priced)).toBe(true)
    const [id, defaults] = Object.entries(defaultModelData).find(([, d]) => d.chat !== undefined)!
    expect(targetsOf(routing.targets(needs("auto", id)))).toEqual([{ provider: id, model: defaults.chat, priced: false }])
  })

  it("resolves aliases and operator models; a priced operator model joins auto routing", () => {
    const { catalog: c, routing: r } = services({
      models: Option.some(JSON.stringify([
        { id: "house-llama", provider: "groq", inputPer1kUSD: 0.00001, outputPer1kUSD: 0.00002, quality: 5 },
        { id: "my-deployment", provider: "azure-openai", kind: "chat" }
      ])),
      modelAliases: Option.some(JSON.stringify({ fast: "house-llama", router: "openrouter/openai/gpt-4.1-nano" }))
    })
    expect(targetsOf(r.targets(needs("fast")))).toEqual([{ provider: "groq", model: "house-llama", priced: true }])
    expect(targetsOf(r.targets(needs("router")))).toEqual([{ provider: "openrouter", model: "openai/gpt-4.1-nano", priced: false }])
    expect(targetsOf(r.targets(needs("my-deployment")))).toEqual([{ provider: "azure-openai", model: "my-deployment", priced: false }])
    expect(targetsOf(r.targets({ ...needs("auto"), preference: "cost" }))[0]).toEqual({ provider: "groq", model: "house-llama", priced: true })
    expect(Option.getOrThrow(c.model("house-llama")).pricingSource).toMatch(/^https:/)
  })

  it("lets an operator override a catalogued model's fields", () => {
    const base = catalog.models.find((m) => m.kind === "chat")!
    const { catalog: c } = services({ models: Option.some(JSON.stringify([{ id: base.id, minPlan: "Gold", inputPer1kUSD: 1, outputPer1kUSD: 2 }])) })
    expect(Option.getOrThrow(c.model(base.id))).toMatchObject({ provider: base.provider, minPlan: "Gold", inputPer1kUSD: 1, outputPer1kUSD: 2 })
  })

  it("stops the start with the bad entry named", () => {
    const failure = (options: Partial<GatewayConfig.GatewayOptions>) =>
      Effect.runSync(Effect.flip(Effect.provide(Catalog.Catalog, Catalog.layer.pipe(Layer.provide(configured(options)))))).message
    expect(failure({ models: Option.some("[{") })).toMatch(/AIGW_MODELS is not valid JSON/)
    // A value's text around the mistake (a key written without quotes) is not quoted in the line.
    const unquoted = failure({ models: Option.some('[{"id":"x","provider":"openai","note": sk-live-0123456789}]') })
    expect(unquoted).toMatch(/AIGW_MODELS is not valid JSON \(Unexpected token\)/)
    expect(unquoted).not.toContain("sk-live")
    expect(unquoted).not.toContain("'s'")
    expect(failure({ models: Option.some(JSON.stringify([{ id: "x", provider: "nope" }])) })).toMatch(/AIGW_MODELS entry 1 \("x"\): provider "nope" is not catalogued/)
    expect(failure({ models: Option.some(JSON.stringify([{ id: "x" }])) })).toMatch(/entry 1 \("x"\): provider is required/)
    expect(failure({ models: Option.some(JSON.stringify([{ id: "x", provider: "openai", inputPer1kUSD: 1 }])) })).toMatch(/both inputPer1kUSD and outputPer1kUSD/)
    expect(failure({ models: Option.some(JSON.stringify([{ id: "x", provider: "openai", colour: "red" }])) })).toMatch(/entry 1 \("x"\).*colour/)
    expect(failure({ modelAliases: Option.some(JSON.stringify({ a: "no-such-model" })) })).toMatch(/AIGW_MODEL_ALIASES "a": "no-such-model" is neither/)
    expect(failure({ modelAliases: Option.some(JSON.stringify({ auto: "openai/x" })) })).toMatch(/already a model name/)
  })

  it("estimates a catalogued model and says clearly when there is no price; provider and model may be auto", () => {
    const { catalog, routing } = services()
    const run = <A, E>(e: Effect.Effect<A, E, Catalog.Catalog | Routing.Routing>) =>
      Effect.runSync(Effect.either(e.pipe(Effect.provideService(Catalog.Catalog, catalog), Effect.provideService(Routing.Routing, routing))))
    const base = catalog.models.find((m) => m.kind === "chat")!
    const named = run(estimateCost({ provider: base.provider, model: base.id, promptTokens: 1000, completionTokens: 0 }, "Free"))
    expect(Either.isRight(named)).toBe(true)
    const unpriced = run(estimateCost({ provider: "openai", model: "o4-mini", promptTokens: 1000, completionTokens: 0 }, "Free"))
    expect(Either.isLeft(unpriced) && unpriced.left).toMatchObject({ _tag: "NotFound", message: expect.stringMatching(/No price is known for model o4-mini.*AIGW_MODELS/) })
    // The spec's "provider id" takes auto: a named model is found in its own provider's catalogue.
    expect(run(estimateCost({ provider: "auto", model: base.id, promptTokens: 1000, completionTokens: 0 }, "Free"))).toEqual(named)
    expect(run(estimateCost({ provider: "auto", model: `${base.provider}/${base.id}`, promptTokens: 1000, completionTokens: 0 }, "Free"))).toEqual(named)
    // model auto: the model auto routing tries first for the plan, named in the note.
    const first = (routing.targets({ provider: "openai", model: "auto", plan: "Free", needsTools: false, contextTokens: 1500 }) as ReadonlyArray<{ readonly model: { readonly id: string } }>)[0]!.model.id
    const auto = run(estimateCost({ provider: "openai", model: "auto", promptTokens: 1000, completionTokens: 500 }, "Free"))
    expect(Either.getOrThrow(auto).note).toMatch(new RegExp(`^model auto: priced as openai/${first.replace(/\./g, "\\.")}, the model auto routing tries first for plan Free`))
    expect(Either.getOrThrow(auto).estimatedUSD).toBe(costOf(catalog.models.find((m) => m.id === first && m.provider === "openai")!, 1000, 500))
    expect(Either.isRight(run(estimateCost({ provider: "auto", model: "auto", promptTokens: 10, completionTokens: 0 }, "Gold")))).toBe(true)
    const unknown = run(estimateCost({ provider: "nope", model: "auto", promptTokens: 10, completionTokens: 0 }, "Free"))
    expect(Either.isLeft(unknown) && unknown.left._tag).toBe("NotFound")
  })
})
