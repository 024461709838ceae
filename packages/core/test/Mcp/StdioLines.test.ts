/**
 * The stdio transport's line splitter (Mcp/Server.ts `lineSplitter`): lines across chunk
 * boundaries, CRLF, a last line without a newline, and a line over the limit dropped as it comes
 * (TOO_LONG) with the next line read whole.
 */
import { describe, expect, it } from "vitest"
import { lineSplitter, TOO_LONG } from "../../src/Mcp/Server.ts"

const text = (lines: ReadonlyArray<Uint8Array | typeof TOO_LONG>) => lines.map((l) => (l === TOO_LONG ? l : Buffer.from(l).toString("utf8")))
const bytes = (s: string) => new Uint8Array(Buffer.from(s, "utf8"))

describe("lineSplitter", () => {
  it("gives each line once whole, whatever the chunks, without its newline or CR", () => {
    const split = lineSplitter(100)
    expect(text(split.push(bytes("{\"a\":")))).toEqual([])
    expect(text(split.push(bytes("1}\r\n{\"b\":2}\n\n{\"c\"")))).toEqual(["{\"a\":1}", "{\"b\":2}", ""])
    expect(text(split.push(bytes(":3}")))).toEqual([])
    expect(text(split.end())).toEqual(["{\"c\":3}"])
    expect(split.end()).toEqual([])
  })

  it("drops a line over the limit as it comes, answers it TOO_LONG, and reads the next one whole", () => {
    const split = lineSplitter(10)
    expect(text(split.push(bytes("0123456789")))).toEqual([])
    expect(text(split.push(bytes("abcdef")))).toEqual([])
    expect(text(split.push(bytes("ghi\nshort\n")))).toEqual([TOO_LONG, "short"])
    expect(text(split.push(bytes("exactly10!\n")))).toEqual(["exactly10!"])
    expect(text(split.push(bytes("x".repeat(50))))).toEqual([])
    expect(split.end()).toEqual([TOO_LONG])
  })
})
