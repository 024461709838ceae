/**
 * The provider and model catalogues: data files validated with Schema at load (a bad entry
 * stops the start with the entry named), joined with configuration (credentials, base URL
 * overrides) into the `Catalog` service.
 */
import { Context, Effect, Either, Layer, Option, ParseResult, Redacted, Schema } from "effect"
import { baseUrlProblem, envPrefix, GatewayConfig } from "../Config.ts"
import { ModelPlan, Plan, planAllows } from "../Plans.ts"
import { startupError } from "../StartupError.ts"
import { jsonSyntaxProblem } from "../JsonText.ts"
import { modelData } from "./models.data.ts"
import { providerData } from "./providers.data.ts"
import { endpointTypes, servedBy } from "../Providers/Registry.ts"
import { knowCredential } from "../Providers/UpstreamError.ts"

export const EndpointType = Schema.Literal(
  "chat", "embeddings", "images", "video", "speech", "transcription", "rerank", "moderation", "translate",
  "classify", "extract", "documents", "code", "batch", "memory", "guardrails", "finetune", "graphrag", "prompts"
)
export type EndpointType = typeof EndpointType.Type

/** Wire-protocol family: one adapter per family. */
export const Adapter = Schema.Literal("openai", "anthropic", "gemini", "cohere", "bespoke")
export const AuthStyle = Schema.Literal("bearer", "x-api-key", "x-goog-api-key", "api-key", "token", "key", "basic")

/** A provider as the data file describes it (providers.data.ts). */
export const ProviderData = Schema.Struct({
  id: Schema.String.pipe(Schema.pattern(/^[a-z0-9]+(-[a-z0-9]+)*$/)),
  name: Schema.NonEmptyTrimmedString,
  adapter: Adapter,
  /**
   * `{placeholders}` mark deployment-specific hosts that need `<ID>_BASE_URL`. Plain http only for
   * servers on this machine (local model servers such as Ollama).
   */
  baseUrl: Schema.String.pipe(Schema.pattern(/^(https:\/\/[^\s]+|http:\/\/localhost:\d+(\/[^\s]*)?)$/)),
  auth: AuthStyle,
  /** The endpoint types the upstream offers; what aigw serves of them is the registry's (`capabilities`). */
  offers: Schema.NonEmptyArray(EndpointType),
  minPlan: Plan,
  website: Schema.String.pipe(Schema.pattern(/^https:\/\//))
})
export type ProviderData = typeof ProviderData.Type

/** A catalogued provider: its data, and the endpoint types aigw serves through it (Providers/Registry.ts). */
export interface ProviderEntry extends ProviderData {
  readonly capabilities: ReadonlyArray<EndpointType>
}

const UsdPer1k = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

export const ModelEntry = Schema.Struct({
  id: Schema.NonEmptyTrimmedString,
  name: Schema.NonEmptyTrimmedString,
  provider: Schema.String,
  kind: Schema.Literal("chat", "embeddings", "rerank"),
  minPlan: ModelPlan,
  inputPer1kUSD: UsdPer1k,
  outputPer1kUSD: UsdPer1k,
  /** Prompt tokens read from the upstream's prompt cache (Cost.ts `costOf`: the input price when not given). */
  cacheReadPer1kUSD: Schema.optional(UsdPer1k),
  /** Prompt tokens written to it (Cost.ts `costOf`: 1.25 × the input price when not given). */
  cacheWritePer1kUSD: Schema.optional(UsdPer1k),
  contextWindow: Schema.Int.pipe(Schema.positive()),
  maxOutputTokens: Schema.Int.pipe(Schema.nonNegative()),
  supportsVision: Schema.Boolean,
  supportsFunctions: Schema.Boolean,
  quality: Schema.Int.pipe(Schema.between(1, 5)),
  pricingSource: Schema.String.pipe(Schema.pattern(/^https:\/\//)),
  /**
   * Set on models without a known price: those a call names by provider outside the catalogue,
   * and configured ones given no price (AIGW_MODELS). Their cost is recorded as 0 and answers say
   * `costKnown: false`; `auto` routing never picks them.
   */
  unpriced: Schema.optional(Schema.Literal(true))
})
export type ModelEntry = typeof ModelEntry.Type

/** An operator's model entry (AIGW_MODELS): a new model, or fields that override a catalogued one. */
export const ConfiguredModel = Schema.Struct({
  id: Schema.NonEmptyTrimmedString,
  provider: Schema.optional(Schema.String),
  name: Schema.optional(Schema.NonEmptyTrimmedString),
  kind: Schema.optional(Schema.Literal("chat", "embeddings", "rerank")),
  minPlan: Schema.optional(ModelPlan),
  inputPer1kUSD: Schema.optional(UsdPer1k),
  outputPer1kUSD: Schema.optional(UsdPer1k),
  cacheReadPer1kUSD: Schema.optional(UsdPer1k),
  cacheWritePer1kUSD: Schema.optional(UsdPer1k),
  contextWindow: Schema.optional(Schema.Int.pipe(Schema.positive())),
  maxOutputTokens: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  supportsVision: Schema.optional(Schema.Boolean),
  supportsFunctions: Schema.optional(Schema.Boolean),
  quality: Schema.optional(Schema.Int.pipe(Schema.between(1, 5))),
  pricingSource: Schema.optional(Schema.String.pipe(Schema.pattern(/^https:\/\//)))
})

/** No limit known: the upstream enforces its own. */
const UNKNOWN_CONTEXT = Number.MAX_SAFE_INTEGER

/** The entry of a model the catalogue does not list, as a call or the operator names it. */
export const uncataloguedModel = (provider: string, id: string, kind: ModelEntry["kind"]): ModelEntry => ({
  id,
  name: id,
  provider,
  kind,
  minPlan: "Free",
  inputPer1kUSD: 0,
  outputPer1kUSD: 0,
  contextWindow: UNKNOWN_CONTEXT,
  maxOutputTokens: 0,
  supportsVision: true,
  supportsFunctions: true,
  quality: 3,
  pricingSource: "https://aigw.invalid/unpriced",
  unpriced: true
})

/** A decoding failure in one line: the first problem with its field path. */
const describeSchemaError = (error: ParseResult.ParseError) => {
  const [first] = ParseResult.ArrayFormatter.formatErrorSync(error)
  return first === undefined ? "invalid entry" : `${first.path.length > 0 ? `${first.path.join(".")}: ` : ""}${first.message}`
}

const jsonOf = (variable: string, text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch (e) {
    throw new Error(`${variable} is ${jsonSyntaxProblem(e)}`)
  }
}

/**
 * The catalogue's models with the operator's (AIGW_MODELS) merged in, and the aliases
 * (AIGW_MODEL_ALIASES) checked; throws with the bad entry named in one line.
 */
export const configuredModels = (
  catalogue: { readonly providers: ReadonlyArray<ProviderEntry>; readonly models: ReadonlyArray<ModelEntry> },
  modelsJson: string | undefined,
  aliasesJson: string | undefined
): { readonly models: ReadonlyArray<ModelEntry>; readonly aliases: ReadonlyMap<string, string> } => {
  const models = new Map(catalogue.models.map((m) => [m.id, m]))
  const providerIds = new Set(catalogue.providers.map((p) => p.id))
  if (modelsJson !== undefined) {
    const entries = jsonOf("AIGW_MODELS", modelsJson)
    if (!Array.isArray(entries)) throw new Error("AIGW_MODELS must be a JSON array of model entries")
    entries.forEach((raw, i) => {
      const label = `AIGW_MODELS entry ${i + 1}${typeof raw?.id === "string" ? ` ("${raw.id}")` : ""}`
      const decoded = Schema.decodeUnknownEither(ConfiguredModel)(raw, { onExcessProperty: "error" })
      if (Either.isLeft(decoded)) throw new Error(`${label}: ${describeSchemaError(decoded.left)}`)
      const entry = decoded.right
      const base = models.get(entry.id)
      const provider = entry.provider ?? base?.provider
      if (provider === undefined) throw new Error(`${label}: provider is required for a model the catalogue does not list`)
      if (!providerIds.has(provider)) throw new Error(`${label}: provider "${provider}" is not catalogued (see GET /v1/providers)`)
      if ((entry.inputPer1kUSD === undefined) !== (entry.outputPer1kUSD === undefined)) {
        throw new Error(`${label}: give both inputPer1kUSD and outputPer1kUSD, or neither`)
      }
      const priced = entry.inputPer1kUSD !== undefined || (base !== undefined && base.unpriced === undefined)
      const { provider: _p, ...fields } = entry
      const merged: ModelEntry = {
        ...(base ?? uncataloguedModel(provider, entry.id, entry.kind ?? "chat")),
        ...fields,
        provider,
        ...(entry.pricingSource === undefined && entry.inputPer1kUSD !== undefined ? { pricingSource: "https://aigw.invalid/configured" } : {})
      }
      const { unpriced: _u, ...pricedEntry } = merged
      models.set(entry.id, priced ? pricedEntry : { ...merged, unpriced: true })
    })
  }
  const aliases = new Map<string, string>()
  if (aliasesJson !== undefined) {
    const parsed = jsonOf("AIGW_MODEL_ALIASES", aliasesJson)
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new Error(`AIGW_MODEL_ALIASES must be a JSON object of alias -> model ("model id" or "provider/model")`)
    }
    for (const [alias, target] of Object.entries(parsed)) {
      if (typeof target !== "string" || target === "") throw new Error(`AIGW_MODEL_ALIASES "${alias}": the target must be a model id or provider/model`)
      if (alias === "auto" || models.has(alias)) throw new Error(`AIGW_MODEL_ALIASES "${alias}": the alias is already a model name`)
      const slash = target.indexOf("/")
      if (!models.has(target) && !(slash > 0 && providerIds.has(target.slice(0, slash)))) {
        throw new Error(`AIGW_MODEL_ALIASES "${alias}": "${target}" is neither a model id (GET /v1/models) nor provider/model with a catalogued provider`)
      }
      aliases.set(alias, target)
    }
  }
  return { models: [...models.values()], aliases }
}

/** Validates the data files; throws with the offending entry named. Cross-checks references. */
export const validate = (providers: unknown, models: unknown) => {
  const p = Schema.decodeUnknownSync(Schema.Array(ProviderData))(providers, { onExcessProperty: "error" })
    .map((entry): ProviderEntry => ({ ...entry, capabilities: endpointTypes(entry) }))
  const m = Schema.decodeUnknownSync(Schema.Array(ModelEntry))(models, { onExcessProperty: "error" })
  const ids = new Set<string>()
  for (const entry of p) {
    if (ids.has(entry.id)) throw new Error(`catalogue: duplicate provider id ${entry.id}`)
    ids.add(entry.id)
  }
  const modelIds = new Set<string>()
  for (const model of m) {
    const provider = p.find((x) => x.id === model.provider)
    if (!provider) throw new Error(`catalogue: model ${model.id} names unknown provider ${model.provider}`)
    if (!provider.offers.includes(model.kind)) {
      throw new Error(`catalogue: model ${model.id} is ${model.kind} but ${provider.id} does not serve ${model.kind}`)
    }
    if (modelIds.has(model.id)) throw new Error(`catalogue: duplicate model id ${model.id}`)
    modelIds.add(model.id)
  }
  return { providers: p, models: m }
}

export const data = validate(providerData, modelData)

export interface ConfiguredProvider extends ProviderEntry {
  /** The effective endpoint: `<ID>_BASE_URL` or the catalogue's. */
  readonly endpoint: string
  readonly apiKey: Option.Option<Redacted.Redacted>
  /** The provider's own settings that are set (Served.settings), by variable name. */
  readonly settings: Readonly<Record<string, string>>
  /** Credentials set, and a concrete endpoint (no placeholders left). */
  readonly configured: boolean
  /** When not configured: what to set, as one sentence. */
  readonly missing: string | undefined
}

/** Why a provider cannot be called yet (what to set), or undefined. */
const missingOf = (p: ProviderEntry, endpoint: string, hasApiKey: boolean, settings: Readonly<Record<string, string>>) => {
  const prefix = envPrefix(p.id)
  if (endpoint.includes("{")) {
    return `Provider ${p.id} is not configured: set ${prefix}_BASE_URL (deployment-specific endpoint)${hasApiKey ? "" : ` and ${prefix}_API_KEY`}.`
  }
  const credentials = servedBy(p).credentials
  if (credentials) {
    const problem = credentials({ hasApiKey, settings }, prefix)
    return problem === undefined ? undefined : `Provider ${p.id} is not configured: ${problem}.`
  }
  return hasApiKey ? undefined : `Provider ${p.id} is not configured: set ${prefix}_API_KEY.`
}

/** What may follow a model id and still name that model: version or date stamps (`-2024-08-06`, `-0613`, `@20250514`, `-v1:0`, `-latest`). */
const SAME_MODEL_SUFFIX = /^(?:[-_.:@](?:\d+|v\d+|latest))+$/

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  // A base URL that cannot take the API's paths (no http(s) URL, a query, a fragment, user info) used to
  // start and fail, or misdirect, every call of its provider: the first one found stops the start.
  let unusableBaseUrl: { provider: ProviderEntry; problem: string } | undefined
  const providers = data.providers.map((p): ConfiguredProvider => {
    const env = config.providerEnv(p.id)
    const problem = Option.isSome(env.baseUrl) && env.baseUrl.value !== "" ? baseUrlProblem(env.baseUrl.value) : undefined
    if (problem !== undefined) unusableBaseUrl ??= { provider: p, problem }
    const endpoint = Option.getOrElse(env.baseUrl, () => p.baseUrl).replace(/\/+$/, "")
    const settings: Record<string, string> = {}
    for (const s of servedBy(p).settings ?? []) {
      const value = config.setting(s.name)
      if (Option.isSome(value) && value.value !== "") settings[s.name] = value.value
      if (s.secret && settings[s.name] !== undefined) knowCredential(settings[s.name]!)
    }
    // Redacted wherever an upstream echoes them (UpstreamError.shownUpstreamText).
    if (Option.isSome(env.apiKey)) knowCredential(Redacted.value(env.apiKey.value))
    const missing = missingOf(p, endpoint, Option.isSome(env.apiKey), settings)
    return { ...p, endpoint, apiKey: env.apiKey, settings, configured: missing === undefined, missing }
  })
  if (unusableBaseUrl !== undefined) {
    const { provider, problem } = unusableBaseUrl
    const variable = `${envPrefix(provider.id)}_BASE_URL`
    return yield* Effect.fail(startupError(`${variable} ${problem}: the provider's API base, e.g. ${provider.baseUrl}`, `check ${variable}`))
  }
  const byId = new Map(providers.map((p) => [p.id, p]))
  const { aliases, models } = yield* Effect.try({
    try: () => configuredModels(data, Option.getOrUndefined(config.models), Option.getOrUndefined(config.modelAliases)),
    catch: (e) => startupError((e as Error).message, "fix the entry in AIGW_MODELS / AIGW_MODEL_ALIASES; see docs/configuration.md")
  })
  const modelsById = new Map(models.map((m) => [m.id, m]))
  return {
    /**
     * The catalogued model an uncatalogued name of `providerId` names another way: the same id in
     * another case (`same`), else a catalogued id followed only by a version or date stamp (a snapshot
     * `gpt-4o-2024-08-06`, `claude-…@20250514`, `-latest`), a fine-tune of one (`ft:gpt-4o-mini:org::id`),
     * or either after a vendor path (`anthropic/claude-…` on an aggregator, matched among all providers).
     * Held to that model's plan (Routing): another spelling must not sidestep it. A name that goes on
     * with words (`grok-4-fast`, `gpt-5.5-pro`) is another model, forwarded at the provider's plan.
     */
    variantOf: (providerId: string, name: string): { readonly model: ModelEntry; readonly same: boolean } | undefined => {
      const lower = name.toLowerCase()
      // The names to compare, and whether a model of any provider counts (after a vendor path).
      const candidates: Array<{ readonly text: string; readonly anyProvider: boolean }> = []
      const add = (text: string, anyProvider: boolean) => {
        candidates.push({ text, anyProvider })
        if (text.startsWith("ft:")) candidates.push({ text: text.slice(3).split(":")[0]!, anyProvider })
      }
      add(lower, false)
      const slash = lower.lastIndexOf("/")
      if (slash >= 0) add(lower.slice(slash + 1), true)
      let found: ModelEntry | undefined
      for (const m of models) {
        const id = m.id.toLowerCase()
        const own = m.provider === providerId
        if (own && id === lower) return { model: m, same: true }
        const named = candidates.some((c) =>
          (own || c.anyProvider) && (c.text === id || (c.text.startsWith(id) && SAME_MODEL_SUFFIX.test(c.text.slice(id.length))))
        )
        if (named && (found === undefined || m.id.length > found.id.length)) found = m
      }
      return found === undefined ? undefined : { model: found, same: false }
    },
    providers,
    /** The catalogue's models with the operator's (AIGW_MODELS). */
    models,
    provider: (id: string) => Option.fromNullable(byId.get(id)),
    model: (id: string) => Option.fromNullable(modelsById.get(id)),
    /** What an alias (AIGW_MODEL_ALIASES) stands for: a model id or `provider/model`. */
    alias: (name: string) => Option.fromNullable(aliases.get(name)),
    aliases,
    /** Models available on a plan (minimum plan at most `plan`). */
    modelsFor: (plan: Plan) => models.filter((m) => planAllows(plan, m.minPlan)),
    modelsOf: (providerId: string) => models.filter((m) => m.provider === providerId)
  }
})

export class Catalog extends Context.Tag("aigw/Catalog")<Catalog, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Catalog, makeService)

/** The spec's model catalogue entry (GET /v1/models). */
export const modelView = (m: ModelEntry, providers: (id: string) => Option.Option<ProviderEntry>) => ({
  id: m.id,
  name: m.name,
  providerName: Option.match(providers(m.provider), { onNone: () => m.provider, onSome: (p) => p.name }),
  minPlanLabel: m.minPlan,
  inputPer1kUSD: m.inputPer1kUSD,
  outputPer1kUSD: m.outputPer1kUSD,
  contextWindow: m.contextWindow,
  supportsVision: m.supportsVision,
  supportsFunctions: m.supportsFunctions
})

/** The single-model detail: the catalogue entry plus routing data. */
export const modelDetail = (m: ModelEntry, providers: (id: string) => Option.Option<ProviderEntry>) => ({
  ...modelView(m, providers),
  provider: m.provider,
  kind: m.kind,
  maxOutputTokens: m.maxOutputTokens,
  qualityTier: m.quality,
  pricingSource: m.pricingSource
})

export const OPENSERV_PREFIX = "aigw"

/** The third-party (OpenServ-style) connector entry. */
export const openServView = (m: ModelEntry) => ({
  id: `${OPENSERV_PREFIX}/${m.id}`,
  name: m.name,
  provider: m.provider,
  contextWindow: m.contextWindow,
  capabilities: ["chat", ...(m.supportsFunctions ? ["tools"] : []), ...(m.supportsVision ? ["vision"] : [])]
})
