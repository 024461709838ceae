/**
 * The node host's bundle and the V8 that builds it (scripts/bundle.mjs, lowersObjectSpread): on V8
 * before 12 (Node 20) object spread is lowered to helper calls, because that V8 puts `{ ...a, b }`
 * in the old generation and so keeps the young objects it refers to through scavenges
 * (docs/performance.md, "Issue 18, ninth session"); a build stamped by another V8 is rebuilt.
 * The vitest global setup (scripts/vitest-global-setup.mjs) has built the bundle with this node.
 */
import * as fs from "node:fs"
import ts from "typescript"
import { describe, expect, it } from "vitest"
// @ts-expect-error: a plain .mjs script without declarations
import { builtByThisV8, stampText } from "../../../scripts/build.mjs"
// @ts-expect-error: a plain .mjs script without declarations
import { hostBundle, lowersObjectSpread, v8Major } from "../../../scripts/bundle.mjs"

/** The object spreads (`{ ...x }`) in a program's text, found by TypeScript's parser (not in strings or comments). */
const objectSpreads = (text: string): number => {
  const file = ts.createSourceFile("bundle.mjs", text, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS)
  let count = 0
  const visit = (node: ts.Node): void => {
    if (ts.isSpreadAssignment(node)) count++
    ts.forEachChild(node, visit)
  }
  visit(file)
  return count
}

describe("the node host's bundle", () => {
  it("lowers object spread exactly when built by V8 older than 12", () => {
    expect(v8Major).toBe(Number(process.versions.v8.split(".")[0]))
    expect(lowersObjectSpread).toBe(v8Major < 12)
  })

  it("has no object spread left when this node's V8 lowers it, and keeps them otherwise", () => {
    const spreads = objectSpreads(fs.readFileSync(hostBundle, "utf8"))
    if (lowersObjectSpread) expect(spreads).toBe(0)
    else expect(spreads).toBeGreaterThan(0)
  })

  it("the parser finds spreads at all (the check above cannot pass vacuously)", () => {
    expect(objectSpreads(`const a = { ...b, c: 1 }; const s = "{ ...not }"`)).toBe(1)
  })

  it("a build stamped by another V8 counts as stale", () => {
    expect(builtByThisV8(stampText(0))).toBe(true)
    expect(builtByThisV8(stampText(0).replace(` v8 ${v8Major}\n`, ` v8 ${v8Major + 1}\n`))).toBe(false)
    // A stamp from before the V8 was recorded.
    expect(builtByThisV8("2026-11-27T10:00:00.000Z tsc exit 0\n")).toBe(false)
  })
})
