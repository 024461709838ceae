/**
 * Langfuse as a usage exporter (Exporters.ts): `POST {LANGFUSE_BASE_URL}/ingestion` (the catalogue's
 * base URL ends in `/api/public`) with a batch of events, each call a `trace-create` and a
 * `generation-create` carrying model, token usage, cost and timing. Basic auth with the public key
 * as user and the secret key as password: `LANGFUSE_API_KEY` is `publicKey:secretKey`. Langfuse
 * answers 207 with per-event `errors`; those count as rejected.
 */
import { Option, Redacted } from "effect"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { authHeaders, postJsonNow } from "../Providers/internal/http.ts"
import type { Served } from "../Providers/Served.ts"
import type { ExportEvent, Exporter } from "./Exporters.ts"
import { PROMPTS_NOT_SERVED } from "./Vendors.ts"

export const served: Served = { notServed: { prompts: PROMPTS_NOT_SERVED } }

const iso = (ms: number) => new Date(ms).toISOString()

/** The two ingestion events of one call: its trace and its generation. */
export const eventsOf = (e: ExportEvent) => {
  const metadata = { provider: e.provider, capability: e.capability, estimated: e.estimated, ...(e.requestId ? { requestId: e.requestId } : {}) }
  return [
    {
      id: `${e.id}-trace`,
      type: "trace-create",
      timestamp: iso(e.at),
      body: { id: e.id, timestamp: iso(e.at - e.latencyMs), name: `aigw ${e.capability}`, userId: e.avatar, metadata, tags: ["aigw"] }
    },
    {
      id: `${e.id}-generation`,
      type: "generation-create",
      timestamp: iso(e.at),
      body: {
        id: `${e.id}-generation`,
        traceId: e.id,
        name: e.capability,
        startTime: iso(e.at - e.latencyMs),
        endTime: iso(e.at),
        model: e.model,
        usageDetails: { input: e.promptTokens, output: e.completionTokens, total: e.promptTokens + e.completionTokens },
        costDetails: { total: e.costUSD },
        level: e.ok ? "DEFAULT" : "ERROR",
        ...(e.ok ? {} : { statusMessage: "the call failed" }),
        metadata
      }
    }
  ]
}

export const exporter = (p: ConfiguredProvider): Exporter | string => {
  const key = Option.isSome(p.apiKey) ? Redacted.value(p.apiKey.value) : ""
  if (!/^[^:]+:.+$/.test(key)) return "LANGFUSE_API_KEY must be `publicKey:secretKey` (the project's public and secret keys joined by a colon)"
  const url = `${p.endpoint}/ingestion`
  return {
    id: p.id,
    send: async (events, cancel) => {
      const answer = await postJsonNow(p.id, url, authHeaders(p), { batch: events.flatMap(eventsOf) }, cancel)
      // Two ingestion events per call: a call counts as rejected when either of its events was.
      const failed = new Set<string>()
      for (const error of Array.isArray(answer?.errors) ? answer.errors : []) {
        if (typeof error?.id === "string") failed.add(error.id.replace(/-(trace|generation)$/, ""))
      }
      return failed.size
    }
  }
}
