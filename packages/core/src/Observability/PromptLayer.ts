/**
 * PromptLayer as a usage exporter (Exporters.ts): `POST {PROMPTLAYER_BASE_URL}/log-request` with
 * `X-API-KEY`, one request per call (the endpoint takes one). `input` and `output` are required
 * prompt blueprints; aigw exports no text, so both are empty completion blueprints and the call
 * is described by provider, model, times, token counts, price, status and metadata.
 */
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { authHeaders, postJsonNow } from "../Providers/internal/http.ts"
import type { Served } from "../Providers/Served.ts"
import type { ExportEvent, Exporter } from "./Exporters.ts"
import { PROMPTS_NOT_SERVED } from "./Vendors.ts"

export const served: Served = { notServed: { prompts: PROMPTS_NOT_SERVED } }

const empty = { type: "completion", content: [] as Array<never>, input_variables: [] as Array<never> }

export const bodyOf = (e: ExportEvent) => ({
  provider: e.provider,
  model: e.model,
  input: empty,
  output: empty,
  request_start_time: new Date(e.at - e.latencyMs).toISOString(),
  request_end_time: new Date(e.at).toISOString(),
  input_tokens: e.promptTokens,
  output_tokens: e.completionTokens,
  price: e.costUSD,
  tags: ["aigw", e.capability],
  // PromptLayer's metadata is searchable string pairs.
  metadata: {
    avatar: e.avatar,
    capability: e.capability,
    estimated: String(e.estimated),
    latency_ms: String(e.latencyMs),
    ...(e.requestId ? { request_id: e.requestId } : {})
  },
  status: e.ok ? "SUCCESS" : "FAILED"
})

export const exporter = (p: ConfiguredProvider): Exporter => ({
  id: p.id,
  send: async (events, cancel) => {
    // One request per call, in order; a failure fails the rest of the batch (retried as a whole).
    for (const e of events) await postJsonNow(p.id, `${p.endpoint}/log-request`, authHeaders(p), bodyOf(e), cancel)
    return 0
  }
})
