/**
 * Local mocks of the external memory vendors (mem0, Zep, Letta, Supermemory), each speaking its
 * documented wire format on 127.0.0.1:0 and keeping what it is given: a memory added under one
 * user (tag, container) is found by a search under the same one only, ranked by the share of
 * query words it holds (words in no stored text score 0 and are left out). Unknown request fields
 * are a 400, a wrong key a 401, each in the vendor's error shape.
 *
 * References: see the adapters (packages/core/src/Providers/Memory/*.ts) for the documents each
 * wire detail comes from.
 *  - mem0: `POST /v1/memories/` (`async_mode` true or absent answers a queued event without
 *    ids, as the platform does), `POST /v2/memories/search/`; `Authorization: Token`; errors
 *    `{error, details: {message}}`.
 *  - Zep: `POST /api/v2/users`, `POST /api/v2/graph` (404 for an unknown user),
 *    `POST /api/v2/graph/search` (scope episodes; edges otherwise); `Authorization: Api-Key`;
 *    errors `{message}`.
 *  - Letta: `POST /v1/agents/{id}/archival-memory`, `GET /v1/agents/{id}/archival-memory/search`;
 *    bearer; errors `{detail}`.
 *  - Supermemory: `POST /v3/documents` (containerTag letters, digits, `-`, `_`; scalar metadata),
 *    `POST /v3/search`; bearer; errors `{error, details}`.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { readJson, relevance } from "./mockVendors.ts"

export type MemoryVendor = "mem0" | "zep" | "letta" | "supermemory"

export interface MemoryVendorMock {
  /** The base URL, as `<ID>_BASE_URL` takes it (the catalogue's path on the mock). */
  readonly url: string
  readonly requests: Array<{ method: string; path: string; headers: IncomingMessage["headers"]; body: any }>
  /** The next answer is this status with this body (the vendor's error shape, or anything). */
  failNext(status: number, body: unknown): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(body: string): void
  close(): Promise<void>
}

interface Kept {
  readonly id: string
  readonly owner: string
  readonly text: string
  readonly metadata: Record<string, unknown> | null
  readonly createdAt: string
}

/** The owner's memories matching the query, best first. */
const searchKept = (kept: ReadonlyArray<Kept>, owner: string, query: string, limit: number) =>
  kept
    .filter((k) => k.owner === owner)
    .map((k) => ({ k, score: relevance(query, k.text) }))
    .filter((x) => x.score > 0)
    .sort((a, b) => b.score - a.score)
    .slice(0, limit)

const basePaths: Record<MemoryVendor, string> = { mem0: "/v1", zep: "/api/v2", letta: "/v1", supermemory: "/v3" }

const authOf: Record<MemoryVendor, (key: string) => string> = {
  mem0: (k) => `Token ${k}`,
  zep: (k) => `Api-Key ${k}`,
  letta: (k) => `Bearer ${k}`,
  supermemory: (k) => `Bearer ${k}`
}

const errorOf: Record<MemoryVendor, (message: string) => unknown> = {
  mem0: (message) => ({ error: message, details: { message } }),
  zep: (message) => ({ message }),
  letta: (message) => ({ detail: message }),
  supermemory: (message) => ({ error: message, details: message })
}

const allowed: Record<string, ReadonlySet<string>> = {
  "mem0 POST /v1/memories/": new Set(["messages", "user_id", "agent_id", "run_id", "app_id", "metadata", "infer", "async_mode", "output_format"]),
  "mem0 POST /v2/memories/search/": new Set(["query", "filters", "top_k", "threshold", "rerank", "fields"]),
  "zep POST /api/v2/users": new Set(["user_id", "email", "first_name", "last_name", "metadata"]),
  "zep POST /api/v2/graph": new Set(["user_id", "graph_id", "type", "data", "metadata", "created_at", "source_description"]),
  "zep POST /api/v2/graph/search": new Set(["user_id", "graph_id", "query", "limit", "scope", "reranker", "search_filters", "mmr_lambda"]),
  "letta POST archival": new Set(["text", "tags", "created_at"]),
  "supermemory POST /v3/documents": new Set(["content", "containerTag", "customId", "metadata"]),
  "supermemory POST /v3/search": new Set(["q", "containerTags", "limit", "documentThreshold", "chunkThreshold", "rerank", "filters", "onlyMatchingChunks"])
}

type Answer = readonly [status: number, body: unknown]

const CONTAINER_TAG = /^[A-Za-z0-9_-]{1,100}$/
const scalar = (v: unknown) => typeof v === "string" || typeof v === "number" || typeof v === "boolean"

export const startMemoryVendorMock = async (vendor: MemoryVendor, options: { readonly apiKey: string; readonly agentId?: string }): Promise<MemoryVendorMock> => {
  const requests: MemoryVendorMock["requests"] = []
  const pending: Array<(res: ServerResponse) => void> = []
  const kept: Array<Kept> = []
  const zepUsers = new Set<string>()
  const fail = (status: number, message: string): Answer => [status, errorOf[vendor](message)]
  const keep = (owner: string, text: string, metadata: Record<string, unknown> | null): Kept => {
    const k = { id: randomUUID(), owner, text, metadata, createdAt: new Date().toISOString() }
    kept.push(k)
    return k
  }

  const mem0 = (route: string, body: any): Answer => {
    if (route === "POST /v1/memories/") {
      if (!Array.isArray(body.messages) || body.messages.length === 0) return fail(400, "400 Bad Request: messages is required")
      if (typeof body.user_id !== "string") return fail(400, "400 Bad Request: user_id is required")
      if (body.async_mode !== false) return [200, { message: "Memory processing has been queued for background execution", status: "PENDING", event_id: randomUUID() }]
      const added = body.messages.map((m: any) => keep(body.user_id, String(m.content), body.metadata ?? null))
      return [200, added.map((k: Kept) => ({ id: k.id, event: "ADD", data: { memory: k.text } }))]
    }
    const owner = body.filters?.user_id
    if (typeof owner !== "string") return fail(400, "400 Bad Request: filters must name an entity (user_id)")
    const hits = searchKept(kept, owner, String(body.query ?? ""), body.top_k ?? 10)
    return [200, hits.map(({ k, score }) => ({ id: k.id, memory: k.text, user_id: k.owner, metadata: k.metadata, categories: [], created_at: k.createdAt, updated_at: null, score }))]
  }

  const zep = (route: string, body: any): Answer => {
    if (route === "POST /api/v2/users") {
      if (zepUsers.has(body.user_id)) return fail(400, "user already exists")
      zepUsers.add(body.user_id)
      return [201, { user_id: body.user_id, uuid: randomUUID(), created_at: new Date().toISOString() }]
    }
    if (!zepUsers.has(body.user_id)) return fail(404, "not found: user")
    if (route === "POST /api/v2/graph") {
      if (body.type !== "text" || typeof body.data !== "string") return fail(400, "bad request: type and data are required")
      if (body.metadata !== undefined && Object.keys(body.metadata).length > 10) return fail(400, "bad request: metadata holds at most 10 keys")
      const k = keep(body.user_id, body.data, body.metadata ?? null)
      return [202, { uuid: k.id, content: k.text, created_at: k.createdAt, processed: false, source: "text" }]
    }
    const hits = searchKept(kept, body.user_id, String(body.query ?? ""), body.limit ?? 10)
    if (body.scope !== "episodes") {
      return [200, { edges: hits.map(({ k, score }) => ({ uuid: randomUUID(), fact: `fact about ${k.text}`, name: "RELATES_TO", score, created_at: k.createdAt })), nodes: null, episodes: null }]
    }
    return [200, { edges: null, nodes: null, episodes: hits.map(({ k, score }) => ({ uuid: k.id, content: k.text, score, metadata: k.metadata, created_at: k.createdAt, source: "text" })) }]
  }

  const letta = (method: string, path: string, body: any): Answer => {
    const match = /^\/v1\/agents\/([^/]+)\/archival-memory(\/search)?(\?.*)?$/.exec(path)
    if (match === null) return fail(404, `no route ${method} ${path}`)
    if (decodeURIComponent(match[1]!) !== options.agentId) return fail(404, `Agent ${match[1]} not found`)
    if (match[2] === undefined && method === "POST") {
      const unknown = Object.keys(body ?? {}).find((f) => !allowed["letta POST archival"]!.has(f))
      if (unknown !== undefined) return fail(422, `Extra inputs are not permitted: ${unknown}`)
      if (typeof body?.text !== "string") return fail(422, "text: Field required")
      const k = keep(JSON.stringify(body.tags ?? []), body.text, null)
      return [200, [{ id: `passage-${k.id}`, text: k.text, tags: body.tags ?? [], created_at: k.createdAt, agent_id: options.agentId }]]
    }
    if (match[2] !== undefined && method === "GET") {
      const params = new URLSearchParams(match[3] ?? "")
      const tags = params.getAll("tags")
      const query = params.get("query")
      if (query === null) return fail(422, "query: Field required")
      if (params.get("tag_match_mode") !== "all") return fail(400, "this mock answers tag_match_mode=all only")
      const hits = searchKept(kept, JSON.stringify(tags), query, Number(params.get("top_k") ?? 10))
      return [200, { results: hits.map(({ k }) => ({ id: `passage-${k.id}`, content: k.text, timestamp: k.createdAt, tags })), count: hits.length }]
    }
    return fail(405, "Method Not Allowed")
  }

  const supermemory = (route: string, body: any): Answer => {
    if (route === "POST /v3/documents") {
      if (typeof body.content !== "string" || body.content === "") return fail(400, "content is required")
      if (typeof body.containerTag !== "string" || !CONTAINER_TAG.test(body.containerTag)) return fail(400, "Invalid containerTag")
      if (body.metadata !== undefined && !Object.values(body.metadata).every(scalar)) return fail(400, "metadata values must be strings, numbers or booleans")
      const k = keep(body.containerTag, body.content, body.metadata ?? null)
      return [200, { id: k.id, status: "queued" }]
    }
    if (!Array.isArray(body.containerTags) || body.containerTags.length !== 1) return fail(400, "this mock searches one container tag")
    const hits = searchKept(kept, body.containerTags[0], String(body.q ?? ""), body.limit ?? 10)
    return [200, {
      results: hits.map(({ k, score }) => ({
        documentId: k.id, title: null, type: "text", score, metadata: k.metadata, createdAt: k.createdAt, updatedAt: k.createdAt,
        chunks: [{ content: k.text, score, isRelevant: true }]
      })),
      total: hits.length,
      timing: 3
    }]
  }

  const route = (method: string, path: string, body: any): Answer => {
    if (vendor === "letta") return letta(method, path, body)
    const key = `${method} ${path}`
    const fields = allowed[`${vendor} ${key}`]
    if (fields === undefined) return fail(404, `no route ${key}`)
    if (typeof body !== "object" || body === null) return fail(400, "body is not JSON")
    const unknown = Object.keys(body).find((f) => !fields.has(f))
    if (unknown !== undefined) return fail(400, `unknown field ${unknown}`)
    return vendor === "mem0" ? mem0(key, body) : vendor === "zep" ? zep(key, body) : supermemory(key, body)
  }

  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body)
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    res.end(text)
  }
  const server = createServer((req, res) => {
    void readJson(req).then((body) => {
      const method = req.method ?? "GET"
      const path = req.url ?? "/"
      requests.push({ method, path, headers: req.headers, body })
      const next = pending.shift()
      if (next) return next(res)
      if (req.headers.authorization !== authOf[vendor](options.apiKey)) return json(res, 401, errorOf[vendor]("invalid api key"))
      const [status, answer] = route(method, path, body)
      return json(res, status, answer)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}${basePaths[vendor]}`,
    requests,
    failNext: (status, body) => pending.push((res) => json(res, status, body)),
    rawNext: (body) =>
      pending.push((res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(body)
      }),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()))
        server.closeAllConnections()
      })
  }
}
