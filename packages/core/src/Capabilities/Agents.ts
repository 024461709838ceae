/**
 * The reasoning network's agent registry. Each avatar's agents are the ones it registered or
 * seeded from the third-party catalogue plus the eight built-in roles (AgentRoster.ts), seeded
 * per avatar on first use under deterministic ids. Every agent keeps a skill document per task
 * category (one evolution epoch rewrites it with a routed model) and its measured outcomes.
 *
 * Ranking (`rank`, and `list` through it), every score 0-1:
 *  - fit = 0.7 x similarity + 0.3 x prior: similarity is the cosine between the task text and the
 *    agent's text (name, description, skill document of the task type, skills) under the
 *    TextEmbedder (negative = 0); the prior is 1 when the agent declares the task type, 0.4 when
 *    it declares "general", else 0;
 *  - successRate = (successes + 1) / (runs + 2);
 *  - latency and cost: mean ms and USD per run, min-max scaled among the candidates that have
 *    runs (fastest/cheapest 1, slowest/dearest 0); 0.5 when unmeasured or all equal;
 *  - composite = 0.5 fit + 0.3 successRate + 0.12 latency + 0.08 cost.
 */
import { createHash } from "node:crypto"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { Catalog, openServView } from "../Catalog/Catalog.ts"
import { NotFound, Rejected, UpstreamFailed } from "../Errors.ts"
import { cosine } from "./Memory.ts"
import { TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import { TextEmbedder } from "../Ml/TextEmbedder.ts"
import { type TaskType, TaskTypes } from "../Ml/taskExamples.data.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { DocumentStore, modify } from "../Storage/DocumentStore.ts"
import { type AgentRole, roster } from "./AgentRoster.ts"
import { Completions } from "./Completions.ts"

export const AGENT = "agent"

/** Measured outcomes of an agent's runs (dispatch nodes and reported evolutions). */
export interface AgentStats {
  readonly runs: number
  readonly successes: number
  readonly totalMs: number
  readonly totalCostUSD: number
  readonly scoreSum: number
  readonly scored: number
}

export interface Agent extends AgentStats {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly skills: ReadonlyArray<TaskType>
  readonly provider: string
  readonly model: string
  readonly source: "builtin" | "registered" | "openserv"
}

export interface RankedAgent {
  readonly agent: Agent
  /** What the agent is told (system prompt): its skill document for the task type. */
  readonly instructions: string
  readonly score: { readonly fit: number; readonly successRate: number; readonly latency: number; readonly cost: number; readonly composite: number }
  /** One sentence: why it ranks where it does. */
  readonly why: string
}

export const WEIGHTS = { fit: 0.5, successRate: 0.3, latency: 0.12, cost: 0.08 } as const
const SIMILARITY_SHARE = 0.7

const noStats: AgentStats = { runs: 0, successes: 0, totalMs: 0, totalCostUSD: 0, scoreSum: 0, scored: 0 }

/** Stored agents from before the measured outcomes read their missing figures as 0. */
const readAgent = (data: unknown): Agent => {
  const a = data as Partial<Agent>
  const num = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? x : 0)
  return { ...(a as Agent), runs: num(a.runs), successes: num(a.successes), totalMs: num(a.totalMs), totalCostUSD: num(a.totalCostUSD), scoreSum: num(a.scoreSum), scored: num(a.scored) }
}

export const SKILL = "agent_skill"

export interface SkillDocument {
  readonly agentId: string
  readonly taskCategory: TaskType
  readonly version: number
  readonly document: string
  readonly history: ReadonlyArray<{ readonly version: number; readonly feedback: string; readonly atUtc: string }>
}

export const RegisterAgentParams = {
  name: Schema.String.pipe(Schema.minLength(1, { message: () => "name must not be empty" }), Schema.maxLength(100)),
  description: Schema.String.pipe(Schema.minLength(1, { message: () => "description must not be empty" }), Schema.maxLength(5000)),
  skills: Schema.Array(TaskTypeSchema).pipe(Schema.minItems(1, { message: () => "skills must name at least one task type" })).annotations({
    description: `Task types the agent is good at: ${TaskTypes.join(", ")}`
  }),
  provider: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(100)), { default: () => "auto" }),
  model: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "auto" })
}

/** The built-in role's agent id for an avatar: deterministic, so seeding is idempotent across processes. */
export const builtinId = (avatarId: string, roleId: string) => `builtin:${avatarId}:${roleId}`

/** A built-in role declares the task types it fits well (roster fit 0.7 or more). */
const builtinAgent = (avatarId: string, role: AgentRole): Agent => ({
  id: builtinId(avatarId, role.id),
  name: role.role,
  description: role.instructions,
  skills: TaskTypes.filter((t) => (role.skills[t] ?? 0) >= 0.7),
  provider: "auto",
  model: "auto",
  source: "builtin",
  ...noStats
})

const initialSkill = (agent: Agent, category: TaskType): string =>
  [
    `# ${agent.name}: ${category} skill`,
    "",
    agent.description,
    "",
    "## Approach",
    `- Restate the ${category} problem and its constraints before starting.`,
    "- Work in small, checkable steps and state assumptions.",
    "- Check the result against the request before answering.",
    "",
    "## Lessons learned",
    "- (none yet)"
  ].join("\n")

const round = (x: number) => Math.round(x * 1e4) / 1e4

/** Min-max scaled among the measured values, lower is better; 0.5 when unmeasured or all equal. */
const relative = (values: ReadonlyArray<number | undefined>) => {
  const known = values.filter((v): v is number => v !== undefined)
  const lo = Math.min(...known)
  const hi = Math.max(...known)
  return values.map((v) => (v === undefined || hi === lo ? 0.5 : 1 - (v - lo) / (hi - lo)))
}

/**
 * The agents an avatar may hold, built-in, registered and seeded together: every ranking (each
 * dispatch, each listing) reads and embeds all of them, and there is no tool to remove one.
 */
export const MAX_AGENTS = 1_000
/** What one read of an avatar's agents returns at most: the bound with room for registrations that raced past it. */
const AGENTS_READ = 5 * MAX_AGENTS

/** Agent-text vectors by embedder name and text hash: bounded, oldest out first. */
const VECTOR_CACHE_SIZE = 4096

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore
  const catalog = yield* Catalog
  const completions = yield* Completions
  const embedder = yield* TextEmbedder
  const vectors = new Map<string, ReadonlyArray<number>>()

  const owned = (avatar: AvatarRecord, agentId: string) =>
    Effect.flatMap(docs.get(AGENT, agentId), (d) =>
      Option.isSome(d) && (d.value.owner === avatar.id || avatar.avatarType === "Admin")
        ? Effect.succeed(readAgent(d.value.data))
        : Effect.fail(new NotFound({ message: `No agent ${agentId}.` })))

  const insertAgent = (avatar: AvatarRecord, agent: Agent, key: string) =>
    Effect.suspend(() => {
      const now = Date.now()
      return docs.insertIfAbsent({ kind: AGENT, id: agent.id, owner: avatar.id, key, data: agent, version: 0, createdAt: now, updatedAt: now })
    })

  /** The avatar's agents, the built-in roles seeded on first use (insertIfAbsent: idempotent and race-free). */
  const agentsOf = (avatar: AvatarRecord) =>
    Effect.gen(function*() {
      const stored = (yield* docs.list(AGENT, { owner: avatar.id, limit: AGENTS_READ })).map((d) => readAgent(d.data))
      const have = new Set(stored.map((a) => a.id))
      const missing = roster.map((r) => builtinAgent(avatar.id, r)).filter((a) => !have.has(a.id))
      yield* Effect.forEach(missing, (a) => insertAgent(avatar, a, `builtin:${a.id}`), { discard: true })
      return [...stored, ...missing]
    })

  /** Refused when `adding` more agents would take the avatar past MAX_AGENTS (it holds `held`). */
  const roomFor = (adding: number, held: number) =>
    held + adding <= MAX_AGENTS
      ? Effect.void
      : Effect.fail(new Rejected({
        message: `An avatar holds at most ${MAX_AGENTS.toLocaleString("en-US")} agents (built-in, registered and seeded); this one holds ${held.toLocaleString("en-US")}, so ${adding === 1 ? "one more does" : `${adding.toLocaleString("en-US")} more do`} not fit.`
      }))

  const register = Effect.fn("Agents.register")(function*(avatar: AvatarRecord, input: { readonly name: string; readonly description: string; readonly skills: ReadonlyArray<TaskType>; readonly provider: string; readonly model: string }) {
    // A pin on a provider the catalogue does not know could never run: refused now, not at each crew that names the agent.
    if (input.provider !== "auto" && input.provider !== "local" && Option.isNone(catalog.provider(input.provider))) {
      return yield* Effect.fail(new NotFound({ message: `Unknown provider ${input.provider}. See GET /v1/providers.` }))
    }
    yield* roomFor(1, (yield* agentsOf(avatar)).length)
    const agent: Agent = { id: crypto.randomUUID(), ...input, skills: [...new Set(input.skills)], source: "registered", ...noStats }
    yield* insertAgent(avatar, agent, `registered:${agent.id}`)
    return agent
  })

  /**
   * The task's vector and the agent texts' (from the bounded cache), all from one embedder, named
   * by the vectors themselves: if the model fails between the two embeddings, the embedder is
   * lexical for good and the task is embedded again in that space.
   */
  const embedForRanking = (task: string, texts: ReadonlyArray<string>): Effect.Effect<{ readonly name: string; readonly semantic: boolean; readonly task: ReadonlyArray<number>; readonly agents: ReadonlyArray<ReadonlyArray<number>> }> =>
    Effect.gen(function*() {
      const embedded = yield* embedder.embedNamed([task])
      const keys = texts.map((t) => `${embedded.name}:${createHash("sha256").update(t).digest("hex")}`)
      // This call's vectors, kept apart from the cache: with more agents than the cache holds, adding the
      // fresh ones evicted others of this very call (a 500 above 4,096 agents).
      const mine = new Map<string, ReadonlyArray<number>>()
      const textOf = new Map<string, string>()
      keys.forEach((k, i) => {
        const cached = vectors.get(k)
        if (cached !== undefined) mine.set(k, cached)
        else textOf.set(k, texts[i]!)
      })
      if (textOf.size > 0) {
        const todo = [...textOf.keys()]
        const fresh = yield* embedder.embedNamed(todo.map((k) => textOf.get(k)!))
        if (fresh.name !== embedded.name) return yield* embedForRanking(task, texts)
        todo.forEach((k, i) => {
          mine.set(k, fresh.vectors[i]!)
          vectors.set(k, fresh.vectors[i]!)
          if (vectors.size > VECTOR_CACHE_SIZE) vectors.delete(vectors.keys().next().value!)
        })
      }
      return { name: embedded.name, semantic: embedded.semantic, task: embedded.vectors[0]!, agents: keys.map((k) => mine.get(k)!) }
    })

  /** The avatar's agents scored for a task, best first (the module header gives the formula). */
  const rank = Effect.fn("Agents.rank")(function*(avatar: AvatarRecord, input: { readonly task: string; readonly taskType: TaskType }) {
    const agents = yield* agentsOf(avatar)
    const skillDocs = new Map(
      (yield* docs.list(SKILL, { owner: avatar.id, limit: 20_000 }))
        .map((d) => d.data as SkillDocument)
        .filter((d) => d.taskCategory === input.taskType)
        .map((d) => [d.agentId, d.document] as const)
    )
    const instructions = agents.map((a) => skillDocs.get(a.id) ?? initialSkill(a, input.taskType))
    const embedded = yield* embedForRanking(input.task, agents.map((a, i) => [a.name, a.description, instructions[i], `Skills: ${a.skills.join(", ")}`].join("\n")))
    const latency = relative(agents.map((a) => (a.runs > 0 ? a.totalMs / a.runs : undefined)))
    const cost = relative(agents.map((a) => (a.runs > 0 ? a.totalCostUSD / a.runs : undefined)))
    const ranked = agents.map((agent, i): RankedAgent => {
      const similarity = Math.max(0, Math.min(1, cosine(embedded.task, embedded.agents[i]!)))
      const prior = agent.skills.includes(input.taskType) ? 1 : agent.skills.includes("general") ? 0.4 : 0
      const parts = {
        fit: round(SIMILARITY_SHARE * similarity + (1 - SIMILARITY_SHARE) * prior),
        successRate: round((agent.successes + 1) / (agent.runs + 2)),
        latency: round(latency[i]!),
        cost: round(cost[i]!)
      }
      const composite = round((Object.keys(WEIGHTS) as Array<keyof typeof WEIGHTS>).reduce((sum, k) => sum + WEIGHTS[k] * parts[k], 0))
      const because = {
        fit: `task fit ${parts.fit} (${embedded.semantic ? "semantic" : "lexical"} similarity ${round(similarity)}${prior === 1 ? `, declares ${input.taskType}` : prior > 0 ? ", declares general" : ""})`,
        successRate: `success rate ${parts.successRate} (${agent.successes} of ${agent.runs} runs)`,
        latency: agent.runs > 0 ? `latency score ${parts.latency} (mean ${Math.round(agent.totalMs / agent.runs)} ms)` : "latency unmeasured",
        cost: agent.runs > 0 ? `cost score ${parts.cost} (mean $${(agent.totalCostUSD / agent.runs).toFixed(6)} a run)` : "cost unmeasured"
      }
      const strongest = (Object.keys(WEIGHTS) as Array<keyof typeof WEIGHTS>).sort((a, b) => WEIGHTS[b] * parts[b] - WEIGHTS[a] * parts[a]).slice(0, 2)
      return {
        agent,
        instructions: instructions[i]!,
        score: { ...parts, composite },
        why: `Composite ${composite}, led by ${because[strongest[0]!]} and ${because[strongest[1]!]}.`
      }
    })
    ranked.sort((a, b) => b.score.composite - a.score.composite || a.agent.name.localeCompare(b.agent.name))
    return { embedder: embedded.name, semantic: embedded.semantic, agents: ranked }
  })

  /** The avatar's agents with the same ranking as dispatch's (each agent's fields, then its scores); without a task text, the task type's name stands for the task. */
  const list = Effect.fn("Agents.list")(function*(avatar: AvatarRecord, taskType?: TaskType, task?: string) {
    const type = taskType ?? "general"
    const text = task ?? `${type} task`
    const ranking = yield* rank(avatar, { task: text, taskType: type })
    return {
      taskType: type,
      task: text,
      embedder: ranking.embedder,
      semantic: ranking.semantic,
      total: ranking.agents.length,
      agents: ranking.agents.map(({ agent, ...scored }) => ({ ...agent, ...scored }))
    }
  })

  /** Adds measured outcomes to one of the avatar's agents (deltas may be negative when a verdict is replaced). */
  const addStats = (avatar: AvatarRecord, agentId: string, delta: Partial<AgentStats>) =>
    Effect.flatMap(docs.get(AGENT, agentId), (d) =>
      Option.isNone(d) || d.value.owner !== avatar.id
        ? Effect.succeed(Option.none<Agent>())
        : modify<Agent>(docs, AGENT, agentId, (stored) => {
          const a = readAgent(stored)
          const plus = (k: keyof AgentStats) => a[k] + (delta[k] ?? 0)
          return { ...a, runs: plus("runs"), successes: plus("successes"), totalMs: plus("totalMs"), totalCostUSD: plus("totalCostUSD"), scoreSum: plus("scoreSum"), scored: plus("scored") }
        }))

  /** One agent per chat model of the third-party catalogue; existing ones are kept. */
  const seedOpenServ = Effect.fn("Agents.seedOpenServ")(function*(avatar: AvatarRecord) {
    // All the avatar's agents, the built-ins seeded first, for the count; the stored keys for what is seeded already.
    const held = yield* agentsOf(avatar)
    const existing = new Set((yield* docs.list(AGENT, { owner: avatar.id, limit: AGENTS_READ })).map((d) => d.key).filter((k) => k?.startsWith("openserv:")))
    const toSeed = catalog.models.filter((x) => x.kind === "chat").map((m) => ({ m, entry: openServView(m) }))
      .filter(({ entry }) => !existing.has(`openserv:${entry.id}`))
    yield* roomFor(toSeed.length, held.length)
    let created = 0
    for (const { entry, m } of toSeed) {
      const skills: Array<TaskType> = ["general", ...(entry.capabilities.includes("tools") ? (["code"] as const) : []), ...(m.quality >= 4 ? (["analysis", "research"] as const) : []), ...(entry.capabilities.includes("vision") ? (["creative"] as const) : [])]
      yield* insertAgent(avatar, {
        id: crypto.randomUUID(),
        name: entry.name,
        description: `Agent backed by ${entry.id} (${entry.provider}), context window ${entry.contextWindow} tokens.`,
        skills,
        provider: entry.provider,
        model: m.id,
        source: "openserv",
        ...noStats
      }, `openserv:${entry.id}`)
      created++
    }
    return { created, existing: existing.size, total: existing.size + created }
  })

  const skillId = (agentId: string, category: TaskType) => `${agentId}:${category}`

  const getSkill = Effect.fn("Agents.getSkill")(function*(avatar: AvatarRecord, agentId: string, category: TaskType) {
    const agent = yield* owned(avatar, agentId)
    const stored = yield* docs.get(SKILL, skillId(agentId, category))
    if (Option.isSome(stored)) return stored.value.data as SkillDocument
    return { agentId, taskCategory: category, version: 0, document: initialSkill(agent, category), history: [] } satisfies SkillDocument
  })

  /** An evolution's refusals before admission: an agent the caller does not have, or no model to route it to. */
  const checkEvolve = (avatar: AvatarRecord, input: { readonly agentId: string }) =>
    Effect.flatMap(owned(avatar, input.agentId), (agent) => completions.check(avatar, { provider: agent.provider, model: agent.model, messages: [] }))

  /** One evolution epoch: a routed model rewrites the skill document with the feedback. */
  const evolveSkill = Effect.fn("Agents.evolveSkill")(function*(avatar: AvatarRecord, input: { readonly agentId: string; readonly taskCategory: TaskType; readonly feedback: string; readonly success?: boolean | undefined }) {
    const agent = yield* owned(avatar, input.agentId)
    const current = yield* getSkill(avatar, input.agentId, input.taskCategory)
    const result = yield* completions.complete(avatar, {
      provider: agent.provider,
      model: agent.model,
      messages: [
        { role: "system", content: "You maintain an AI agent's skill document (Markdown). Rewrite it to include what the feedback teaches: keep it concise, keep the headings, put concrete lessons under 'Lessons learned'. Answer with the full new document only." },
        { role: "user", content: `Current document:\n${current.document}\n\nFeedback from the last run${input.success === undefined ? "" : input.success ? " (succeeded)" : " (failed)"}:\n${input.feedback}` }
      ]
    })
    const document = result.content.replace(/^```(?:markdown|md)?\s*|```\s*$/g, "").trim()
    if (document.length < 20) return yield* Effect.fail(new UpstreamFailed({ provider: result.provider, message: `${result.provider}/${result.model} returned no usable skill document.` }))
    const next: SkillDocument = {
      agentId: input.agentId,
      taskCategory: input.taskCategory,
      version: current.version + 1,
      document,
      history: [...current.history, { version: current.version + 1, feedback: input.feedback, atUtc: new Date().toISOString() }].slice(-20)
    }
    const id = skillId(input.agentId, input.taskCategory)
    const now = Date.now()
    // The first version, or the next: two evolutions at once both land (the later one's document), on every store.
    const inserted = yield* docs.insertIfAbsent({ kind: SKILL, id, owner: avatar.id, key: input.agentId, data: next, version: 0, createdAt: now, updatedAt: now })
    if (!inserted) yield* modify<SkillDocument>(docs, SKILL, id, () => next)
    if (input.success !== undefined) yield* addStats(avatar, input.agentId, { runs: 1, successes: input.success ? 1 : 0 })
    return { ...next, provider: result.provider, model: result.model, usage: result.usage }
  })

  return { register, list, rank, addStats, seedOpenServ, getSkill, evolveSkill, checkEvolve }
})

export class Agents extends Context.Tag("aigw/Agents")<Agents, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Agents, makeService)
