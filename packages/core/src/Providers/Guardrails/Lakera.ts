/**
 * Lakera Guard as a guardrail vendor.
 *
 * Wire format (Lakera Guard API v2, https://docs.lakera.ai/docs/api/guard):
 *  - `POST {base}/guard` (the catalogue's base is `https://api.lakera.ai/v2`) with
 *    `{messages: [{role, content}], breakdown, payload, project_id?}`; bearer key.
 *  - answer `{flagged, breakdown: [{detector_type, detected, ...}], payload: [{start, end, text,
 *    detector_type, labels, message_id}], metadata: {request_uuid}}`. `breakdown` lists each
 *    detector the project's policy ran; `payload` locates PII and profanity matches (end
 *    exclusive).
 * Which detectors run is the Lakera project's policy (`LAKERA_PROJECT_ID`, else the account's
 * default policy). Lakera's content moderation is one of those detectors, not an API of its own,
 * so /v1/moderation does not go to Lakera.
 */
import { Effect } from "effect"
import { authHeaders, postJson } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError } from "../UpstreamError.ts"
import { type GuardrailsAdapter, spansIn } from "./GuardrailsAdapter.ts"

export const PROJECT_SETTING = "LAKERA_PROJECT_ID"

export const guardBody = (text: string, projectId: string | undefined) => ({
  messages: [{ role: "user", content: text }],
  breakdown: true,
  payload: true,
  ...(projectId !== undefined ? { project_id: projectId } : {})
})

export const lakera: GuardrailsAdapter = {
  check: (provider, text) =>
    postJson(provider.id, `${provider.endpoint}/guard`, authHeaders(provider), guardBody(text, provider.settings[PROJECT_SETTING])).pipe(
      Effect.flatMap((answer) => {
        if (typeof answer?.flagged !== "boolean") return Effect.fail(protocolError(provider.id, "no flagged verdict in the guard answer"))
        const spans = spansIn(answer.payload, (p) => p?.detector_type, (p) => p?.start, (p) => p?.end)
        const detected = (Array.isArray(answer.breakdown) ? answer.breakdown : [])
          .filter((d: any) => d?.detected === true && typeof d?.detector_type === "string")
          .map((d: any) => d.detector_type as string)
        return Effect.succeed({ flagged: answer.flagged, categories: [...new Set([...detected, ...spans.map((s) => s.type)])], spans })
      })
    )
}

/** What aigw serves through Lakera Guard (a bespoke provider). */
export const served: Served = {
  guardrails: lakera,
  settings: [{ name: PROJECT_SETTING, description: "The Lakera Guard project whose policy (detectors, thresholds) checks run under; the account's default policy when unset" }],
  notServed: {
    moderation: "Lakera's content moderation is a detector of its guard policy, not a moderation API of its own: use provider lakera on POST /v1/guardrails/check"
  }
}
