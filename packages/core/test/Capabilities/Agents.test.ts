/**
 * The agent registry's ranking: built-in roles seeded once per avatar, fit from the (lexical)
 * embedder, success rate, latency and cost moving with recorded dispatches, `list` showing
 * the same scores, and the bound on an avatar's agents.
 */
import { Effect, Layer } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { AGENT, Agents, layer as agentsLayer, MAX_AGENTS } from "../../src/Capabilities/Agents.ts"
import { Learning } from "../../src/Capabilities/Learning.ts"
import * as TextEmbedder from "../../src/Ml/TextEmbedder.ts"
import { DocumentStore } from "../../src/Storage/DocumentStore.ts"
import { coreRuntime, testAvatar } from "../support/inProcess.ts"

const runtime = coreRuntime()
afterAll(() => runtime.dispose())

/** The registry over the lexical embedder (whatever embedder the runtime's layers carry), with the runtime's stores. */
const lexicalAgents = agentsLayer.pipe(Layer.provide(TextEmbedder.layerLexical))
const run = <A, E>(f: (agents: typeof Agents.Service) => Effect.Effect<A, E, any>) =>
  runtime.runPromise(Effect.provide(Effect.flatMap(Agents, f), lexicalAgents) as Effect.Effect<A, E, never>)

const plan = "flowchart TD\n  problem --> a\n  a --> answer"

/** `n` registered agents stored directly, as a database from before the bound may hold them. */
const storeAgents = (owner: string, n: number) =>
  runtime.runPromise(Effect.flatMap(DocumentStore, (docs) =>
    Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => {
      const id = crypto.randomUUID()
      const data = { id, name: `agent ${i}`, description: `Writes reports about topic ${i}`, skills: ["analysis"], provider: "auto", model: "auto", source: "registered" }
      return docs.insert({ kind: AGENT, id, owner, key: `registered:${id}`, data, version: 0, createdAt: i, updatedAt: i })
    }, { discard: true })))

describe("agent registry", () => {
  it(`an avatar holds at most ${MAX_AGENTS} agents: a registration or a seeding past that is refused, naming the bound`, async () => {
    const eve = testAvatar("eve")
    // With the eight built-in roles seeded on first use, one short of the bound.
    await storeAgents(eve.id, MAX_AGENTS - 9)
    const input = { name: "last", description: "The last one that fits", skills: ["analysis" as const], provider: "auto", model: "auto" }
    const last = await run((agents) => agents.register(eve, input))
    expect((await run((agents) => agents.list(eve))).total).toBe(MAX_AGENTS)
    expect(last.name).toBe("last")
    const refused = await run((agents) => Effect.flip(agents.register(eve, { ...input, name: "one too many" })))
    expect(refused).toMatchObject({ _tag: "Rejected", message: `An avatar holds at most 1,000 agents (built-in, registered and seeded); this one holds 1,000, so one more does not fit.` })
    const seeding = await run((agents) => Effect.flip(agents.seedOpenServ(eve)))
    expect(seeding._tag).toBe("Rejected")
    expect(seeding.message).toMatch(/^An avatar holds at most 1,000 agents .*this one holds 1,000, so \d+ more do not fit\.$/)
    expect((await run((agents) => agents.list(eve))).total).toBe(MAX_AGENTS)
    // A fresh avatar's built-ins count before any seeding: with room for all but them, seeding is refused.
    const fay = testAvatar("fay")
    await storeAgents(fay.id, MAX_AGENTS - 25)
    const crowded = await run((agents) => Effect.flip(agents.seedOpenServ(fay)))
    expect(crowded.message).toMatch(/this one holds 983, so \d+ more do not fit\.$/)
    expect((await run((agents) => agents.list(fay))).total).toBe(MAX_AGENTS - 17)
  })

  it("seeds the eight built-in roles per avatar once, also under concurrent first use", async () => {
    const ana = testAvatar("ana")
    const results = await run((agents) => Effect.all([1, 2, 3].map(() => agents.rank(ana, { task: "Prove it", taskType: "math" })), { concurrency: "unbounded" }))
    for (const r of results) expect(r.agents).toHaveLength(8)
    const listed = await run((agents) => agents.list(ana, "math"))
    expect(listed.total).toBe(8)
    expect(listed.agents.map((a) => a.source)).toEqual(Array(8).fill("builtin"))
    expect(listed.agents.map((a) => a.id).sort()).toEqual(["analyst", "coder", "critic", "linguist", "mathematician", "planner", "researcher", "writer"].map((r) => `builtin:ana:${r}`))
    expect(listed.agents.find((a) => a.id === "builtin:ana:mathematician")).toMatchObject({ provider: "auto", model: "auto", skills: expect.arrayContaining(["math"]) })
    // The built-ins' skill document carries their role instructions.
    expect(listed.agents.find((a) => a.id === "builtin:ana:coder")!.instructions).toContain("Write correct, idiomatic code")
    expect((await run((agents) => agents.list(testAvatar("ben")))).agents.every((a) => a.id.startsWith("builtin:ben:"))).toBe(true)
  })

  it("ranks by task fit with the lexical embedder and says it is not semantic", async () => {
    const cy = testAvatar("cy")
    const [py, fr] = await run((agents) =>
      Effect.all([
        agents.register(cy, { name: "Python developer", description: "Writes Python functions, parses data and fixes bugs in Python code", skills: ["code"], provider: "auto", model: "auto" }),
        agents.register(cy, { name: "French translator", description: "Translates English letters and documents into French, keeping the tone", skills: ["translation"], provider: "auto", model: "auto" })
      ]))
    const coding = await run((agents) => agents.rank(cy, { task: "Write a Python function that parses dates and fix the bugs in this Python code", taskType: "code" }))
    expect(coding).toMatchObject({ embedder: "local:hash-256", semantic: false })
    const fitOf = (r: typeof coding, id: string) => r.agents.find((a) => a.agent.id === id)!.score.fit
    expect(fitOf(coding, py.id)).toBeGreaterThan(fitOf(coding, fr.id))
    // The prior alone is 0.3 for a declared skill: the similarity makes the rest.
    expect(fitOf(coding, py.id)).toBeGreaterThan(0.3)
    const letter = await run((agents) => agents.rank(cy, { task: "Translate this English letter into French, keeping the tone", taskType: "translation" }))
    expect(fitOf(letter, fr.id)).toBeGreaterThan(fitOf(letter, py.id))
    expect(letter.agents.findIndex((a) => a.agent.id === fr.id)).toBeLessThan(letter.agents.findIndex((a) => a.agent.id === py.id))
    const top = letter.agents[0]!
    expect(top.why).toMatch(/^Composite [\d.]+, led by /)
    expect(top.why).toContain("lexical similarity")
    for (const k of ["fit", "successRate", "latency", "cost", "composite"] as const) expect(top.score[k]).toBeGreaterThanOrEqual(0)
    expect(top.score.composite).toBeCloseTo(0.5 * top.score.fit + 0.3 * top.score.successRate + 0.12 * top.score.latency + 0.08 * top.score.cost, 3)
    // list is the same scoring.
    const listed = await run((agents) => agents.list(cy, "translation", "Translate this English letter into French, keeping the tone"))
    expect(listed.agents.map((a) => [a.id, a.score])).toEqual(letter.agents.map((a) => [a.agent.id, a.score]))
  })

  it("ranks more agents than its vector cache holds (the fresh vectors evicted the call's own: a 500)", async () => {
    const dee = testAvatar("dee")
    // Stored before registrations were bounded (MAX_AGENTS): such an avatar is still ranked whole.
    await storeAgents(dee.id, 4_200)
    const ranked = await run((agents) => agents.rank(dee, { task: "Write a report about topic 7", taskType: "analysis" }))
    expect(ranked.agents).toHaveLength(4_208)
    expect(ranked.agents.every((a) => Number.isFinite(a.score.composite))).toBe(true)
  })

  it("moves success rate, latency and cost with recorded dispatches", async () => {
    const dee = testAvatar("dee")
    const task = { task: "Compute the integral of x squared", taskType: "math" as const }
    const before = await run((agents) => agents.rank(dee, task))
    const score = (r: typeof before, role: string) => r.agents.find((a) => a.agent.id === `builtin:dee:${role}`)!.score
    expect(score(before, "mathematician")).toMatchObject({ successRate: 0.5, latency: 0.5, cost: 0.5 })
    await runtime.runPromise(Effect.flatMap(Learning, (l) =>
      l.record(dee, {
        id: "d-1", problem: task.task, taskType: "math", mode: "Serial", finalAnswer: "x^3/3", partial: false, plan,
        nodes: [{ agentId: "builtin:dee:mathematician", ok: true, ms: 100, costUSD: 0.001, tokens: 10 }, { agentId: "builtin:dee:critic", ok: true, ms: 900, costUSD: 0.004, tokens: 40 }],
        verdict: { success: true, score: 0.9, source: "judge", reason: "correct" }
      })))
    const after = await run((agents) => agents.rank(dee, task))
    expect(score(after, "mathematician")).toMatchObject({ successRate: 0.6667, latency: 1, cost: 1 })
    expect(score(after, "critic")).toMatchObject({ successRate: 0.6667, latency: 0, cost: 0 })
    expect(score(after, "writer")).toMatchObject({ successRate: 0.5, latency: 0.5 })
    expect(score(after, "mathematician").composite).toBeGreaterThan(score(before, "mathematician").composite)
    expect(after.agents.find((a) => a.agent.id === "builtin:dee:mathematician")!.agent).toMatchObject({ runs: 1, successes: 1, totalMs: 100, scoreSum: 0.9, scored: 1 })
  })

  it("reads agents stored before the measured outcomes with zero figures", async () => {
    const eve = testAvatar("eve")
    await runtime.runPromise(Effect.flatMap(DocumentStore, (docs) =>
      docs.insert({
        kind: "agent", id: "old-1", owner: "eve", key: "registered:old-1", version: 0, createdAt: 0, updatedAt: 0,
        data: { id: "old-1", name: "Old", description: "An agent from before", skills: ["general"], provider: "auto", model: "auto", source: "registered", runs: 2, successes: 1 }
      })))
    const old = (await run((agents) => agents.rank(eve, { task: "anything", taskType: "general" }))).agents.find((a) => a.agent.id === "old-1")!
    expect(old.agent).toMatchObject({ runs: 2, successes: 1, totalMs: 0, totalCostUSD: 0, scoreSum: 0, scored: 0 })
    expect(old.score.successRate).toBe(0.5)
    expect(Number.isNaN(old.score.composite)).toBe(false)
  })
  it("ranks in one vector space when the model fails between the task's and the agents' embeddings", async () => {
    // A model that answers the task, then fails for good: the agents' texts come back lexical.
    let calls = 0
    const failing: TextEmbedder.TextEmbedderService = {
      get name() {
        return calls === 0 ? "local:test-model" : TextEmbedder.LEXICAL_NAME
      },
      get semantic() {
        return calls === 0
      },
      embed: (texts) => Effect.map(failing.embedNamed(texts), (e) => e.vectors),
      embedNamed: (texts) =>
        Effect.sync(() =>
          calls++ === 0
            ? { name: "local:test-model", semantic: true, vectors: texts.map(() => Array.from({ length: 512 }, () => 1 / Math.sqrt(512))) }
            : { name: TextEmbedder.LEXICAL_NAME, semantic: false, vectors: texts.map(TextEmbedder.hashEmbedding) }
        )
    }
    const dee = testAvatar("dee")
    const ranked = await runtime.runPromise(
      Effect.provide(Effect.flatMap(Agents, (agents) => agents.rank(dee, { task: "Translate this letter into French", taskType: "translation" })), agentsLayer.pipe(Layer.provide(Layer.succeed(TextEmbedder.TextEmbedder, failing)))) as Effect.Effect<any, never, never>
    )
    expect(ranked).toMatchObject({ embedder: TextEmbedder.LEXICAL_NAME, semantic: false })
    // Task and agents compared as hashed words: the linguist's words meet the task's.
    const linguist = ranked.agents.find((a: any) => a.agent.id === "builtin:dee:linguist")
    expect(linguist.why).toContain("lexical similarity")
    expect(linguist.score.fit).toBeGreaterThan(0.3)
  })
})
