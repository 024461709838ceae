/** The SSE parser: line ends split across chunks, and linear time for a long line (a hostile upstream's, up to the reply limit). */
import { describe, expect, it } from "vitest"
import { makeSseParser } from "../../../src/Providers/internal/sse.ts"

const bytes = (s: string) => new TextEncoder().encode(s)
const parseChunks = (chunks: ReadonlyArray<string>) => {
  const parser = makeSseParser()
  return [...chunks.flatMap((c) => parser.push(bytes(c))), ...parser.end()]
}

describe("makeSseParser", () => {
  it("joins data lines and accepts LF, CR and CRLF line ends, split anywhere", () => {
    const text = "event: x\r\ndata: a\rdata: b\n\ndata: c\r\n\r\n: comment\n\ndata: d\n\ndata: cut"
    // The last event has no blank line: the stream ended in the middle of it, so it is not dispatched.
    const expected = [{ event: "x", data: "a\nb" }, { event: "message", data: "c" }, { event: "message", data: "d" }]
    expect(parseChunks([text])).toEqual(expected)
    for (let cut = 1; cut < text.length; cut++) {
      expect(parseChunks([text.slice(0, cut), "", text.slice(cut)]), `cut at ${cut}`).toEqual(expected)
    }
    expect(parseChunks(Array.from(text))).toEqual(expected)
  })

  it("decodes UTF-8 split anywhere, drops one leading byte order mark and turns invalid bytes into U+FFFD", () => {
    const text = "\ufeffdata: h\u00e9llo \u20ac \ud83d\ude00\n\ndata: \ufeffkept\n\n"
    const encoded = new TextEncoder().encode(text)
    const expected = [{ event: "message", data: "h\u00e9llo \u20ac \ud83d\ude00" }, { event: "message", data: "\ufeffkept" }]
    for (let cut = 0; cut <= encoded.length; cut++) {
      const parser = makeSseParser()
      const events = [...parser.push(encoded.subarray(0, cut)), ...parser.push(encoded.subarray(cut)), ...parser.end()]
      expect(events, `cut at ${cut}`).toEqual(expected)
    }
    const parser = makeSseParser()
    const invalid = Uint8Array.from([...bytes("data: a"), 0xff, 0xe2, 0x82, ...bytes("b\n\ndata: c"), 0xf0, 0x9f, ...bytes("\n\n")])
    expect([...parser.push(invalid), ...parser.end()]).toEqual([{ event: "message", data: "a\ufffd\ufffdb" }, { event: "message", data: "c\ufffd" }])
  })

  it("takes a CR at the very end as a line end", () => {
    expect(parseChunks(["data: z\r\r"])).toEqual([{ event: "message", data: "z" }])
    expect(parseChunks(["data: z\r", "\r"])).toEqual([{ event: "message", data: "z" }])
  })

  it("does not dispatch an event the stream ends in the middle of (WHATWG: no blank line, no event)", () => {
    expect(parseChunks(["data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n"])).toEqual([])
    expect(parseChunks(["data: a\n\ndata: {\"partial"])).toEqual([{ event: "message", data: "a" }])
  })

  it("reads a burst of lines of one kind of line end in linear time (CR only, LF only)", () => {
    for (const end of ["\r", "\n"]) {
      const parser = makeSseParser()
      const started = performance.now()
      // 400,000 events of one line each in one read: a search for the other line end from every line would be quadratic.
      const events = parser.push(bytes(`data: x${end}${end}`.repeat(400_000)))
      expect(events).toHaveLength(400_000)
      expect(events[0]).toEqual({ event: "message", data: "x" })
      expect(performance.now() - started).toBeLessThan(3_000)
    }
  })

  it("reads a 32 MiB line in 16 KiB chunks in linear time", () => {
    const parser = makeSseParser()
    const chunk = bytes("x".repeat(16 * 1024))
    const started = performance.now()
    parser.push(bytes("data: "))
    for (let i = 0; i < 2048; i++) expect(parser.push(chunk)).toEqual([])
    const [event] = parser.push(bytes("\n\n"))
    expect(event!.data.length).toBe(32 * 1024 * 1024)
    // Rescanning the line per chunk (as before) took minutes.
    expect(performance.now() - started).toBeLessThan(3_000)
  })
})
