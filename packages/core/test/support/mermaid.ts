/**
 * Parses a Mermaid flowchart with the real Mermaid parser, for tests that check the charts the
 * gateway renders (the reasoning network's plan and run graph) are valid and say what they should.
 *
 * Mermaid sanitises labels with DOMPurify, which binds to `window` when it is first imported: a
 * jsdom window is installed as the global only while Mermaid is imported, then removed again.
 */
import { JSDOM } from "jsdom"

export interface FlowchartVertex {
  readonly id: string
  /** The label as a reader sees it: entity codes (`#quot;`) decoded, HTML tags dropped, `<br>` as a newline. */
  readonly text: string
  readonly classes: Array<string>
}

export interface FlowchartEdge {
  readonly start: string
  readonly end: string
  readonly text: string
}

export interface Flowchart {
  /** TB (Mermaid reads TD as TB), BT, LR or RL. */
  readonly direction: string
  readonly vertices: Array<FlowchartVertex>
  readonly edges: Array<FlowchartEdge>
}

/** The part of Mermaid's flowchart database read here. */
interface FlowDb {
  getDirection(): string
  getVertices(): Map<string, { id: string; text?: string; classes: Array<string> }>
  getEdges(): Array<{ start: string; end: string; text?: string }>
}

const { window } = new JSDOM("")

const loadMermaid = (() => {
  let loaded: Promise<typeof import("mermaid").default> | undefined
  return () =>
    (loaded ??= (async () => {
      const g = globalThis as { window?: unknown }
      const previous = g.window
      g.window = window
      try {
        return (await import("mermaid")).default
      } finally {
        if (previous === undefined) delete g.window
        else g.window = previous
      }
    })())
})()

/**
 * Mermaid swaps `#name;` / `#123;` entity codes for placeholders before parsing and turns them back
 * into HTML entities when it renders (its `decodeEntities`, not exported); the label is then HTML.
 */
const readable = (label: string | undefined) => {
  const html = (label ?? "").replace(/ﬂ°°/g, "&#").replace(/ﬂ°/g, "&").replace(/¶ß/g, ";").replace(/<br\s*\/?>/gi, "\n")
  const element = window.document.createElement("div")
  element.innerHTML = html
  return element.textContent ?? ""
}

/** Rejects with Mermaid's own message when the text is not a valid flowchart. */
export const parseFlowchart = async (text: string): Promise<Flowchart> => {
  const mermaid = await loadMermaid()
  // `parse` registers the diagram types and throws Mermaid's syntax error; the diagram gives the db.
  await mermaid.parse(text)
  const diagram = await mermaid.mermaidAPI.getDiagramFromText(text)
  if (diagram.type !== "flowchart-v2" && diagram.type !== "flowchart") {
    throw new Error(`Expected a Mermaid flowchart, got a ${diagram.type} diagram`)
  }
  const db = diagram.db as unknown as FlowDb
  return {
    direction: db.getDirection(),
    vertices: [...db.getVertices().values()].map((v) => ({ id: v.id, text: readable(v.text), classes: [...v.classes] })),
    edges: db.getEdges().map((e) => ({ start: e.start, end: e.end, text: readable(e.text) }))
  }
}
