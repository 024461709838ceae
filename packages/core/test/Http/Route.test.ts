/** The shared JSON body checks of Route.ts: depth and NUL before JSON.parse, for every edge. */
import { describe, expect, it } from "vitest"
import { BadRequest } from "../../src/Errors.ts"
import { jsonTextProblem, parseJsonBody } from "../../src/Http/Route.ts"

const nested = (levels: number) => "[".repeat(levels) + "]".repeat(levels)

describe("jsonTextProblem", () => {
  it("counts nesting of arrays and objects outside strings", () => {
    expect(jsonTextProblem(nested(64), 64)).toBeUndefined()
    expect(jsonTextProblem(nested(65), 64)).toBe("JSON nested deeper than 64 levels.")
    expect(jsonTextProblem(`{"a":${nested(63)}}`, 64)).toBeUndefined()
    expect(jsonTextProblem(`{"a":${nested(64)}}`, 64)).toBe("JSON nested deeper than 64 levels.")
    // Brackets in strings, also after escaped quotes, do not count.
    expect(jsonTextProblem(JSON.stringify({ a: "[[[[[[", b: "\"{{{{{{" }), 2)).toBeUndefined()
    expect(jsonTextProblem(nested(50_000), 64)).toBe("JSON nested deeper than 64 levels.")
  })

  it("finds NUL as the \\u0000 escape or a raw character, not an escaped backslash before u0000", () => {
    expect(jsonTextProblem(JSON.stringify({ title: "a\u0000b" }), 64)).toBe("NUL characters (\\u0000) are not accepted.")
    expect(jsonTextProblem("{\"title\":\"a\u0000b\"}", 64)).toBe("NUL characters (\\u0000) are not accepted.")
    expect(jsonTextProblem(JSON.stringify({ path: "C:\\u0000" }), 64)).toBeUndefined()
    expect(jsonTextProblem(JSON.stringify({ ok: "\u0001 \\ \" \u00e9" }), 64)).toBeUndefined()
  })

  it("scans a 10 MB body in well under a second", () => {
    const big = JSON.stringify({ text: "x\\\"".repeat(2_500_000), list: Array.from({ length: 100_000 }, (_, i) => ({ i })) })
    const started = performance.now()
    expect(jsonTextProblem(big, 64)).toBeUndefined()
    expect(performance.now() - started).toBeLessThan(1_000)
  })
})

describe("parseJsonBody", () => {
  it("answers the 400 of an empty, too deep, NUL-carrying or malformed body, else the value", () => {
    const message = (text: string) => (parseJsonBody(text, 64) as BadRequest).message
    expect(message("  ")).toBe("Request body is required (JSON).")
    expect(message(nested(65))).toBe("Invalid request body: JSON nested deeper than 64 levels.")
    expect(message("{\"a\":\"\\u0000\"}")).toBe("Invalid request body: NUL characters (\\u0000) are not accepted.")
    expect(message("{\"a\": [1,")).toMatch(/^Malformed JSON body: /)
    expect(parseJsonBody("{\"a\":[1]}", 64)).toEqual({ a: [1] })
    expect(parseJsonBody(nested(65), 64)).toBeInstanceOf(BadRequest)
  })
})
