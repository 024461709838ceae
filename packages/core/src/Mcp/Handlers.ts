/**
 * The toolkit's handlers: each calls the same core service or query as the matching HTTP
 * endpoint. Authentication and quota admission happen before a handler runs (Server.ts), which
 * provides the calling avatar as CurrentAvatar.
 */
import { Effect, type Schema } from "effect"
import { Catalog } from "../Catalog/Catalog.ts"
import { GatewayConfig } from "../Config.ts"
import { ProviderHealth } from "../Providers/ProviderHealth.ts"
import { Quota } from "../Quota.ts"
import { avatarContext, type CompletionInput, Completions } from "../Capabilities/Completions.ts"
import { Agents } from "../Capabilities/Agents.ts"
import { Learning } from "../Capabilities/Learning.ts"
import { Braid } from "../Capabilities/Braid.ts"
import { Embeddings } from "../Capabilities/Embeddings.ts"
import * as Rerank from "../Capabilities/Rerank.ts"
import { ProviderCalls } from "../Engine/ProviderCalls.ts"
import { Routing } from "../Routing.ts"
import { Holons } from "../Capabilities/Holons.ts"
import { Memory } from "../Capabilities/Memory.ts"
import { Orchestrators } from "../Capabilities/Orchestrators.ts"
import { Media } from "../Capabilities/Media.ts"
import { checkConversation, checkCrew, checkGraphNode, Orchestration } from "../Capabilities/Orchestration.ts"
import { ReasoningNetwork } from "../Capabilities/ReasoningNetwork.ts"
import { estimateCost, getModel, listModels, listProviders, openServModels } from "../Catalog/Queries.ts"
import { check } from "../Health.ts"
import { inOwnTurn } from "../Ml/Nlp.ts"
import { Sentiment } from "../Ml/Sentiment.ts"
import { TaskClassifier } from "../Ml/TaskClassifier.ts"
import { karmaMultiplier, type Plan } from "../Plans.ts"
import { Usage } from "../Usage.ts"
import type { GatewayError } from "../Errors.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { type CompleteParams, CurrentAvatar, GatewayToolkit } from "./Tools.ts"

/** gateway_complete's arguments -> the call's input: what its admission check reads and what it calls with. */
const completionInputOf = (params: Schema.Struct.Type<typeof CompleteParams>): CompletionInput => ({
  messages: params.messages,
  provider: params.provider,
  model: params.model,
  temperature: params.temperature,
  maxTokens: params.maxTokens,
  injectAvatarContext: params.injectAvatarContext,
  useFAHRN: params.useFAHRN,
  useHolonicBraid: params.useHolonicBraid,
  routing: params.routing
})

/** A metered tool's refusals that depend only on its arguments and configuration. */
export type AdmissionCheck = (avatar: AvatarRecord, params: any) => Effect.Effect<void, GatewayError>

/**
 * The checks the MCP edge runs before it counts a metered tool call, as the HTTP routes' `check`
 * (a refused call costs no quota, docs/quota.md); the same capability checks as those routes.
 */
export const makeAdmissionChecks = Effect.gen(function*() {
  const completions = yield* Completions
  const embeddings = yield* Embeddings
  const media = yield* Media
  const memory = yield* Memory
  const agents = yield* Agents
  const holons = yield* Holons
  const orchestrators = yield* Orchestrators
  const reranking = yield* Effect.context<Routing>()
  const routing = (avatar: AvatarRecord, provider: string, model = "auto") => completions.check(avatar, { provider, model, messages: [] })
  const checks: Record<string, AdmissionCheck> = {
    gateway_complete: (avatar, params) => completions.check(avatar, completionInputOf(params)),
    gateway_embed: (avatar, params) => embeddings.check(avatar, params),
    gateway_rerank: (avatar, params) => Effect.provide(Rerank.check(avatar, params), reranking),
    gateway_generate_image: (avatar, params) => media.check.images(avatar, params),
    gateway_memory_external_add: (avatar, params) => memory.checkExternal(avatar, params.provider, params.metadata),
    gateway_memory_external_search: (avatar, params) => memory.checkExternal(avatar, params.provider),
    gateway_fahrn_solve: (avatar, params) => routing(avatar, params.provider),
    gateway_fahrn_dispatch: (avatar, params) => routing(avatar, params.provider),
    gateway_orchestrate_crew: (avatar, params) =>
      checkCrew(avatar, params).pipe(Effect.provideService(Completions, completions), Effect.provideService(Agents, agents)),
    gateway_orchestrate_conversation: (avatar, params) => Effect.provideService(checkConversation(avatar, params), Completions, completions),
    gateway_orchestrate_graph_node: (avatar, params) => Effect.provideService(checkGraphNode(avatar, params), Completions, completions),
    gateway_orchestrator_invoke: (avatar, params) => orchestrators.checkInvoke(avatar, params),
    gateway_fahrn_evolve_agent_skill: (avatar, params) => agents.checkEvolve(avatar, params),
    gateway_memory_record: (_, params) => holons.checkHolon(params),
    gateway_memory_propagate: (_, params) => holons.checkHolon(params),
    gateway_memory_propagate_up: (_, params) => holons.checkHolon(params)
  }
  return checks
})

export const layerHandlers = GatewayToolkit.toLayer(
  Effect.gen(function*() {
    const completions = yield* Completions
    const embeddings = yield* Embeddings
    const media = yield* Media
    const reasoning = yield* ReasoningNetwork
    const orchestration = yield* Orchestration
    const agents = yield* Agents
    const learning = yield* Learning
    const braid = yield* Braid
    const holons = yield* Holons
    const memory = yield* Memory
    const orchestrators = yield* Orchestrators
    const usage = yield* Usage
    const quota = yield* Quota
    const sentiment = yield* Sentiment
    const classifier = yield* TaskClassifier
    // The shared queries read Catalog, ProviderHealth and GatewayConfig: capture them once.
    const services = yield* Effect.context<Catalog | ProviderHealth | GatewayConfig>()
    const reranking = yield* Effect.context<Routing | ProviderCalls>()
    const withServices = <A, E>(effect: Effect.Effect<A, E, Catalog | ProviderHealth | GatewayConfig>) => Effect.provide(effect, services)

    return {
      gateway_complete: (params) => Effect.flatMap(CurrentAvatar, (avatar) => completions.complete(avatar, completionInputOf(params))),
      gateway_embed: (params) => Effect.flatMap(CurrentAvatar, (avatar) => embeddings.embed(avatar, params)),
      gateway_rerank: (params) => Effect.flatMap(CurrentAvatar, (avatar) => Effect.provide(Rerank.rerank(avatar, params), reranking)),
      gateway_generate_image: (params) => Effect.flatMap(CurrentAvatar, (avatar) => media.images(avatar, params)),
      gateway_fahrn_solve: (params) => Effect.flatMap(CurrentAvatar, (avatar) => reasoning.dispatch(avatar, { ...params, mode: "Hybrid" })),
      gateway_fahrn_dispatch: (params) => Effect.flatMap(CurrentAvatar, (avatar) => reasoning.dispatch(avatar, params)),
      gateway_orchestrate_crew: (params) => Effect.flatMap(CurrentAvatar, (avatar) => orchestration.crew(avatar, params)),
      gateway_orchestrate_conversation: (params) => Effect.flatMap(CurrentAvatar, (avatar) => orchestration.conversation(avatar, params)),
      gateway_orchestrate_graph_node: (params) => Effect.flatMap(CurrentAvatar, (avatar) => orchestration.graphNode(avatar, params)),
      gateway_fahrn_register_agent: (params) => Effect.flatMap(CurrentAvatar, (avatar) => agents.register(avatar, params)),
      gateway_fahrn_get_agents: (params) => Effect.flatMap(CurrentAvatar, (avatar) => agents.list(avatar, params.taskType, params.task)),
      gateway_fahrn_record_outcome: (params) => Effect.flatMap(CurrentAvatar, (avatar) => learning.feedback(avatar, params)),
      gateway_fahrn_seed_openserv_agents: () => Effect.flatMap(CurrentAvatar, (avatar) => agents.seedOpenServ(avatar)),
      gateway_fahrn_get_agent_skill: (params) => Effect.flatMap(CurrentAvatar, (avatar) => agents.getSkill(avatar, params.agentId, params.taskCategory)),
      gateway_fahrn_evolve_agent_skill: (params) => Effect.flatMap(CurrentAvatar, (avatar) => agents.evolveSkill(avatar, params)),
      gateway_braid_find_graph: (params) => Effect.flatMap(CurrentAvatar, (avatar) => braid.find(avatar, params.taskType)),
      gateway_braid_save_graph: (params) => Effect.flatMap(CurrentAvatar, (avatar) => braid.save(avatar, params)),
      gateway_braid_record_outcome: (params) => Effect.flatMap(CurrentAvatar, (avatar) => braid.recordOutcome(avatar, params)),
      gateway_memory_get_earth_holon: () => holons.getEarth,
      gateway_memory_get_or_create_holon: (params) => Effect.flatMap(CurrentAvatar, (avatar) => holons.getOrCreate(avatar, params)),
      gateway_memory_set_membrane_rule: (params) => Effect.flatMap(CurrentAvatar, (avatar) => holons.setMembrane(avatar, params)),
      gateway_memory_record: (params) => Effect.flatMap(CurrentAvatar, (avatar) => holons.record(avatar, params)),
      gateway_memory_propagate: (params) => holons.propagate(params.holonId),
      gateway_memory_propagate_up: (params) => holons.propagateUp(params),
      gateway_memory_search: (params) => Effect.flatMap(CurrentAvatar, (avatar) => holons.search(avatar, params)),
      gateway_memory_external_list_providers: () => Effect.sync(() => memory.externalProviders()),
      gateway_memory_external_add: (params) => Effect.flatMap(CurrentAvatar, (avatar) => memory.addExternal(avatar, params)),
      gateway_memory_external_search: (params) => Effect.flatMap(CurrentAvatar, (avatar) => memory.searchExternal(avatar, params)),
      gateway_orchestrator_register: (params) => Effect.flatMap(CurrentAvatar, (avatar) => orchestrators.register(avatar, params)),
      gateway_orchestrator_list: () => Effect.flatMap(CurrentAvatar, (avatar) => orchestrators.list(avatar)),
      gateway_orchestrator_invoke: (params) => Effect.flatMap(CurrentAvatar, (avatar) => orchestrators.invoke(avatar, params)),
      gateway_list_models: (params) => withServices(listModels({ plan: params.plan, capability: params.capability })),
      gateway_get_model: (params) => withServices(getModel(params.modelId)),
      gateway_list_providers: () => withServices(listProviders),
      gateway_estimate_cost: (params) => Effect.flatMap(CurrentAvatar, (avatar) => withServices(Effect.provide(estimateCost(params, avatar.plan as Plan), reranking))),
      gateway_get_usage: (params) => Effect.flatMap(CurrentAvatar, (avatar) => usage.summary(avatar, { plan: params.plan, karma: params.karma })),
      gateway_get_avatar_context: () =>
        Effect.map(CurrentAvatar, (avatar) => ({
          id: avatar.id,
          username: avatar.username,
          title: avatar.title,
          avatarType: avatar.avatarType,
          plan: avatar.plan,
          karma: avatar.karmaTotal,
          karmaMultiplier: karmaMultiplier(avatar.karmaTotal),
          dailyCallLimit: quota.limitOf(avatar.plan, avatar.karmaTotal),
          contextBlock: avatarContext(avatar)
        })),
      gateway_list_openserv_models: () => withServices(Effect.map(openServModels, (models) => ({ total: models.length, models }))),
      gateway_health: () => withServices(check),
      gateway_ml_classify_task: (params) => inOwnTurn(classifier.classify(params.text)),
      gateway_ml_sentiment: (params) => inOwnTurn(sentiment.analyze(params.text))
    }
  })
)
