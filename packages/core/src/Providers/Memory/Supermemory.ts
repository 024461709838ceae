/**
 * Supermemory as an external memory: each text is a document in the avatar's container.
 *
 * Wire format (https://supermemory.ai/docs/api-reference: ingest/add-document, search/search-documents):
 *  - add: `POST {endpoint}/documents` with `{content, containerTag, metadata}` → `{id, status: "queued"}`
 *    (processing is asynchronous: a document is searchable once Supermemory has indexed it).
 *    `containerTag` is letters, digits, hyphens and underscores, at most 100 characters; metadata
 *    values are strings, numbers or booleans (Supermemory refuses others with a 400).
 *  - search: `POST {endpoint}/search` with `{q, containerTags: [tag], limit}` → `{results: [{documentId,
 *    chunks: [{content, score, isRelevant}], score, metadata, createdAt, ...}], total, timing}`; a
 *    hit's text is its relevant chunks (all chunks when none is marked, else the document content).
 *  - auth: `Authorization: Bearer <key>`; errors are `{"error": "...", "details": "..."}`.
 * Supermemory fetches a content that is a URL, as its API documents.
 */
import { Effect } from "effect"
import { authHeaders, postJson } from "../internal/http.ts"
import { protocolError } from "../UpstreamError.ts"
import type { Served } from "../Served.ts"
import { itemOf, listIn, type MemoryAdapter, type MemoryAddRequest, type MemorySearchRequest } from "./MemoryAdapter.ts"

export const addBody = (request: MemoryAddRequest) => ({
  content: request.text,
  containerTag: request.userId,
  ...(request.metadata !== undefined ? { metadata: request.metadata } : {})
})

export const searchBody = (request: MemorySearchRequest) => ({ q: request.query, containerTags: [request.userId], limit: request.limit })

/** A document hit's text: its relevant chunks, else all its chunks, else its content. */
const textOf = (hit: any): unknown => {
  const chunks = Array.isArray(hit?.chunks) ? hit.chunks.filter((c: any) => typeof c?.content === "string") : []
  const relevant = chunks.filter((c: any) => c.isRelevant === true)
  const chosen = relevant.length > 0 ? relevant : chunks
  return chosen.length > 0 ? chosen.map((c: any) => c.content as string).join("\n") : hit?.content
}

export const supermemory: MemoryAdapter = {
  add: (provider, request) =>
    postJson(provider.id, `${provider.endpoint}/documents`, authHeaders(provider), addBody(request)).pipe(
      Effect.flatMap((doc) =>
        typeof doc?.id === "string" && doc.id.length > 0
          ? Effect.succeed({ id: doc.id as string, createdAt: null })
          : Effect.fail(protocolError(provider.id, "the added document has no id"))
      )
    ),
  search: (provider, request) =>
    postJson(provider.id, `${provider.endpoint}/search`, authHeaders(provider), searchBody(request)).pipe(
      Effect.flatMap((answer) => listIn(provider.id, answer, ["results"])),
      Effect.flatMap((hits) =>
        Effect.forEach(hits, (h) => itemOf(provider.id, { id: h?.documentId, text: textOf(h), score: h?.score, metadata: h?.metadata, createdAt: h?.createdAt }))
      )
    )
}

/** What aigw serves through Supermemory (a bespoke provider). */
export const served: Served = { memory: supermemory }
