/** Decoding a hostile body costs what its size costs, and its 400 stays short. */
import { JSONSchema, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { defaultLimits } from "../../src/Config.ts"
import { BadRequest } from "../../src/Errors.ts"
import { describeParseError, parseOptions, preview } from "../../src/Http/DecodeProblems.ts"
import { errorBody, parseJsonBody } from "../../src/Http/Edge.ts"
import { ChatCompletionBody } from "../../src/Http/OpenAiRoutes.ts"
import { decoderNow } from "../../src/Http/Route.ts"
import { BoundedArray } from "../../src/RequestFields.ts"

/** An item schema that counts how many items it was asked to decode. */
const counted = () => {
  let seen = 0
  const item = Schema.Number.pipe(Schema.filter(() => {
    seen++
    return true
  }))
  return { item, seen: () => seen }
}

const messageOf = (result: unknown) => (result instanceof BadRequest ? result.message : "decoded")

describe("BoundedArray", () => {
  it("refuses a length out of bounds before decoding any item", () => {
    const { item, seen } = counted()
    const decode = decoderNow(Schema.Struct({ xs: BoundedArray(item, { min: 2, max: 3 }) }), "body")
    expect(messageOf(decode({ xs: Array.from({ length: 100_000 }, () => 1) }))).toBe("Invalid body: xs: holds at most 3 items")
    expect(messageOf(decode({ xs: [1] }))).toBe("Invalid body: xs: must hold at least 2 items")
    expect(seen()).toBe(0)
    expect(decode({ xs: [1, 2, 3] })).toEqual({ xs: [1, 2, 3] })
    expect(seen()).toBe(3)
    expect(messageOf(decode({ xs: "no" }))).toBe("Invalid body: xs: Expected an array, actual \"no\"")
    expect(messageOf(decode({ xs: [1, "two"] }))).toBe("Invalid body: xs.1: Expected number, actual \"two\"")
  })

  it("takes the messages it is given", () => {
    const decode = decoderNow(Schema.Struct({ xs: BoundedArray(Schema.Number, { min: 1, max: 1, minMessage: "xs needs one", maxMessage: "xs takes one" }) }), "body")
    expect(messageOf(decode({ xs: [] }))).toBe("Invalid body: xs: xs needs one")
    expect(messageOf(decode({ xs: [1, 2] }))).toBe("Invalid body: xs: xs takes one")
  })

  it("refuses what the items hold together past a total before decoding any item", () => {
    const { item, seen } = counted()
    const decode = decoderNow(
      Schema.Struct({ xs: BoundedArray(Schema.Struct({ a: Schema.optional(Schema.Array(item)), b: Schema.optional(Schema.Array(item)) }), { max: 10, totals: [{ fields: ["a", "b"], max: 4, what: "numbers" }] }) }),
      "body"
    )
    expect(messageOf(decode({ xs: [{ a: [1, 2] }, { a: [3], b: [4, 5] }] }))).toBe("Invalid body: xs: holds more than 4 numbers in all")
    expect(seen()).toBe(0)
    // What is not an array counts nothing (the item's own schema refuses it).
    expect(decode({ xs: [{ a: [1, 2] }, { b: [3, 4] }, null as any].slice(0, 2) })).toEqual({ xs: [{ a: [1, 2] }, { b: [3, 4] }] })
    expect(messageOf(decode({ xs: [{ a: "1,2,3,4,5" }] }))).toMatch(/^Invalid body: xs\.0\.a: Expected/)
  })

  it("is documented as the plain array it is", () => {
    const plain = Schema.Array(Schema.String).pipe(Schema.minItems(1), Schema.maxItems(5)).annotations({ description: "d" })
    const bounded = BoundedArray(Schema.String, { min: 1, max: 5, description: "d" })
    const { $schema: _a, ...a } = JSONSchema.make(plain) as any
    const { $schema: _b, ...b } = JSONSchema.make(bounded) as any
    expect(b).toEqual(a)
    expect(b).toMatchObject({ type: "array", items: { type: "string" }, minItems: 1, maxItems: 5, description: "d" })
  })
})

describe("describeParseError", () => {
  it("names the first problem of a body (not every one)", () => {
    const decode = Schema.decodeUnknownEither(Schema.Struct({ a: Schema.Number, b: Schema.String }), parseOptions)
    const result = decode({ a: "x", b: 1 })
    expect(result._tag).toBe("Left")
    if (result._tag === "Left") expect(describeParseError(result.left)).toBe("a: Expected number, actual \"x\"")
  })

  it("shows a wrong value in short, however large", () => {
    const decode = decoderNow(ChatCompletionBody, "body")
    // 9,000 parts: within the 10,000 of all messages, past the 500 of one.
    const parts = messageOf(decode({ model: "m", messages: [{ role: "user", content: Array.from({ length: 9_000 }, () => 1) }] }))
    expect(parts).toBe("Invalid body: messages.0.content: Expected string, actual an array of 9000 items")
    const long = messageOf(decode({ model: "m", messages: [{ role: "user", content: "hi" }], temperature: "x".repeat(1_000_000) }))
    expect(long).toMatch(/^Invalid body: temperature: .*actual "x{80}"… \(1000000 characters\)/)
    expect(long.length).toBeLessThan(400)
  })
})

describe("what a problem says was expected", () => {
  it("names a body's schema by its kind, not written out: an object, an array, a union of kinds", () => {
    const decode = decoderNow(ChatCompletionBody, "body")
    for (const body of [null, 5, "text", [1, 2]]) {
      const message = messageOf(decode(body))
      expect(message).toMatch(/^Invalid body: Expected an object, actual /)
      expect(message.length).toBeLessThan(120)
    }
    const notAnArray = messageOf(decode({ model: "m", messages: { role: "user" } }))
    expect(notAnArray).toMatch(/^Invalid body: messages: Expected an array, actual \{"role":"user"\}$/)
    const part = messageOf(decode({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "hi" }, 5] }] }))
    expect(part.length).toBeLessThan(300)
    expect(part).not.toMatch(/readonly/)
    // A short name stays as the schema library writes it.
    expect(messageOf(decoderNow(Schema.Struct({ a: Schema.Literal("x") }), "body")({ a: "z" }))).toBe("Invalid body: a: Expected \"x\", actual \"z\"")
  })
})

describe("the problem's field", () => {
  it("is carried as OpenAI's param, and the OpenAI envelope shows it (null when there is none)", () => {
    const decode = decoderNow(ChatCompletionBody, "body")
    const bad = decode({ model: "m", messages: [{ role: "user", content: "hi" }, { role: "user", content: [{ type: "text", text: 5 }] }] })
    expect(bad).toBeInstanceOf(BadRequest)
    expect((bad as BadRequest).param).toBe("messages.[1].content.[0].text")
    expect(errorBody("openai", bad as BadRequest)).toEqual({
      error: { message: (bad as BadRequest).message, type: "invalid_request_error", param: "messages.[1].content.[0].text", code: "BadRequest" }
    })
    expect(errorBody("openai", new BadRequest({ message: "m" }))).toEqual({ error: { message: "m", type: "invalid_request_error", param: null, code: "BadRequest" } })
    expect((decode({ messages: [] }) as BadRequest).param).toBe("model")
  })

  it("names an empty field name as \"\"", () => {
    const strict = decoderNow(Schema.Struct({ a: Schema.String }).annotations({ parseOptions: { onExcessProperty: "error" } }), "body")
    // It used to read "Invalid body: : is unexpected, …".
    expect(messageOf(strict({ a: "x", "": 1 }))).toMatch(/^Invalid body: "": is unexpected/)
  })
})

describe("preview", () => {
  it("writes small values whole and large ones as their size", () => {
    expect(preview(5)).toBe("5")
    expect(preview(null)).toBe("null")
    expect(preview("a\"b")).toBe("\"a\\\"b\"")
    expect(preview([1, "a", { b: [true] }])).toBe("[1,\"a\",{\"b\":an array of 1 items}]")
    expect(preview({ a: 1, b: [2] })).toBe("{\"a\":1,\"b\":[2]}")
    expect(preview(Array.from({ length: 9 }, () => 0))).toBe("an array of 9 items")
    expect(preview(Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, i])))).toBe("an object of 9 fields")
    expect(preview("y".repeat(81))).toBe(`"${"y".repeat(80)}"… (81 characters)`)
  })
})

describe("a malformed body's Content-Type", () => {
  it("is named when the body was sent as something other than JSON (a form's curl -d excepted), never otherwise", () => {
    const messageOf = (contentType?: string) => (parseJsonBody("--xyz\r\ncontent-disposition: form-data", defaultLimits, contentType) as BadRequest).message
    expect(messageOf("multipart/form-data; boundary=xyz")).toMatch(/^Malformed JSON body: .* \(sent as multipart\/form-data; this route takes application\/json\)$/)
    expect(messageOf("text/plain")).toMatch(/\(sent as text\/plain; this route takes application\/json\)$/)
    for (const plain of [undefined, "application/json", "application/json; charset=utf-8", "application/vnd.api+json", "application/x-www-form-urlencoded"]) {
      expect(messageOf(plain)).not.toMatch(/sent as/)
    }
    expect(parseJsonBody('{"a":1}', defaultLimits, "text/plain")).toEqual({ a: 1 })
  })
})

describe("a value no alternative of a union takes", () => {
  const problem = (schema: Schema.Struct.Field, value: unknown) => {
    const decode = decoderNow(Schema.Struct({ t: schema }) as unknown as Schema.Schema<unknown, any>, "body")
    return messageOf(decode({ t: value }))
  }
  it("names every literal the field takes, not the first", () => {
    expect(problem(Schema.Literal("code", "math", "research"), "zzz")).toBe(`Invalid body: t: Expected one of "code", "math", "research", actual "zzz"`)
    expect(problem(Schema.optional(Schema.Literal("a", "b")), 3)).toBe(`Invalid body: t: Expected one of "a", "b", actual 3`)
    const many = Schema.Literal(...Array.from({ length: 30 }, (_, i) => `v${i}`))
    expect(problem(many, "x")).toMatch(/Expected one of "v0", .*"v19", … \(30 values\), actual "x"$/)
    expect(problem(Schema.Union(Schema.Literal("a"), Schema.Number), "zzz")).toBe(`Invalid body: t: Expected "a" or number, actual "zzz"`)
  })
  it("uses the union's own message, or its one alternative's, also on an optional field", () => {
    const taskType = Schema.Literal("code", "math").annotations({ message: () => "taskType must be one of code, math" })
    expect(problem(taskType, "zzz")).toBe("Invalid body: t: taskType must be one of code, math")
    expect(problem(Schema.optional(taskType), "zzz")).toBe("Invalid body: t: taskType must be one of code, math")
    const one = Schema.optional(Schema.NullOr(Schema.Literal(1).annotations({ message: () => "n must be 1" })))
    expect(problem(one, 2)).toBe("Invalid body: t: n must be 1")
  })
  it("still reports the alternative that got further into an object", () => {
    const shape = Schema.Union(Schema.Struct({ kind: Schema.Literal("a"), x: Schema.Number }), Schema.String)
    expect(problem(shape, { kind: "a", x: "no" })).toBe(`Invalid body: t.x: Expected number, actual "no"`)
  })
})

describe("a client's own keys in a problem", () => {
  it("are cut: an unexpected field named by a key of 100,000 characters is not written back whole", () => {
    const decode = decoderNow(Schema.Struct({ t: Schema.String }).annotations({ parseOptions: { onExcessProperty: "error" } }) as unknown as Schema.Schema<unknown, any>, "body")
    const text = messageOf(decode({ t: "ok", ["k".repeat(100_000)]: 1 }))
    expect(text).toMatch(/^Invalid body: k{100}… \(100000 characters\): is unexpected/)
    expect(text.length).toBeLessThan(300)
  })
})
