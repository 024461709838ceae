import fc from "fast-check"
import { describe, expect, it } from "vitest"
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

  // What a quoted label must escape for Mermaid 11 (found by the property below): `"` ends the label;
  // `#word;` / `#123;` is an entity code, so `#` goes first (the other escapes contain it); `%%{`
  // opens a directive that swallows the rest of the chart; on a line holding "style" or "classDef",
  // `:` followed by a `#` makes Mermaid drop a `;`; the label is HTML (`<b>`, `&lt;`) and a label in
  // backticks is Markdown. Newlines are written as `<br>`. Mermaid trims the label's outer spaces.
  const escapeLabel = (s: string) =>
    s
      .replace(/#/g, "#35;")
      .replace(/"/g, "#quot;")
      .replace(/&/g, "#amp;")
      .replace(/</g, "#lt;")
      .replace(/>/g, "#gt;")
      .replace(/`/g, "#96;")
      .replace(/:/g, "#58;")
      .replace(/%/g, "#37;")
      .replace(/\r?\n/g, "<br>")

  it("the escaping above keeps any node and edge label intact", async () => {
    const tricky = fc.constantFrom(..."\"'#;&<>`[](){}|:%$@·\\-\n 0123abc".split(""), "#quot;", "&lt;", "<b>", "style x:", "classDef", "-->", ":::", "%%", "120 tok", "é中🙂", "%%{init: {}}%%", "}%%", "#35;", "&nbsp;", "\t", "$$x$$", "end", "subgraph")
    const label = fc.array(tricky, { maxLength: 12 }).map((parts) => parts.join("").trim()).filter((s) => s.length > 0)
    await fc.assert(
      fc.asyncProperty(label, label, async (node, edge) => {
        const chart = await parseFlowchart(`flowchart TD\n  n["${escapeLabel(node)}"] -->|"${escapeLabel(edge)}"| m`)
        expect(chart.vertices[0]?.text).toBe(node)
        expect(chart.edges[0]?.text).toBe(edge)
      }),
      { numRuns: 150 }
    )
  })
})
