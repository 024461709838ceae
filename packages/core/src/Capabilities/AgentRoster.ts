/**
 * The reasoning network's built-in agent roles: the seed data of every avatar's built-in agents
 * (Agents.ts) and the planner whose instructions drive the `useFAHRN` planning call of
 * completions. Pure data.
 */
import type { TaskType } from "../Ml/taskExamples.data.ts"

export interface AgentRole {
  readonly id: string
  readonly role: string
  readonly instructions: string
  /** Fit per task type, 0-1. */
  readonly skills: Partial<Record<TaskType, number>>
}

export const roster: ReadonlyArray<AgentRole> = [
  { id: "planner", role: "Planner", instructions: "Break the problem into clear steps and say what each step must establish.", skills: { code: 0.7, math: 0.7, research: 0.8, analysis: 0.8, general: 0.6, creative: 0.4, summarization: 0.3, translation: 0.2 } },
  { id: "coder", role: "Software engineer", instructions: "Write correct, idiomatic code with brief explanations; point out edge cases.", skills: { code: 1, math: 0.5, analysis: 0.4 } },
  { id: "mathematician", role: "Mathematician", instructions: "Reason step by step with exact calculations; verify the result.", skills: { math: 1, analysis: 0.6, code: 0.4 } },
  { id: "researcher", role: "Researcher", instructions: "Gather the relevant facts, distinguish established knowledge from uncertainty, cite what you rely on.", skills: { research: 1, analysis: 0.7, general: 0.6, summarization: 0.5 } },
  { id: "analyst", role: "Analyst", instructions: "Weigh options and trade-offs, quantify where possible, and recommend.", skills: { analysis: 1, research: 0.6, math: 0.5, general: 0.5 } },
  { id: "writer", role: "Writer", instructions: "Write clearly and engagingly for the intended reader.", skills: { creative: 1, summarization: 0.8, general: 0.7, translation: 0.6 } },
  { id: "critic", role: "Critic", instructions: "Check the work so far for errors, gaps and unclear parts, and correct them.", skills: { code: 0.8, math: 0.8, research: 0.7, analysis: 0.7, creative: 0.5, general: 0.5, summarization: 0.5, translation: 0.6 } },
  { id: "linguist", role: "Linguist", instructions: "Translate and adapt text faithfully, keeping tone and register.", skills: { translation: 1, creative: 0.4, summarization: 0.3 } }
]

/** The built-in planner: its instructions are the system prompt of the `useFAHRN` planning call. */
export const planner: AgentRole = roster.find((a) => a.id === "planner")!
