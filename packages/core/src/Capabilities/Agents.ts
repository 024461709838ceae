/**
 * The reasoning network's agent registry: avatars register agents (a name, a description, the
 * task types they are good at, optionally a pinned provider/model) or seed one agent per model
 * of the third-party catalogue. Agents are scored live: composite = 0.6 x skill fit for the task
 * type + 0.4 x smoothed success rate of their recorded runs. Each agent keeps a skill document per
 * task category, which one evolution epoch rewrites with a routed model from the current document
 * and the feedback given.
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { Catalog, openServView } from "../Catalog/Catalog.ts"
import { NotFound, UpstreamFailed } from "../Errors.ts"
import { TaskTypeSchema } from "../Ml/TaskClassifier.ts"
import { type TaskType, TaskTypes } from "../Ml/taskExamples.data.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { DocumentStore, modify } from "../Storage/DocumentStore.ts"
import { Completions } from "./Completions.ts"

export const AGENT = "agent"

export interface Agent {
  readonly id: string
  readonly name: string
  readonly description: string
  readonly skills: ReadonlyArray<TaskType>
  readonly provider: string
  readonly model: string
  readonly source: "registered" | "openserv"
  readonly runs: number
  readonly successes: number
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

export const compositeScore = (agent: Agent, taskType: TaskType | undefined) => {
  const fit = taskType === undefined ? 0.5 : agent.skills.includes(taskType) ? 1 : agent.skills.includes("general") ? 0.4 : 0.1
  const successRate = (agent.successes + 1) / (agent.runs + 2)
  return { skillFit: fit, successRate: Math.round(successRate * 1e4) / 1e4, composite: Math.round((0.6 * fit + 0.4 * successRate) * 1e4) / 1e4 }
}

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

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore
  const catalog = yield* Catalog
  const completions = yield* Completions

  const owned = (avatar: AvatarRecord, agentId: string) =>
    Effect.flatMap(docs.get(AGENT, agentId), (d) =>
      Option.isSome(d) && (d.value.owner === avatar.id || avatar.avatarType === "Admin")
        ? Effect.succeed(d.value.data as Agent)
        : Effect.fail(new NotFound({ message: `No agent ${agentId}.` })))

  const insertAgent = (avatar: AvatarRecord, agent: Agent, key: string) =>
    Effect.suspend(() => {
      const now = Date.now()
      return docs.insert({ kind: AGENT, id: agent.id, owner: avatar.id, key, data: agent, version: 0, createdAt: now, updatedAt: now })
    })

  const register = Effect.fn("Agents.register")(function*(avatar: AvatarRecord, input: { readonly name: string; readonly description: string; readonly skills: ReadonlyArray<TaskType>; readonly provider: string; readonly model: string }) {
    const agent: Agent = { id: crypto.randomUUID(), ...input, skills: [...new Set(input.skills)], source: "registered", runs: 0, successes: 0 }
    yield* insertAgent(avatar, agent, `registered:${agent.id}`)
    return { ...agent, score: compositeScore(agent, undefined) }
  })

  const list = Effect.fn("Agents.list")(function*(avatar: AvatarRecord, taskType?: TaskType) {
    const agents = (yield* docs.list(AGENT, { owner: avatar.id, limit: 5000 })).map((d) => d.data as Agent)
    const scored = agents.map((a) => ({ ...a, score: compositeScore(a, taskType) })).sort((a, b) => b.score.composite - a.score.composite || a.name.localeCompare(b.name))
    return { taskType: taskType ?? null, total: scored.length, agents: scored }
  })

  /** One agent per chat model of the third-party catalogue; existing ones are kept. */
  const seedOpenServ = Effect.fn("Agents.seedOpenServ")(function*(avatar: AvatarRecord) {
    const existing = new Set((yield* docs.list(AGENT, { owner: avatar.id, limit: 5000 })).map((d) => d.key))
    let created = 0
    for (const m of catalog.models.filter((x) => x.kind === "chat")) {
      const entry = openServView(m)
      if (existing.has(`openserv:${entry.id}`)) continue
      const skills: Array<TaskType> = ["general", ...(entry.capabilities.includes("tools") ? (["code"] as const) : []), ...(m.quality >= 4 ? (["analysis", "research"] as const) : []), ...(entry.capabilities.includes("vision") ? (["creative"] as const) : [])]
      yield* insertAgent(avatar, {
        id: crypto.randomUUID(),
        name: entry.name,
        description: `Agent backed by ${entry.id} (${entry.provider}), context window ${entry.contextWindow} tokens.`,
        skills,
        provider: entry.provider,
        model: m.id,
        source: "openserv",
        runs: 0,
        successes: 0
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
    const existing = yield* docs.get(SKILL, id)
    if (Option.isNone(existing)) yield* docs.insert({ kind: SKILL, id, owner: avatar.id, key: input.agentId, data: next, version: 0, createdAt: now, updatedAt: now })
    else yield* modify<SkillDocument>(docs, SKILL, id, () => next)
    if (input.success !== undefined) {
      yield* modify<Agent>(docs, AGENT, input.agentId, (a) => ({ ...a, runs: a.runs + 1, successes: a.successes + (input.success ? 1 : 0) }))
    }
    return { ...next, provider: result.provider, model: result.model, usage: result.usage }
  })

  return { register, list, seedOpenServ, getSkill, evolveSkill }
})

export class Agents extends Context.Tag("aigw/Agents")<Agents, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Agents, makeService)
