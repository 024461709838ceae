/** Orchestrator adapters (crew, conversation, graph-node) and the reasoning-network dispatch. */
import { type Context, Effect, type Schema } from "effect"
import { checkConversation, checkCrew, checkGraphNode, checkRouting, ConversationBody, CrewBody, GraphNodeBody, Orchestration } from "../Capabilities/Orchestration.ts"
import type { Agents } from "../Capabilities/Agents.ts"
import { DispatchBody, ReasoningNetwork } from "../Capabilities/ReasoningNetwork.ts"
import type { Completions } from "../Capabilities/Completions.ts"
import { FeedbackBody, Learning } from "../Capabilities/Learning.ts"
import type { GatewayError } from "../Errors.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { ConversationReply, CrewResult, DispatchResult, FeedbackResult, GraphNodeResult } from "./ResponseSchemas.ts"
import { onLane } from "./Lane.ts"
import { authed } from "./Route.ts"

const tag = "Orchestration"

type OrchestrationApi = Context.Tag.Service<typeof Orchestration>

/** An orchestrator adapter: a metered POST refused before admission by `check` (default: its provider and model), run by Orchestration. */
const orchestrator = <B extends { readonly provider: string; readonly model?: string }, A>(
  path: string,
  body: Schema.Schema<B, any, never>,
  run: (o: OrchestrationApi) => (avatar: AvatarRecord, body: B) => Effect.Effect<A, GatewayError>,
  docs: { readonly summary: string; readonly description?: string; readonly success: Schema.Schema.Any },
  check: (avatar: AvatarRecord, body: B) => Effect.Effect<void, GatewayError, Completions | Agents> = (avatar, body) => checkRouting(avatar, body.provider, body.model)
) =>
  authed({
    method: "POST",
    path,
    tag,
    metered: true,
    ...docs,
    ...onLane(body, {
      check: ({ avatar, body }) => check(avatar, body),
      handle: ({ avatar, body }) => Effect.flatMap(Orchestration, (o) => run(o)(avatar, body))
    })
  })

export const orchestrationRoutes = [
  orchestrator("/v1/orchestrate/crew", CrewBody, (o) => o.crew, {
    success: CrewResult,
    summary: "Run a crew of agents (CrewAI-style tasks); answers { raw, tasks_output, token_usage }",
    description: "Each task's role and description are classified and assigned a model within the caller's plan: code, math, analysis and research the highest quality (tools-capable for code), other types the cheapest of quality >= 3; a registered agent named like the role keeps its pinned provider/model; provider forces one provider. tasks_output[].assignment says why. hierarchical: tasks run in parallel and a manager writes the final answer."
  }, checkCrew),
  orchestrator("/v1/orchestrate/conversation", ConversationBody, (o) => o.conversation, {
    success: ConversationReply,
    summary: "Run a conversation (AutoGen-style) between agents; answers the first agent's last message with the transcript",
    description: "Agents (default: assistant with system_message, and a user_proxy critic) speak round-robin, one routed completion per turn, until a message contains termination_keyword (removed from it) or max_rounds turns ran. One admitted request; usage and cost are summed over every turn."
  }, checkConversation),
  orchestrator("/v1/orchestrate/graph-node", GraphNodeBody, (o) => o.graphNode, {
    success: GraphNodeResult,
    summary: "Run one graph node's model step (LangGraph-style); answers { state, nextNode }",
    description: "state is passed through and extended with messages (the node's reply appended), __node__ and __timestamp__; nextNode is next_node or __end__. With thread_id (or state.thread_id, or config.configurable.thread_id) the node starts from the thread's stored state (given keys win, messages accumulate without repeats) and stores the result: checkpoint { thread_id, step }. Threads are per avatar."
  }, checkGraphNode),
  authed({
    method: "POST",
    path: "/v1/reasoning-network/dispatch",
    success: DispatchResult,
    tag: "Reasoning network",
    metered: true,
    summary: "Rank the avatar's agents for the problem and run a sub-network (Serial, Parallel, Hybrid or Decomposed) within a budget; final answer, the graph that ran (Mermaid), a judge's verdict",
    description: "Every call (planner, steps, synthesiser, judge) is a routed completion recorded in usage and counted against budget (maxCalls, maxTokens, maxSeconds); a failed or skipped branch gives a partial answer from the others. The dispatch itself counts as one request against the daily quota.",
    ...onLane(DispatchBody, {
      check: ({ avatar, body }) => checkRouting(avatar, body.provider),
      handle: ({ avatar, body }) => Effect.flatMap(ReasoningNetwork, (r) => r.dispatch(avatar, body))
    })
  }),
  authed({
    method: "POST",
    path: "/v1/reasoning-network/feedback",
    success: FeedbackResult,
    tag: "Reasoning network",
    metered: false,
    summary: "Your verdict on one of your dispatches: replaces the judge's (or earlier feedback) in its agents' scores and its learned braid graph (not metered)",
    body: FeedbackBody,
    handle: ({ avatar, body }) => Effect.flatMap(Learning, (l) => l.feedback(avatar, body))
  })
]
