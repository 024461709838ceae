/**
 * `auto` routing weighs every catalogue model against the caller's plan and the configured
 * providers. The reasons a model is passed over are errors only when one is answered: each error
 * costs a stack trace and a schema check, and `auto` passes over most of the catalogue on every call.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { beforeEach, describe, expect, it, vi } from "vitest"
import * as Catalog from "../../src/Catalog/Catalog.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as ProviderHealth from "../../src/Providers/ProviderHealth.ts"
import type { Target } from "../../src/Providers/Chat.ts"
import * as Routing from "../../src/Routing.ts"

/** How many routing errors were constructed (the error classes, counted). */
const made = vi.hoisted(() => ({ count: 0 }))
vi.mock("../../src/Errors.ts", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../src/Errors.ts")>()
  const counted = <C extends new(...args: Array<any>) => object>(Base: C): C =>
    class extends Base {
      constructor(...args: Array<any>) {
        super(...args)
        made.count++
      }
    }
  return { ...real, Forbidden: counted(real.Forbidden), NotFound: counted(real.NotFound), Unprocessable: counted(real.Unprocessable) }
})

// Only OpenAI configured: every other provider's models are passed over for want of a key.
const { routing } = Effect.runSync(
  Effect.provide(
    Effect.all({ routing: Routing.Routing }),
    Routing.layer.pipe(
      Layer.provideMerge(Layer.merge(Catalog.layer, ProviderHealth.layer)),
      Layer.provide(GatewayConfig.layer({
        providerEnv: (id) =>
          id === "openai"
            ? { apiKey: Option.some(Redacted.make("key-openai")), baseUrl: Option.some("https://openai.example/v1") }
            : { apiKey: Option.none(), baseUrl: Option.none() }
      }))
    )
  )
)

const needs = (over: Partial<Routing.ChatNeeds> = {}): Routing.ChatNeeds => ({
  provider: "auto",
  model: "auto",
  plan: "Free",
  needsTools: false,
  contextTokens: 10,
  ...over
})

describe("routing's reasons for passing a model over", () => {
  beforeEach(() => {
    made.count = 0
  })

  it("auto passes over the unconfigured providers' and the plan's excluded models without making an error", () => {
    const found = routing.targets(needs())
    expect(Array.isArray(found) && found.length > 0 && found.every((t) => t.provider.id === "openai")).toBe(true)
    expect(made.count).toBe(0)
    // The same with a provider named and tools needed: its models that cannot serve are passed over too.
    expect(Array.isArray(routing.targets(needs({ provider: "openai", needsTools: true })))).toBe(true)
    expect(made.count).toBe(0)
    // auto's candidates alone: none for a kind nothing configured serves (a rerank falls back to BM25), and no error.
    expect(routing.autoTargets(needs({ kind: "rerank" }))).toEqual([])
    expect(routing.autoTargets(needs()).map((t) => t.model.id)).toEqual((found as ReadonlyArray<Target>).map((t) => t.model.id))
    expect(made.count).toBe(0)
  })

  it("a refusal is still one error, naming why", () => {
    const refused = routing.targets(needs({ kind: "rerank" }))
    expect(Array.isArray(refused)).toBe(false)
    expect((refused as Routing.RoutingError).message).toMatch(/rerank/)
    expect(made.count).toBe(1)
    const unconfigured = routing.targets(needs({ provider: "mistral" }))
    expect((unconfigured as Routing.RoutingError).message).toMatch(/MISTRAL_API_KEY/)
    const tooLong = routing.targets(needs({ model: "gpt-4o-mini", contextTokens: 10_000_000 }))
    expect((tooLong as Routing.RoutingError).message).toMatch(/context window/)
    expect(made.count).toBe(3)
  })
})
