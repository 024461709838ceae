/**
 * The provider and model catalogues: data files validated with Schema at load (a bad entry
 * stops the start with the entry named), joined with configuration (credentials, base URL
 * overrides) into the `Catalog` service.
 */
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { GatewayConfig } from "../Config.ts"
import { ModelPlan, Plan, planAllows } from "../Plans.ts"
import { modelData } from "./models.data.ts"
import { providerData } from "./providers.data.ts"
import { endpointTypes } from "../Providers/Registry.ts"

export const EndpointType = Schema.Literal(
  "chat", "embeddings", "images", "video", "speech", "transcription", "rerank", "moderation", "translate",
  "classify", "extract", "documents", "code", "batch", "memory", "guardrails", "finetune", "graphrag", "prompts"
)
export type EndpointType = typeof EndpointType.Type

/** Wire-protocol family: one adapter per family. */
export const Adapter = Schema.Literal("openai", "anthropic", "gemini", "cohere", "bespoke")
export const AuthStyle = Schema.Literal("bearer", "x-api-key", "x-goog-api-key", "token", "key", "basic")

/** A provider as the data file describes it (providers.data.ts). */
export const ProviderData = Schema.Struct({
  id: Schema.String.pipe(Schema.pattern(/^[a-z0-9]+(-[a-z0-9]+)*$/)),
  name: Schema.NonEmptyTrimmedString,
  adapter: Adapter,
  /** `{placeholders}` mark deployment-specific hosts that need `<ID>_BASE_URL`. */
  baseUrl: Schema.String.pipe(Schema.pattern(/^https:\/\/[^\s]+$/)),
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
  kind: Schema.Literal("chat", "embeddings"),
  minPlan: ModelPlan,
  inputPer1kUSD: UsdPer1k,
  outputPer1kUSD: UsdPer1k,
  contextWindow: Schema.Int.pipe(Schema.positive()),
  maxOutputTokens: Schema.Int.pipe(Schema.nonNegative()),
  supportsVision: Schema.Boolean,
  supportsFunctions: Schema.Boolean,
  quality: Schema.Int.pipe(Schema.between(1, 5)),
  pricingSource: Schema.String.pipe(Schema.pattern(/^https:\/\//))
})
export type ModelEntry = typeof ModelEntry.Type

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
  /** Credentials set, and a concrete endpoint (no placeholders left). */
  readonly configured: boolean
}

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const providers = data.providers.map((p): ConfiguredProvider => {
    const env = config.providerEnv(p.id)
    const endpoint = Option.getOrElse(env.baseUrl, () => p.baseUrl).replace(/\/+$/, "")
    return { ...p, endpoint, apiKey: env.apiKey, configured: Option.isSome(env.apiKey) && !endpoint.includes("{") }
  })
  const byId = new Map(providers.map((p) => [p.id, p]))
  const modelsById = new Map(data.models.map((m) => [m.id, m]))
  return {
    providers,
    models: data.models,
    provider: (id: string) => Option.fromNullable(byId.get(id)),
    model: (id: string) => Option.fromNullable(modelsById.get(id)),
    /** Models available on a plan (minimum plan at most `plan`). */
    modelsFor: (plan: Plan) => data.models.filter((m) => planAllows(plan, m.minPlan)),
    modelsOf: (providerId: string) => data.models.filter((m) => m.provider === providerId)
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
