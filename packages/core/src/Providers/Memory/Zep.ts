/**
 * Zep Cloud as an external memory: texts go to the user's knowledge graph as episodes, and
 * searches return the matching episodes (the texts as stored, with Zep's score).
 *
 * Wire format (https://help.getzep.com/sdk-reference: graph/add-data, graph/search, user/add):
 *  - add: `POST {endpoint}/graph` with `{user_id, type: "text", data, metadata}` → 202 with the
 *    episode `{uuid, content, created_at, ...}`. The user must exist: a 404 answer makes the
 *    adapter create it (`POST {endpoint}/users` with `{user_id}`) and add again.
 *  - search: `POST {endpoint}/graph/search` with `{user_id, query, limit, scope: "episodes"}` →
 *    `{episodes: [{uuid, content, score, metadata, created_at}], edges, nodes}`. A user that does
 *    not exist yet (404) has no memories: an empty answer.
 *  - auth: `Authorization: Api-Key <key>`. The catalogue's `key` style would send `Key <key>`,
 *    which Zep refuses, so this adapter writes its own header. Errors are `{"message": "..."}`.
 * `{endpoint}` is the catalogue's `https://api.getzep.com/api/v2` (the v3 SDK's API path).
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { postJson } from "../internal/http.ts"
import { protocolError, type UpstreamError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { isoOr, itemOf, keyOf, listIn, type MemoryAdapter, type MemoryAddRequest, type MemorySearchRequest } from "./MemoryAdapter.ts"

const headersOf = (provider: ConfiguredProvider): Record<string, string> => {
  const key = keyOf(provider)
  return key === undefined ? {} : { authorization: `Api-Key ${key}` }
}

const notFound = (e: UpstreamError) => e.kind === "http" && e.status === 404

export const addBody = (request: MemoryAddRequest) => ({
  user_id: request.userId,
  type: "text",
  data: request.text,
  ...(request.metadata !== undefined ? { metadata: request.metadata } : {})
})

export const searchBody = (request: MemorySearchRequest) => ({ user_id: request.userId, query: request.query, limit: request.limit, scope: "episodes" })

const addEpisode = (provider: ConfiguredProvider, request: MemoryAddRequest) =>
  postJson(provider.id, `${provider.endpoint}/graph`, headersOf(provider), addBody(request))

export const zep: MemoryAdapter = {
  add: (provider, request) =>
    addEpisode(provider, request).pipe(
      Effect.catchIf(notFound, () =>
        Effect.zipRight(postJson(provider.id, `${provider.endpoint}/users`, headersOf(provider), { user_id: request.userId }), addEpisode(provider, request))),
      Effect.flatMap((episode) =>
        typeof episode?.uuid === "string" && episode.uuid.length > 0
          ? Effect.succeed({ id: episode.uuid as string, createdAt: isoOr(episode.created_at) })
          : Effect.fail(protocolError(provider.id, "the added episode has no uuid"))
      )
    ),
  search: (provider, request) =>
    postJson(provider.id, `${provider.endpoint}/graph/search`, headersOf(provider), searchBody(request)).pipe(
      Effect.map((answer) => (answer?.episodes === null ? { episodes: [] } : answer)),
      Effect.flatMap((answer) => listIn(provider.id, answer, ["episodes"])),
      Effect.flatMap((episodes) =>
        Effect.forEach(episodes, (e) => itemOf(provider.id, { id: e?.uuid, text: e?.content, score: e?.score, metadata: e?.metadata, createdAt: e?.created_at }))
      ),
      Effect.catchIf(notFound, () => Effect.succeed([]))
    )
}

/** What aigw serves through Zep (a bespoke provider). */
export const served: Served = { memory: zep }
