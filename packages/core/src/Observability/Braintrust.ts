/**
 * Braintrust as a usage exporter (Exporters.ts): `POST {BRAINTRUST_BASE_URL}/project_logs/{project}/insert`
 * (the catalogue's base URL ends in `/v1`) with `{ events }`, bearer auth. The project is
 * `BRAINTRUST_PROJECT_ID` (a setting: without it the provider is not configured). Each call is an
 * `llm` span with token metrics, start/end times and the cost in its metadata; no input or output.
 */
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { authHeaders, postJsonNow } from "../Providers/internal/http.ts"
import type { Served } from "../Providers/Served.ts"
import type { ExportEvent, Exporter } from "./Exporters.ts"
import { PROMPTS_NOT_SERVED } from "./Vendors.ts"

export const PROJECT_SETTING = "BRAINTRUST_PROJECT_ID"

export const served: Served = {
  notServed: { prompts: PROMPTS_NOT_SERVED },
  settings: [{ name: PROJECT_SETTING, description: "The Braintrust project that receives the usage logs (its id, from the project's settings)." }],
  credentials: (view, prefix) =>
    !view.hasApiKey
      ? `set ${prefix}_API_KEY and ${PROJECT_SETTING}`
      : view.settings[PROJECT_SETTING] === undefined
      ? `set ${PROJECT_SETTING} (the project that receives the usage logs)`
      : undefined
}

export const eventOf = (e: ExportEvent) => ({
  id: e.id,
  created: new Date(e.at).toISOString(),
  ...(e.ok ? {} : { error: "the call failed" }),
  metadata: {
    model: e.model,
    provider: e.provider,
    capability: e.capability,
    avatar: e.avatar,
    cost_usd: e.costUSD,
    estimated: e.estimated,
    ...(e.requestId ? { request_id: e.requestId } : {})
  },
  metrics: {
    start: (e.at - e.latencyMs) / 1000,
    end: e.at / 1000,
    prompt_tokens: e.promptTokens,
    completion_tokens: e.completionTokens,
    tokens: e.promptTokens + e.completionTokens
  },
  span_attributes: { name: e.capability, type: "llm" },
  tags: ["aigw"]
})

export const exporter = (p: ConfiguredProvider): Exporter => {
  const url = `${p.endpoint}/project_logs/${encodeURIComponent(p.settings[PROJECT_SETTING] ?? "")}/insert`
  return {
    id: p.id,
    send: async (events, cancel) => {
      await postJsonNow(p.id, url, authHeaders(p), { events: events.map(eventOf) }, cancel)
      return 0
    }
  }
}
