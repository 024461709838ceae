/**
 * The orchestrators on memory layers with two OpenAI-wire mock upstreams (openai, groq): a
 * conversation's turns and stop condition, crew assignments by task type, plan and registered
 * agents, and graph-node checkpoints per avatar and thread.
 */
import { Effect, Layer, ManagedRuntime, Option, Redacted } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { Agents } from "../../src/Capabilities/Agents.ts"
import { Orchestration } from "../../src/Capabilities/Orchestration.ts"
import * as GatewayConfig from "../../src/Config.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import { type AvatarRecord, AvatarStore } from "../../src/Storage/AvatarStore.ts"
import { REVOKED_MID_REQUEST } from "../../src/Accounts/StillActing.ts"
import { sha256 } from "../../src/Accounts/Secrets.ts"
import * as RequestId from "../../src/RequestId.ts"
import { ApiKeyStore } from "../../src/Storage/ApiKeyStore.ts"
import { answerBySystem, messagesOf, resetMocks, text } from "../support/agentMocks.ts"
import { type MockUpstream, type RecordedRequest, type Scenario, startOpenAiMock } from "../support/mockUpstreams.ts"

const avatar = (id: string, plan: AvatarRecord["plan"] = "Free"): AvatarRecord => ({
  id, username: id, email: `${id}@example.com`, passwordHash: "x", title: "", description: "", image: "", dob: null, karmaTotal: 0,
  avatarType: "User", providerType: "Default", plan, emailVerified: true, pendingEmail: null, isActive: true, createdAt: 0, updatedAt: 0, deletedAt: null, tokensValidAfter: 0
})
const alice = avatar("alice", "Silver")
const bob = avatar("bob")

/** Stores the callers: each of a request's calls checks that its avatar still stands behind it (StillActing.ts). */
const withCallers = (runtime: ManagedRuntime.ManagedRuntime<any, unknown>) =>
  runtime.runPromise(Effect.flatMap(AvatarStore, (s) => Effect.forEach([alice, bob], s.insert)))


/** The core services on memory stores, with each mock as the named provider's upstream. */
const gateway = (mocks: Record<string, [string, MockUpstream]>, options: Partial<GatewayConfig.GatewayOptions> = {}) =>
  ManagedRuntime.make(Layers.layerMemory.pipe(
    Layer.provideMerge(Mailer.layerMemory),
    Layer.provideMerge(GatewayConfig.layer({
      allowPrivateUrls: true,
      providerEnv: (id) => {
        const mock = mocks[id]
        return mock ? { apiKey: Option.some(Redacted.make(mock[0])), baseUrl: Option.some(mock[1].url) } : { apiKey: Option.none(), baseUrl: Option.none() }
      },
      ...options
    }))
  ))

describe("orchestrators", () => {
  let openai: MockUpstream
  let groq: MockUpstream
  let runtime: ManagedRuntime.ManagedRuntime<Orchestration | Agents | AvatarStore | ApiKeyStore, unknown>
  const run = <A>(f: (o: Orchestration["Type"]) => Effect.Effect<A, unknown>) => runtime.runPromise(Effect.flatMap(Orchestration, f))
  const fails = (f: (o: Orchestration["Type"]) => Effect.Effect<unknown, unknown>) =>
    runtime.runPromise(Effect.flip(Effect.flatMap(Orchestration, f))) as Promise<{ _tag: string; message: string }>
  const all = () => [...openai.requests, ...groq.requests]

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-o" })
    groq = await startOpenAiMock({ apiKey: "sk-g" })
    runtime = gateway({ openai: ["sk-o", openai], groq: ["sk-g", groq] })
    await withCallers(runtime)
  })
  afterAll(async () => {
    await runtime?.dispose()
    await openai?.close()
    await groq?.close()
  })
  beforeEach(() => resetMocks([openai, groq]))

  const respond = (f: (system: string, r: RecordedRequest) => Scenario) => answerBySystem([openai, groq], f)

  describe("conversation", () => {
    it("lets the critic ask for more, then stops on its keyword, with the transcript and summed usage", async () => {
      let assistantTurns = 0
      respond((system) => {
        if (system.startsWith("You stand in for the user")) return assistantTurns === 1 ? text("It lacks the units.", 30, 4) : text("TERMINATE", 40, 1)
        assistantTurns++
        return text(assistantTurns === 1 ? "The answer is 42." : "The answer is 42 metres.", 20, 8)
      })
      const reply = await run((o) => o.conversation(alice, { initial_message: "How tall is the mast?", system_message: "You are a sailor.", provider: "openai", model: "auto", max_rounds: 10, termination_keyword: "TERMINATE" }))
      expect(reply).toMatchObject({ role: "assistant", name: "assistant", content: "The answer is 42 metres.", rounds: 4, max_rounds: 10, stop_reason: "termination_keyword", provider: "openai" })
      expect(reply.messages.map((m) => [m.name, m.content])).toEqual([
        ["assistant", "The answer is 42."],
        ["user_proxy", "It lacks the units."],
        ["assistant", "The answer is 42 metres."],
        ["user_proxy", ""]
      ])
      expect(reply.usage).toMatchObject({ promptTokens: 20 + 30 + 20 + 40, completionTokens: 8 + 4 + 8 + 1, totalTokens: 131 })
      // One completion per turn; each agent sees its own turns as assistant, the others' as named user turns.
      const calls = openai.requests
      expect(calls).toHaveLength(4)
      expect(messagesOf(calls[0]!)).toEqual([{ role: "system", content: "You are a sailor." }, { role: "user", content: "How tall is the mast?" }])
      expect(messagesOf(calls[2]!).slice(1)).toEqual([
        { role: "user", content: "How tall is the mast?" },
        { role: "assistant", content: "The answer is 42." },
        { role: "user", content: "user_proxy: It lacks the units." }
      ])
      expect(messagesOf(calls[3]!).at(-1)).toEqual({ role: "user", content: "assistant: The answer is 42 metres." })
    })

    it("runs its agents round-robin up to max_rounds when nobody says the keyword", async () => {
      respond((system, r) => text(`${system.split(" ")[0]} turn ${messagesOf(r).length - 1}`))
      const agents = ["Planner", "Coder", "Tester"].map((name) => ({ name, system_message: `${name} persona` }))
      const reply = await run((o) => o.conversation(alice, { initial_message: "Build it", provider: "auto", model: "auto", max_rounds: 5, termination_keyword: "DONE", agents }))
      expect(reply).toMatchObject({ name: "Planner", rounds: 5, stop_reason: "max_rounds", content: "Planner turn 4" })
      expect(reply.messages.map((m) => m.name)).toEqual(["Planner", "Coder", "Tester", "Planner", "Coder"])
      expect(all()).toHaveLength(5)
      expect(reply.costUSD).toBeGreaterThan(0)
    })

    for (const [name, cut] of [["deleted", { isActive: false, deletedAt: 1 }], ["reset", { tokensValidAfter: Date.now() + 1 }]] as const) {
      it(`stops before its next model call once its avatar is ${name}: a 401, no more upstream calls`, async () => {
        const carol = avatar(`carol-${name}`)
        await runtime.runPromise(Effect.flatMap(AvatarStore, (s) => s.insert(carol)))
        // The third answer is the moment the owner takes the account back (an Admin deletes it, a password reset).
        respond((system, r) => {
          if (all().length === 3) void runtime.runPromise(Effect.flatMap(AvatarStore, (s) => s.update(carol.id, cut)))
          return text(`${system} turn ${messagesOf(r).length - 1}`)
        })
        const agents = ["Planner", "Coder"].map((name) => ({ name, system_message: `${name} persona` }))
        const error = await fails((o) => o.conversation(carol, { initial_message: "Build it", provider: "auto", model: "auto", max_rounds: 20, termination_keyword: "DONE", agents }))
        expect([error._tag, error.message]).toEqual(["Unauthorized", REVOKED_MID_REQUEST])
        expect(all()).toHaveLength(3)
      })
    }

    it("stops before its next model call once the API key its request came with is revoked: a 401, no more upstream calls", async () => {
      const dave = avatar("dave-key")
      const secret = `aigw_${crypto.randomUUID().replaceAll("-", "")}`
      await runtime.runPromise(Effect.gen(function*() {
        yield* Effect.flatMap(AvatarStore, (s) => s.insert(dave))
        yield* Effect.flatMap(ApiKeyStore, (k) => k.insert({ id: "dave-key", avatarId: dave.id, name: "thief's", prefix: secret.slice(0, 9), hash: sha256(secret), createdAt: 0, lastUsedAt: null, revokedAt: null }))
      }))
      // The third answer is the moment the owner revokes the key (DELETE /v1/keys/{id}).
      respond((system, r) => {
        if (all().length === 3) void runtime.runPromise(Effect.flatMap(ApiKeyStore, (k) => k.revoke(dave.id, "dave-key", Date.now())))
        return text(`${system} turn ${messagesOf(r).length - 1}`)
      })
      const agents = ["Planner", "Coder"].map((name) => ({ name, system_message: `${name} persona` }))
      const error = await fails((o) =>
        o.conversation(dave, { initial_message: "Build it", provider: "auto", model: "auto", max_rounds: 20, termination_keyword: "DONE", agents }).pipe(
          Effect.locally(RequestId.CurrentRequest, { id: "req-key", route: "/v1/orchestration/conversation", apiKey: secret })
        ))
      expect([error._tag, error.message]).toEqual(["Unauthorized", REVOKED_MID_REQUEST])
      expect(all()).toHaveLength(3)
    })

    it("gives each agent its own provider and model, and strips the keyword from a closing message", async () => {
      respond((system) => text(system === "Boss" ? "Ship it. DONE" : "Draft v1"))
      const reply = await run((o) => o.conversation(alice, {
        initial_message: "Write a haiku",
        provider: "auto",
        model: "auto",
        max_rounds: 10,
        termination_keyword: "DONE",
        agents: [{ name: "poet", system_message: "Poet", provider: "groq", model: "llama-3.1-8b-instant" }, { name: "boss", system_message: "Boss", provider: "openai", model: "gpt-4o-mini" }]
      }))
      expect(reply.messages).toEqual([
        { name: "poet", role: "assistant", content: "Draft v1", provider: "groq", model: "llama-3.1-8b-instant" },
        { name: "boss", role: "assistant", content: "Ship it.", provider: "openai", model: "gpt-4o-mini" }
      ])
      expect(reply).toMatchObject({ content: "Draft v1", stop_reason: "termination_keyword", provider: "openai", model: "gpt-4o-mini" })
    })

    it("refuses agents it cannot run as given", async () => {
      const base = { initial_message: "x", provider: "auto", model: "auto", max_rounds: 3, termination_keyword: "TERMINATE" }
      const twins = [{ name: "a", system_message: "A" }, { name: "a", system_message: "B" }]
      expect(await fails((o) => o.conversation(alice, { ...base, agents: twins }))).toMatchObject({ _tag: "BadRequest", message: expect.stringMatching(/name a is used twice/) })
      const agents = [{ name: "a", system_message: "A" }, { name: "b", system_message: "B" }]
      expect(await fails((o) => o.conversation(alice, { ...base, agents, system_message: "persona" }))).toMatchObject({ _tag: "BadRequest", message: expect.stringMatching(/each agent its system_message/) })
      expect(all()).toHaveLength(0)
    })
  })

  describe("crew", () => {
    const tasks = [
      { id: "c", agent: "Senior software engineer", description: "Write a Python function that parses ISO dates and fix the failing unit test", expected_output: "code" },
      { id: "s", agent: "Editor", description: "Summarize the following article into three key points", expected_output: "three bullets" }
    ]
    const assigned = (r: { tasks_output: ReadonlyArray<{ id: string; provider: string; model: string; taskType: string; assignment: { reason: string } }> }) =>
      Object.fromEntries(r.tasks_output.map((t) => [t.id, { provider: t.provider, model: t.model, taskType: t.taskType, reason: t.assignment.reason }]))

    it("gives a code role the best model of the plan and a summary role the cheapest good-enough one", async () => {
      respond(() => text("done"))
      const by = assigned(await run((o) => o.crew(alice, { tasks, process: "sequential", provider: "auto" })))
      // Silver, openai and groq configured: gpt-5.4 is the best model the plan allows; groq's gpt-oss-120b (quality 4) the cheapest of quality >= 3.
      expect(by.c).toMatchObject({ taskType: "code", provider: "openai", model: "gpt-5.4", reason: expect.stringMatching(/^code is demanding: the highest-quality tools-capable model on plan Silver \(quality 5/) })
      expect(by.s).toMatchObject({ taskType: "summarization", provider: "groq", model: "openai/gpt-oss-120b", reason: expect.stringMatching(/^summarization: the cheapest model of quality >= 3 on plan Silver \(quality 4/) })
      expect(openai.requests.map((r) => (r.body as { model: string }).model)).toEqual(["gpt-5.4"])
      expect(groq.requests.map((r) => (r.body as { model: string }).model)).toEqual(["openai/gpt-oss-120b"])
      // On Free the best a code role gets is quality 4.
      expect(assigned(await run((o) => o.crew(bob, { tasks, process: "sequential", provider: "auto" }))).c.model).toBe("openai/gpt-oss-120b")
    })

    it("keeps a registered agent's pinned model, and a forced provider over a different pin", async () => {
      respond(() => text("done"))
      await runtime.runPromise(Effect.flatMap(Agents, (a) => a.register(bob, { name: "Editor", description: "Edits copy", skills: ["summarization"], provider: "openai", model: "gpt-4.1-mini" })))
      const pinned = assigned(await run((o) => o.crew(bob, { tasks, process: "sequential", provider: "auto" })))
      expect(pinned.s).toMatchObject({ provider: "openai", model: "gpt-4.1-mini", reason: "registered agent \"Editor\" pins openai/gpt-4.1-mini" })
      expect(pinned.c.model).toBe("openai/gpt-oss-120b")
      // Another avatar's agent of that name is not theirs.
      expect(assigned(await run((o) => o.crew(alice, { tasks, process: "sequential", provider: "auto" }))).s.provider).toBe("groq")
      const forced = assigned(await run((o) => o.crew(bob, { tasks, process: "sequential", provider: "groq" })))
      expect(forced.s).toMatchObject({ provider: "groq", reason: expect.stringMatching(/^summarization: the cheapest model of quality >= 3 of groq/) })
    })

    it("has the hierarchical manager's step assigned like a demanding task", async () => {
      respond((system) => text(system.startsWith("You are the crew manager") ? "final" : "part"))
      const result = await run((o) => o.crew(alice, { tasks, process: "hierarchical", provider: "openai" }))
      expect(result.raw).toBe("final")
      expect(result.manager).toMatchObject({ provider: "openai", assignment: { taskType: "analysis", reason: expect.stringMatching(/^analysis is demanding/) } })
      expect(result.token_usage.total_tokens).toBe(45)
    })
  })

  it("runs a cheaper task type on the plan's cheapest model when none reaches the quality floor, and says so", async () => {
    // The operator rates openai's Free models of quality 3 lower (AIGW_MODELS).
    const lowered = gateway({ openai: ["sk-o", openai] }, { models: Option.some(JSON.stringify([{ id: "gpt-5.4-nano", quality: 2 }, { id: "gpt-4.1-mini", quality: 2 }])) })
    try {
      await withCallers(lowered)
      respond(() => text("done"))
      const task = { id: "s", agent: "Editor", description: "Summarize the following article into three key points", expected_output: "three bullets" }
      const result = await lowered.runPromise(Effect.flatMap(Orchestration, (o) => o.crew(bob, { tasks: [task], process: "sequential", provider: "openai" })))
      expect(result.tasks_output[0]).toMatchObject({ model: "gpt-4o-mini", assignment: { reason: expect.stringMatching(/^summarization: no model of quality >= 3 of openai on plan Free, so the cheapest \(quality 2/) } })
    } finally {
      await lowered.dispose()
    }
  })

  describe("graph-node", () => {
    const node = (thread: Record<string, unknown>, state: Record<string, unknown> = {}, messages: Array<{ role: "user" | "assistant"; content: string }> = []) =>
      ({ node_name: "writer", state, messages, provider: "auto", ...thread })

    it("carries a thread's state to the next call, per avatar", async () => {
      let n = 0
      respond(() => text(`reply ${++n}`))
      const first = await run((o) => o.graphNode(alice, node({ thread_id: "t1" }, { topic: "tides" }, [{ role: "user", content: "Explain tides" }])))
      expect(first.checkpoint).toEqual({ thread_id: "t1", step: 1 })
      expect(first.state.messages).toEqual([{ role: "user", content: "Explain tides" }, { role: "assistant", content: "reply 1", name: "writer" }])
      // LangGraph's config names the same thread; given keys win, repeated messages are kept once.
      const second = await run((o) => o.graphNode(alice, node({ config: { configurable: { thread_id: "t1" } } }, { draft: 2, messages: [{ role: "user", content: "Explain tides" }] }, [{ role: "user", content: "Shorter" }])))
      expect(second.checkpoint).toEqual({ thread_id: "t1", step: 2 })
      expect(second.state).toMatchObject({ topic: "tides", draft: 2, __node__: "writer" })
      expect(second.state.messages).toEqual([
        { role: "user", content: "Explain tides" },
        { role: "assistant", content: "reply 1", name: "writer" },
        { role: "user", content: "Shorter" },
        { role: "assistant", content: "reply 2", name: "writer" }
      ])
      // Bob's t1 is another thread; a call without thread id keeps nothing.
      const bobs = await run((o) => o.graphNode(bob, node({ state: { thread_id: "t1" } })))
      expect(bobs.checkpoint).toEqual({ thread_id: "t1", step: 1 })
      expect((bobs.state as Record<string, unknown>).topic).toBeUndefined()
      expect(bobs.state.messages).toEqual([{ role: "assistant", content: "reply 3", name: "writer" }])
      const stateless = await run((o) => o.graphNode(alice, node({}, { topic: "x" })))
      expect(stateless.checkpoint).toBeUndefined()
      expect(stateless.state.messages).toEqual([{ role: "assistant", content: "reply 4", name: "writer" }])
      expect((await run((o) => o.graphNode(alice, node({ thread_id: "t1" })))).checkpoint?.step).toBe(3)
    })

    it("refuses thread ids that disagree", async () => {
      const error = await fails((o) => o.graphNode(alice, node({ thread_id: "a", config: { configurable: { thread_id: "b" } } })))
      expect(error).toMatchObject({ _tag: "BadRequest", message: expect.stringMatching(/different threads \(a, b\)/) })
      expect((await fails((o) => o.graphNode(alice, node({}, { thread_id: 7 })))).message).toMatch(/state.thread_id must be a string/)
      expect(all()).toHaveLength(0)
    })
  })
})
