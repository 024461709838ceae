/**
 * No fresh function stored as a property of an existing object (`x.push = (c) => …`,
 * `this[k] = function …`) in the gateway's sources. On the request path that made V8 promote each
 * request's objects to the old generation: the reply limit's closure on every upstream body cost
 * 0.75 KB per JSON call and 4 KB per stream, a full collection a second and a fifth of the
 * throughput (docs/performance.md, "Issue 18, fourteenth session"). A shared function with its
 * state on the object, a listener (`on`/`once`), a function inside a new object literal, a class
 * field or `this.x = …` in a constructor does not (measured), so those pass.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "../../..")

/** Assignments that run once per process or server, not per request, with why. */
const allowed: ReadonlyArray<{ readonly file: string; readonly target: string; readonly why: string }> = [
  { file: "packages/core/src/Http/FastLane.ts", target: "server.emit", why: "installed once per server by attach" }
]

/** "line: target" of every fresh function assigned to a property in `source`. */
const functionProperties = (fileName: string, source: string): Array<string> => {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true)
  const found: Array<string> = []
  const fresh = (e: ts.Expression): boolean => {
    while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e) || ts.isTypeAssertionExpression(e)) e = e.expression
    return ts.isArrowFunction(e) || ts.isFunctionExpression(e) || ts.isClassExpression(e)
  }
  /** `this.x = …` directly in a constructor: the property is laid out with the object. */
  const inConstructor = (node: ts.BinaryExpression): boolean => {
    if (!ts.isPropertyAccessExpression(node.left) || node.left.expression.kind !== ts.SyntaxKind.ThisKeyword) return false
    let up: ts.Node | undefined = node.parent
    while (up && !ts.isFunctionLike(up)) up = up.parent
    return up !== undefined && ts.isConstructorDeclaration(up)
  }
  const visit = (node: ts.Node): void => {
    if (
      ts.isBinaryExpression(node) &&
      node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      (ts.isPropertyAccessExpression(node.left) || ts.isElementAccessExpression(node.left)) &&
      fresh(node.right) &&
      !inConstructor(node)
    ) {
      found.push(`${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.left.getText()}`)
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

const sourceFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(full)
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [full] : []
  })

describe("fresh functions as properties", () => {
  it("finds them, and only them (the check below cannot pass vacuously)", () => {
    const code = [
      "const shared = function () {}",
      "stream.push = (chunk) => push.call(stream, chunk)",
      "this[kHandler] = function () {}",
      "o.fn = (async () => 1) as any",
      "o.fn = shared",
      "o.value = { fn: () => 1 }",
      "s.on('data', (d) => d)",
      "const f = () => 1",
      "class C { fn = () => 1; constructor() { this.g = () => 2; setTimeout(() => { this.h = () => 3 }) } }"
    ].join("\n")
    expect(functionProperties("probe.ts", code)).toEqual(["2: stream.push", "3: this[kHandler]", "4: o.fn", "9: this.h"])
  })

  it("are in none of core's or the hosts' sources, beyond the once-per-process list", () => {
    const dirs = [path.join(root, "packages/core/src"), ...fs.readdirSync(path.join(root, "hosts")).map((h) => path.join(root, "hosts", h, "src"))]
    const files = dirs.filter((dir) => fs.existsSync(dir)).flatMap(sourceFiles)
    expect(files.length).toBeGreaterThan(100)
    const hits = files.flatMap((file) => {
      const rel = path.relative(root, file)
      return functionProperties(file, fs.readFileSync(file, "utf8")).map((hit) => ({ rel, hit }))
    })
    const isAllowed = ({ rel, hit }: { rel: string; hit: string }) => allowed.some((a) => a.file === rel && hit.endsWith(`: ${a.target}`))
    expect(hits.filter((h) => !isAllowed(h)).map(({ rel, hit }) => `${rel}:${hit}`)).toEqual([])
    // Every exception still names an assignment that exists.
    for (const a of allowed) expect(hits.some((h) => h.rel === a.file && h.hit.endsWith(`: ${a.target}`))).toBe(true)
  })
})
