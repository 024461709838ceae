/**
 * The local sentence model end to end (AIGW_LOCAL_EMBEDDER default `use-lite`): memories stored
 * with the `local` embedder and holon items are found by meaning, where hashed words miss them;
 * the server still shuts down gracefully with the model's worker running.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hashEmbedding } from "../../../packages/core/src/Ml/TextEmbedder.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const memories = ["My favourite colour is teal.", "I live in Lisbon near the river.", "I am allergic to peanuts.", "I have a dentist appointment on Friday.", "The query planner in my database is slow."]
const question = "when do I see the doctor for my teeth"
const dot = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.reduce((s, x, i) => s + x * b[i]!, 0)

describe("local sentence embedder", () => {
  let server: RunningServer
  let user: TestAvatar
  let rpcId = 0
  const post = (path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })
  const tool = async (name: string, args: Record<string, unknown>) => {
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${user.token}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method: "tools/call", params: { name, arguments: args } })
    })
    return ((await res.json()) as any).result.structuredContent
  }

  beforeAll(async () => {
    server = await startServer()
    user = await signUp(server, "embed")
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("a memory query finds the paraphrase that hashed words miss", async () => {
    // The lexical embedder ranks another memory first for this question (no word in common with the answer's).
    const lexicalBest = memories.reduce((best, m) => (dot(hashEmbedding(question), hashEmbedding(m)) > dot(hashEmbedding(question), hashEmbedding(best)) ? m : best))
    expect(lexicalBest).not.toMatch(/dentist/)
    for (const content of memories) {
      const res = await post("/v1/memory/store", { content, userId: "u1", provider: "local" })
      expect(res.body.result).toMatchObject({ embedder: "local:use-lite-512", dimensions: 512 })
    }
    const q = await post("/v1/memory/query", { query: question, userId: "u1", topK: 2 })
    expect(q.body.result.results[0]).toMatchObject({ content: "I have a dentist appointment on Friday.", embedder: "local:use-lite-512" })
    expect(q.body.result.searched).toBe(5)
  }, 60_000)

  it("a holon search ranks items by meaning and names its embedder", async () => {
    const holon = await tool("gateway_memory_get_or_create_holon", { name: "Home", level: "household" })
    for (const content of memories) await tool("gateway_memory_record", { holonId: holon.id, content, tags: ["home"] })
    const found = await tool("gateway_memory_search", { holonId: holon.id, query: "which nuts make me ill", topK: 1 })
    expect(found).toMatchObject({ embedder: "local:use-lite-512", searched: 5, results: [{ content: "I am allergic to peanuts." }] })
  }, 60_000)

  it("shuts down gracefully with the model's worker running", async () => {
    expect(await server.stop()).toBe(0)
  }, 30_000)
})
