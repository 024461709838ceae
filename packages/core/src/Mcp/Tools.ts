/**
 * The gateway's MCP tools, defined once with @effect/ai's Tool/Toolkit: names, descriptions,
 * precise input schemas (the JSON Schema clients see is generated from these), annotations.
 * Handlers are in Handlers.ts; the MCP edge (transport, auth, rendering) in Server.ts.
 *
 * Only tools of capabilities that exist are listed. Later capability work adds its tools here.
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { Context, Schema, Struct } from "effect"
import { RegisterAgentParams } from "../Capabilities/Agents.ts"
import { FeedbackParams } from "../Capabilities/Learning.ts"
import { SaveGraphParams } from "../Capabilities/Braid.ts"
import { EmbeddingsBody } from "../Capabilities/Embeddings.ts"
import { ExternalAddParams, ExternalSearchParams } from "../Capabilities/Memory.ts"
import { RerankBody } from "../Capabilities/Rerank.ts"
import { Params as HolonParams } from "../Capabilities/Holons.ts"
import { Params as OrchestratorParams } from "../Capabilities/Orchestrators.ts"
import { TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import { ImagesBody } from "../Capabilities/Media.ts"
import { ConversationBody, CrewBody, GraphNodeBody } from "../Capabilities/Orchestration.ts"
import { DispatchBody } from "../Capabilities/ReasoningNetwork.ts"
import { EstimateRequest, ModelCapability } from "../Catalog/Queries.ts"
import { MaxTokens, ModelName, ProviderName, RoutingOptions, Temperature } from "../Http/CompletionRoutes.ts"
import {
  BadRequest,
  Conflict,
  Forbidden,
  NotAvailable,
  NotFound,
  PayloadTooLarge,
  QuotaExceeded,
  Rejected,
  TooManyRequests,
  Busy,
  Unauthorized,
  Unprocessable,
  UpstreamFailed,
  UpstreamTimeout
} from "../Errors.ts"
import { Health } from "../Health.ts"
import { MAX_SENTENCES, MAX_SENTIMENT_TEXT, SentimentResult } from "../Ml/Sentiment.ts"
import { TaskClassification } from "../Ml/TaskClassifier.ts"
import { MAX_TEXT } from "../Ml/Nlp.ts"
import { Plan, PlanNames } from "../Plans.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { BoundedArray } from "../RequestFields.ts"

/** The authenticated avatar a tool call runs for (provided per call by the MCP edge). */
export class CurrentAvatar extends Context.Tag("aigw/Mcp/CurrentAvatar")<CurrentAvatar, AvatarRecord>() {}

/** Tool annotation: the tool needs credentials (default). Open tools run for anyone. */
export class RequiresAuth extends Context.Reference<RequiresAuth>()("aigw/Mcp/RequiresAuth", { defaultValue: () => true }) {}

/** Tool annotation: each call counts against the caller's daily quota (capability tools). */
export class Metered extends Context.Reference<Metered>()("aigw/Mcp/Metered", { defaultValue: () => false }) {}

/** Every tool fails with one of the gateway's typed errors (rendered as an MCP tool error). */
export const ToolFailure = Schema.Union(
  BadRequest,
  Unprocessable,
  Unauthorized,
  Forbidden,
  NotFound,
  Conflict,
  PayloadTooLarge,
  QuotaExceeded,
  TooManyRequests,
  Busy,
  UpstreamFailed,
  UpstreamTimeout,
  NotAvailable,
  Rejected
)

/** An optional field that must be absent or valid (JSON has no `undefined`). */
const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

const PlanParam = Plan.annotations({
  description: `Subscription plan: ${PlanNames.join(", ")}`,
  message: () => ({ message: `plan must be one of ${PlanNames.join(", ")}`, override: true })
})

const Text = (what: string, max = MAX_TEXT) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => `${what} must not be empty` }),
    Schema.maxLength(max, { message: () => `${what} is limited to ${max} characters` })
  )

export const ChatMessage = Schema.Struct({
  role: Schema.Literal("system", "user", "assistant").annotations({
    description: "Who speaks: system (instructions), user or assistant (earlier replies)",
    message: () => ({ message: "role must be one of system, user, assistant", override: true })
  }),
  content: Schema.String.pipe(Schema.maxLength(2_000_000)).annotations({ description: "Message text" })
})

export const CompleteParams = {
  messages: BoundedArray(ChatMessage, {
    min: 1,
    max: 1000,
    minMessage: "messages must hold at least one message",
    description: "The conversation, oldest first; the last message is usually the user's question"
  }),
  // The HTTP routes' own fields (CompletionRoutes.ts): one rule for both surfaces.
  provider: ProviderName,
  model: ModelName,
  temperature: optional(Temperature),
  maxTokens: optional(MaxTokens),
  injectAvatarContext: optional(
    Schema.Boolean.annotations({ description: "Prepend the caller's identity, karma and plan to the system prompt" })
  ),
  useFAHRN: optional(
    Schema.Boolean.annotations({ description: "First make one planning call (the reasoning network's planner) on the last user message and give its plan to the answer call" })
  ),
  useHolonicBraid: optional(
    Schema.Boolean.annotations({ description: "Give the answer call the best reasoning graph (braid) of the request's task type: yours, learned from your dispatches once they succeeded, or Admin-published" })
  ),
  routing: optional(RoutingOptions)
}

/** Title and hints of a tool that reads only (no side effects but quota). */
const readOnly = <T extends Tool.Tool<any, any, any>>(tool: T, title: string): T =>
  tool
    .annotate(Tool.Title, title)
    .annotate(Tool.Readonly, true)
    .annotate(Tool.Destructive, false)
    .annotate(Tool.Idempotent, true)
    .annotate(Tool.OpenWorld, false) as T

/**
 * A capability tool: counts against the quota like its HTTP endpoint. `readsOnly` marks one that
 * changes nothing, so a client may repeat it (embeddings: the same texts give the same vectors).
 */
const capability = <T extends Tool.Tool<any, any, any>>(tool: T, title: string, readsOnly = false): T =>
  tool
    .annotate(Metered, true)
    .annotate(Tool.Title, title)
    .annotate(Tool.Readonly, readsOnly)
    .annotate(Tool.Destructive, false)
    .annotate(Tool.Idempotent, readsOnly)
    .annotate(Tool.OpenWorld, true) as T

const capabilityTool = <const N extends string, F extends Schema.Struct.Fields>(name: N, title: string, description: string, parameters: F, readsOnly = false) =>
  capability(Tool.make(name, { description, parameters, success: Schema.Unknown, failure: ToolFailure, dependencies: [CurrentAvatar] }), title, readsOnly)

export const Complete = capabilityTool("gateway_complete", "Chat completion", "Chat completion through the gateway. With provider/model auto the gateway picks the best-fit configured model for the caller's plan and falls back on upstream failures. Returns the reply (content), tool calls, finish reason, token usage, cost in USD and the provider/model used. Counts against the daily quota.", CompleteParams)

export const Embed = capabilityTool("gateway_embed", "Embeddings", "Embed texts with an embedding model. With provider/model auto the gateway picks the best-fit configured embedding model for the caller's plan. Returns one vector per text (in order), the dimensions, token usage, cost in USD and the provider/model used. Counts against the daily quota.", EmbeddingsBody.fields, true)

export const Rerank = capabilityTool(
  "gateway_rerank",
  "Rerank",
  "Rerank documents against a query: the topN best (default 5), best first, with their original indexes and scores. With provider/model auto the gateway uses a configured rerank model (Cohere, Voyage, Jina, Mixedbread) the caller's plan allows, else BM25 in-process (provider local). Returns the provider/model used, usage and cost in USD. Counts against the daily quota.",
  RerankBody.fields,
  true
)

export const GenerateImage = capabilityTool(
  "gateway_generate_image",
  "Image generation",
  "Generate images from a prompt with an OpenAI-format image API (provider auto: the first configured). width and height go together. Returns image URLs or base64 data. Counts against the daily quota.",
  ImagesBody.fields
)

const SolveParams = Struct.omit(DispatchBody.fields, "mode")

export const FahrnSolve = capabilityTool(
  "gateway_fahrn_solve",
  "Reasoning network: solve",
  "Run the full reasoning pipeline in one call (Hybrid): rank the avatar's agents for the problem, the best one plans, the next ones work on the plan in parallel, a synthesiser merges, a judge scores the answer. Returns the final answer, every step, the graph that ran as Mermaid, the budget used and the verdict. Counts against the daily quota.",
  SolveParams
)

export const FahrnDispatch = capabilityTool(
  "gateway_fahrn_dispatch",
  "Reasoning network: dispatch",
  "Reasoning dispatch with an explicit mode: Serial (each agent builds on the previous), Parallel (independent answers merged by a synthesiser), Hybrid (the best agent plans, the others work on the plan, a synthesiser merges) or Decomposed (a planner splits the problem into subtasks with dependencies, each runs on its best agent, a synthesiser merges). Within budget (maxCalls, maxTokens, maxSeconds); partial results when a branch fails. Counts against the daily quota.",
  DispatchBody.fields
)

export const OrchestrateCrew = capabilityTool("gateway_orchestrate_crew", "Crew", "Same as POST /v1/orchestrate/crew: run a crew of agents on tasks (sequential or hierarchical), each task on the model that fits its type within the plan.", CrewBody.fields)
export const OrchestrateConversation = capabilityTool(
  "gateway_orchestrate_conversation",
  "Conversation",
  "Same as POST /v1/orchestrate/conversation: agents take turns (one completion each) until the termination keyword or max_rounds; answers the first agent's last message and the transcript.",
  ConversationBody.fields
)
export const OrchestrateGraphNode = capabilityTool(
  "gateway_orchestrate_graph_node",
  "Graph node",
  "Same as POST /v1/orchestrate/graph-node: run one node's model step and return the extended state and next node; with thread_id the state is checkpointed and carried to the next call.",
  GraphNodeBody.fields
)

/** A data tool of the reasoning-network, braid, holon and registry families: not metered. */
const dataTool = <const N extends string, F extends Schema.Struct.Fields>(name: N, title: string, description: string, parameters: F, readonly_ = false) =>
  Tool.make(name, { description, parameters, success: Schema.Unknown, failure: ToolFailure, dependencies: [CurrentAvatar] })
    .annotate(Tool.Title, title)
    .annotate(Tool.Readonly, readonly_)
    .annotate(Tool.Destructive, false)
    .annotate(Tool.Idempotent, readonly_)
    .annotate(Tool.OpenWorld, false)

const OptionalTaskType = Schema.optional(TaskTypeSchema.annotations({ message: () => "taskType must be one of code, math, research, creative, analysis, summarization, translation, general" }))
const RequiredTaskType = TaskTypeSchema.annotations({ message: () => "taskCategory must be one of code, math, research, creative, analysis, summarization, translation, general" })

export const FahrnRegisterAgent = dataTool("gateway_fahrn_register_agent", "Register agent", "Register a reasoning agent: name, description, the task types it is good at (skills) and optionally a pinned provider/model. Returns the agent with its id; gateway_fahrn_get_agents scores it.", RegisterAgentParams)
export const FahrnGetAgents = dataTool(
  "gateway_fahrn_get_agents",
  "List agents",
  "List your agents (registered, catalogue and the eight built-in roles) ranked as dispatch ranks them for a task: composite = 0.5 fit (embedding similarity of task and skill, plus declared skills) + 0.3 smoothed success rate + 0.12 latency + 0.08 cost, each with why; best first.",
  { taskType: OptionalTaskType, task: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(50_000)).annotations({ description: "The task text fit is measured against; default: the task type's name" })) },
  true
)
export const FahrnRecordOutcome = dataTool(
  "gateway_fahrn_record_outcome",
  "Record dispatch outcome",
  "Same as POST /v1/reasoning-network/feedback: your verdict (success, optional score 0-1 and comment) on one of your dispatches replaces the judge's in its agents' scores and its learned braid graph; each dispatch counts once. Not metered.",
  FeedbackParams
)
export const FahrnSeedOpenServAgents = dataTool("gateway_fahrn_seed_openserv_agents", "Seed catalogue agents", "Create one agent per chat model of the third-party (OpenServ) catalogue; existing ones are kept. Returns how many were created.", {})
export const FahrnGetAgentSkill = dataTool("gateway_fahrn_get_agent_skill", "Agent skill", "Get an agent's evolved skill document (Markdown) for a task category; version 0 is the starting document.", { agentId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)), taskCategory: RequiredTaskType }, true)
export const FahrnEvolveAgentSkill = capability(
  Tool.make("gateway_fahrn_evolve_agent_skill", {
    description: "Run one skill-evolution epoch: a model (the agent's provider/model, else auto) rewrites the agent's skill document for the task category from the feedback of a run; success (if given) is recorded in the agent's score. Counts against the daily quota.",
    parameters: {
      agentId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
      taskCategory: RequiredTaskType,
      feedback: Schema.String.pipe(Schema.minLength(1, { message: () => "feedback must not be empty" }), Schema.maxLength(20_000)),
      success: Schema.optional(Schema.Boolean)
    },
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "Evolve agent skill"
)

export const BraidFindGraph = dataTool("gateway_braid_find_graph", "Find reasoning graph", "Look up the best reasoning graph (Mermaid) for a task type among your own graphs and those an Admin published, by smoothed success rate, with its quality metadata; null when there is none.", { taskType: RequiredTaskType.annotations({ message: () => "taskType must be one of code, math, research, creative, analysis, summarization, translation, general" }) }, true)
export const BraidSaveGraph = dataTool("gateway_braid_save_graph", "Save reasoning graph", "Store a Mermaid reasoning graph (a flowchart with at least one edge) for a task type; it is private to you unless an Admin publishes it (publish: true) for every avatar.", SaveGraphParams)
export const BraidRecordOutcome = dataTool("gateway_braid_record_outcome", "Record graph outcome", "Feed a solver outcome (success, optional score 0-1) into a graph's quality metadata: your own graphs, or a published one once per completion of yours that used it.", {
  graphId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  success: Schema.Boolean,
  score: Schema.optional(Schema.Number.pipe(Schema.between(0, 1, { message: () => "score must be between 0 and 1" })))
})

export const MemoryGetEarthHolon = dataTool("gateway_memory_get_earth_holon", "Earth holon", "Get (creating it on first use) the top-level planetary memory unit, id \"earth\".", {}, true)
export const MemoryGetOrCreateHolon = dataTool("gateway_memory_get_or_create_holon", "Get or create holon", "Find or create a memory unit by name under a parent (default earth) at any level (continent, country, city, community, household …). Idempotent: the id derives from parent, owner and name, so each avatar gets its own holon of a name.", HolonParams.getOrCreate)
export const MemorySetMembraneRule = dataTool("gateway_memory_set_membrane_rule", "Set membrane rule", "Set a holon's consent-governed upward-propagation rule: which tags may pass to the parent and whether the author's consent is required (always true: an item without its author's consent never propagates). Owner or Admin only.", HolonParams.membrane)
// Writes to holons anyone may write to (earth, another avatar's holon) count against the daily quota: unmetered,
// one avatar filled a shared holon with tens of thousands of items at no cost.
export const MemoryRecord = dataTool("gateway_memory_record", "Record memory", "Record a memory item at a holon, with tags and consent (without consent it stays private to you and never propagates). Counts against the daily quota.", HolonParams.record)
  .annotate(Metered, true)
export const MemoryPropagate = dataTool("gateway_memory_propagate", "Propagate memories", "Propagate the holon's permitted memories (per its membrane rule) one level up; each item once. Counts against the daily quota.", HolonParams.propagate)
  .annotate(Metered, true)
export const MemoryPropagateUp = dataTool("gateway_memory_propagate_up", "Propagate memories up", "Propagate permitted memories level by level, N levels up or to the root; each level applies its own membrane rule. Counts against the daily quota.", HolonParams.propagateUp)
  .annotate(Metered, true)
export const MemorySearch = dataTool("gateway_memory_search", "Search holon", "Semantic search (local embeddings, cosine) over the memory items of a holon that you may see: yours and consented ones.", HolonParams.search, true)
export const MemoryExternalListProviders = dataTool("gateway_memory_external_list_providers", "External memory providers", "List the external memory providers (mem0, zep, letta, supermemory): whether each is configured, and when not what to set. gateway_memory_external_add and gateway_memory_external_search use them.", {}, true)
export const MemoryExternalAdd = capabilityTool(
  "gateway_memory_external_add",
  "Add to external memory",
  "Add a memory to an external memory provider (mem0, zep, letta, supermemory; auto: the first configured), kept under an id derived from your avatar so only you can search it; the same memories as POST /v1/memory/store with that provider and no userId. Returns the provider's memory id. Counts against the daily quota.",
  ExternalAddParams
)
export const MemoryExternalSearch = capabilityTool(
  "gateway_memory_external_search",
  "Search external memory",
  "Semantic search over your memories at an external memory provider (mem0, zep, letta, supermemory; auto: the first configured): the best matches with the provider's score (null when it gives none), metadata and creation time. Counts against the daily quota.",
  ExternalSearchParams,
  true
)

export const OrchestratorRegister = dataTool("gateway_orchestrator_register", "Register orchestrator", "Register an external agent or orchestrator endpoint (openai-chat, a2a or http-json); the URL must be public http(s).", OrchestratorParams.register)
export const OrchestratorList = dataTool("gateway_orchestrator_list", "List orchestrators", "List your registered orchestrator endpoints.", {}, true)
export const OrchestratorInvoke = capability(
  Tool.make("gateway_orchestrator_invoke", {
    description: "Invoke a registered orchestrator with an input over its protocol (OpenAI chat completions, A2A message/send, or a JSON POST) and return its output. Counts against the daily quota.",
    parameters: OrchestratorParams.invoke,
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "Invoke orchestrator"
)

export const ListModels = readOnly(
  Tool.make("gateway_list_models", {
    description:
      "Browse the model catalogue: id, name, provider, minimum plan, USD prices per 1000 input/output tokens, context window, vision and function-calling support. Filter by plan (models available on that plan) and/or capability.",
    parameters: {
      plan: optional(PlanParam),
      capability: optional(ModelCapability.annotations({
        description: "chat, embeddings or rerank (model kind), tools (function calling) or vision (image input)",
        message: () => ({ message: "capability must be one of chat, embeddings, rerank, tools, vision", override: true })
      }))
    },
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "List models"
)

export const GetModel = readOnly(
  Tool.make("gateway_get_model", {
    description: "Full detail of one model: catalogue entry plus provider id, kind, max output tokens, quality tier and pricing source.",
    parameters: {
      modelId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
        description: "Model id as listed by gateway_list_models, e.g. gpt-4o-mini"
      })
    },
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "Model detail"
)

export const ListProviders = readOnly(
  Tool.make("gateway_list_providers", {
    description:
      "All upstream providers with adapter, minimum plan (tier), endpoint types, whether credentials are configured on this gateway, live status and model ids.",
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "List providers"
)

export const EstimateCost = readOnly(
  Tool.make("gateway_estimate_cost", {
    description: "Estimate the USD cost of a call from token counts and the catalogue's list prices for a provider's model.",
    parameters: EstimateRequest.fields,
    success: Schema.Struct({ estimatedUSD: Schema.Number, note: Schema.String }),
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "Estimate cost"
)

export const GetUsage = readOnly(
  Tool.make("gateway_get_usage", {
    description:
      "The caller's usage today and this month: calls used, daily limit (plan base limit x karma multiplier), remaining calls, karma multiplier, monthly spend in USD, tokens today. plan/karma compute a what-if limit only; they never change the enforced quota (under `enforced`).",
    parameters: {
      plan: optional(PlanParam.annotations({ description: "What-if plan for the limit calculation" })),
      karma: optional(
        Schema.Number.pipe(
          Schema.int({ message: () => "karma must be an integer" }),
          Schema.between(-1e12, 1e12, { message: () => "karma must be between -1e12 and 1e12" })
        ).annotations({ description: "What-if karma for the limit calculation" })
      )
    },
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "Usage and quota"
)

export const AvatarContext = Schema.Struct({
  id: Schema.String,
  username: Schema.String,
  title: Schema.String,
  avatarType: Schema.String,
  plan: Schema.String,
  karma: Schema.Number,
  karmaMultiplier: Schema.Number,
  dailyCallLimit: Schema.Number,
  contextBlock: Schema.String
})

export const GetAvatarContext = readOnly(
  Tool.make("gateway_get_avatar_context", {
    description:
      "The caller's avatar context: identity (id, username, title, type), karma, karma multiplier, plan and daily call limit, plus the context block that injectAvatarContext prepends to prompts.",
    success: AvatarContext,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "Avatar context"
)

export const ListOpenServModels = readOnly(
  Tool.make("gateway_list_openserv_models", {
    description:
      "Chat models in the third-party (OpenServ) connector format: id (aigw/<model>), name, provider, context window, capabilities (chat, tools, vision). Same data as GET /v1/openserv/models, under `models`.",
    success: Schema.Unknown,
    failure: ToolFailure,
    dependencies: [CurrentAvatar]
  }),
  "List OpenServ models"
)

export const HealthTool = readOnly(
  Tool.make("gateway_health", {
    description: "Gateway status, API version and UTC timestamp. Needs no credentials.",
    success: Health,
    failure: ToolFailure
  }).annotate(RequiresAuth, false),
  "Health"
)

/** An in-process ML tool on one text: reads only, but counts against the quota like its HTTP endpoint. */
const mlTool = <const N extends string, S extends Schema.Schema.Any>(name: N, title: string, success: S, text: string, description: string, maxText = MAX_TEXT) =>
  readOnly(
    Tool.make(name, {
      description,
      parameters: { text: Text("text", maxText).annotations({ description: text }) },
      success,
      failure: ToolFailure,
      dependencies: [CurrentAvatar]
    }).annotate(Metered, true),
    title
  )

export const ClassifyTask = mlTool("gateway_ml_classify_task", "Classify task", TaskClassification, "The request or prompt to classify",
  "Classify what kind of task a request is (code, math, research, creative, analysis, summarization, translation, general) with an in-process naive Bayes classifier; returns the task type, its probability and every type's probability. No upstream call. Counts against the daily quota.")

export const SentimentTool = mlTool("gateway_ml_sentiment", "Sentiment", SentimentResult, `English text to analyse, at most ${MAX_SENTIMENT_TEXT} characters`,
  `In-process English sentiment analysis (lexicon with negation and emoji handling): score from -1 (negative) to +1 (positive), label positive/neutral/negative, and the scores of the first ${MAX_SENTENCES} sentences with sentenceCount, how many there are. No upstream call. Counts against the daily quota.`, MAX_SENTIMENT_TEXT)

export const GatewayToolkit = Toolkit.make(
  Complete,
  Embed,
  Rerank,
  GenerateImage,
  FahrnSolve,
  FahrnDispatch,
  OrchestrateCrew,
  OrchestrateConversation,
  OrchestrateGraphNode,
  FahrnRegisterAgent,
  FahrnGetAgents,
  FahrnRecordOutcome,
  FahrnSeedOpenServAgents,
  FahrnGetAgentSkill,
  FahrnEvolveAgentSkill,
  BraidFindGraph,
  BraidSaveGraph,
  BraidRecordOutcome,
  MemoryGetEarthHolon,
  MemoryGetOrCreateHolon,
  MemorySetMembraneRule,
  MemoryRecord,
  MemoryPropagate,
  MemoryPropagateUp,
  MemorySearch,
  MemoryExternalListProviders,
  MemoryExternalAdd,
  MemoryExternalSearch,
  OrchestratorRegister,
  OrchestratorList,
  OrchestratorInvoke,
  ListModels,
  GetModel,
  ListProviders,
  EstimateCost,
  GetUsage,
  GetAvatarContext,
  ListOpenServModels,
  HealthTool,
  ClassifyTask,
  SentimentTool
)

export const toolNames: ReadonlyArray<string> = Object.keys(GatewayToolkit.tools)
