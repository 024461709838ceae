/**
 * Read-only catalogue queries shared by the HTTP routes (/v1/models, /v1/models/{id},
 * /v1/providers, /v1/openserv/models, /v1/estimate) and the MCP tools, so both edges answer
 * from one implementation.
 */
import { Effect, Option, Schema } from "effect"
import { costOf, pricingNote } from "../Cost.ts"
import { NotFound } from "../Errors.ts"
import { routed, Routing, type RoutingError } from "../Routing.ts"
import type { Plan } from "../Plans.ts"
import { ProviderHealth } from "../Providers/ProviderHealth.ts"
import { notServed } from "../Providers/Registry.ts"
import { Catalog, type ModelEntry, modelDetail, modelView, openServView } from "./Catalog.ts"

/** Model capabilities a caller can filter on (a chat model's features, or its kind). */
export const ModelCapability = Schema.Literal("chat", "embeddings", "rerank", "tools", "vision")
export type ModelCapability = typeof ModelCapability.Type

/** The model catalogue (spec: `total` and `models`), optionally for one plan and one capability. */
export const listModels = (filter: { readonly plan?: Plan | undefined; readonly capability?: ModelCapability | undefined } = {}) =>
  Effect.map(Catalog, (c) => {
    const byPlan = filter.plan ? c.modelsFor(filter.plan) : c.models
    const byCapability = filter.capability === undefined ? byPlan : byPlan.filter((m) => {
      switch (filter.capability) {
        case "chat":
        case "embeddings":
        case "rerank":
          return m.kind === filter.capability
        case "tools":
          return m.kind === "chat" && m.supportsFunctions
        case "vision":
          return m.kind === "chat" && m.supportsVision
      }
    })
    const models = byCapability.map((m) => modelView(m, c.provider))
    return { total: models.length, models }
  })

/** A path's model id: percent-decoded where it decodes (ids with `/` may be sent encoded), else as sent. */
export const pathModelId = (s: string) => {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

/**
 * The catalogued model an id names, as a chat call names it: a catalogue id, or `provider/model` for
 * that provider's catalogued model (the OpenAI and Anthropic surfaces' model lookups).
 */
export const namedModel = (c: Effect.Effect.Success<typeof Catalog>, id: string): Option.Option<ModelEntry> => {
  const slash = id.indexOf("/")
  return Option.orElse(c.model(id), () =>
    slash > 0 ? Option.filter(c.model(id.slice(slash + 1)), (m) => m.provider === id.slice(0, slash)) : Option.none())
}

/** Full detail of one model. */
export const getModel = (id: string) =>
  Effect.flatMap(Catalog, (c) =>
    Option.match(c.model(id), {
      onNone: () => Effect.fail(new NotFound({ message: `Unknown model ${id}. See GET /v1/models.` })),
      onSome: (m) => Effect.succeed(modelDetail(m, c.provider))
    }))

/** All providers with minimum plan, endpoint types, configuration and live status. */
export const listProviders = Effect.gen(function*() {
  const c = yield* Catalog
  const health = yield* ProviderHealth
  const providers = c.providers.map((p) => ({
    id: p.id,
    name: p.name,
    adapter: p.adapter,
    // An operator's base URL carries no user, query or fragment: the start refuses one that does (Config.baseUrlProblem).
    baseUrl: p.endpoint,
    auth: p.auth,
    // What aigw serves through the provider (Providers/Registry.ts), and what the upstream offers.
    endpointTypes: p.capabilities,
    offers: p.offers,
    notServed: notServed(p),
    minPlan: p.minPlan,
    minPlanLabel: p.minPlan,
    configured: p.configured,
    status: health.status(p.id),
    models: c.modelsOf(p.id).map((m) => m.id),
    website: p.website
  }))
  return { total: providers.length, providers }
})

/** Chat models in the third-party (OpenServ-style) connector format. */
export const openServModels = Effect.map(Catalog, (c) => c.models.filter((m) => m.kind === "chat").map(openServView))

const TokenCount = Schema.Int.pipe(
  Schema.between(0, 100_000_000, { message: () => "token counts must be integers from 0 to 100000000" })
)

/** The cost-estimate request (POST /v1/estimate and gateway_estimate_cost). */
export const EstimateRequest = Schema.Struct({
  provider: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)).annotations({
    description: "Provider id, e.g. openai (see the provider catalogue)"
  }),
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
    description: "Model id of that provider, e.g. gpt-4o-mini (see the model catalogue)"
  }),
  promptTokens: TokenCount.annotations({ description: "Expected prompt (input) tokens" }),
  completionTokens: Schema.optionalWith(TokenCount.annotations({ description: "Expected completion (output) tokens; default 0" }), {
    default: () => 0
  })
})
export type EstimateRequest = typeof EstimateRequest.Type

const isAuto = (s: string) => s === "auto"

/**
 * Cost of a call from token counts and the catalogue's list prices (an alias or `provider/model`
 * resolves like a call's). `provider` may be `auto` (the spec's "provider id"): a named model is
 * looked up in every provider's catalogue. `model: "auto"` is priced as the model `auto` routing
 * would try first for the caller's plan and these token counts (of the named provider, or of any
 * under `auto`), and the note names it.
 */
export const estimateCost = (request: EstimateRequest, plan: Plan) =>
  Effect.flatMap(Catalog, (c): Effect.Effect<{ estimatedUSD: number; note: string }, RoutingError, Routing> => {
    const priced = (model: ModelEntry, picked = "") =>
      Effect.succeed({
        estimatedUSD: costOf(model, request.promptTokens, request.completionTokens),
        note: `${picked}${pricingNote(model, Option.match(c.provider(model.provider), { onNone: () => model.provider, onSome: (p) => p.name }))}`
      })
    if (!isAuto(request.provider) && Option.isNone(c.provider(request.provider))) {
      return Effect.fail(new NotFound({ message: `Unknown provider ${request.provider}. See GET /v1/providers.` }))
    }
    if (isAuto(request.model)) {
      return Effect.flatMap(Routing, (routing) =>
        Effect.flatMap(
          routed(routing.targets({ provider: request.provider, model: "auto", plan, needsTools: false, contextTokens: request.promptTokens + request.completionTokens })),
          ([first]) => priced(first!.model, `model auto: priced as ${first!.provider.id}/${first!.model.id}, the model auto routing tries first for plan ${plan} and these token counts. `)
        ))
    }
    const named = Option.getOrElse(c.alias(request.model), () => request.model)
    const slash = named.indexOf("/")
    const prefix = slash > 0 ? named.slice(0, slash) : ""
    const [owner, id] = isAuto(request.provider)
      ? (prefix !== "" && Option.isSome(c.provider(prefix)) && Option.isNone(c.model(named)) ? [prefix, named.slice(slash + 1)] : [undefined, named])
      : [request.provider, named.startsWith(`${request.provider}/`) ? named.slice(request.provider.length + 1) : named]
    const model = Option.filter(c.model(id), (m) => owner === undefined || m.provider === owner)
    if (Option.isNone(model) || model.value.unpriced) {
      return Effect.fail(
        new NotFound({
          message: `No price is known for model ${request.model} of provider ${request.provider}: it is not priced in the catalogue (GET /v1/models). ` +
            `Calls to it are forwarded and their usage recorded with the cost unknown (costKnown: false); set its prices with AIGW_MODELS to estimate and count its cost.`
        })
      )
    }
    return priced(model.value)
  })
