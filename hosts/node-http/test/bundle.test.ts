/**
 * The node host's bundle and the V8 that builds it (scripts/bundle.mjs, lowersObjectSpread): on V8
 * before 12 (Node 20) object spread is lowered to helper calls, because that V8 puts `{ ...a, b }`
 * in the old generation and so keeps the young objects it refers to through scavenges
 * (docs/performance.md, "Issue 18, ninth session"); a build stamped by another V8 is rebuilt.
 * The helpers are ours (objectSpreadHelpers, on Object.assign): they must mean exactly what native
 * spread and rest mean, also for hostile "__proto__" keys, and the calls whose literals need define
 * semantics must keep esbuild's helpers (definingCallSites).
 * The vitest global setup (scripts/vitest-global-setup.mjs) has built the bundle with this node.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import ts from "typescript"
import { describe, expect, it } from "vitest"
// @ts-expect-error: a plain .mjs script without declarations
import { builtByThisV8, stampText } from "../../../scripts/build.mjs"
// @ts-expect-error: a plain .mjs script without declarations
import { buildStages, root } from "../../../bench/lib/build.mjs"
// @ts-expect-error: a plain .mjs script without declarations
import { definingCallSites, esmRequireBanner, hostBundle, lowersObjectSpread, objectSpreadHelpers, v8Major } from "../../../scripts/bundle.mjs"

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

  it("starts with our spread helpers and leaves no lowered call that needs define semantics on them", () => {
    if (!lowersObjectSpread) return
    const text = fs.readFileSync(hostBundle, "utf8")
    expect(text.startsWith(esmRequireBanner + objectSpreadHelpers)).toBe(true)
    // esbuild's definitions are renamed away: ours are the only ones
    for (const name of ["__spreadValues", "__spreadProps", "__objRest"]) expect(text.split(`${name}=(`).length - 1).toBe(1)
    expect(definingCallSites(ts, text)).toEqual([])
    // Effect's Micro adds a getter after a spread: that call kept esbuild's defining helpers
    expect(text).toContain("__esbuildProp(__esbuildValue(")
  })
})

/** Our helpers, evaluated as the bundle defines them. */
const helpers = new Function(`${objectSpreadHelpers}; return { __spreadValues, __spreadProps, __objRest }`)() as {
  __spreadValues: (a: object, b: unknown) => any
  __spreadProps: (a: object, b: object) => any
  __objRest: (b: unknown, skip: ReadonlyArray<PropertyKey>) => any
}

/** Everything spread and rest decide about an object: its prototype, its keys in order, and their descriptors. */
const shape = (o: object) => ({ proto: Object.getPrototypeOf(o), keys: Reflect.ownKeys(o), descriptors: Object.getOwnPropertyDescriptors(o) })

describe("the benchmark's bundles", () => {
  it("take core's sources, so an A/B overlay replaces them in the stage benchmark too", async () => {
    // Core's tsc output (packages/core/dist) is what its package exports by default: a bundle of it
    // would measure the last tsc build, with the overlay ignored.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "aigw-stages-"))
    try {
      // The SSE parser's default event name, which the stage benchmark's stream stage runs.
      const file = "packages/core/src/Providers/internal/sse.ts"
      const source = fs.readFileSync(path.join(root, file), "utf8")
      const overlaid = source.replace(`event || "message"`, `event || "overlaid message"`)
      expect(overlaid).not.toBe(source)
      fs.mkdirSync(path.join(dir, "overlay", path.dirname(file)), { recursive: true })
      fs.writeFileSync(path.join(dir, "overlay", file), overlaid)
      const built = await buildStages({ outfile: path.join(dir, "stages.mjs"), overlay: path.join(dir, "overlay") })
      expect(fs.readFileSync(built.path, "utf8").includes(`"overlaid message"`)).toBe(true)
      const sources: Array<string> = JSON.parse(fs.readFileSync(`${built.path}.map`, "utf8")).sources
      expect(sources.filter((s) => s.includes("packages/core/dist/"))).toEqual([])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("the bundle's object spread helpers mean what native spread and rest mean", () => {
  const sym = Symbol("s")
  const hidden = Symbol("hidden")
  const sources = (): Record<string, () => unknown> => ({
    plain: () => ({ a: 1, b: "two", c: { nested: true } }),
    "numeric keys": () => ({ b: 1, 2: "x", 1: "y", a: 2 }),
    symbols: () => {
      const o: any = { a: 1, [sym]: "visible" }
      Object.defineProperty(o, hidden, { value: "not enumerable", enumerable: false })
      return o
    },
    "non-enumerable and inherited": () => {
      const o = Object.create({ inherited: 1 })
      o.own = 2
      Object.defineProperty(o, "hidden", { value: 3, enumerable: false })
      return o
    },
    "hostile __proto__ from JSON": () => JSON.parse(`{"a":1,"__proto__":{"polluted":true,"stream":true},"b":2}`),
    "__proto__ null from JSON": () => JSON.parse(`{"__proto__":null}`),
    array: () => ["x", "y"],
    string: () => "ab",
    number: () => 5,
    null: () => null,
    undefined: () => undefined
  })

  for (const [name, make] of Object.entries(sources())) {
    it(`{ ...x }, { k, ...x }, { ...x, k } and { a, ...rest } of ${name}`, () => {
      expect(shape(helpers.__spreadValues({}, make()))).toEqual(shape({ ...(make() as object) }))
      expect(shape(helpers.__spreadValues({ a: "first", z: 0 }, make()))).toEqual(shape({ a: "first", z: 0, ...(make() as object) }))
      expect(shape(helpers.__spreadProps(helpers.__spreadValues({}, make()), { a: "after", k: 1 }))).toEqual(shape({ ...(make() as object), a: "after", k: 1 }))
      expect(shape(helpers.__spreadValues(helpers.__spreadValues({}, make()), { b: "again" }))).toEqual(shape({ ...(make() as object), ...{ b: "again" } }))
      const source = make()
      if (source === null || source === undefined) return // destructuring them throws before rest runs
      const { a: _a, ...rest } = source as any
      expect(shape(helpers.__objRest(source, ["a"]))).toEqual(shape(rest))
    })
  }

  it("a hostile __proto__ key stays an own property and sets no prototype", () => {
    const copy = helpers.__spreadProps(helpers.__spreadValues({}, JSON.parse(`{"__proto__":{"isAdmin":true}}`)), { k: 1 })
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype)
    expect(copy.isAdmin).toBeUndefined()
    expect(Object.keys(copy)).toEqual(["__proto__", "k"])
    expect(JSON.stringify(copy)).toBe(`{"__proto__":{"isAdmin":true},"k":1}`)
    const rest = helpers.__objRest(JSON.parse(`{"a":1,"__proto__":{"isAdmin":true}}`), ["a"])
    expect(Object.getPrototypeOf(rest)).toBe(Object.prototype)
    expect(rest.isAdmin).toBeUndefined()
    expect(({} as any).isAdmin).toBeUndefined()
  })

  it("reads a source's getters once each, as spread does", () => {
    let reads = 0
    const source = { get value() { return ++reads } }
    const copy = helpers.__spreadValues({}, source)
    expect(reads).toBe(1)
    expect(Object.getOwnPropertyDescriptor(copy, "value")).toEqual({ value: 1, writable: true, enumerable: true, configurable: true })
  })
})

describe("the calls that keep esbuild's defining helpers", () => {
  const sitesIn = (code: string) => definingCallSites(ts, code).map((at: number) => code.slice(at, code.indexOf("(", at)))

  it("finds accessors after a spread and a prototype in the literal spread into, with every call of their chain", () => {
    expect(sitesIn(`x = __spreadProps(__spreadValues({}, a), { get b() { return 1 } })`)).toEqual(["__spreadProps", "__spreadValues"])
    expect(sitesIn(`x = __spreadValues({ set b(v) {} }, a)`)).toEqual(["__spreadValues"])
    expect(sitesIn(`x = __spreadValues({ __proto__: proto }, a)`)).toEqual(["__spreadValues"])
    expect(sitesIn(`x = __spreadValues(__spreadProps(__spreadValues({}, a), { get b() { return 1 } }), c)`)).toEqual(["__spreadValues", "__spreadProps", "__spreadValues"])
    expect(sitesIn(`x = __spreadValues(target, a)`)).toEqual(["__spreadValues"])
  })

  it("leaves plain literals, a null prototype and computed __proto__ keys to ours", () => {
    expect(sitesIn(`x = __spreadProps(__spreadValues({ a: 1 }, b), { c: 2, ["__proto__"]: d, m() {} })`)).toEqual([])
    expect(sitesIn(`x = __spreadValues({ __proto__: null }, a)`)).toEqual([])
    expect(sitesIn(`f(__spreadValues({}, __spreadProps(__spreadValues({}, a), { get g() { return 1 } })))`)).toEqual(["__spreadProps", "__spreadValues"])
  })
})
