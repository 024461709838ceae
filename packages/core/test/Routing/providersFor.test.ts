/**
 * Provider choice for capabilities served by dedicated clients: a named provider alone (or its
 * refusal), `auto` as every usable provider ranked by the plan's preference with circuit-open
 * providers tried last.
 */
import { Effect, Either, Layer, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as Catalog from "../../src/Catalog/Catalog.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import * as Routing from "../../src/Routing.ts"

/** Every provider configured (a key and a base URL), so `auto` may consider all of them. */
const services = (keys = true) =>
  Effect.runSync(
    Effect.provide(
      Effect.all({ routing: Routing.Routing, catalog: Catalog.Catalog, health: ProviderHealth.ProviderHealth }),
      Routing.layer.pipe(
        Layer.provideMerge(Layer.merge(Catalog.layer, ProviderHealth.layer)),
        Layer.provide(GatewayConfig.layer({
          providerEnv: (id) => ({ apiKey: keys ? Option.some(Redacted.make(`key-${id}`)) : Option.none(), baseUrl: Option.some(`https://${id}.example/v1`) })
        }))
      )
    )
  )

const ids = (found: Effect.Effect<ReadonlyArray<Catalog.ConfiguredProvider>, unknown>) => Effect.runSync(found).map((p) => p.id)
const refusal = <E extends { readonly message: string }>(found: Effect.Effect<unknown, E>): E => {
  const result = Effect.runSync(Effect.either(found))
  if (Either.isRight(result)) throw new Error("expected a refusal")
  return result.left
}

describe("providersFor", () => {
  it("gives a named provider alone, and refuses an unknown or unfit one", () => {
    const { routing } = services()
    expect(ids(routing.providersFor("images", "xai", "Enterprise"))).toEqual(["xai"])
    expect(refusal(routing.providersFor("images", "nope", "Enterprise"))._tag).toBe("NotFound")
    expect(refusal(routing.providersFor("images", "anthropic", "Enterprise")).message).toMatch(/cannot serve images/)
  })

  it("gives every configured provider that serves the capability under auto, providerFor being the first", () => {
    const { catalog, routing } = services()
    const serving = catalog.providers.filter((p) => p.capabilities.includes("images") && p.configured).map((p) => p.id)
    const auto = ids(routing.providersFor("images", "auto", "Enterprise"))
    expect(serving.length).toBeGreaterThan(1)
    expect([...auto].sort()).toEqual([...serving].sort())
    // No image model is catalogued: the catalogue order stands.
    expect(auto).toEqual(serving)
    expect(Effect.runSync(routing.providerFor("images", "auto", "Enterprise")).id).toBe(auto[0])
  })

  it("ranks by the plan's preference over the providers' catalogued models of the kind", () => {
    const { catalog, routing } = services()
    const models = (id: string) => catalog.modelsOf(id).filter((m) => m.kind === "embeddings" && !m.unpriced)
    const cheapest = (id: string) => Math.min(...models(id).map((m) => m.inputPer1kUSD + m.outputPer1kUSD))
    const best = (id: string) => Math.max(...models(id).map((m) => m.quality))
    const byCost = ids(routing.providersFor("embeddings", "auto", "Free"))
    const byQuality = ids(routing.providersFor("embeddings", "auto", "Enterprise"))
    const ranked = (order: ReadonlyArray<string>) => order.filter((id) => models(id).length > 0)
    expect(ranked(byCost).length).toBeGreaterThan(1)
    // Providers with a priced model of the kind come first; the rest keep catalogue order.
    expect(byCost.slice(0, ranked(byCost).length)).toEqual(ranked(byCost))
    const prices = ranked(byCost).map(cheapest)
    expect(prices).toEqual([...prices].sort((a, b) => a - b))
    const qualities = ranked(byQuality).map(best)
    expect(qualities).toEqual([...qualities].sort((a, b) => b - a))
    expect(byQuality).not.toEqual(byCost)
  })

  it("tries circuit-open providers after every other one under auto, and still uses one that is named", () => {
    const { health, routing } = services()
    const before = ids(routing.providersFor("images", "auto", "Enterprise"))
    const [first, second] = before
    for (let i = 0; i < ProviderHealth.FAILURE_THRESHOLD; i++) health.record(first!, false)
    const auto = ids(routing.providersFor("images", "auto", "Enterprise"))
    expect(auto).toEqual([...before.slice(1), first])
    expect(auto[0]).toBe(second)
    expect(ids(routing.providersFor("images", first!, "Enterprise"))).toEqual([first])
  })

  it("never answers a refusal because circuits are open: with every provider cooling down, auto tries them all in their order", () => {
    const { health, routing } = services()
    const before = ids(routing.providersFor("moderation", "auto", "Enterprise"))
    for (const id of before) for (let i = 0; i < ProviderHealth.FAILURE_THRESHOLD; i++) health.record(id, false)
    expect(ids(routing.providersFor("moderation", "auto", "Enterprise"))).toEqual(before)
    // Chat's auto alike: the circuit-open provider's models after the others', none left out.
    const fresh = services()
    const chat = () => (fresh.routing.targets({ provider: "auto", model: "auto", plan: "Free", needsTools: false, contextTokens: 10 }) as ReadonlyArray<Target>)
      .map((t) => `${t.provider.id}/${t.model.id}`)
    const all = chat()
    const cooling = all[0]!.split("/")[0]!
    for (let i = 0; i < ProviderHealth.FAILURE_THRESHOLD; i++) fresh.health.record(cooling, false)
    const theirs = all.filter((t) => t.startsWith(`${cooling}/`))
    expect(chat()).toEqual([...all.filter((t) => !t.startsWith(`${cooling}/`)), ...theirs])
  })

  it("says what to use for provider local where the gateway's own process serves nothing: the configured providers, else the keys to set", () => {
    expect(refusal(services().routing.providersFor("moderation", "local", "Enterprise")).message)
      .toMatch(/^Provider local \(the gateway's own process\) does not serve moderation: it needs a model upstream; use provider auto or one of the configured: .*openai/)
    expect(refusal(services(false).routing.providersFor("moderation", "local", "Enterprise")).message)
      .toMatch(/^Provider local \(the gateway's own process\) does not serve moderation: it needs a model upstream; set one of .*OPENAI_API_KEY/)
  })

  it("refuses auto with what to configure when no provider can serve", () => {
    const { routing } = services(false)
    expect(refusal(routing.providersFor("images", "auto", "Enterprise")).message).toMatch(/^No images provider is configured for plan Enterprise: set one of .*OPENAI_API_KEY/)
  })

  it("says the plan, not the keys, when the providers configured for a capability are all above the caller's plan", () => {
    const refused = refusal(services().routing.providersFor("video", "auto", "Free"))
    expect(refused._tag).toBe("Forbidden")
    expect(refused.message).toMatch(/^The video providers configured here \(.*luma: plan Gold.*\) need a higher plan than yours \(Free\)\.$/)
  })
})
