/** The checks on JSON bodies before and after parsing (JsonText.ts): prototype keys; the fields outside a known set. */
import { describe, expect, it } from "vitest"
import { fieldsOutside, parseJsonText, protoKeyProblem } from "../src/JsonText.ts"

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
      const parsed = parseJsonText(text, 64)
      expect("problem" in parsed && parsed.malformed).toBe(true)
      const problem = "problem" in parsed ? parsed.problem : ""
      expect(problem).not.toMatch(/MySecret|aigw_secret|password/)
      expect(problem.length).toBeGreaterThan(0)
    }
  })
})
