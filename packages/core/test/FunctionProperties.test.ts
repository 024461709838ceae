/**
 * No function literal assigned to a property (`x.push = (c) => …`, `this[k] = function …`,
 * `o.f ??= () => …`) in the gateway's sources. V8's parser allocates such a closure in the old
 * generation at once ("pretenured", on the guess that it is a method set up once: parser.h,
 * CheckAssigningFunctionLiteralToProperty), and an old-generation closure keeps its context chain,
 * every variable of the enclosing functions that an inner closure captures, alive through young
 * collections until the next full one. On the request path that promotes each request's objects
 * and brings full collections: the reply limit's closure on every upstream body did
 * (docs/performance.md, "Issue 18, fourteenth session"). A function from a variable, a listener
 * (`on`/`once`), a function inside an object literal or a class field is allocated young, so those
 * pass.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "../../..")

/** Assignments that run once per process or server, not per request (pretenuring suits them), with why. */
const allowed: ReadonlyArray<{ readonly file: string; readonly target: string; readonly why: string }> = [
  { file: "packages/core/src/Http/FastLane.ts", target: "server.emit", why: "installed once per server by attach" }
]

/** "line: target" of every function literal assigned to a property in `source`. */
const functionProperties = (fileName: string, source: string): Array<string> => {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true)
  const found: Array<string> = []
  // Parentheses and type assertions are gone from the JavaScript V8 parses.
  const functionLiteral = (e: ts.Expression): boolean => {
    while (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e) || ts.isTypeAssertionExpression(e)) e = e.expression
    return ts.isArrowFunction(e) || ts.isFunctionExpression(e)
  }
  // `=` and the logical assignments, as in the parser.
  const assigning = new Set([ts.SyntaxKind.EqualsToken, ts.SyntaxKind.BarBarEqualsToken, ts.SyntaxKind.AmpersandAmpersandEqualsToken, ts.SyntaxKind.QuestionQuestionEqualsToken])
  const visit = (node: ts.Node): void => {
    if (
      ts.isBinaryExpression(node) &&
      assigning.has(node.operatorToken.kind) &&
      (ts.isPropertyAccessExpression(node.left) || ts.isElementAccessExpression(node.left)) &&
      functionLiteral(node.right)
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

describe("function literals assigned to properties", () => {
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
      "class C { fn = () => 1; constructor() { this.g = () => 2 } }",
      "o.f ??= function () {}",
      "o.g += () => 1"
    ].join("\n")
    expect(functionProperties("probe.ts", code)).toEqual(["2: stream.push", "3: this[kHandler]", "4: o.fn", "9: this.g", "10: o.f"])
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
