/**
 * Provider and model selection for a capability call. A named provider or model is used as
 * named or refused with a clear error; `auto` filters the catalogue and ranks by the plan's
 * preference. See docs/routing.md.
 */
import { Context, Effect, Layer, Option } from "effect"
import { Catalog, type ConfiguredProvider, type EndpointType, type ModelEntry, uncataloguedModel } from "./Catalog/Catalog.ts"
import { defaultModelData } from "./Catalog/defaultModels.data.ts"
import { envPrefix } from "./Config.ts"
import { BadRequest, Forbidden, type GatewayError, NotFound, Unprocessable } from "./Errors.ts"
import { type Plan, planAllows } from "./Plans.ts"
import type { ChatMessage, Target } from "./Providers/Chat.ts"
import { ProviderHealth } from "./Providers/ProviderHealth.ts"
import { countMessages, messageTokensNow, promptCharacters } from "./Tokens.ts"

export type Preference = "cost" | "balanced" | "quality"

/** The model kinds routing serves. */
export type ModelKind = ModelEntry["kind"]

const labels: Record<ModelKind, string> = { chat: "chat completions", embeddings: "embeddings", rerank: "reranking" }

export interface ChatNeeds {
  /** Default "chat". */
  readonly kind?: ModelKind | undefined
  readonly provider: string
  readonly model: string
  readonly plan: Plan
  readonly needsTools: boolean
  /** Estimated prompt tokens plus requested completion tokens (the prompt's as `promptTokensNow` counts them). */
  readonly contextTokens: number
  readonly maxTokens?: number | undefined
  readonly preference?: Preference | undefined
  /** Lowest catalogue quality (1-5) a model may have: e.g. a crew role's floor (Capabilities/Orchestration.ts). */
  readonly minQuality?: number | undefined
}

/** Why routing found no target. */
export type RoutingError = BadRequest | NotFound | Forbidden | Unprocessable

/**
 * Why a provider or model cannot serve a call, as the error to answer with, made only when it is
 * answered: `auto` asks it of every catalogue model, and an error costs a stack trace and a schema
 * check each.
 */
type Problem = () => RoutingError

/** Routing's answer as an Effect: the targets, or a failure with the routing error. */
export const routed = <E extends GatewayError>(found: ReadonlyArray<Target> | E): Effect.Effect<ReadonlyArray<Target>, E> =>
  Array.isArray(found) ? Effect.succeed(found) : Effect.fail(found as E)

export interface Fallback {
  readonly provider: string
  readonly model: string
  readonly error: string
}

/** What the engine's `firstSuccessEffect` tries (Engine/ProviderCalls.ts): a provider and the model it is asked for. */
export interface FallbackCandidate {
  readonly provider: { readonly id: string }
  readonly model: string
}

/** The candidate that answered, its answer, and the failures before it. */
export interface Attempted<C, A> {
  readonly candidate: C
  readonly value: A
  readonly fallbacks: ReadonlyArray<Fallback>
}

export const preferenceOf = (plan: Plan): Preference =>
  plan === "Free" || plan === "Bronze" ? "cost" : plan === "Silver" ? "balanced" : "quality"

const price = (m: ModelEntry) => m.inputPer1kUSD + m.outputPer1kUSD

export const rank = (models: ReadonlyArray<ModelEntry>, preference: Preference): Array<ModelEntry> =>
  [...models].sort((a, b) => {
    switch (preference) {
      case "cost":
        return price(a) - price(b) || b.quality - a.quality
      case "balanced":
        return price(a) / a.quality - price(b) / b.quality || b.quality - a.quality
      case "quality":
        return b.quality - a.quality || price(a) - price(b)
    }
  })

/** The refusal of a model asked for a kind of call it is not for (a chat model for images). */
export const wrongKind = (model: Pick<ModelEntry, "id" | "kind">, wanted: string) =>
  new Unprocessable({ message: `Model ${model.id} is ${/^[aeiou]/.test(model.kind) ? "an" : "a"} ${model.kind} model, not a ${wanted} model.` })

const isAuto = (s: string) => s === "" || s === "auto"

const makeService = Effect.gen(function*() {
  const catalog = yield* Catalog
  const health = yield* ProviderHealth

  /** Why a provider cannot serve this kind of call for this caller, if it cannot (see `Problem`). */
  const providerProblem = (p: ConfiguredProvider, plan: Plan, kind: ModelKind): Problem | undefined => {
    if (!planAllows(plan, p.minPlan)) return () => new Forbidden({ message: `Provider ${p.id} needs plan ${p.minPlan} or higher (yours: ${plan}).` })
    // `capabilities`: what aigw serves through the provider (Providers/Registry.ts); `offers`: what the upstream has.
    if (!p.offers.includes(kind)) return () => new Unprocessable({ message: `Provider ${p.id} does not offer ${labels[kind]}.` })
    if (!p.capabilities.includes(kind)) {
      return () => new Unprocessable({ message: `Provider ${p.id} speaks its own (${p.adapter}) protocol, which has no ${labels[kind]} adapter yet.` })
    }
    const missing = p.missing
    if (missing !== undefined) return () => new Unprocessable({ message: missing })
    return undefined
  }

  const modelProblem = (m: ModelEntry, needs: ChatNeeds): Problem | undefined => {
    const kind = needs.kind ?? "chat"
    if (m.kind !== kind) return () => wrongKind(m, kind)
    if (!planAllows(needs.plan, m.minPlan)) return () => new Forbidden({ message: `Model ${m.id} needs plan ${m.minPlan} or higher (yours: ${needs.plan}).` })
    if (needs.needsTools && !m.supportsFunctions) return () => new Unprocessable({ message: `Model ${m.id} does not support tools.` })
    if (needs.minQuality !== undefined && m.quality < needs.minQuality) {
      return () => new Unprocessable({ message: `Model ${m.id} has quality ${m.quality}, below the ${needs.minQuality} asked for.` })
    }
    if (needs.maxTokens !== undefined && m.maxOutputTokens > 0 && needs.maxTokens > m.maxOutputTokens) {
      return () => new Unprocessable({ message: `maxTokens ${needs.maxTokens} exceeds ${m.id}'s limit of ${m.maxOutputTokens} completion tokens.` })
    }
    if (needs.contextTokens > m.contextWindow) {
      return () => new Unprocessable({ message: `The request needs about ${needs.contextTokens} tokens; ${m.id} has a context window of ${m.contextWindow}.` })
    }
    return undefined
  }

  /**
   * `provider: "local"` where the gateway's own process serves nothing (DESIGN.md §7: what needs a model
   * upstream): which providers to use instead, the configured ones if any, else the keys to set.
   */
  const notServedLocally = (what: string, serving: ReadonlyArray<ConfiguredProvider>) => {
    const configured = serving.filter((p) => p.configured).map((p) => p.id)
    return new Unprocessable({
      message: `Provider local (the gateway's own process) does not serve ${what}: it needs a model upstream; ` +
        (configured.length > 0
          ? `use provider auto or one of the configured: ${configured.join(", ")}.`
          : `set one of ${serving.map((p) => `${envPrefix(p.id)}_API_KEY`).join(", ")}.`)
    })
  }

  const usable = (m: ModelEntry, needs: ChatNeeds) =>
    Option.match(catalog.provider(m.provider), {
      onNone: () => false,
      onSome: (p) => !providerProblem(p, needs.plan, needs.kind ?? "chat") && !modelProblem(m, needs)
    })

  /**
   * Candidates in their order, those of circuit-open providers (ProviderHealth) moved last: `auto`
   * routes around a failing provider while another can serve, and still tries it when none can (a
   * breaker that left nothing would answer a refusal for an upstream's passing trouble; the call
   * then ends with the upstream's own error, or its success).
   */
  const healthyFirst = <T>(candidates: ReadonlyArray<T>, providerOf: (candidate: T) => string): ReadonlyArray<T> => {
    const now = Date.now()
    const cooling = candidates.filter((c) => !health.isAvailable(providerOf(c), now))
    return cooling.length === 0 ? candidates : [...candidates.filter((c) => health.isAvailable(providerOf(c), now)), ...cooling]
  }

  const targetOf = (m: ModelEntry): Target => ({ provider: Option.getOrThrow(catalog.provider(m.provider)), model: m })

  /**
   * `provider/model` with no provider named: the catalogued provider before the first `/`, and the
   * model after it; undefined for anything else (a slash after a named provider is the model's own).
   */
  const providerAndModel = (provider: string, model: string): { readonly provider: string; readonly model: string } | undefined => {
    const slash = model.indexOf("/")
    return slash > 0 && isAuto(provider) && Option.isSome(catalog.provider(model.slice(0, slash)))
      ? { provider: model.slice(0, slash), model: model.slice(slash + 1) }
      : undefined
  }

  /**
   * The model a call names, resolved: an alias (AIGW_MODEL_ALIASES), a model of the catalogue or
   * AIGW_MODELS, or, with a provider named (the `provider` field, or `provider/model`), any model
   * of that provider, forwarded as named (cost unknown unless configured).
   */
  const resolveModel = (named: string, provider: string, kind: ModelKind): ModelEntry | RoutingError => {
    const name = Option.getOrElse(catalog.alias(named), () => named)
    const catalogued = catalog.model(name)
    if (Option.isSome(catalogued) && (isAuto(provider) || catalogued.value.provider === provider)) return catalogued.value
    const spelled = providerAndModel(provider, name)
    const providerId = spelled?.provider ?? provider
    const upstream = spelled?.model ?? name
    if (isAuto(providerId)) {
      return new NotFound({
        message: `Unknown model ${named}. See GET /v1/models; to use a model the catalogue does not list, name its provider (the provider field, or provider/model).`
      })
    }
    if (Option.isNone(catalog.provider(providerId))) return new NotFound({ message: `Unknown provider ${providerId}. See GET /v1/providers.` })
    if (upstream.trim() === "") {
      return new BadRequest({ message: `model ${JSON.stringify(named)} names no model after its provider: name one, or ${providerId}/auto.`, param: "model" })
    }
    const known = catalog.model(upstream)
    if (Option.isSome(known) && known.value.provider === providerId) return known.value
    // Model ids are printable ASCII: white space, control, zero-width and look-alike characters only disguise one.
    if (/[^\x21-\x7e]/.test(upstream)) {
      return new BadRequest({ message: `model ${JSON.stringify(named)} holds a character no model id has (white space, a control character or a non-ASCII one).`, param: "model" })
    }
    const variant = catalog.variantOf(providerId, upstream)
    if (variant?.same === true) return variant.model
    const forwarded = uncataloguedModel(providerId, upstream, kind)
    return variant === undefined ? forwarded : { ...forwarded, minPlan: variant.model.minPlan }
  }

  /** `provider/auto` with no provider named: that provider with model auto, as the two fields would say it. */
  const spelledApart = (needs: ChatNeeds): ChatNeeds => {
    const spelled = providerAndModel(needs.provider, needs.model)
    return spelled?.model === "auto" ? { ...needs, ...spelled } : needs
  }

  /** Candidates in the order to try them (at least one), or the error that says why there is none. */
  const targets = (asked: ChatNeeds): ReadonlyArray<Target> | RoutingError => {
    const needs = spelledApart(asked)
    const preference = needs.preference ?? preferenceOf(needs.plan)
    const kind = needs.kind ?? "chat"
    if (needs.provider === "local") return notServedLocally(labels[kind], catalog.providers.filter((p) => p.capabilities.includes(kind)))
    if (!isAuto(needs.model)) {
      const model = resolveModel(needs.model, needs.provider, kind)
      if (!("id" in model)) return model
      const provider = Option.getOrThrow(catalog.provider(model.provider))
      const problem = providerProblem(provider, needs.plan, kind) ?? modelProblem(model, needs)
      return problem ? problem() : [{ provider, model }]
    }
    if (!isAuto(needs.provider)) {
      const provider = catalog.provider(needs.provider)
      if (Option.isNone(provider)) return new NotFound({ message: `Unknown provider ${needs.provider}. See GET /v1/providers.` })
      const problem = providerProblem(provider.value, needs.plan, needs.kind ?? "chat")
      if (problem) return problem()
      const ofKind = catalog.modelsOf(provider.value.id).filter((m) => m.kind === kind && !m.unpriced)
      const fallback = defaultModelData[provider.value.id]?.[kind as "chat" | "embeddings"]
      if (ofKind.length === 0 && fallback !== undefined) {
        // No catalogued model of this kind: the provider's documented default (Catalog/defaultModels.data.ts), forwarded like a named one.
        const model = uncataloguedModel(provider.value.id, fallback, kind)
        const problem = modelProblem(model, needs)
        return problem ? problem() : [{ provider: provider.value, model }]
      }
      const models = ofKind.filter((m) => !modelProblem(m, needs))
      if (models.length === 0) {
        return new Unprocessable({
          message: `Provider ${provider.value.id} has no catalogued ${kind} model that fits this request on plan ${needs.plan}; name the model to use (any model of the provider is forwarded as named).`
        })
      }
      return rank(models, preference).map(targetOf)
    }
    const candidates = autoTargets(needs)
    if (candidates.length === 0) {
      // Providers `auto` could use: configured, serving the kind, with priced models of it (local servers have none).
      const configured = catalog.providers.filter((p) =>
        p.configured && p.capabilities.includes(kind) && catalog.modelsOf(p.id).some((m) => m.kind === kind && !m.unpriced)
      )
      return new Unprocessable({
      message: configured.length === 0
        ? `No ${labels[kind]} provider is configured: set a provider key such as OPENAI_API_KEY or GOOGLE_API_KEY.`
        : `No configured provider can serve this request on plan ${needs.plan} (configured: ${configured.map((p) => p.id).join(", ")}; check plan, tools and context size).`
    })
    }
    return candidates
  }

  /** `auto`'s candidates (provider and model both auto) in the order to try them; none when nothing can serve. */
  const autoTargets = (needs: ChatNeeds): ReadonlyArray<Target> =>
    healthyFirst(rank(catalog.models.filter((m) => !m.unpriced && usable(m, needs)), needs.preference ?? preferenceOf(needs.plan)).map(targetOf), (t) => t.provider.id)

  /**
   * The provider's standing for `auto` on a dedicated capability: its best catalogued model of that
   * kind by the preference (cheapest, best value or best quality), or undefined when none is
   * catalogued (such providers keep catalogue order, after the ranked ones).
   */
  const standingOf = (p: ConfiguredProvider, capability: EndpointType, preference: Preference): ModelEntry | undefined =>
    rank(catalog.modelsOf(p.id).filter((m) => m.kind === capability && !m.unpriced), preference)[0]

  /** Providers ranked like `rank` ranks their best models; unranked ones last, in catalogue order (stable sort). */
  const rankProviders = (providers: ReadonlyArray<ConfiguredProvider>, capability: EndpointType, preference: Preference) => {
    const standing = new Map(providers.map((p) => [p.id, standingOf(p, capability, preference)]))
    return [...providers].sort((a, b) => {
      const sa = standing.get(a.id)
      const sb = standing.get(b.id)
      if (sa === undefined || sb === undefined) return (sa === undefined ? 1 : 0) - (sb === undefined ? 1 : 0)
      const [first] = rank([sa, sb], preference)
      return first === sa ? -1 : 1
    })
  }

  /**
   * The providers to try, in order, for a capability served by dedicated clients (media, video,
   * guardrails, documents, ...): those whose registry declaration serves it (Providers/Registry.ts).
   * A named provider is used alone or refused, never substituted. `auto` gives every provider that
   * is configured and allowed on the plan, ranked by the plan's preference (`preferenceOf`) over their
   * catalogued models of that kind (providers without such models keep catalogue order), circuit-open
   * ones last (`healthyFirst`). Never empty.
   */
  const providersFor = (
    capability: EndpointType,
    named: string,
    plan: Plan
  ): Effect.Effect<ReadonlyArray<ConfiguredProvider>, NotFound | Forbidden | Unprocessable> =>
    Effect.suspend((): Effect.Effect<ReadonlyArray<ConfiguredProvider>, NotFound | Forbidden | Unprocessable> => {
      const serving = catalog.providers.filter((p) => p.capabilities.includes(capability))
      const supported = serving.map((p) => p.id)
      if (!isAuto(named)) {
        const p = catalog.provider(named)
        // The gateway's own process serves what it can compute honestly (guardrails, documents, code, memory, embeddings, rerank), each before routing.
        if (named === "local") return Effect.fail(notServedLocally(capability, serving))
        if (Option.isNone(p)) return Effect.fail(new NotFound({ message: `Unknown provider ${named}. See GET /v1/providers.` }))
        if (!planAllows(plan, p.value.minPlan)) {
          return Effect.fail(new Forbidden({ message: `Provider ${named} needs plan ${p.value.minPlan} or higher (yours: ${plan}).` }))
        }
        if (!p.value.capabilities.includes(capability)) {
          return Effect.fail(new Unprocessable({ message: `Provider ${named} cannot serve ${capability} here; supported: ${supported.join(", ")}.` }))
        }
        if (p.value.missing !== undefined) return Effect.fail(new Unprocessable({ message: p.value.missing }))
        return Effect.succeed([p.value])
      }
      const usable = serving.filter((p) => p.configured && planAllows(plan, p.minPlan))
      if (usable.length > 0) return Effect.succeed(healthyFirst(rankProviders(usable, capability, preferenceOf(plan)), (p) => p.id))
      // Configured, but above the plan: the plan is what to change, not the keys.
      const aboveThePlan = serving.filter((p) => p.configured)
      return Effect.fail(
        aboveThePlan.length > 0
          ? new Forbidden({
            message: `The ${capability} providers configured here (${aboveThePlan.map((p) => `${p.id}: plan ${p.minPlan}`).join(", ")}) need a higher plan than yours (${plan}).`
          })
          : new Unprocessable({
            message: `No ${capability} provider is configured for plan ${plan}: set one of ${supported.map((id) => `${envPrefix(id)}_API_KEY`).join(", ")}.`
          })
      )
    })

  /** The first of `providersFor`: for capabilities that call one provider (jobs fix theirs at submit time). */
  const providerFor = (capability: EndpointType, named: string, plan: Plan) =>
    Effect.map(providersFor(capability, named, plan), (providers) => providers[0]!)

  // No chat model's window is smaller: a request below it fits every one, however it is counted.
  const smallestChatWindow = Math.min(...catalog.models.filter((m) => m.kind === "chat").map((m) => m.contextWindow))

  /**
   * A prompt's tokens as its context window is checked (`ChatNeeds.contextTokens`, with `maxTokens`
   * added): its characters, a bound, while that cannot reach the smallest chat model's window (the
   * check passes either way), else the tokenizer's count, since prose has 4 to 5 characters a token and
   * a window may not refuse what fits it. Undefined when the count is needed and the tokenizer has not
   * loaded yet (`promptTokens` loads it).
   */
  const promptTokensNow = (messages: ReadonlyArray<ChatMessage>, maxTokens = 0): number | undefined => {
    const bound = promptCharacters(messages)
    return bound + maxTokens <= smallestChatWindow ? bound : messageTokensNow(messages)
  }
  const promptTokens = (messages: ReadonlyArray<ChatMessage>, maxTokens = 0): Effect.Effect<number> =>
    Effect.suspend(() => {
      const now = promptTokensNow(messages, maxTokens)
      return now === undefined ? countMessages(messages) : Effect.succeed(now)
    })

  return { targets, autoTargets, providersFor, providerFor, providerAndModel, promptTokensNow, promptTokens }
})

export class Routing extends Context.Tag("aigw/Routing")<Routing, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Routing, makeService)
