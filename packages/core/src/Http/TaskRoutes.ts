/**
 * Text capabilities: translation (routed chat models, or a translation vendor), classification,
 * extraction and prompt optimisation (routed chat models), guardrails (in-process, or a
 * guardrail vendor) and reranking (rerank models, or BM25 in-process). Each
 * counts as one metered call.
 */
import { type Context, Effect, Schema } from "effect"
import * as Guardrails from "../Capabilities/Guardrails.ts"
import type { CompletionResult } from "../Capabilities/Completions.ts"
import { answers, compileSchema, IsoLanguage, LlmTasks, schemaCompilerIfLoaded, type Task, taskInput, tasks } from "../Capabilities/LlmTasks.ts"
import * as Rerank from "../Capabilities/Rerank.ts"
import * as Translation from "../Capabilities/Translation.ts"
import { type GatewayError, UpstreamFailed } from "../Errors.ts"
import { chatPlan, type Lane, type LaneServices } from "./Lane.ts"
import { authed } from "./Route.ts"
import { BoundedArray, Provider } from "../RequestFields.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { ClassifyResult, ExtractResult, GuardrailsResult, OptimisePromptResult, RerankResult, TranslateResult } from "./ResponseSchemas.ts"

const Text = (max = 100_000, name = "text") =>
  Schema.String.pipe(Schema.minLength(1, { message: () => `${name} must not be empty` }), Schema.maxLength(max, { message: () => `${name} is limited to ${max} characters` }))
const Model = Schema.optional(Schema.String.pipe(Schema.maxLength(200)))

const TranslateBody = Schema.Struct({
  text: Text(),
  targetLanguage: IsoLanguage.annotations({ message: () => "targetLanguage must be an ISO 639-1 code such as en, de, ja" }),
  sourceLanguage: Schema.optional(IsoLanguage.annotations({ message: () => "sourceLanguage must be an ISO 639-1 code such as en, de, ja" })),
  provider: Provider,
  model: Model
})

const ClassifyBody = Schema.Struct({
  text: Text(),
  labels: BoundedArray(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)), {
    min: 2,
    max: 100,
    minMessage: "labels must hold at least two labels",
    maxMessage: "labels holds at most 100 labels"
  }).pipe(
    Schema.filter((ls) => new Set(ls.map((l) => l.toLowerCase())).size === ls.length || "labels must be unique")
  ),
  provider: Provider,
  model: Model
})

const ExtractBody = Schema.Struct({
  text: Text(),
  schema: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ message: () => "schema must be a JSON Schema object" }),
  provider: Provider,
  model: Model
})

const OptimiseBody = Schema.Struct({ prompt: Text(50_000, "prompt"), provider: Provider, model: Model })
const GuardrailsBody = Schema.Struct({ text: Text(), provider: Provider })
type LlmTasksApi = Context.Tag.Service<typeof LlmTasks>
type TaskCall<B, A> = (avatar: AvatarRecord, body: B) => Effect.Effect<A, GatewayError>

/** How the lane reads a task's answer (LlmTasks.answers): the result, or the model's failure to comply. */
type Answer<B> = (body: B, call: CompletionResult) => unknown

/**
 * The fast-lane plan of a routed chat-model task (Lane.ts): `answerOf` gives the reading of the
 * answer, a refusal before admission, or undefined to leave the request to the route; then the
 * task's call is planned like the route's check plans it and made through the engine.
 */
const taskLane = <B>(task: (body: B) => Task, answerOf: (services: LaneServices, body: B) => Answer<B> | GatewayError | undefined): Lane<B> => ({
  plan: (services, avatar, body) => {
    const answer = answerOf(services, body)
    if (typeof answer !== "function") return answer
    return chatPlan(services, avatar, taskInput(task(body)), ({ messages, request, targets }) => async (lane) => {
      const result = answer(body, await services.calls.complete({ ...lane.call(targets), messages, request }))
      if (result instanceof UpstreamFailed) throw result
      return result
    })
  }
})

/**
 * A routed chat-model task: a metered POST tagged Text whose body goes to the LlmTasks method that
 * `task` picks, after that method's check (refused before the call is counted); served on the fast
 * lane too.
 */
const llmTask = <B, A>(
  path: string,
  body: Schema.Schema<B, any, never>,
  success: Schema.Schema.Any,
  task: (t: LlmTasksApi) => readonly [check: TaskCall<B, void>, run: TaskCall<B, A>],
  summary: string,
  lane: Lane<B>
) =>
  authed({
    method: "POST",
    path,
    success,
    tag: "Text",
    metered: true,
    summary,
    body,
    check: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => task(t)[0](avatar, body)),
    handle: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => task(t)[1](avatar, body)),
    lane
  })

/** Extraction on the lane once ajv was imported (the route imports it on the first extraction); the schema's refusals first, as in the route's check. */
const extractAnswer = (_services: LaneServices, body: typeof ExtractBody.Type) => {
  const compiler = schemaCompilerIfLoaded()
  if (compiler === undefined) return undefined
  const validate = compileSchema(compiler, body.schema)
  return typeof validate === "function" ? answers.extract(validate) : validate
}

export const taskRoutes = [
  authed({
    method: "POST",
    path: "/v1/translate",
    success: TranslateResult,
    tag: "Text",
    metered: true,
    summary: "Translate text (sourceLanguage auto-detected when omitted) with a routed chat model, or through a translation vendor (DeepL)",
    body: TranslateBody,
    check: ({ avatar, body }) => Translation.check(avatar, body),
    handle: ({ avatar, body }) => Translation.translate(avatar, body),
    // a translation vendor (DeepL) is called by the route
    lane: taskLane(tasks.translate, ({ catalog }, body) => (Translation.namesVendor(catalog, body.provider) ? undefined : answers.translate))
  }),
  llmTask("/v1/classify", ClassifyBody, ClassifyResult, (t) => [t.check.classify, t.classify], "Zero-shot classification into one of the given labels, with a score per label", taskLane(tasks.classify, () => answers.classify)),
  llmTask("/v1/extract", ExtractBody, ExtractResult, (t) => [t.check.extract, t.extract], "Structured extraction: a JSON object following the given JSON Schema (validated; `valid` and `errors` report the check)", taskLane(tasks.extract, extractAnswer)),
  llmTask("/v1/prompts/optimise", OptimiseBody, OptimisePromptResult, (t) => [t.check.optimisePrompt, t.optimisePrompt], "Rewrite a prompt so a model answers it better; returns the new prompt and the changes", taskLane(tasks.optimisePrompt, () => answers.optimisePrompt)),
  authed({
    method: "POST",
    path: "/v1/guardrails/check",
    success: GuardrailsResult,
    tag: "Safety",
    metered: true,
    summary: "Guardrails: rule-based in-process (local, the default: personal data, credentials, prompt injection) or a guardrail vendor (Lakera Guard, Patronus); findings and redacted text",
    body: GuardrailsBody,
    check: ({ avatar, body }) => Guardrails.checkProvider(avatar, body.provider),
    handle: ({ avatar, body }) => Guardrails.check(avatar, body.text, body.provider),
    lane: Guardrails.lane
  }),
  authed({
    method: "POST",
    path: "/v1/rerank",
    success: RerankResult,
    tag: "Retrieval",
    metered: true,
    summary: "Rerank documents against a query with a rerank model (Cohere, Voyage, Jina, Mixedbread) or BM25 in-process (local, the default when none is configured); the top N with scores and original indexes",
    body: Rerank.RerankBody,
    check: ({ avatar, body }) => Rerank.check(avatar, body),
    handle: ({ avatar, body }) => Rerank.rerank(avatar, body),
    lane: Rerank.lane
  })
]
