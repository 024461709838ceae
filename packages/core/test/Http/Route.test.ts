/** The shared JSON body checks of Route.ts: depth and NUL before JSON.parse, for every edge. */
import { describe, expect, it } from "vitest"
import { defaultLimits } from "../../src/Config.ts"
import { Cause, Effect, Logger } from "effect"
import { BadRequest } from "../../src/Errors.ts"
import { holdsMoreParts, jsonTextProblem, logUnexpected, parseJsonBody, undecodableField } from "../../src/Http/Route.ts"
import { jsonLine } from "../../src/Logging.ts"

const nested = (levels: number) => "[".repeat(levels) + "]".repeat(levels)

describe("jsonTextProblem", () => {
  it("counts nesting of arrays and objects outside strings", () => {
    expect(jsonTextProblem(nested(64), { maxDepth: 64 })).toBeUndefined()
    expect(jsonTextProblem(nested(65), { maxDepth: 64 })).toBe("JSON nested deeper than 64 levels.")
    expect(jsonTextProblem(`{"a":${nested(63)}}`, { maxDepth: 64 })).toBeUndefined()
    expect(jsonTextProblem(`{"a":${nested(64)}}`, { maxDepth: 64 })).toBe("JSON nested deeper than 64 levels.")
    // Brackets in strings, also after escaped quotes, do not count.
    expect(jsonTextProblem(JSON.stringify({ a: "[[[[[[", b: "\"{{{{{{" }), { maxDepth: 2 })).toBeUndefined()
    expect(jsonTextProblem(nested(50_000), { maxDepth: 64 })).toBe("JSON nested deeper than 64 levels.")
  })

  it("finds NUL as the \\u0000 escape or a raw character, not an escaped backslash before u0000", () => {
    expect(jsonTextProblem(JSON.stringify({ title: "a\u0000b" }), { maxDepth: 64 })).toBe("NUL characters (\\u0000) are not accepted.")
    expect(jsonTextProblem("{\"title\":\"a\u0000b\"}", { maxDepth: 64 })).toBe("NUL characters (\\u0000) are not accepted.")
    expect(jsonTextProblem(JSON.stringify({ path: "C:\\u0000" }), { maxDepth: 64 })).toBeUndefined()
    expect(jsonTextProblem(JSON.stringify({ ok: "\u0001 \\ \" \u00e9" }), { maxDepth: 64 })).toBeUndefined()
  })

  it("refuses an escaped half of a surrogate pair, which UTF-8 cannot keep (stored, it became U+FFFD)", () => {
    const lone = "a \\u escape of half a UTF-16 surrogate pair (\\uD800 to \\uDFFF without its other half) is no character: send valid Unicode."
    const problem = (text: string) => jsonTextProblem(text, { maxDepth: 64 })
    // JSON.stringify writes a lone surrogate as an escape.
    for (const title of ["a\ud800b", "a\udc00", "\udbff", "x\ud83d", "\ude00\ud83d"]) expect(problem(JSON.stringify({ title })), JSON.stringify(title)).toBe(lone)
    expect(problem(`{"title":"\\uD800\\u0041"}`)).toBe(lone)
    // A whole pair, escaped or raw, and an escaped backslash before "ud800", are text.
    expect(problem(`{"title":"\\ud83d\\ude00 \\uD83D\\uDE00 \u{1F600}"}`)).toBeUndefined()
    expect(problem(JSON.stringify({ path: "C:\\ud800" }))).toBeUndefined()
    // An upstream's answer keeps them (its text is relayed, not stored as sent).
    expect(jsonTextProblem(JSON.stringify({ t: "a\ud800" }), { maxDepth: 64, refuseUnstorable: false })).toBeUndefined()
  })

  it("counts array items and object members outside strings against maxItems (commas and openings: a bound from above)", () => {
    const items = (n: number) => JSON.stringify(Array.from({ length: n }, () => 0))
    // [0,0,0] is one opening and two commas: three.
    expect(jsonTextProblem(items(3), { maxDepth: 64, maxItems: 3 })).toBeUndefined()
    expect(jsonTextProblem(items(4), { maxDepth: 64, maxItems: 3 })).toBe("JSON holds more than 3 array items and object members.")
    expect(jsonTextProblem(JSON.stringify({ a: 1, b: 2 }), { maxDepth: 64, maxItems: 2 })).toBeUndefined()
    expect(jsonTextProblem(JSON.stringify({ a: 1, b: [2, 3] }), { maxDepth: 64, maxItems: 3 })).toBe("JSON holds more than 3 array items and object members.")
    // Commas and brackets inside strings do not count; without maxItems nothing is counted.
    expect(jsonTextProblem(JSON.stringify(["a,b,c,[d,{e", "\",["]), { maxDepth: 64, maxItems: 3 })).toBeUndefined()
    expect(jsonTextProblem(items(100_000), { maxDepth: 64 })).toBeUndefined()
  })

  it("scans a 10 MB body in well under a second", () => {
    const big = JSON.stringify({ text: "x\\\"".repeat(2_500_000), list: Array.from({ length: 100_000 }, (_, i) => ({ i })) })
    const started = performance.now()
    expect(jsonTextProblem(big, { maxDepth: 64 })).toBeUndefined()
    expect(performance.now() - started).toBeLessThan(1_000)
  })
})

describe("jsonTextProblem against a character-by-character reading", () => {
  /**
   * The same checks one character at a time (the form before strings were skipped with indexOf),
   * with a raw NUL anywhere named first: it is searched for before the rest (and a raw NUL after a
   * backslash, which the character loop skipped as escaped, is refused as NUL too).
   */
  const reference = (text: string, maxDepth: number): string | undefined => {
    if (text.includes("\u0000")) return "NUL characters (\\u0000) are not accepted."
    let depth = 0
    let inString = false
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (inString) {
        if (c === 0x5c) {
          if (text.charCodeAt(i + 1) === 0x75 && text.startsWith("0000", i + 2)) return "NUL characters (\\u0000) are not accepted."
          i++
        } else if (c === 0x22) inString = false
      } else if (c === 0x22) inString = true
      else if (c === 0x7b || c === 0x5b) {
        if (++depth > maxDepth) return `JSON nested deeper than ${maxDepth} levels.`
      } else if (c === 0x7d || c === 0x5d) depth--
    }
    return undefined
  }

  it("agrees on texts made of quotes, escapes, NUL escapes and brackets, terminated or not", () => {
    const pieces = ["\"", "\\", "\\u0000", "\\u00001", "u0000", "[", "]", "{", "}", "a", " ", "\u0000", "\\\""]
    let seed = 7
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n
    }
    for (let t = 0; t < 20_000; t++) {
      let text = ""
      for (let k = random(24); k > 0; k--) text += pieces[random(pieces.length)]
      expect([text, jsonTextProblem(text, { maxDepth: 3 })]).toEqual([text, reference(text, 3)])
    }
  })

  it("stays linear on many strings with one backslash at the very end", () => {
    const text = JSON.stringify(Array.from({ length: 200_000 }, (_, i) => `s${i}`)) + "\"\\\""
    const started = performance.now()
    expect(jsonTextProblem(text, { maxDepth: 64 })).toBe(reference(text, 64))
    expect(performance.now() - started).toBeLessThan(1_000)
  })
})

describe("parseJsonBody", () => {
  it("answers the 400 of an empty, too deep, NUL-carrying or malformed body, else the value", () => {
    const message = (text: string) => (parseJsonBody(text, defaultLimits) as BadRequest).message
    expect(message("  ")).toBe("Request body is required (JSON).")
    expect(message(nested(65))).toBe("Invalid request body: JSON nested deeper than 64 levels.")
    expect(message("{\"a\":\"\\u0000\"}")).toBe("Invalid request body: NUL characters (\\u0000) are not accepted.")
    expect(message("{\"a\": [1,")).toMatch(/^Malformed JSON body: /)
    expect(parseJsonBody("{\"a\":[1]}", defaultLimits)).toEqual({ a: [1] })
    expect(parseJsonBody(nested(65), defaultLimits)).toBeInstanceOf(BadRequest)
  })
})

describe("holdsMoreParts", () => {
  const form = (boundary: string, parts: number) =>
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n`.repeat(parts) + `--${boundary}--\r\n`)
  it("counts the delimiters of the boundary the Content-Type names, quoted or not", () => {
    expect(holdsMoreParts(form("xyz", 3), "multipart/form-data; boundary=xyz", 3)).toBe(false)
    expect(holdsMoreParts(form("xyz", 4), "multipart/form-data; boundary=xyz", 3)).toBe(true)
    expect(holdsMoreParts(form("a b", 4), 'multipart/form-data; boundary="a b"', 3)).toBe(true)
    expect(holdsMoreParts(form("a b", 3), 'multipart/form-data; charset=utf-8; boundary="a b"', 3)).toBe(false)
    // Without a boundary nothing is counted: the parser refuses the body itself.
    expect(holdsMoreParts(form("xyz", 10), "multipart/form-data", 3)).toBe(false)
  })
})

describe("undecodableField", () => {
  const TYPE = "multipart/form-data; boundary=xyz"
  const parsed = async (body: Buffer, type = TYPE) => {
    const form = await new Response(new Uint8Array(body), { headers: { "content-type": type } }).formData()
    return Effect.runPromise(undecodableField(form, body, type))
  }
  const part = (name: Buffer | string, value: Buffer | string, headers = "") =>
    Buffer.concat([Buffer.from(`--xyz\r\nContent-Disposition: form-data; name="`), Buffer.from(name), Buffer.from(`"\r\n${headers}\r\n`), Buffer.from(value), Buffer.from("\r\n")])
  const file = (name: string, content: Buffer | string) =>
    Buffer.concat([Buffer.from(`--xyz\r\nContent-Disposition: form-data; name="${name}"; filename="a.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`), Buffer.from(content), Buffer.from("\r\n")])
  const body = (...parts: Array<Buffer>) => Buffer.concat([...parts, Buffer.from("--xyz--\r\n")])
  const latin1 = Buffer.from([0x63, 0x61, 0x66, 0xe9]) // "café" in Latin-1

  it("refuses a text field or a field name with bytes that are not UTF-8, naming the field", async () => {
    expect((await parsed(body(part("language", "fr"), part("prompt", latin1))))?.message).toBe('Invalid request body: the form field "prompt" is not valid UTF-8.')
    expect((await parsed(body(part("prompt", Buffer.from([0xed, 0xa0, 0x80])))))?.param).toBe("prompt")
    expect(await parsed(body(part(Buffer.from([0x6e, 0xff]), "x")))).toBeInstanceOf(BadRequest)
  })

  it("reads each part where it is: a file holding U+FFFD (or the replaced text) hides no bad field, and the bad field is the one named", async () => {
    expect((await parsed(body(file("file", "mojibake \uFFFD text"), part("language", Buffer.from([0xe9])))))?.param).toBe("language")
    expect((await parsed(body(part("language", Buffer.from([0x65, 0xff])), file("file", "e\uFFFD"))))?.param).toBe("language")
    expect((await parsed(body(part("a", Buffer.from([0xff])), part("b", "\uFFFD"))))?.param).toBe("a")
  })

  it("reads the parts as the form parser does: a header written loosely, filename= outside Content-Disposition, a boundary in a quoted parameter", async () => {
    const bad = Buffer.from([0x65, 0xe9])
    const b64 = (spaced: string) => part("language", bad.toString("base64"), `Content-Transfer-Encoding${spaced}: base64\r\n`)
    expect((await parsed(body(b64(""))))?.param).toBe("language")
    expect((await parsed(body(b64(" "))))?.param).toBe("language")
    expect((await parsed(body(part("language", bad, "X-Note: a;filename=b\r\n"))))?.param).toBe("language")
    expect((await parsed(body(part("language", bad, "Content-Type: text/plain; filename=b\r\n"))))?.param).toBe("language")
    const quoted = 'multipart/form-data; foo="; boundary=ZZ"; boundary=xyz'
    expect((await parsed(body(part("language", bad)), quoted))?.param).toBe("language")
    // The part counter reads that boundary too.
    expect(holdsMoreParts(body(...Array.from({ length: 4 }, () => part("f", "v"))), quoted, 3)).toBe(true)
  })

  it("takes UTF-8 text, U+FFFD itself included (in an escaped name too), and leaves files and their names alone", async () => {
    expect(await parsed(body(part("prompt", "café \uFFFD ok")))).toBeUndefined()
    expect(await parsed(body(part("x%22\uFFFD", "v")))).toBeUndefined()
    expect(await parsed(body(file("file", Buffer.from([0xff, 0xfe, 0x00])), part("model", "whisper-1")))).toBeUndefined()
    expect(await parsed(body(file("file", Buffer.from([0xff, 0xfe, 0x00])), part("model", "\uFFFD")))).toBeUndefined()
    const latin1Name = Buffer.concat([Buffer.from(`--xyz\r\nContent-Disposition: form-data; name="file"; filename="caf`), Buffer.from([0xe9]), Buffer.from(`.txt"\r\n\r\nhello\r\n`)])
    expect(await parsed(body(latin1Name, part("prompt", "\uFFFD")))).toBeUndefined()
    // A base64 part reads the same from sent bytes and from replaced ones: a U+FFFD in it is refused.
    expect((await parsed(body(part("p", Buffer.from("\uFFFD ok").toString("base64"), "Content-Transfer-Encoding: base64\r\n"))))?.param).toBe("p")
  })
})

describe("logUnexpected", () => {
  it("logs a thrown error as the line's cause, its text and stack, with the message a string (the fast lane's 500s had an array and `{}`)", async () => {
    const lines: Array<string> = []
    const capture = Logger.replace(Logger.defaultLogger, Logger.map(jsonLine, (line) => lines.push(line)))
    const thrown = Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR_WRITE" })
    await Effect.runPromise(logUnexpected(Cause.die(thrown)).pipe(Effect.annotateLogs("requestId", "r-1"), Effect.provide(capture)))
    const line = JSON.parse(lines[0]!)
    expect([line.level, line.message, line.requestId]).toEqual(["ERROR", "unexpected failure", "r-1"])
    expect(line.cause).toMatch(/^Error: disk I\/O error\n\s+at /)
  })
})
