/**
 * Patronus evaluators as a guardrail vendor.
 *
 * Wire format (Patronus API, `POST /v1/evaluate`; https://docs.patronus.ai/reference, as the
 * official patronus-api SDK generates it from the OpenAPI spec):
 *  - body `{evaluators: [{evaluator, criteria?}], task_output}`; header `X-API-KEY`.
 *  - answer `{results: [{evaluator_id, criteria, status, error_message, evaluation_result: {pass,
 *    score_raw, additional_info: {positions: [[start, end]]}}}]}`; `status` is "success" when the
 *    evaluator ran.
 * The text is checked as a model output (what PII and toxicity evaluators judge). The evaluators
 * come from `PATRONUS_EVALUATORS` (comma-separated, `evaluator` or `evaluator:criteria`), by
 * default `pii,toxicity`. The text is flagged when an evaluator does not pass; an evaluator that
 * did not run fails the check (a verdict without it would claim more than was checked).
 */
import { Effect } from "effect"
import { authHeaders, postJson } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError, UpstreamError } from "../UpstreamError.ts"
import { type GuardrailsAdapter, spansIn } from "./GuardrailsAdapter.ts"

export const EVALUATORS_SETTING = "PATRONUS_EVALUATORS"
const DEFAULT_EVALUATORS = "pii,toxicity"

/** `judge:patronus:is-concise` → evaluator `judge`, criteria `patronus:is-concise`. */
export const evaluatorsOf = (setting: string | undefined) =>
  (setting ?? DEFAULT_EVALUATORS).split(",").map((s) => s.trim()).filter((s) => s.length > 0).map((s) => {
    const at = s.indexOf(":")
    return at < 0 ? { evaluator: s } : { evaluator: s.slice(0, at), criteria: s.slice(at + 1) }
  })

export const evaluateBody = (text: string, setting: string | undefined) => ({ evaluators: evaluatorsOf(setting), task_output: text })

export const patronus: GuardrailsAdapter = {
  check: (provider, text) =>
    postJson(provider.id, `${provider.endpoint}/evaluate`, authHeaders(provider), evaluateBody(text, provider.settings[EVALUATORS_SETTING])).pipe(
      Effect.flatMap((answer) => {
        const results: Array<any> | undefined = Array.isArray(answer?.results) ? answer.results : undefined
        if (results === undefined || results.length === 0) return Effect.fail(protocolError(provider.id, "no results in the evaluate answer"))
        const nameOf = (r: any) => [r?.evaluator_id, r?.criteria].filter((s) => typeof s === "string" && s.length > 0).join(":") || "evaluator"
        const broken = results.find((r) => r?.status !== "success" || typeof r?.evaluation_result?.pass !== "boolean")
        if (broken !== undefined) {
          const why = typeof broken?.error_message === "string" ? broken.error_message : `status ${String(broken?.status)}, no pass verdict`
          return Effect.fail(new UpstreamError({ provider: provider.id, kind: "protocol", message: `${provider.id} evaluator ${nameOf(broken)} did not run: ${why}`, retryable: false }))
        }
        const failed = results.filter((r) => r.evaluation_result.pass === false)
        const spans = failed.flatMap((r) =>
          spansIn(r.evaluation_result.additional_info?.positions, () => nameOf(r), (p) => p?.[0], (p) => p?.[1])
        )
        return Effect.succeed({ flagged: failed.length > 0, categories: [...new Set(failed.map(nameOf))], spans })
      })
    )
}

/** What aigw serves through Patronus (a bespoke provider). */
export const served: Served = {
  guardrails: patronus,
  settings: [{ name: EVALUATORS_SETTING, description: "Comma-separated Patronus evaluators a guardrail check runs (`evaluator` or `evaluator:criteria`, e.g. `judge:patronus:is-concise`); default pii,toxicity" }]
}
