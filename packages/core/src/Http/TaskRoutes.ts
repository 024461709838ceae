/**
 * Text capabilities: translation, classification, extraction and prompt optimisation (routed
 * chat models), guardrails and reranking (in-process). Each counts as one metered call.
 */
import { Effect, Schema } from "effect"
import * as Guardrails from "../Capabilities/Guardrails.ts"
import { IsoLanguage, LlmTasks } from "../Capabilities/LlmTasks.ts"
import * as Rerank from "../Capabilities/Rerank.ts"
import { authed } from "./Route.ts"
import { Provider } from "../RequestFields.ts"
import { ClassifyResult, ExtractResult, GuardrailsResult, OptimisePromptResult, RerankResult, TranslateResult } from "./ResponseSchemas.ts"

const Text = (max = 100_000) =>
  Schema.String.pipe(Schema.minLength(1, { message: () => "text must not be empty" }), Schema.maxLength(max, { message: () => `text is limited to ${max} characters` }))
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
  labels: Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))).pipe(
    Schema.minItems(2, { message: () => "labels must hold at least two labels" }),
    Schema.maxItems(100, { message: () => "labels holds at most 100 labels" }),
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

const OptimiseBody = Schema.Struct({ prompt: Text(50_000), provider: Provider, model: Model })
const GuardrailsBody = Schema.Struct({ text: Text(), provider: Provider })
const RerankBody = Schema.Struct({
  query: Text(10_000),
  documents: Schema.Array(Schema.String.pipe(Schema.maxLength(100_000))).pipe(
    Schema.minItems(1, { message: () => "documents must hold at least one document" }),
    Schema.maxItems(1000, { message: () => "documents holds at most 1000 documents" })
  ),
  topN: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 1000, { message: () => "topN must be an integer from 1 to 1000" })), { default: () => 5 }),
  provider: Provider
})

export const taskRoutes = [
  authed({
    method: "POST",
    path: "/v1/translate",
    success: TranslateResult,
    tag: "Text",
    metered: true,
    summary: "Translate text (sourceLanguage auto-detected when omitted) with a routed chat model",
    body: TranslateBody,
    check: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.check.translate(avatar, body)),
    handle: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.translate(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/classify",
    success: ClassifyResult,
    tag: "Text",
    metered: true,
    summary: "Zero-shot classification into one of the given labels, with a score per label",
    body: ClassifyBody,
    check: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.check.classify(avatar, body)),
    handle: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.classify(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/extract",
    success: ExtractResult,
    tag: "Text",
    metered: true,
    summary: "Structured extraction: a JSON object following the given JSON Schema (validated; `valid` and `errors` report the check)",
    body: ExtractBody,
    check: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.check.extract(avatar, body)),
    handle: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.extract(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/prompts/optimise",
    success: OptimisePromptResult,
    tag: "Text",
    metered: true,
    summary: "Rewrite a prompt so a model answers it better; returns the new prompt and the changes",
    body: OptimiseBody,
    check: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.check.optimisePrompt(avatar, body)),
    handle: ({ avatar, body }) => Effect.flatMap(LlmTasks, (t) => t.optimisePrompt(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/guardrails/check",
    success: GuardrailsResult,
    tag: "Safety",
    metered: true,
    summary: "Rule-based guardrails (in-process): personal data, credentials, prompt injection; findings and redacted text",
    body: GuardrailsBody,
    check: ({ body }) => Guardrails.checkProvider(body.provider),
    handle: ({ body }) => Guardrails.check(body.text, body.provider)
  }),
  authed({
    method: "POST",
    path: "/v1/rerank",
    success: RerankResult,
    tag: "Retrieval",
    metered: true,
    summary: "Rerank documents against a query (BM25, in-process); the top N with scores and original indexes",
    body: RerankBody,
    check: ({ body }) => Rerank.checkProvider(body.provider),
    handle: ({ body }) => Rerank.rerank(body)
  })
]
