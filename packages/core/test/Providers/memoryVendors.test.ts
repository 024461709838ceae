/**
 * The external memory adapters (mem0, Zep, Letta, Supermemory) over the real transport against
 * local mocks of their APIs: the exact requests (paths, auth headers, bodies), the mapped
 * results, the scoping of memories by vendor user id, and errors as clean UpstreamErrors.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ConfiguredProvider, data } from "../../src/Catalog/Catalog.ts"
import { letta } from "../../src/Providers/Memory/Letta.ts"
import { mem0 } from "../../src/Providers/Memory/Mem0.ts"
import type { MemoryAdapter } from "../../src/Providers/Memory/MemoryAdapter.ts"
import { vendorUserId } from "../../src/Providers/Memory/MemoryAdapter.ts"
import { supermemory } from "../../src/Providers/Memory/Supermemory.ts"
import { zep } from "../../src/Providers/Memory/Zep.ts"
import { endpointTypes, notServed, servedBy } from "../../src/Providers/Registry.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { type MemoryVendor, type MemoryVendorMock, startMemoryVendorMock } from "../support/mockMemoryVendors.ts"

const KEY = "memory-test-key"
const AGENT = "agent-0b7c3a52-5d1e-4f7a-9c1e-2f3a4b5c6d7e"
const ALICE = vendorUserId("00000000-0000-4000-8000-00000000000a")
const BOB = vendorUserId("00000000-0000-4000-8000-00000000000b")

const providerAt = (id: MemoryVendor, endpoint: string, key = KEY): ConfiguredProvider => ({
  ...data.providers.find((p) => p.id === id)!,
  capabilities: ["memory"],
  endpoint,
  apiKey: Option.some(Redacted.make(key)),
  configured: true,
  settings: id === "letta" ? { LETTA_AGENT_ID: AGENT } : {},
  missing: undefined
})

const run = <A>(e: Effect.Effect<A, UpstreamError>) => Effect.runPromise(e)
const failure = async <A>(e: Effect.Effect<A, UpstreamError>) => {
  const r = await Effect.runPromise(Effect.either(e))
  if (Either.isRight(r)) throw new Error(`expected a failure, got ${JSON.stringify(r.right)}`)
  return r.left
}

describe("vendor user ids", () => {
  it("derive from the avatar id, and from a user id of the avatar's own by its hash", () => {
    expect(vendorUserId("00000000-0000-4000-8000-00000000000a")).toBe("aigw-00000000-0000-4000-8000-00000000000a")
    expect(vendorUserId("00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000a")).toBe(ALICE)
    const custom = vendorUserId("00000000-0000-4000-8000-00000000000a", "customer 42 / Ünïcode")
    expect(custom).toMatch(/^aigw-00000000-0000-4000-8000-00000000000a-[0-9a-f]{16}$/)
    // Another avatar choosing the same user id gets another scope.
    expect(vendorUserId("00000000-0000-4000-8000-00000000000b", "customer 42 / Ünïcode")).not.toBe(custom)
  })
})

describe("registry", () => {
  it("serves memory through the four vendors, and only that of what they offer", () => {
    for (const id of ["mem0", "zep", "letta", "supermemory"]) {
      const entry = data.providers.find((p) => p.id === id)!
      expect(endpointTypes(entry)).toEqual(["memory"])
      expect(servedBy(entry).memory).toBeDefined()
    }
    expect(notServed(data.providers.find((p) => p.id === "mem0")!).map((n) => n.type)).toEqual(["graphrag"])
  })

  it("Letta needs its agent id as well as its key", () => {
    const credentials = servedBy({ id: "letta", adapter: "bespoke" }).credentials!
    expect(credentials({ hasApiKey: true, settings: {} }, "LETTA")).toBe("set LETTA_API_KEY and LETTA_AGENT_ID")
    expect(credentials({ hasApiKey: true, settings: { LETTA_AGENT_ID: AGENT } }, "LETTA")).toBeUndefined()
  })
})

/** The behaviour every adapter shares: add then search within a scope, not across. */
const sharedSuite = (vendor: MemoryVendor, adapter: MemoryAdapter, mock: () => MemoryVendorMock) => {
  const provider = () => providerAt(vendor, mock().url)

  it("finds a memory in its owner's scope only", async () => {
    await run(adapter.add(provider(), { userId: ALICE, text: "Alice keeps bees on the roof" }))
    await run(adapter.add(provider(), { userId: BOB, text: "Bob keeps bees in the garden" }))
    const alice = await run(adapter.search(provider(), { userId: ALICE, query: "who keeps bees", limit: 5 }))
    expect(alice.map((r) => r.text)).toEqual(["Alice keeps bees on the roof"])
    const bob = await run(adapter.search(provider(), { userId: BOB, query: "who keeps bees", limit: 5 }))
    expect(bob.map((r) => r.text)).toEqual(["Bob keeps bees in the garden"])
    const stranger = await run(adapter.search(provider(), { userId: vendorUserId("00000000-0000-4000-8000-00000000000c"), query: "bees", limit: 5 }))
    expect(stranger).toEqual([])
  })

  it("maps a refused key to an http UpstreamError with the vendor's message", async () => {
    const e = await failure(adapter.search(providerAt(vendor, mock().url, "wrong-key"), { userId: ALICE, query: "bees", limit: 5 }))
    expect(e).toMatchObject({ provider: vendor, kind: "http", status: 401, retryable: false })
    expect(e.message).toContain("invalid api key")
  })

  it("maps a 5xx to a retryable error and a body that is not JSON to a protocol error", async () => {
    mock().failNext(503, { message: "overloaded" })
    expect(await failure(adapter.add(provider(), { userId: ALICE, text: "x" }))).toMatchObject({ kind: "http", status: 503, retryable: true })
    mock().rawNext("<html>oops</html>")
    expect(await failure(adapter.search(provider(), { userId: ALICE, query: "bees", limit: 5 }))).toMatchObject({ kind: "protocol" })
  })

  it("refuses answers of the wrong shape with a protocol error", async () => {
    mock().rawNext(JSON.stringify({ unexpected: true }))
    expect(await failure(adapter.search(provider(), { userId: ALICE, query: "bees", limit: 5 }))).toMatchObject({ kind: "protocol", provider: vendor })
    mock().rawNext(JSON.stringify({ surprise: [] }))
    expect(await failure(adapter.add(provider(), { userId: ALICE, text: "x" }))).toMatchObject({ kind: "protocol", provider: vendor })
  })
}

describe("mem0 (Platform API)", () => {
  let mock: MemoryVendorMock
  beforeAll(async () => void (mock = await startMemoryVendorMock("mem0", { apiKey: KEY })))
  afterAll(() => mock.close())

  it("the catalogue's base URL is the v1 API with Token auth", () => {
    const entry = data.providers.find((p) => p.id === "mem0")!
    expect([entry.baseUrl, entry.auth]).toEqual(["https://api.mem0.ai/v1", "token"])
  })

  it("adds with POST /v1/memories/ (text kept as given, answered synchronously) and searches with POST /v2/memories/search/", async () => {
    const provider = providerAt("mem0", mock.url)
    const added = await run(mem0.add(provider, { userId: ALICE, text: "I am allergic to peanuts", metadata: { topic: "health" } }))
    expect(added.id).toMatch(/^[0-9a-f-]{36}$/)
    const sent = mock.requests.at(-1)!
    expect([sent.method, sent.path, sent.headers.authorization]).toEqual(["POST", "/v1/memories/", `Token ${KEY}`])
    expect(sent.body).toEqual({
      messages: [{ role: "user", content: "I am allergic to peanuts" }],
      user_id: ALICE,
      metadata: { topic: "health" },
      infer: false,
      async_mode: false
    })
    const found = await run(mem0.search(provider, { userId: ALICE, query: "peanuts allergy", limit: 3 }))
    const search = mock.requests.at(-1)!
    expect([search.method, search.path, search.headers.authorization]).toEqual(["POST", "/v2/memories/search/", `Token ${KEY}`])
    expect(search.body).toEqual({ query: "peanuts allergy", filters: { user_id: ALICE }, top_k: 3 })
    expect(found).toEqual([{ id: added.id, text: "I am allergic to peanuts", score: 0.5, metadata: { topic: "health" }, createdAt: expect.stringMatching(/Z$/) }])
  })

  it("takes the search list wrapped in results too", async () => {
    mock.rawNext(JSON.stringify({ results: [{ id: "m1", memory: "wrapped", score: 0.9, metadata: null, created_at: "2024-07-26T10:29:36.630547-07:00" }] }))
    expect(await run(mem0.search(providerAt("mem0", mock.url), { userId: ALICE, query: "q", limit: 1 }))).toEqual([
      { id: "m1", text: "wrapped", score: 0.9, metadata: {}, createdAt: "2024-07-26T17:29:36.630Z" }
    ])
  })

  it("reads mem0's error shape", async () => {
    mock.failNext(400, { error: "400 Bad Request", details: { message: "Invalid input data" } })
    const e = await failure(mem0.add(providerAt("mem0", mock.url), { userId: ALICE, text: "x" }))
    expect(e.message).toBe("mem0 answered HTTP 400: 400 Bad Request")
  })

  sharedSuite("mem0", mem0, () => mock)
})

describe("Zep (v3 API: user graphs)", () => {
  let mock: MemoryVendorMock
  beforeAll(async () => void (mock = await startMemoryVendorMock("zep", { apiKey: KEY })))
  afterAll(() => mock.close())

  it("sends Api-Key auth (not the catalogue's Key style), creates the user on first add, and searches episodes", async () => {
    const provider = providerAt("zep", mock.url)
    const before = mock.requests.length
    const added = await run(zep.add(provider, { userId: ALICE, text: "Alice prefers window seats", metadata: { source: "chat" } }))
    const calls = mock.requests.slice(before)
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(["POST /api/v2/graph", "POST /api/v2/users", "POST /api/v2/graph"])
    expect(calls.every((c) => c.headers.authorization === `Api-Key ${KEY}`)).toBe(true)
    expect(calls[1]!.body).toEqual({ user_id: ALICE })
    expect(calls[2]!.body).toEqual({ user_id: ALICE, type: "text", data: "Alice prefers window seats", metadata: { source: "chat" } })
    expect(added).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), createdAt: expect.stringMatching(/Z$/) })

    await run(zep.add(provider, { userId: ALICE, text: "Alice flies to Lisbon in May" }))
    expect(mock.requests.at(-1)!.path).toBe("/api/v2/graph")
    expect(mock.requests.at(-2)!.path).not.toBe("/api/v2/users")

    const found = await run(zep.search(provider, { userId: ALICE, query: "window seats", limit: 4 }))
    expect(mock.requests.at(-1)!.body).toEqual({ user_id: ALICE, query: "window seats", limit: 4, scope: "episodes" })
    expect(found).toEqual([{ id: added.id, text: "Alice prefers window seats", score: 1, metadata: { source: "chat" }, createdAt: added.createdAt }])
  })

  it("a user Zep does not know has no memories (404 → empty)", async () => {
    expect(await run(zep.search(providerAt("zep", mock.url), { userId: vendorUserId("00000000-0000-4000-8000-0000000000ff"), query: "x", limit: 2 }))).toEqual([])
  })

  sharedSuite("zep", zep, () => mock)
})

describe("Letta (archival memory of one agent)", () => {
  let mock: MemoryVendorMock
  beforeAll(async () => void (mock = await startMemoryVendorMock("letta", { apiKey: KEY, agentId: AGENT })))
  afterAll(() => mock.close())

  it("inserts a tagged passage and searches by tag with tag_match_mode=all", async () => {
    const provider = providerAt("letta", mock.url)
    const added = await run(letta.add(provider, { userId: ALICE, text: "The server room code is 4821" }))
    const sent = mock.requests.at(-1)!
    expect([sent.method, sent.path, sent.headers.authorization]).toEqual(["POST", `/v1/agents/${AGENT}/archival-memory`, `Bearer ${KEY}`])
    expect(sent.body).toEqual({ text: "The server room code is 4821", tags: [ALICE] })
    expect(added.id).toMatch(/^passage-/)
    const found = await run(letta.search(provider, { userId: ALICE, query: "server room code", limit: 2 }))
    const search = mock.requests.at(-1)!
    expect(search.method).toBe("GET")
    expect(search.path).toBe(`/v1/agents/${AGENT}/archival-memory/search?query=server+room+code&tags=${ALICE}&tag_match_mode=all&top_k=2`)
    expect(found).toEqual([{ id: added.id, text: "The server room code is 4821", score: null, metadata: {}, createdAt: expect.stringMatching(/Z$/) }])
  })

  it("drops results that do not carry the caller's tag (should Letta ignore the filter)", async () => {
    mock.rawNext(JSON.stringify({ results: [{ id: "p1", content: "someone else's", timestamp: null, tags: [BOB] }, { id: "p2", content: "mine", timestamp: null, tags: [ALICE] }], count: 2 }))
    expect((await run(letta.search(providerAt("letta", mock.url), { userId: ALICE, query: "q", limit: 5 }))).map((r) => r.id)).toEqual(["p2"])
  })

  it("refuses metadata it cannot keep, and names a wrong agent in the error", async () => {
    expect(letta.unsupported!({ userId: ALICE, text: "x", metadata: { a: 1 } })).toMatch(/takes no metadata/)
    expect(letta.unsupported!({ userId: ALICE, text: "x" })).toBeUndefined()
    const wrong = { ...providerAt("letta", mock.url), settings: { LETTA_AGENT_ID: "agent-unknown" } }
    const e = await failure(letta.add(wrong, { userId: ALICE, text: "x" }))
    expect(e).toMatchObject({ kind: "http", status: 404 })
    expect(e.message).toContain("Agent agent-unknown not found")
  })

  sharedSuite("letta", letta, () => mock)
})

describe("Supermemory (v3 documents)", () => {
  let mock: MemoryVendorMock
  beforeAll(async () => void (mock = await startMemoryVendorMock("supermemory", { apiKey: KEY })))
  afterAll(() => mock.close())

  it("adds a document in the caller's container and searches it with containerTags", async () => {
    const provider = providerAt("supermemory", mock.url)
    const added = await run(supermemory.add(provider, { userId: ALICE, text: "Alice's favourite tea is genmaicha", metadata: { kind: "preference", stars: 5, pinned: true } }))
    const sent = mock.requests.at(-1)!
    expect([sent.method, sent.path, sent.headers.authorization]).toEqual(["POST", "/v3/documents", `Bearer ${KEY}`])
    expect(sent.body).toEqual({ content: "Alice's favourite tea is genmaicha", containerTag: ALICE, metadata: { kind: "preference", stars: 5, pinned: true } })
    expect(added).toEqual({ id: expect.any(String), createdAt: null })
    const found = await run(supermemory.search(provider, { userId: ALICE, query: "favourite tea", limit: 3 }))
    expect(mock.requests.at(-1)!.body).toEqual({ q: "favourite tea", containerTags: [ALICE], limit: 3 })
    expect(found).toEqual([{ id: added.id, text: "Alice's favourite tea is genmaicha", score: 1, metadata: { kind: "preference", stars: 5, pinned: true }, createdAt: expect.stringMatching(/Z$/) }])
  })

  it("a hit's text is its relevant chunks, else all chunks, else the document content", async () => {
    mock.rawNext(JSON.stringify({
      results: [
        { documentId: "d1", score: 0.9, chunks: [{ content: "context", isRelevant: false }, { content: "match", isRelevant: true }], metadata: null },
        { documentId: "d2", score: 0.8, chunks: [{ content: "a", isRelevant: false }, { content: "b", isRelevant: false }] },
        { documentId: "d3", score: 0.7, chunks: [], content: "whole document" }
      ],
      total: 3,
      timing: 1
    }))
    const found = await run(supermemory.search(providerAt("supermemory", mock.url), { userId: ALICE, query: "q", limit: 3 }))
    expect(found.map((r) => r.text)).toEqual(["match", "a\nb", "whole document"])
  })

  sharedSuite("supermemory", supermemory, () => mock)
})
