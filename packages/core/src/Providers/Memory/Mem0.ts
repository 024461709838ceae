/**
 * Mem0 Platform as an external memory.
 *
 * Wire format (https://docs.mem0.ai/api-reference, the add-memories and v2 search-memories pages):
 *  - add: `POST {root}/v1/memories/` with `{messages: [{role, content}], user_id, metadata, infer,
 *    async_mode}`. `infer: false` stores the text as given (no LLM rewriting into facts), and
 *    `async_mode: false` answers with the stored memories' ids instead of queued events. The
 *    answer is a list of `{id, event: "ADD", data: {memory}}` (older accounts: `{results: [...]}`).
 *  - search: `POST {root}/v2/memories/search/` with `{query, filters: {user_id}, top_k}` → a list of
 *    `{id, memory, score, metadata, created_at, user_id}` (or under `results` / `memories`).
 *  - auth: `Authorization: Token <key>` (the catalogue's `token` style); errors are
 *    `{"error": "...", "details": {"message": "..."}}` or `{"detail": "..."}`.
 * The catalogue's base URL is the v1 API (`https://api.mem0.ai/v1`); `{root}` is it without `/v1`.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { authHeaders, postJson } from "../internal/http.ts"
import { protocolError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { itemOf, listIn, type MemoryAdapter, type MemoryAddRequest, type MemorySearchRequest } from "./MemoryAdapter.ts"

const rootOf = (provider: ConfiguredProvider) => provider.endpoint.replace(/\/v1$/, "")

export const addBody = (request: MemoryAddRequest) => ({
  messages: [{ role: "user", content: request.text }],
  user_id: request.userId,
  ...(request.metadata !== undefined ? { metadata: request.metadata } : {}),
  infer: false,
  async_mode: false
})

export const searchBody = (request: MemorySearchRequest) => ({ query: request.query, filters: { user_id: request.userId }, top_k: request.limit })

export const mem0: MemoryAdapter = {
  add: (provider, request) =>
    postJson(provider.id, `${rootOf(provider)}/v1/memories/`, authHeaders(provider), addBody(request)).pipe(
      Effect.flatMap((answer) => listIn(provider.id, answer, ["results"])),
      Effect.flatMap((events) => {
        const added = events.find((e) => typeof e?.id === "string" && e.id.length > 0)
        return added === undefined
          ? Effect.fail(protocolError(provider.id, "the add answer names no stored memory"))
          : Effect.succeed({ id: added.id as string, createdAt: null })
      })
    ),
  search: (provider, request) =>
    postJson(provider.id, `${rootOf(provider)}/v2/memories/search/`, authHeaders(provider), searchBody(request)).pipe(
      Effect.flatMap((answer) => listIn(provider.id, answer, ["results", "memories"])),
      Effect.flatMap((hits) =>
        Effect.forEach(hits, (h) => itemOf(provider.id, { id: h?.id, text: h?.memory, score: h?.score, metadata: h?.metadata, createdAt: h?.created_at }))
      )
    )
}

/** What aigw serves through Mem0 (a bespoke provider). */
export const served: Served = { memory: mem0 }
