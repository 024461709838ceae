import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { mermaidLabel } from "../../src/Capabilities/RunGraph.ts"
import { parseFlowchart } from "./mermaid.ts"

describe("parseFlowchart (the real Mermaid parser)", () => {
  it("reads quoted labels, edge labels, classDef/class lines and ::: classes", async () => {
    const chart = await parseFlowchart(
      [
        "flowchart LR",
        '  problem(["Problem"])',
        '  coder["Software engineer · gpt-4o-mini · 120 tok (1.2 s)"]:::ok',
        '  critic["Critic (retry 2)"]',
        '  problem --> coder -->|"handoff · 3 items"| critic',
        '  critic -- "verdict" --> answer(["Final answer"])',
        "  classDef ok fill:#cfc,stroke:#393",
        "  classDef failed fill:#fcc",
        "  class critic failed"
      ].join("\n")
    )
    expect(chart.direction).toBe("LR")
    expect(chart.vertices).toEqual([
      { id: "problem", text: "Problem", classes: [] },
      { id: "coder", text: "Software engineer · gpt-4o-mini · 120 tok (1.2 s)", classes: ["ok"] },
      { id: "critic", text: "Critic (retry 2)", classes: ["failed"] },
      { id: "answer", text: "Final answer", classes: [] }
    ])
    expect(chart.edges).toEqual([
      { start: "problem", end: "coder", text: "" },
      { start: "coder", end: "critic", text: "handoff · 3 items" },
      { start: "critic", end: "answer", text: "verdict" }
    ])
  })

  it("rejects an invalid chart with Mermaid's own message", async () => {
    await expect(parseFlowchart('flowchart TD\n  a["unclosed --> b')).rejects.toThrow(/Parse error on line/)
    await expect(parseFlowchart('flowchart TD\n  a["say "hi""] --> b["x"]"]')).rejects.toThrow(/Parse error/)
  })

  it("refuses a diagram that is not a flowchart", async () => {
    await expect(parseFlowchart("sequenceDiagram\n  A->>B: hi")).rejects.toThrow(/Expected a Mermaid flowchart, got a sequence diagram/)
  })

  it("RunGraph's label escaping keeps any node and edge label intact (line breaks as spaces)", async () => {
    const tricky = fc.constantFrom(..."\"'#;&<>`[](){}|:%$@·\\-\n 0123abc".split(""), "#quot;", "&lt;", "<b>", "style x:", "classDef", "-->", ":::", "%%", "120 tok", "é中🙂", "%%{init: {}}%%", "}%%", "#35;", "&nbsp;", "\t", "$$x$$", "end", "subgraph")
    const label = fc.array(tricky, { maxLength: 12 }).map((parts) => parts.join("").trim()).filter((s) => s.length > 0)
    await fc.assert(
      fc.asyncProperty(label, label, async (node, edge) => {
        const chart = await parseFlowchart(`flowchart TD\n  n["${mermaidLabel(node)}"] -->|"${mermaidLabel(edge)}"| m`)
        expect(chart.vertices[0]?.text).toBe(node.replace(/[\r\n]+/g, " "))
        expect(chart.edges[0]?.text).toBe(edge.replace(/[\r\n]+/g, " "))
      }),
      { numRuns: 150 }
    )
  })
})
