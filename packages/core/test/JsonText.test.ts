/** The checks on JSON bodies before and after parsing (JsonText.ts): prototype keys; the fields outside a known set. */
import { describe, expect, it } from "vitest"
import { defaultLimits } from "../src/Config.ts"
import { requestJsonLimits } from "../src/Http/Edge.ts"
import { fieldsOutside, jsonTextProblem, parseJsonText, parseUpstreamJson, protoKeyProblem } from "../src/JsonText.ts"

const problemOf = (text: string) => protoKeyProblem(text, JSON.parse(text))

describe("protoKeyProblem", () => {
  it("finds an own __proto__ key anywhere, spelled plainly or with escapes, and says where", () => {
    expect(problemOf(`{"__proto__":{"a":1}}`)).toBe("the field name __proto__ is not accepted.")
    expect(problemOf(`{"a":[1,{"b":{"__proto__":null}}]}`)).toBe("the field name __proto__ is not accepted (at a.1.b).")
    expect(problemOf(`[{"\\u005f\\u005fproto\\u005f\\u005f":1}]`)).toBe("the field name __proto__ is not accepted (at 0).")
    expect(problemOf(`{"x":{"__pr\\u006fto__":[]}}`)).toBe("the field name __proto__ is not accepted (at x).")
  })

  it("lets the name through as a value, as part of a longer key, and in bodies without it", () => {
    expect(problemOf(`{"content":"\\"__proto__\\": is an accessor","__proto__x":1,"y__proto__":2}`)).toBeUndefined()
    expect(problemOf(`{"content":"caf\\u00e9","n":[1,2,{"k":"v"}]}`)).toBeUndefined()
    expect(problemOf(`"__proto__"`)).toBeUndefined()
    expect(problemOf(`{"model":"m","messages":[]}`)).toBeUndefined()
  })
})

describe("fieldsOutside", () => {
  const known = new Set(["id", "choices"])

  it("keeps the fields outside the known set, with null and undefined as absent", () => {
    expect(fieldsOutside({ id: "x", choices: [], system_fingerprint: "fp", logprobs: null, n: 0, flag: false }, known)).toEqual({ system_fingerprint: "fp", n: 0, flag: false })
    expect(fieldsOutside({ id: "x", other: undefined }, known)).toBeUndefined()
    expect(fieldsOutside("text", known)).toBeUndefined()
    expect(fieldsOutside(null, known)).toBeUndefined()
  })

  it("leaves a __proto__ field out (an upstream's would reach clients that merge answers), and never makes it the copy's prototype", () => {
    const out = fieldsOutside(JSON.parse(`{"id":"x","__proto__":{"polluted":true},"z":1}`), known)!
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype)
    expect((out as any).polluted).toBeUndefined()
    expect(JSON.stringify(out)).toBe(`{"z":1}`)
    expect(fieldsOutside(JSON.parse(`{"id":"x","__proto__":{"polluted":true}}`), known)).toBeUndefined()
    expect(({} as any).polluted).toBeUndefined()
  })
})

describe("parseJsonText's malformed-body problem", () => {
  it("never quotes the body: a password or key in it stays out of the message", () => {
    for (const text of ['{"username":"a","password":MySecretPassw0rd}', "MySecretPassw0rd", '{"key":"aigw_secret"}x', '{"password":"MySecret\u0001"}']) {
      const parsed = parseJsonText(text, { maxDepth: 64 })
      expect("problem" in parsed && parsed.malformed).toBe(true)
      const problem = "problem" in parsed ? parsed.problem : ""
      expect(problem).not.toMatch(/MySecret|aigw_secret|password/)
      expect(problem.length).toBeGreaterThan(0)
    }
  })
})

describe("objects and arrays, before a parse", () => {
  const empties = (n: number) => `[${Array.from({ length: n }, () => "{}").join(",")}]`

  it("are counted against maxContainers, outside strings only (the root included)", () => {
    expect(jsonTextProblem(empties(2), { maxDepth: 64, maxContainers: 3 })).toBeUndefined()
    expect(jsonTextProblem(empties(3), { maxDepth: 64, maxContainers: 3 })).toBe("JSON holds more than 3 objects and arrays.")
    expect(jsonTextProblem(JSON.stringify({ a: "{[{[{[" }), { maxDepth: 64, maxContainers: 1 })).toBeUndefined()
  })

  it("in a client's body: 100,000 by default (AIGW_MAX_JSON_CONTAINERS), checked before the parse", () => {
    // 3.5 million `{}` in 10 MiB held the event loop 3 s per unauthenticated request.
    expect(parseJsonText(empties(99_999), requestJsonLimits(defaultLimits))).toHaveProperty("value")
    expect(parseJsonText(empties(100_000), requestJsonLimits(defaultLimits))).toEqual({ problem: "JSON holds more than 100000 objects and arrays.", malformed: false })
    expect(requestJsonLimits(defaultLimits)).toBe(requestJsonLimits(defaultLimits))
  })

  it("members of one object are bounded: 10,000 in a client's body, 100,000 in an upstream's answer (3.5 million in one object held the loop 9–19 s)", () => {
    const members = (n: number) => `{"x":{${Array.from({ length: n }, (_, i) => `"k${i}":0`).join(",")}},"y":{"a":1}}`
    expect(parseJsonText(members(10_000), requestJsonLimits(defaultLimits))).toHaveProperty("value")
    expect(parseJsonText(members(10_001), requestJsonLimits(defaultLimits))).toEqual({ problem: "JSON holds an object of more than 10000 members.", malformed: false })
    // Counted per object: many objects of few members each pass, colons in strings do not count.
    expect(parseJsonText(JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ a: i, b: "x:y:z" }))), requestJsonLimits(defaultLimits))).toHaveProperty("value")
    expect(parseUpstreamJson(members(100_001))).toEqual({ problem: "JSON holds an object of more than 100000 members.", malformed: false })
    expect(parseUpstreamJson(members(100_000))).toHaveProperty("value")
  })

  it("in an upstream's answer: bounded objects, arrays, items and nesting; escaped NULs are text", () => {
    // 33 MB of `{},` (under the reply limit) held the event loop 13 s and took 900 MB.
    expect(parseUpstreamJson(empties(1_000_001))).toEqual({ problem: "JSON holds more than 1000000 objects and arrays.", malformed: false })
    expect(parseUpstreamJson(`[${"0,".repeat(4_000_000)}0]`)).toEqual({ problem: "JSON holds more than 4000000 array items and object members.", malformed: false })
    const deep = `${"[".repeat(3_000)}${" ".repeat(2_000)}${"]".repeat(3_000)}`
    expect(parseUpstreamJson(deep)).toEqual({ problem: "JSON nested deeper than 128 levels.", malformed: false })
    // A short text holds nothing costly: parsed as it is.
    expect(parseUpstreamJson("[".repeat(1_000) + "]".repeat(1_000))).toHaveProperty("value")
    expect(parseUpstreamJson(JSON.stringify({ text: `a\u0000b${" ".repeat(5_000)}` }))).toEqual({ value: { text: `a\u0000b${" ".repeat(5_000)}` } })
    // Real answers of the largest kinds pass: two million numbers, 300,000 elements with their metadata.
    expect(parseUpstreamJson(JSON.stringify({ data: [{ embedding: Array.from({ length: 2_000_000 }, () => 0.0123) }] }))).toHaveProperty("value")
    expect(parseUpstreamJson(JSON.stringify(Array.from({ length: 300_000 }, () => ({ text: "a", metadata: { page_number: 1 } }))))).toHaveProperty("value")
    expect(parseUpstreamJson("{not json")).toMatchObject({ malformed: true })
  })
})
