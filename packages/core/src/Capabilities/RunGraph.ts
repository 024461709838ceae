/**
 * The graph a reasoning-network dispatch actually ran: one node per model call (planned before it
 * starts, filled in when it ends or is skipped) and the edges along which outputs flowed, between
 * the `problem` and `answer` terminals. Rendered as a Mermaid flowchart with each call's agent,
 * provider/model, tokens, time and status, and as the figure-free plan (agents and edges only)
 * that Learning keeps as the braid graph candidate of the task type.
 */

export type NodeKind = "planner" | "agent" | "synthesiser" | "judge"
export type NodeStatus = "ok" | "failed" | "skipped"

export interface RunNode {
  readonly id: string
  readonly kind: NodeKind
  /** The registry agent that ran the call; null for the synthesiser and the judge. */
  readonly agentId: string | null
  readonly name: string
  readonly provider: string | null
  readonly model: string | null
  readonly tokens: number
  readonly ms: number
  readonly costUSD: number
  readonly status: NodeStatus
  readonly error: string | null
}

export interface RunEdge {
  readonly from: string
  readonly to: string
}

export interface RunGraphView {
  readonly nodes: ReadonlyArray<RunNode>
  readonly edges: ReadonlyArray<RunEdge>
}

export const PROBLEM = "problem"
export const ANSWER = "answer"

/** Records nodes and edges as a dispatch runs; ids are n1, n2, ... in the order calls are planned. */
export class RunGraph {
  private readonly nodes: Array<RunNode> = []
  private readonly edges: Array<RunEdge> = []

  /** A call about to be made (status "skipped" until it ends: a call never made stays skipped). */
  add(kind: NodeKind, name: string, agentId: string | null): string {
    const id = `n${this.nodes.length + 1}`
    this.nodes.push({ id, kind, agentId, name, provider: null, model: null, tokens: 0, ms: 0, costUSD: 0, status: "skipped", error: null })
    return id
  }

  update(id: string, fields: Partial<Omit<RunNode, "id" | "kind" | "agentId" | "name">>) {
    const i = this.nodes.findIndex((n) => n.id === id)
    this.nodes[i] = { ...this.nodes[i]!, ...fields }
  }

  node(id: string): RunNode {
    return this.nodes.find((n) => n.id === id)!
  }

  connect(from: string, to: string) {
    if (!this.edges.some((e) => e.from === from && e.to === to)) this.edges.push({ from, to })
  }

  view(): RunGraphView {
    return { nodes: [...this.nodes], edges: [...this.edges] }
  }
}

/**
 * Text for a quoted Mermaid label: characters the flowchart grammar or its entity decoding would
 * read differently become entity codes (`#` first, since the codes start with it), line breaks
 * become spaces. `"` ends the label, `#word;` is an entity, `%%{` opens a directive, `:` next to a
 * `#` drops a `;` on lines Mermaid takes for style lines, the label is HTML and a backticked one
 * Markdown (the property test in test/support/mermaid.selftest.test.ts found each).
 */
const entities: Record<string, string> = { "#": "#35;", "\"": "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "`": "#96;", ":": "#58;", "%": "#37;" }

export const mermaidLabel = (text: string) => text.replace(/[\r\n]+/g, " ").replace(/[#"<>&`:%]/g, (c) => entities[c]!)

const figures = (n: RunNode) => {
  const where = n.provider ? `${n.provider}/${n.model}` : "no call"
  const status = n.status === "ok" ? `${n.tokens} tok · ${n.ms} ms` : `${n.status}: ${n.error ?? ""}`.trim()
  return `${n.name} · ${where} · ${status}`
}

const flowchart = (graph: RunGraphView, label: (n: RunNode) => string, classes: boolean) => {
  const lines = ["flowchart TD", `  ${PROBLEM}(["Problem"])`, `  ${ANSWER}(["Final answer"])`]
  for (const n of graph.nodes) lines.push(`  ${n.id}["${mermaidLabel(label(n))}"]`)
  for (const e of graph.edges) lines.push(`  ${e.from} --> ${e.to}`)
  if (classes) {
    lines.push("  classDef ok fill:#e6f4ea,stroke:#1e8e3e", "  classDef failed fill:#fce8e6,stroke:#d93025", "  classDef skipped fill:#f1f3f4,stroke:#9aa0a6,stroke-dasharray:4 3")
    for (const status of ["ok", "failed", "skipped"] as const) {
      const ids = graph.nodes.filter((n) => n.status === status).map((n) => n.id)
      if (ids.length > 0) lines.push(`  class ${ids.join(",")} ${status}`)
    }
  }
  return lines.join("\n")
}

/** The run as a Mermaid flowchart: one node per call labelled "name · provider/model · N tok · M ms", a class per status. */
export const toMermaid = (graph: RunGraphView) => flowchart(graph, figures, true)

/**
 * The topology without per-run figures (agents and edges only; the judge left out): the same plan
 * renders the same text on every run, so Learning can count it as one braid graph.
 */
export const toPlan = (graph: RunGraphView) => {
  const nodes = graph.nodes.filter((n) => n.kind !== "judge")
  const kept = new Set([PROBLEM, ANSWER, ...nodes.map((n) => n.id)])
  return flowchart({ nodes, edges: graph.edges.filter((e) => kept.has(e.from) && kept.has(e.to)) }, (n) => n.name, false)
}
