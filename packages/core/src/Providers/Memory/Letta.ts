/**
 * Letta as an external memory: the archival memory of one Letta agent (`LETTA_AGENT_ID`), shared
 * by the gateway's avatars and kept apart by tags: each passage carries its vendor user id as a
 * tag, searches filter on it, and results without it are dropped.
 *
 * Wire format (https://docs.letta.com/api-reference/agents/passages: create, search):
 *  - add: `POST {endpoint}/agents/{agent_id}/archival-memory` with `{text, tags}` → a list of the
 *    created passages `[{id, text, tags, created_at, ...}]`.
 *  - search: `GET {endpoint}/agents/{agent_id}/archival-memory/search?query=…&tags=…&tag_match_mode=all&top_k=…`
 *    → `{results: [{id, content, timestamp, tags}], count}` (no score).
 *  - auth: `Authorization: Bearer <key>`; errors are `{"detail": "..."}`.
 * Passages take no metadata: a request with metadata is refused rather than stored without it.
 * One agent per avatar would need a model and an embedding choice per agent; a tag per avatar
 * on one configured agent keeps the setup to two variables.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { authHeaders, getJson, postJson } from "../internal/http.ts"
import { protocolError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { isoOr, itemOf, listIn, type MemoryAdapter, type MemorySearchRequest } from "./MemoryAdapter.ts"

export const AGENT_ID = "LETTA_AGENT_ID"

const archivalUrl = (provider: ConfiguredProvider) =>
  `${provider.endpoint}/agents/${encodeURIComponent(provider.settings[AGENT_ID] ?? "")}/archival-memory`

export const searchQuery = (request: MemorySearchRequest) =>
  new URLSearchParams({ query: request.query, tags: request.userId, tag_match_mode: "all", top_k: String(request.limit) }).toString()

const tagged = (userId: string) => (passage: any) => Array.isArray(passage?.tags) && passage.tags.includes(userId)

export const letta: MemoryAdapter = {
  unsupported: (request) =>
    request.metadata !== undefined && Object.keys(request.metadata).length > 0
      ? "Letta's archival memory takes no metadata: send the text alone, or use another memory provider"
      : undefined,
  add: (provider, request) =>
    postJson(provider.id, archivalUrl(provider), authHeaders(provider), { text: request.text, tags: [request.userId] }).pipe(
      Effect.map((answer) => (Array.isArray(answer) ? answer[0] : answer)),
      Effect.flatMap((passage) =>
        typeof passage?.id === "string" && passage.id.length > 0
          ? Effect.succeed({ id: passage.id as string, createdAt: isoOr(passage.created_at) })
          : Effect.fail(protocolError(provider.id, "the created passage has no id"))
      )
    ),
  search: (provider, request) =>
    getJson(provider.id, `${archivalUrl(provider)}/search?${searchQuery(request)}`, authHeaders(provider)).pipe(
      Effect.flatMap((answer) => listIn(provider.id, answer, ["results"])),
      Effect.flatMap((results) =>
        Effect.forEach(results.filter(tagged(request.userId)), (r) => itemOf(provider.id, { id: r?.id, text: r?.content, createdAt: r?.timestamp }))
      )
    )
}

/** What aigw serves through Letta (a bespoke provider). */
export const served: Served = {
  memory: letta,
  settings: [{ name: AGENT_ID, description: "Letta agent whose archival memory holds the gateway's memories (agent-<uuid>)" }],
  credentials: (view, prefix) => (view.hasApiKey && view.settings[AGENT_ID] !== undefined ? undefined : `set ${prefix}_API_KEY and ${AGENT_ID}`)
}
