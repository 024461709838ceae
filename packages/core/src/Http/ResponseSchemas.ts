/**
 * Schemas of the `result` of the main routes, for /openapi.json (the `success` of a route
 * declaration). The services return plain objects; each schema here is checked against the type
 * of what its service really returns (`matches` below: a drift fails the typecheck), and
 * hosts/node-http/test/openapi.e2e.test.ts validates real answers against the document.
 */
import { type Context, type Effect, Schema, type Types } from "effect"
import type { ApiKeyView as ApiKeyViewType } from "../Accounts/ApiKeys.ts"
import type { AuthResult as AuthResultType, AvatarView as AvatarViewType, publicView } from "../Accounts/Avatars.ts"
import { AvatarTypeSchema } from "../Accounts/Schemas.ts"
import type { CompletionResult as CompletionResultType } from "../Capabilities/Completions.ts"
import type { EmbeddingsResult as EmbeddingsResultType } from "../Capabilities/Embeddings.ts"
import type { check as guardrailsCheck } from "../Capabilities/Guardrails.ts"
import type { ExecutionResult as ExecutionResultType } from "../Capabilities/CodeExecution.ts"
import { CODE_LANGUAGES } from "../Providers/Sandboxes/CodeEndpoint.ts"
import type { parse as parseDocument } from "../Capabilities/Documents.ts"
import type { GraphRag } from "../Capabilities/GraphRag.ts"
import type { Learning } from "../Capabilities/Learning.ts"
import type { LlmTasks } from "../Capabilities/LlmTasks.ts"
import type { Media } from "../Capabilities/Media.ts"
import type { Memory } from "../Capabilities/Memory.ts"
import type { Orchestration } from "../Capabilities/Orchestration.ts"
import type { ReasoningNetwork } from "../Capabilities/ReasoningNetwork.ts"
import type { RerankResult as RerankResultType } from "../Capabilities/Rerank.ts"
import type { modelDetail, modelView, openServView } from "../Catalog/Catalog.ts"
import type { estimateCost, listProviders } from "../Catalog/Queries.ts"
import type { Jobs } from "../Jobs/Jobs.ts"
import { TaskClassification, TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import { ModelPlan, Plan } from "../Plans.ts"
import type { UsageSummary as UsageSummaryType } from "../Usage.ts"
import type { toChatCompletion } from "./OpenAiRoutes.ts"
import type { toAnthropicMessage } from "./AnthropicRoutes.ts"
import type { UpstreamFailed } from "../Errors.ts"

/** Compile-time check: the schema's type and the service's type are the same (up to readonly). */
type Same<A, B> = [Types.DeepMutable<A>] extends [Types.DeepMutable<B>] ? [Types.DeepMutable<B>] extends [Types.DeepMutable<A>] ? true : false
  : false
const matches = <S extends Schema.Schema.Any, T>(_: Same<Schema.Schema.Type<S>, T>) => {}
/**
 * The service's type with the fields `K` taken from the schema, for fields the service types more
 * loosely than it answers (a literal built as a plain string, a date that is never null): those are
 * left to the e2e test, the other fields stay checked both ways.
 */
type Overriding<T, S extends Schema.Schema.Any, K extends keyof T & keyof Schema.Schema.Type<S>> = Omit<T, K> & Pick<Schema.Schema.Type<S>, K>

const IsoDateTime = Schema.String.annotations({ description: "ISO 8601 date-time (UTC)" })

// ---- Avatar API ----

export const AvatarView = Schema.Struct({
  id: Schema.String,
  username: Schema.String,
  email: Schema.String,
  title: Schema.String,
  description: Schema.String,
  image: Schema.String,
  dob: Schema.NullOr(Schema.String),
  karmaTotal: Schema.Number,
  AvatarType: AvatarTypeSchema,
  providerType: Schema.String,
  plan: Plan,
  isVerified: Schema.Boolean,
  pendingEmail: Schema.NullOr(Schema.String),
  isActive: Schema.Boolean,
  createdDate: IsoDateTime,
  modifiedDate: IsoDateTime,
  deletedDate: Schema.NullOr(IsoDateTime)
}).annotations({ identifier: "Avatar", description: "An avatar profile as its owner and Admins see it" })
matches<typeof AvatarView, AvatarViewType>(true)

export const PublicAvatarView = Schema.Struct({
  id: Schema.String,
  username: Schema.String,
  title: Schema.String,
  description: Schema.String,
  image: Schema.String,
  karmaTotal: Schema.Number,
  AvatarType: AvatarTypeSchema,
  isActive: Schema.Boolean,
  createdDate: IsoDateTime
}).annotations({ identifier: "PublicAvatar", description: "The public fields of another avatar's profile" })
matches<typeof PublicAvatarView, ReturnType<typeof publicView>>(true)

export const AvatarOrPublicView = Schema.Union(AvatarView, PublicAvatarView)
export const AvatarList = Schema.Array(AvatarView)

export const AuthResult = Schema.Struct({
  jwtToken: Schema.String,
  id: Schema.String,
  username: Schema.String,
  email: Schema.String,
  karmaTotal: Schema.Number,
  AvatarType: AvatarTypeSchema,
  expiresAtUtc: IsoDateTime
}).annotations({ identifier: "AuthResult" })
matches<typeof AuthResult, AuthResultType>(true)

// ---- API keys, plans, usage ----

const apiKeyFields = {
  id: Schema.String,
  name: Schema.String,
  prefix: Schema.String.annotations({ description: "The first characters of the key, to recognise it" }),
  createdAt: IsoDateTime,
  lastUsedAt: Schema.NullOr(IsoDateTime),
  revokedAt: Schema.NullOr(IsoDateTime)
}
export const ApiKeyView = Schema.Struct(apiKeyFields).annotations({ identifier: "ApiKey" })
matches<typeof ApiKeyView, ApiKeyViewType>(true)
export const ApiKeyList = Schema.Array(ApiKeyView)
export const ApiKeyCreated = Schema.Struct({
  ...apiKeyFields,
  key: Schema.String.annotations({ description: "The secret: shown only in this answer" })
}).annotations({ identifier: "ApiKeyCreated" })
matches<typeof ApiKeyCreated, ApiKeyViewType & { key: string }>(true)
export const ApiKeyRevoked = Schema.Struct({
  id: Schema.String,
  revoked: Schema.Literal(true),
  jobsStopped: Schema.optional(Schema.Literal(true).annotations({ description: "With stopJobs=true: the jobs the key submitted are being stopped" }))
})
export const PlanSet = Schema.Struct({ id: Schema.String, plan: Plan })

export const UsageSummary = Schema.Struct({
  dailyCallsUsed: Schema.Number,
  dailyCallLimit: Schema.Number,
  remainingCallsToday: Schema.Number,
  karmaMultiplier: Schema.Number,
  monthlySpendUSD: Schema.Number,
  dailyTokensUsed: Schema.Number,
  periodMonth: Schema.String.annotations({ description: "YYYY-MM (UTC)" }),
  periodDay: Schema.String.annotations({ description: "YYYY-MM-DD (UTC)" }),
  plan: Plan.annotations({ description: "The plan the limit above was computed for" }),
  whatIf: Schema.Boolean.annotations({ description: "True when plan/karma came from the query (a preview)" }),
  enforced: Schema.Struct({ plan: Plan, karmaMultiplier: Schema.Number, dailyCallLimit: Schema.Number })
}).annotations({ identifier: "UsageSummary" })
matches<typeof UsageSummary, UsageSummaryType>(true)

// ---- Catalogue and cost ----

const modelViewFields = {
  id: Schema.String,
  name: Schema.String,
  providerName: Schema.String,
  minPlanLabel: ModelPlan,
  inputPer1kUSD: Schema.Number,
  outputPer1kUSD: Schema.Number,
  contextWindow: Schema.Number,
  supportsVision: Schema.Boolean,
  supportsFunctions: Schema.Boolean
}
export const ModelView = Schema.Struct(modelViewFields).annotations({ identifier: "Model" })
matches<typeof ModelView, ReturnType<typeof modelView>>(true)
export const ModelList = Schema.Struct({ total: Schema.Number, models: Schema.Array(ModelView) }).annotations({ identifier: "ModelList" })

export const ModelDetail = Schema.Struct({
  ...modelViewFields,
  provider: Schema.String,
  kind: Schema.Literal("chat", "embeddings", "rerank"),
  maxOutputTokens: Schema.Number,
  qualityTier: Schema.Number,
  pricingSource: Schema.String
}).annotations({ identifier: "ModelDetail" })
matches<typeof ModelDetail, ReturnType<typeof modelDetail>>(true)

const ProviderView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  adapter: Schema.Literal("openai", "anthropic", "gemini", "cohere", "bespoke"),
  baseUrl: Schema.String,
  auth: Schema.Literal("bearer", "x-api-key", "x-goog-api-key", "api-key", "token", "key", "basic"),
  endpointTypes: Schema.Array(Schema.String).annotations({ description: "What aigw serves through the provider." }),
  offers: Schema.Array(Schema.String).annotations({ description: "What the upstream offers; types not in endpointTypes are not served yet." }),
  notServed: Schema.Array(Schema.Struct({ type: Schema.String, reason: Schema.String })).annotations({
    description: "The offered endpoint types aigw does not serve through this provider, each with the reason."
  }),
  minPlan: Plan,
  minPlanLabel: Plan,
  configured: Schema.Boolean,
  status: Schema.String,
  models: Schema.Array(Schema.String),
  website: Schema.String
}).annotations({ identifier: "Provider" })
export const ProviderList = Schema.Struct({ total: Schema.Number, providers: Schema.Array(ProviderView) }).annotations({
  identifier: "ProviderList"
})
type ProviderListType = Effect.Effect.Success<typeof listProviders>
// endpointTypes and status are string literal unions in the service: checked one way (they are strings).
const _providers: typeof ProviderList.Type = null as unknown as ProviderListType
void _providers

export const OpenServModel = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  provider: Schema.String,
  contextWindow: Schema.Number,
  capabilities: Schema.Array(Schema.String)
}).annotations({ identifier: "OpenServModel" })
matches<typeof OpenServModel, ReturnType<typeof openServView>>(true)
export const OpenServModelList = Schema.Array(OpenServModel)

export const CostEstimate = Schema.Struct({ estimatedUSD: Schema.Number, note: Schema.String }).annotations({ identifier: "CostEstimate" })
matches<typeof CostEstimate, Effect.Effect.Success<ReturnType<typeof estimateCost>>>(true)

// ---- Completions and embeddings ----

const Fallback = Schema.Struct({ provider: Schema.String, model: Schema.String, error: Schema.String }).annotations({
  identifier: "Fallback",
  description: "A candidate that failed with a retryable error before the answering one"
})
const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String.annotations({ description: "JSON text of the arguments" }),
  signature: Schema.optional(Schema.String.annotations({ description: "The upstream's signature of the call (Gemini's thoughtSignature): send it back with the call in the next turn's history" }))
}).annotations({ identifier: "ToolCall" })
const FinishReason = Schema.Literal("stop", "length", "tool_calls", "content_filter", "error")

export const CompletionResult = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  content: Schema.String,
  message: Schema.Struct({ role: Schema.Literal("assistant"), content: Schema.String, toolCalls: Schema.Array(ToolCall) }),
  toolCalls: Schema.Array(ToolCall),
  finishReason: FinishReason,
  stopSequence: Schema.optional(Schema.String.annotations({ description: "The stop sequence that ended the answer, when the upstream says which (Anthropic)" })),
  usage: Schema.Struct({
    promptTokens: Schema.Number,
    completionTokens: Schema.Number,
    totalTokens: Schema.Number.annotations({ description: "Every token of the call: prompt, cache reads and writes, completion" }),
    estimated: Schema.Boolean.annotations({ description: "Counted by the gateway's tokenizer (the upstream reported none)" }),
    cacheCreationTokens: Schema.optional(Schema.Number.annotations({ description: "Prompt tokens written to the upstream's prompt cache (not in promptTokens)" })),
    cacheReadTokens: Schema.optional(Schema.Number.annotations({ description: "Prompt tokens read from the upstream's prompt cache (not in promptTokens)" })),
    cacheCreation1hTokens: Schema.optional(Schema.Number.annotations({ description: "Of cacheCreationTokens, those written for an hour (Anthropic's ttl 1h), priced at twice the input price" })),
    reasoningTokens: Schema.optional(Schema.Number.annotations({ description: "Of completionTokens, those of the model's reasoning" })),
    tokenDetails: Schema.optional(Schema.Struct({
      prompt: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number })),
      completion: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number }))
    }).annotations({
      description:
        "The upstream's other counts of the prompt and completion as it reported them (an OpenAI-format upstream's audio_tokens, accepted_prediction_tokens, rejected_prediction_tokens): parts of promptTokens and completionTokens, not counted again"
    }))
  }),
  costUSD: Schema.Number,
  costKnown: Schema.Boolean.annotations({ description: "False for a model without a known price (named outside the catalogue): costUSD is then 0" }),
  extra: Schema.optional(Schema.Struct({
    body: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    choice: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    message: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  }).annotations({ description: "Fields of an OpenAI-format upstream answer that the result does not model (logprobs, refusal, annotations, ...)" })),
  latencyMs: Schema.Number,
  fallbacks: Schema.Array(Fallback)
}).annotations({ identifier: "CompletionResult" })
matches<typeof CompletionResult, CompletionResultType>(true)

export const EmbeddingsResult = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  embeddings: Schema.Array(Schema.Array(Schema.Number)).annotations({ description: "One vector per text, in order" }),
  dimensions: Schema.Number,
  usage: Schema.Struct({ promptTokens: Schema.Number, totalTokens: Schema.Number, estimated: Schema.Boolean }),
  costUSD: Schema.Number,
  costKnown: Schema.Boolean,
  latencyMs: Schema.Number,
  fallbacks: Schema.Array(Fallback)
}).annotations({ identifier: "EmbeddingsResult" })
matches<typeof EmbeddingsResult, EmbeddingsResultType>(true)

// ---- Text tasks, guardrails, rerank ----

type Tasks = Context.Tag.Service<LlmTasks>
type TaskResult<K extends Exclude<keyof Tasks, "check">> = Effect.Effect.Success<ReturnType<Tasks[K]>>

/** What every LLM task answer carries about the call that produced it. */
const callInfoFields = {
  provider: Schema.String,
  model: Schema.String,
  usage: CompletionResult.fields.usage,
  costUSD: Schema.Number
}

/** An LLM task's answer: its own fields, then what it says about the call. */
const taskResult = <F extends Schema.Struct.Fields>(identifier: string, fields: F) =>
  Schema.Struct({ ...fields, ...callInfoFields }).annotations({ identifier })

export const TranslateResult = taskResult("TranslateResult", {
  translation: Schema.String,
  sourceLanguage: Schema.NullOr(Schema.String).annotations({ description: "ISO 639-1; the detected one when not given (null when undetected)" }),
  targetLanguage: Schema.String
})
matches<typeof TranslateResult, TaskResult<"translate">>(true)

export const ClassifyResult = taskResult("ClassifyResult", {
  label: Schema.String,
  scores: Schema.Array(Schema.Struct({ label: Schema.String, score: Schema.Number })).annotations({ description: "Every label, best first; they sum to 1" })
})
matches<typeof ClassifyResult, TaskResult<"classify">>(true)

export const ExtractResult = taskResult("ExtractResult", {
  data: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ description: "The object the model extracted" }),
  valid: Schema.Boolean.annotations({ description: "Whether `data` conforms to the given JSON Schema" }),
  errors: Schema.Array(Schema.String)
})
matches<typeof ExtractResult, TaskResult<"extract">>(true)

export const OptimisePromptResult = taskResult("OptimisePromptResult", {
  originalPrompt: Schema.String,
  optimisedPrompt: Schema.String,
  changes: Schema.Array(Schema.String)
})
matches<typeof OptimisePromptResult, TaskResult<"optimisePrompt">>(true)

export const GuardrailsResult = Schema.Struct({
  passed: Schema.Boolean,
  flagged: Schema.Boolean,
  categories: Schema.Array(Schema.String),
  findings: Schema.Array(Schema.Struct({
    type: Schema.String.annotations({ description: "local: pii.email, pii.phone, pii.payment_card, pii.iban, pii.us_ssn, secret.api_key, secret.private_key, prompt_injection; a vendor: its own detector or evaluator name (e.g. pii/email for Lakera)" }),
    start: Schema.Number,
    end: Schema.Number,
    preview: Schema.String.annotations({ description: "The match with all but its edges masked" })
  })),
  redactedText: Schema.String,
  provider: Schema.String.annotations({ description: "local (in-process), or the guardrail vendor that checked (lakera, patronus)" })
}).annotations({ identifier: "GuardrailsResult" })
// Finding types are a literal union in the service: checked one way (they are strings).
const _guardrails: typeof GuardrailsResult.Type = null as unknown as Effect.Effect.Success<ReturnType<typeof guardrailsCheck>>
void _guardrails

export const RerankResult = Schema.Struct({
  results: Schema.Array(Schema.Struct({ index: Schema.Number, document: Schema.String, score: Schema.Number })).annotations({
    description: "Best first; scores are the rerank model's relevance scores, or BM25 scores for local"
  }),
  provider: Schema.String.annotations({ description: "The rerank model's provider, or local (BM25 in-process)" }),
  model: Schema.String.annotations({ description: "The rerank model, or bm25" }),
  usage: Schema.optional(Schema.Struct({
    totalTokens: Schema.Number,
    estimated: Schema.Boolean,
    searchUnits: Schema.optional(Schema.Number).annotations({ description: "Searches billed, for providers that bill per search (Cohere)" })
  })).annotations({ description: "Upstream reranks only" }),
  costUSD: Schema.Number.annotations({ description: "0 for local" }),
  costKnown: Schema.Boolean,
  latencyMs: Schema.Number,
  fallbacks: Schema.Array(Fallback)
}).annotations({ identifier: "RerankResult" })
matches<typeof RerankResult, RerankResultType>(true)

// ---- Memory and code execution ----

type MemoryService = Context.Tag.Service<Memory>

export const MemoryStored = Schema.Struct({
  memoryId: Schema.String,
  userId: Schema.String,
  provider: Schema.String.annotations({ description: "Where the memory is kept: local, or the external memory provider (mem0, zep, letta, supermemory)" }),
  embedder: Schema.String.annotations({ description: "local, provider/model of the embedding model, or the external memory provider (which embeds itself)" }),
  dimensions: Schema.NullOr(Schema.Number).annotations({ description: "Vector dimensions; null when an external memory provider embeds" }),
  createdAtUtc: IsoDateTime
}).annotations({ identifier: "MemoryStored" })
matches<typeof MemoryStored, Effect.Effect.Success<ReturnType<MemoryService["store"]>>>(true)

export const MemoryQueryResult = Schema.Struct({
  userId: Schema.String,
  provider: Schema.String.annotations({ description: "Where the search ran: local, or the external memory provider" }),
  results: Schema.Array(Schema.Struct({
    memoryId: Schema.String,
    content: Schema.String,
    score: Schema.NullOr(Schema.Number).annotations({ description: "Cosine similarity (local), the external provider's relevance score, or null when it gives none (Letta)" }),
    embedder: Schema.String,
    createdAtUtc: Schema.NullOr(IsoDateTime).annotations({ description: "null when the external provider does not say" })
  })),
  searched: Schema.Number.annotations({ description: "How many memories were compared (external provider: how many it returned)" })
}).annotations({ identifier: "MemoryQueryResult" })
matches<typeof MemoryQueryResult, Effect.Effect.Success<ReturnType<MemoryService["query"]>>>(true)

export const ExecutionResult = Schema.Struct({
  stdout: Schema.String,
  stderr: Schema.String,
  result: Schema.NullOr(Schema.String).annotations({ description: "The value of the last expression (javascript) as JSON text" }),
  exitCode: Schema.Number,
  error: Schema.NullOr(Schema.String),
  timedOut: Schema.Boolean,
  language: Schema.Literal(...CODE_LANGUAGES),
  durationMs: Schema.Number,
  provider: Schema.String.annotations({ description: "local, or the remote sandbox vendor that ran the code (riza, daytona)" }),
  isolation: Schema.String.annotations({ description: "How the run was isolated: bwrap or process locally, remote at a vendor" })
}).annotations({ identifier: "ExecutionResult" })
matches<typeof ExecutionResult, ExecutionResultType>(true)

// ---- Media ----

type MediaService = Context.Tag.Service<Media>
type MediaResult<K extends Exclude<keyof MediaService, "check">> = Effect.Effect.Success<ReturnType<MediaService[K]>>

/** A moderation or transcription answer: its own fields, then the provider and model that served it. */
const servedResult = <F extends Schema.Struct.Fields>(identifier: string, fields: F) =>
  Schema.Struct({ ...fields, provider: Schema.String, model: Schema.String }).annotations({ identifier })

export const ImagesResult = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  images: Schema.Array(Schema.Struct({
    url: Schema.optional(Schema.String),
    b64Json: Schema.optional(Schema.String),
    revisedPrompt: Schema.optional(Schema.String)
  })),
  n: Schema.Number,
  size: Schema.optional(Schema.String.annotations({ description: "WIDTHxHEIGHT, when width and height were given" })),
  usage: Schema.optional(
    Schema.Struct({ promptTokens: Schema.Number, completionTokens: Schema.Number, totalTokens: Schema.Number, promptImageTokens: Schema.Number })
      .annotations({ description: "The tokens a token-billed image model reported (OpenAI's gpt-image models; promptImageTokens: of the prompt's, those of input images); absent for vendors that bill per image" })
  ),
  extra: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Unknown })
      .annotations({ description: "Fields of an OpenAI-format image answer the gateway does not model (gpt-image's background, output_format, quality, size), as the provider sent them" })
  )
}).annotations({ identifier: "ImagesResult" })
matches<typeof ImagesResult, MediaResult<"images">>(true)

export const ModerationResult = servedResult("ModerationResult", {
  flagged: Schema.Boolean,
  categories: Schema.Array(Schema.String).annotations({ description: "The categories flagged" }),
  categoryScores: Schema.Record({ key: Schema.String, value: Schema.Number })
})
matches<typeof ModerationResult, MediaResult<"moderation">>(true)

export const TranscriptionResult = servedResult("TranscriptionResult", {
  text: Schema.String,
  language: Schema.NullOr(Schema.String)
})
matches<typeof TranscriptionResult, MediaResult<"transcription">>(true)

// ---- Orchestration and the reasoning network ----

type OrchestrationService = Context.Tag.Service<Orchestration>
type OrchestrationResult<K extends keyof OrchestrationService> = Effect.Effect.Success<ReturnType<OrchestrationService[K]>>

/** Token counts and cost summed over every completion of a run (snake_case, as the frameworks name them). */
const TokenUsage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  total_tokens: Schema.Number,
  costUSD: Schema.Number
}).annotations({ identifier: "TokenUsage", description: "Summed over every completion of the run" })

/** Why a crew step runs on its model. */
const CrewAssignment = Schema.Struct({
  taskType: TaskTypeSchema,
  reason: Schema.String.annotations({ description: "The registered agent's pin, or the rule applied (highest quality for code, math, analysis, research; else the cheapest model of quality >= 3) with the model's quality and price" })
}).annotations({ identifier: "CrewAssignment" })

export const CrewResult = Schema.Struct({
  raw: Schema.String.annotations({ description: "The crew's final answer: the manager's (hierarchical) or the last task's output" }),
  process: Schema.Literal("sequential", "hierarchical"),
  tasks_output: Schema.Array(Schema.Struct({
    id: Schema.String,
    agent: Schema.String,
    description: Schema.String,
    expected_output: Schema.String,
    raw: Schema.String.annotations({ description: "The agent's output" }),
    taskType: TaskTypeSchema.annotations({ description: "The class of the agent's role and task, which chose its model" }),
    provider: Schema.String,
    model: Schema.String,
    assignment: CrewAssignment
  })),
  manager: Schema.optional(
    Schema.Struct({ raw: Schema.String, provider: Schema.String, model: Schema.String, assignment: CrewAssignment }).annotations({ description: "hierarchical only: the manager's call" })
  ),
  token_usage: TokenUsage
}).annotations({ identifier: "CrewResult" })
matches<typeof CrewResult, OrchestrationResult<"crew">>(true)

export const ConversationReply = Schema.Struct({
  role: Schema.Literal("assistant"),
  name: Schema.String.annotations({ description: "The replying agent: the first agent (assistant by default)" }),
  content: Schema.String.annotations({ description: "The first agent's last non-empty message" }),
  finish_reason: FinishReason,
  rounds: Schema.Number.annotations({ description: "Turns taken: one agent message, one completion each" }),
  max_rounds: Schema.Number.annotations({ description: "The request's max_rounds" }),
  stop_reason: Schema.Literal("termination_keyword", "max_rounds"),
  messages: Schema.Array(Schema.Struct({
    name: Schema.String,
    role: Schema.Literal("assistant"),
    content: Schema.String.annotations({ description: "Without the termination keyword" }),
    provider: Schema.String,
    model: Schema.String
  })).annotations({ description: "The transcript after the opening message, one entry per turn" }),
  ...callInfoFields
}).annotations({ identifier: "ConversationReply", description: "An assistant message (AutoGen-style)" })
// role is built as a plain string: checked by the e2e test.
matches<typeof ConversationReply, Overriding<OrchestrationResult<"conversation">, typeof ConversationReply, "role">>(true)

export const GraphNodeResult = Schema.Struct({
  state: Schema.Struct({
    messages: Schema.Array(Schema.Unknown).annotations({ description: "state.messages (else the request's messages) with the node's reply appended as { role: assistant, content, name }" }),
    __node__: Schema.String.annotations({ description: "The node that ran" }),
    __timestamp__: IsoDateTime
  }, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({ description: "The request's state, passed through and extended" }),
  nextNode: Schema.String.annotations({ description: "next_node, or __end__" }),
  checkpoint: Schema.optional(Schema.Struct({ thread_id: Schema.String, step: Schema.Number }).annotations({ description: "With a thread id only: the thread and the step this call stored" })),
  provider: Schema.String,
  model: Schema.String,
  usage: CompletionResult.fields.usage
}).annotations({ identifier: "GraphNodeResult" })
matches<typeof GraphNodeResult, OrchestrationResult<"graphNode">>(true)

const RunStatus = Schema.Literal("ok", "failed", "skipped")
const RunNode = Schema.Struct({
  id: Schema.String.annotations({ description: "n1, n2, ... in the order the calls were planned" }),
  kind: Schema.Literal("planner", "agent", "synthesiser", "judge"),
  agentId: Schema.NullOr(Schema.String).annotations({ description: "The registry agent that ran the call; null for the synthesiser and the judge" }),
  name: Schema.String,
  provider: Schema.NullOr(Schema.String).annotations({ description: "Null when the call was never made" }),
  model: Schema.NullOr(Schema.String),
  tokens: Schema.Number,
  ms: Schema.Number,
  costUSD: Schema.Number,
  status: RunStatus,
  error: Schema.NullOr(Schema.String).annotations({ description: "Why the call failed or was skipped (budget, upstream error, a dependency that did not succeed)" })
}).annotations({ identifier: "RunNode" })

export const DispatchResult = Schema.Struct({
  dispatchId: Schema.String.annotations({ description: "The run's id for feedback" }),
  taskType: TaskTypeSchema,
  classification: Schema.NullOr(TaskClassification.annotations({ identifier: "TaskClassification" })).annotations({ description: "The classifier's verdict; null when the request gave taskType" }),
  mode: Schema.Literal("Serial", "Parallel", "Hybrid", "Decomposed"),
  fit: Schema.Struct({
    embedder: Schema.String,
    semantic: Schema.Boolean,
    note: Schema.String.annotations({ description: "How fit was measured; says plainly when it is lexical (hashed words, no model)" })
  }),
  agents: Schema.Array(Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    source: Schema.Literal("builtin", "registered", "openserv"),
    provider: Schema.String,
    model: Schema.String,
    score: Schema.Struct({ fit: Schema.Number, successRate: Schema.Number, latency: Schema.Number, cost: Schema.Number, composite: Schema.Number }),
    why: Schema.String,
    chosen: Schema.Boolean.annotations({ description: "One of the best-ranked agents that form the sub-network" })
  })).annotations({ description: "Every agent ranked for the problem, best first" }),
  subNetwork: Schema.Array(Schema.String).annotations({ description: "The ids of the agents that had a node in the run" }),
  subtasks: Schema.Array(Schema.Struct({
    id: Schema.String,
    task: Schema.String,
    dependsOn: Schema.Array(Schema.String),
    taskType: TaskTypeSchema,
    agentId: Schema.String.annotations({ description: "The best-ranked agent for the subtask's text" }),
    node: Schema.String
  })).annotations({ description: "Decomposed: the planner's subtasks; empty for the other modes" }),
  steps: Schema.Array(Schema.Struct({
    node: Schema.String,
    kind: Schema.Literal("planner", "agent", "synthesiser", "judge"),
    agent: Schema.String.annotations({ description: "The agent id, or synthesiser" }),
    role: Schema.String,
    output: Schema.String,
    provider: Schema.NullOr(Schema.String),
    model: Schema.NullOr(Schema.String),
    status: RunStatus,
    error: Schema.NullOr(Schema.String)
  })).annotations({ description: "Every node but the judge's, in graph order" }),
  finalAnswer: Schema.String,
  partial: Schema.Boolean.annotations({ description: "True when a node failed or was skipped: the answer merges what succeeded" }),
  graph: Schema.Struct({
    nodes: Schema.Array(RunNode),
    edges: Schema.Array(Schema.Struct({ from: Schema.String, to: Schema.String })).annotations({ description: "Outputs flowing between nodes and the problem/answer terminals" })
  }),
  mermaid: Schema.String.annotations({ description: "The graph that ran as a Mermaid flowchart (name, provider/model, tokens, ms, a class per status)" }),
  plan: Schema.String.annotations({ description: "The same topology without per-run figures (agents and edges only): the braid graph candidate" }),
  budget: Schema.Struct({
    limits: Schema.Struct({ maxCalls: Schema.Number, maxTokens: Schema.Number, maxSeconds: Schema.Number }),
    used: Schema.Struct({ calls: Schema.Number, tokens: Schema.Number, ms: Schema.Number }),
    exhausted: Schema.NullOr(Schema.Literal("calls", "tokens", "time")).annotations({ description: "The limit that stopped a call; null when none did" })
  }),
  usage: TokenUsage,
  verdict: Schema.NullOr(Schema.Struct({
    success: Schema.Boolean.annotations({ description: "score >= 0.6" }),
    score: Schema.Number,
    source: Schema.Literal("judge"),
    reason: Schema.String
  })),
  verdictError: Schema.NullOr(Schema.String).annotations({ description: "Why there is no verdict (the judge failed, answered no score, or judge was false)" }),
  braidGraphId: Schema.String.annotations({ description: "The avatar's learned braid graph of the task type for this plan" })
}).annotations({ identifier: "DispatchResult" })
matches<typeof DispatchResult, Effect.Effect.Success<ReturnType<Context.Tag.Service<ReasoningNetwork>["dispatch"]>>>(true)

const JudgeVerdict = Schema.Struct({ success: Schema.Boolean, score: Schema.Number, source: Schema.Literal("judge"), reason: Schema.String })
const FeedbackVerdict = Schema.Struct({ success: Schema.Boolean, score: Schema.NullOr(Schema.Number), source: Schema.Literal("feedback"), comment: Schema.NullOr(Schema.String) })

export const FeedbackResult = Schema.Struct({
  dispatchId: Schema.String,
  problem: Schema.String,
  taskType: TaskTypeSchema,
  mode: Schema.Literal("Serial", "Parallel", "Hybrid", "Decomposed"),
  partial: Schema.Boolean,
  verdict: FeedbackVerdict.annotations({ description: "The verdict the dispatch now counts with" }),
  replaced: Schema.NullOr(Schema.Union(JudgeVerdict, FeedbackVerdict)).annotations({ description: "The verdict this one replaced (the judge's or earlier feedback): its counts were taken back" }),
  braidGraph: Schema.Struct({
    id: Schema.String,
    taskType: TaskTypeSchema,
    title: Schema.String,
    description: Schema.String,
    mermaid: Schema.String,
    createdBy: Schema.String,
    published: Schema.Boolean,
    source: Schema.optional(Schema.Literal("saved", "learned")),
    runs: Schema.Number,
    successes: Schema.Number,
    scoreSum: Schema.Number,
    scored: Schema.Number,
    quality: Schema.Struct({ runs: Schema.Number, successes: Schema.Number, successRate: Schema.Number, meanScore: Schema.NullOr(Schema.Number) })
  }).annotations({ description: "The avatar's learned braid graph for the dispatch's plan, updated" }),
  embedder: Schema.String,
  semantic: Schema.Boolean.annotations({ description: "False when fit is lexical (hashed words, no model)" }),
  agents: Schema.Array(Schema.Struct({
    agent: Schema.Struct({
      id: Schema.String,
      name: Schema.String,
      description: Schema.String,
      skills: Schema.Array(TaskTypeSchema),
      provider: Schema.String,
      model: Schema.String,
      source: Schema.Literal("builtin", "registered", "openserv"),
      runs: Schema.Number,
      successes: Schema.Number,
      totalMs: Schema.Number,
      totalCostUSD: Schema.Number,
      scoreSum: Schema.Number,
      scored: Schema.Number
    }),
    instructions: Schema.String,
    score: Schema.Struct({ fit: Schema.Number, successRate: Schema.Number, latency: Schema.Number, cost: Schema.Number, composite: Schema.Number }),
    why: Schema.String
  })).annotations({ description: "The dispatch's agents with their new scores, best first" })
}).annotations({ identifier: "FeedbackResult" })
matches<typeof FeedbackResult, Effect.Effect.Success<ReturnType<Context.Tag.Service<Learning>["feedback"]>>>(true)

// ---- Documents and graph retrieval ----

export const DocumentParseResult = Schema.Struct({
  filename: Schema.String,
  mimeType: Schema.NullOr(Schema.String),
  format: Schema.Literal("text", "markdown", "csv", "json", "html", "pdf", "docx"),
  text: Schema.String,
  characters: Schema.Number,
  words: Schema.Number,
  rows: Schema.optional(Schema.Array(Schema.Array(Schema.String)).annotations({ description: "csv: the fields of every row, the first row included" })),
  columns: Schema.optional(Schema.Array(Schema.String).annotations({ description: "csv: the first row" })),
  data: Schema.optional(Schema.Unknown.annotations({ description: "json: the parsed document" })),
  pages: Schema.optional(Schema.Number.annotations({ description: "pdf, or a vendor that reports pages: the page count" })),
  pageTexts: Schema.optional(Schema.Array(Schema.String).annotations({ description: "pdf, or a vendor that tells which page each part is on: the text of each page" })),
  provider: Schema.String.annotations({ description: "local (in-process), or the vendor that parsed it (unstructured, llamaparse, reducto, landingai)" })
}).annotations({ identifier: "DocumentParseResult" })
// The per-format fields are gathered in a record the service's type does not show: the e2e tests check them.
matches<typeof DocumentParseResult, Effect.Effect.Success<ReturnType<typeof parseDocument>>>(true)

export const GraphRagAnswer = Schema.Struct({
  answer: Schema.String.annotations({ description: "The model's answer, citing sources by their n as [n]" }),
  sources: Schema.Array(Schema.Struct({
    n: Schema.Number,
    memoryId: Schema.String,
    content: Schema.String,
    hop: Schema.Number.annotations({ description: "0 for a memory matching the question, 1 or 2 for one reached over shared entities" }),
    entities: Schema.Array(Schema.String)
  })),
  graph: Schema.Struct({
    nodes: Schema.Array(Schema.String).annotations({ description: "The sources' memory ids" }),
    edges: Schema.Array(Schema.Struct({ from: Schema.String, to: Schema.String, via: Schema.String.annotations({ description: "The shared entity" }) }))
  }),
  searched: Schema.Number.annotations({ description: "How many memories were read" }),
  ...callInfoFields
}).annotations({ identifier: "GraphRagAnswer" })
export const GraphRagNoMemories = Schema.Struct({
  answer: Schema.Null,
  message: Schema.String,
  sources: Schema.Tuple(),
  graph: Schema.Struct({ nodes: Schema.Tuple(), edges: Schema.Tuple() }),
  searched: Schema.Number
}).annotations({ identifier: "GraphRagNoMemories", description: "No stored memory relates to the question: no model was called" })
export const GraphRagResult = Schema.Union(GraphRagAnswer, GraphRagNoMemories)
type GraphRagType = Effect.Effect.Success<ReturnType<Context.Tag.Service<GraphRag>["query"]>>
matches<typeof GraphRagAnswer, Extract<GraphRagType, { answer: string }>>(true)
// The service's empty arrays are typed never[], the schema's empty tuples ([]) say the same to the document.
matches<typeof GraphRagNoMemories, Overriding<Extract<GraphRagType, { answer: null }>, typeof GraphRagNoMemories, "sources" | "graph">>(true)

// ---- Jobs: batch, video, fine-tuning (docs/webhooks.md) ----

const JobStatus = Schema.Literal("queued", "running", "completed", "failed", "cancelled")

const jobViewFields = {
  jobId: Schema.String,
  jobType: Schema.Literal("video", "batch", "finetune"),
  status: JobStatus,
  provider: Schema.String,
  upstreamId: Schema.NullOr(Schema.String).annotations({ description: "The upstream's id of the job, once submitted there" }),
  result: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
    description:
      "Progress, then the final result. batch: { total, completed, failed, items: [{ index, ok, result | error }] }; video: { videoUrl, provider, upstreamId, … }; finetune: { fineTunedModel, baseModel, trainedTokens, upstreamStatus, events }"
  }),
  error: Schema.NullOr(Schema.String),
  callbackUrl: Schema.NullOr(Schema.String),
  createdAtUtc: IsoDateTime,
  updatedAtUtc: IsoDateTime,
  completedAtUtc: Schema.NullOr(IsoDateTime),
  webhook: Schema.NullOr(Schema.Struct({
    deliveryId: Schema.String,
    status: Schema.Literal("pending", "delivered", "dead"),
    attempts: Schema.Number,
    deliveredAtUtc: Schema.NullOr(IsoDateTime),
    lastError: Schema.NullOr(Schema.String)
  })).annotations({ description: "The completion webhook's delivery: null until a job with a callbackUrl ends" })
}
export const JobView = Schema.Struct(jobViewFields).annotations({ identifier: "Job" })
// The service types the stored result as unknown (each runner writes its own object) and every date
// as nullable (one helper): those fields are checked by the e2e test.
type JobViewType = Overriding<Effect.Effect.Success<ReturnType<Context.Tag.Service<Jobs>["view"]>>, typeof JobView, "result" | "createdAtUtc" | "updatedAtUtc">
matches<typeof JobView, JobViewType>(true)

export const BatchStatus = Schema.Struct({ batchId: Schema.String.annotations({ description: "The same as jobId" }), ...jobViewFields }).annotations({
  identifier: "BatchStatus"
})
matches<typeof BatchStatus, { batchId: string } & JobViewType>(true)

/**
 * What a job route answers at once: the job (queued) and where to poll it. The route handlers build
 * it from the stored job, so there is no service type to check it against: the e2e test checks it.
 */
const jobAccepted = <T extends "batch" | "video" | "finetune", F extends Schema.Struct.Fields>(identifier: string, jobType: T, fields: F) =>
  Schema.Struct({
    jobId: Schema.String,
    jobType: Schema.Literal(jobType),
    status: JobStatus,
    provider: Schema.String,
    ...fields,
    statusUrl: Schema.String.annotations({ description: "The path that answers the job's status" })
  }).annotations({ identifier })

export const BatchAccepted = jobAccepted("BatchAccepted", "batch", {
  batchId: Schema.String.annotations({ description: "The same as jobId" }),
  total: Schema.Number.annotations({ description: "How many requests the batch holds" })
})
export const VideoAccepted = jobAccepted("VideoAccepted", "video", {})
export const FineTuneAccepted = jobAccepted("FineTuneAccepted", "finetune", {
  baseModel: Schema.String,
  examples: Schema.Number.annotations({ description: "How many training examples were given" })
})

// ---- OpenAI-compatible surface ----

/** The upstream's own fields beyond the listed ones, returned as it sent them. */
const upstreamFields = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const ChatCompletion = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("chat.completion"),
  created: Schema.Number,
  model: Schema.String,
  provider: Schema.String,
  choices: Schema.Array(Schema.Struct({
    index: Schema.Number,
    message: Schema.Struct({
      role: Schema.Literal("assistant"),
      content: Schema.NullOr(Schema.String),
      refusal: Schema.NullOr(Schema.String),
      tool_calls: Schema.optional(Schema.Array(Schema.Struct({
        id: Schema.String,
        type: Schema.Literal("function"),
        function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
      })))
    }, upstreamFields),
    logprobs: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    finish_reason: Schema.Literal("stop", "length", "tool_calls", "content_filter")
  }, upstreamFields)),
  usage: Schema.Struct({
    prompt_tokens: Schema.Number,
    completion_tokens: Schema.Number,
    total_tokens: Schema.Number,
    // Beside the counts the gateway models, the upstream's others as it reported them (audio_tokens, accepted_prediction_tokens, …).
    prompt_tokens_details: Schema.optional(Schema.Struct({ cached_tokens: Schema.optional(Schema.Number) }, Schema.Record({ key: Schema.String, value: Schema.Number }))),
    completion_tokens_details: Schema.optional(
      Schema.Struct({ reasoning_tokens: Schema.optional(Schema.Number) }, Schema.Record({ key: Schema.String, value: Schema.Number }))
    )
  })
}, upstreamFields).annotations({
  identifier: "ChatCompletion",
  description:
    "A chat.completion object (with stream: true, a text/event-stream of chat.completion.chunk objects instead). Fields of an OpenAI-format upstream's answer that are not listed here (system_fingerprint, message.annotations, ...) come back as the upstream sent them."
})
// The service builds its literals as plain strings: checked one way (an answer of the schema's type
// is one the service can build), the literals by the end-to-end test.
const _chat: ReturnType<typeof toChatCompletion> = null as unknown as Types.DeepMutable<typeof ChatCompletion.Type>
void _chat

export const AnthropicMessage = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  role: Schema.Literal("assistant"),
  model: Schema.String,
  provider: Schema.String,
  content: Schema.Array(Schema.Union(
    Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
    Schema.Struct({ type: Schema.Literal("tool_use"), id: Schema.String, name: Schema.String, input: Schema.Record({ key: Schema.String, value: Schema.Unknown }) }),
    Schema.Struct({ type: Schema.Literal("thinking"), thinking: Schema.String, signature: Schema.String }),
    Schema.Struct({ type: Schema.Literal("redacted_thinking"), data: Schema.String })
  )),
  stop_reason: Schema.Literal("end_turn", "max_tokens", "tool_use", "refusal", "stop_sequence"),
  stop_sequence: Schema.NullOr(Schema.String),
  usage: Schema.Struct({
    input_tokens: Schema.Number,
    output_tokens: Schema.Number,
    cache_creation_input_tokens: Schema.optional(Schema.Number),
    cache_read_input_tokens: Schema.optional(Schema.Number),
    cache_creation: Schema.optional(Schema.Struct({ ephemeral_5m_input_tokens: Schema.Number, ephemeral_1h_input_tokens: Schema.Number }))
  })
}).annotations({
  identifier: "AnthropicMessage",
  description: "An Anthropic Message (with stream: true, a text/event-stream of message_start, content_block_*, message_delta and message_stop events instead)"
})
matches<typeof AnthropicMessage, Exclude<ReturnType<typeof toAnthropicMessage>, UpstreamFailed>>(true)

export const OpenAiModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({ id: Schema.String, object: Schema.Literal("model"), created: Schema.Number, owned_by: Schema.String }))
}).annotations({ identifier: "OpenAiModelList" })

const AnthropicModelFields = {
  type: Schema.Literal("model"),
  id: Schema.String,
  display_name: Schema.String,
  created_at: Schema.String.annotations({ description: "RFC 3339; the catalogue keeps no release dates: the epoch" })
}
export const AnthropicModel = Schema.Struct(AnthropicModelFields).annotations({ identifier: "AnthropicModel" })
export const AnthropicModelList = Schema.Struct({
  data: Schema.Array(AnthropicModel),
  has_more: Schema.Boolean,
  first_id: Schema.NullOr(Schema.String),
  last_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "AnthropicModelList" })

const OpenAiModelFields = { id: Schema.String, object: Schema.Literal("model"), created: Schema.Number, owned_by: Schema.String }
export const OpenAiModel = Schema.Struct(OpenAiModelFields).annotations({ identifier: "OpenAiModel" })

export const OpenAiEmbeddingList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({
    object: Schema.Literal("embedding"),
    index: Schema.Number,
    embedding: Schema.Union(Schema.Array(Schema.Number), Schema.String.annotations({ description: "encoding_format base64: little-endian float32" }))
  })),
  model: Schema.String,
  provider: Schema.String,
  usage: Schema.Struct({ prompt_tokens: Schema.Number, total_tokens: Schema.Number })
}).annotations({ identifier: "OpenAiEmbeddingList" })

export const OpenAiModeration = Schema.Struct({
  id: Schema.String,
  model: Schema.String,
  provider: Schema.String,
  results: Schema.Array(Schema.Struct({
    flagged: Schema.Boolean,
    categories: Schema.Record({ key: Schema.String, value: Schema.Boolean }),
    category_scores: Schema.Record({ key: Schema.String, value: Schema.Number })
  })).annotations({ description: "One result per input text, in order" })
}).annotations({ identifier: "OpenAiModeration" })

export const OpenAiImages = Schema.Struct({
  created: Schema.Number,
  data: Schema.Array(Schema.Struct({
    url: Schema.optional(Schema.String),
    b64_json: Schema.optional(Schema.String),
    revised_prompt: Schema.optional(Schema.String)
  })),
  usage: Schema.optional(Schema.Struct({
    input_tokens: Schema.Number,
    output_tokens: Schema.Number,
    total_tokens: Schema.Number,
    input_tokens_details: Schema.Struct({ text_tokens: Schema.Number, image_tokens: Schema.Number })
  })),
  model: Schema.String,
  provider: Schema.String
}, upstreamFields).annotations({
  identifier: "OpenAiImages",
  description: "With the provider's own fields the gateway does not model (gpt-image's background, output_format, quality, size), as it sent them"
})
