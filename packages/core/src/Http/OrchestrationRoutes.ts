/** Orchestrator adapters (crew, conversation, graph-node) and the reasoning-network dispatch. */
import { Effect } from "effect"
import { ConversationBody, CrewBody, GraphNodeBody, Orchestration } from "../Capabilities/Orchestration.ts"
import { DispatchBody, ReasoningNetwork } from "../Capabilities/ReasoningNetwork.ts"
import { Completions } from "../Capabilities/Completions.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { authed } from "./Route.ts"

const tag = "Orchestration"

/** The routing refusals of the steps' provider (and model) before admission. */
const checkRouting = (avatar: AvatarRecord, provider: string, model = "auto") =>
  Effect.flatMap(Completions, (c) => c.check(avatar, { provider, model, messages: [] }))

export const orchestrationRoutes = [
  authed({
    method: "POST",
    path: "/v1/orchestrate/crew",
    tag,
    metered: true,
    summary: "Run a crew of agents (CrewAI-style tasks); answers { raw, tasks_output, token_usage }",
    description: "Each agent's role and task are classified and routed (code, math, analysis, research by quality; others balanced) unless provider names one. hierarchical: tasks run in parallel and a manager writes the final answer.",
    body: CrewBody,
    check: ({ avatar, body }) => checkRouting(avatar, body.provider),
    handle: ({ avatar, body }) => Effect.flatMap(Orchestration, (o) => o.crew(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/orchestrate/conversation",
    tag,
    metered: true,
    summary: "Start a conversation (AutoGen-style): routes initial_message, answers an assistant message",
    body: ConversationBody,
    check: ({ avatar, body }) => checkRouting(avatar, body.provider, body.model),
    handle: ({ avatar, body }) => Effect.flatMap(Orchestration, (o) => o.conversation(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/orchestrate/graph-node",
    tag,
    metered: true,
    summary: "Run one graph node's model step (LangGraph-style); answers { state, nextNode }",
    description: "state is passed through and extended with messages (the node's reply appended), __node__ and __timestamp__; nextNode is next_node or __end__.",
    body: GraphNodeBody,
    check: ({ avatar, body }) => checkRouting(avatar, body.provider),
    handle: ({ avatar, body }) => Effect.flatMap(Orchestration, (o) => o.graphNode(avatar, body))
  }),
  authed({
    method: "POST",
    path: "/v1/reasoning-network/dispatch",
    tag: "Reasoning network",
    metered: true,
    summary: "Classify the problem, score agents, run a sub-network (Serial, Parallel or Hybrid); final answer and a Mermaid plan",
    body: DispatchBody,
    check: ({ avatar, body }) => checkRouting(avatar, body.provider),
    handle: ({ avatar, body }) => Effect.flatMap(ReasoningNetwork, (r) => r.dispatch(avatar, body))
  })
]
