/** DOCX parsing through the bounded zip reader: normal documents, bombs refused before inflating, lying sizes refused while inflating. */
import { Effect, Either, Layer } from "effect"
import { describe, expect, it } from "vitest"
import * as Documents from "../../src/Capabilities/Documents.ts"
import * as Sandboxes from "../../src/Capabilities/Sandboxes.ts"
import * as Zip from "../../src/Capabilities/Zip.ts"
import * as GatewayConfig from "../../src/Config.ts"
import { bombEntry, CONTENT_TYPES, docxBomb, docxOf, docxWithText, DOCUMENT_HEAD, DOCUMENT_TAIL, entry, RELS, zipOf } from "../support/zip.ts"

const DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
const limits = { ...GatewayConfig.defaultLimits, maxInflatedBytes: 4 * 1024 * 1024, maxInflateRatio: 100 }

const parse = (bytes: Buffer) =>
  Effect.runPromise(
    Effect.either(Documents.parseLocal(new File([new Uint8Array(bytes)], "doc.docx", { type: DOCX }), "a")).pipe(
      Effect.provide(Sandboxes.layer.pipe(Layer.provideMerge(GatewayConfig.layer({ limits }))))
    )
  )

describe("DOCX through the bounded zip reader", () => {
  it("parses a normal document", async () => {
    const result = await parse(docxWithText("Dear reader"))
    expect(Either.getOrThrow(result)).toMatchObject({ format: "docx", text: "Dear reader", words: 2 })
  })

  it("answers a lone surrogate of the document's XML (a character reference) as U+FFFD: well-formed text, as every sandbox output", async () => {
    // The runner's JSON escaped it (\\ud800), past the check of the result line's text, and it came back lone.
    const result = Either.getOrThrow(await parse(docxWithText("a&#xD800;b&#55296;c&#xDC00;d")))
    expect(result.text).toBe("a\uFFFDb\uFFFDc\uFFFDd")
  })

  it("hands the sandbox the parts' bytes as they are: multi-byte text over many pipe chunks, odd part names beside it", async () => {
    // The job line names each part and its size; the bytes follow it raw (Sandbox.ts writeJob, runner.cjs).
    const text = "Grüße, 日本語 — ".repeat(20_000).trim()
    const odd = entry("word/\"odd\"\nnamé.xml", Buffer.from([0xff, 0x0a, 0x00, 0xc3]))
    const bytes = zipOf([entry("[Content_Types].xml", CONTENT_TYPES), entry("_rels/.rels", RELS), odd, entry("word/document.xml", DOCUMENT_HEAD + text + DOCUMENT_TAIL)])
    const result = Either.getOrThrow(await parse(bytes))
    expect(result.text).toBe(text)
    expect(Buffer.byteLength(text)).toBeGreaterThan(256 * 1024)
  })

  it("refuses a bomb from its central directory with 413 naming the limit, before inflating", async () => {
    const bomb = await docxBomb(200 * 1024 * 1024)
    expect(bomb.length).toBeLessThan(512 * 1024)
    const before = process.memoryUsage().rss
    const started = performance.now()
    const result = await parse(bomb)
    expect(performance.now() - started).toBeLessThan(500)
    expect(process.memoryUsage().rss - before).toBeLessThan(50 * 1024 * 1024)
    expect(result).toMatchObject({ _tag: "Left", left: { _tag: "PayloadTooLarge" } })
    expect(Either.getLeft(result).pipe((l) => l._tag === "Some" && l.value.message)).toMatch(/AIGW_MAX_INFLATED_BYTES/)
  })

  it("holds entries over 1 MiB to the ratio", async () => {
    // 3 MiB at ratio ~1000 fits the 4 MiB total but not the ratio.
    const result = await parse(docxOf(await bombEntry("word/document.xml", 3 * 1024 * 1024, DOCUMENT_HEAD, DOCUMENT_TAIL)))
    expect(result).toMatchObject({ _tag: "Left", left: { _tag: "PayloadTooLarge" } })
    expect(Either.getLeft(result).pipe((l) => l._tag === "Some" && l.value.message)).toMatch(/word\/document\.xml inflates more than 100 times .*AIGW_MAX_INFLATE_RATIO/)
  })

  it("stops an entry whose declared size lies at that size, and refuses it", async () => {
    const lying = { ...(await bombEntry("word/document.xml", 200 * 1024 * 1024, DOCUMENT_HEAD, DOCUMENT_TAIL)), declared: 1000 }
    const before = process.memoryUsage().rss
    const result = await parse(docxOf(lying))
    expect(process.memoryUsage().rss - before).toBeLessThan(50 * 1024 * 1024)
    expect(result).toMatchObject({ _tag: "Left", left: { _tag: "PayloadTooLarge" } })
    expect(Either.getLeft(result).pipe((l) => l._tag === "Some" && l.value.message)).toMatch(/inflates past its declared size/)
  })

  it("counts every entry toward the total (many small entries)", () => {
    const parts = Array.from({ length: 10 }, (_, i) => entry(`word/part${i}.xml`, Buffer.alloc(512 * 1024, "x")))
    expect(() => Zip.open(zipOf(parts), limits)).toThrow(Zip.InflateLimitExceeded)
    expect(() => Zip.open(zipOf(parts.slice(0, 4)), limits)).not.toThrow()
  })

  it("refuses a document whose XML declares nested entities (billion laughs) without expanding them", async () => {
    const levels = Array.from({ length: 8 }, (_, i) => `<!ENTITY e${i + 1} "${`&e${i};`.repeat(10)}">`).join("")
    const xml = `<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY e0 "aaaaaaaaaa">${levels}]>` +
      `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&e8;</w:t></w:r></w:p></w:body></w:document>`
    const started = performance.now()
    const result = await parse(docxOf(entry("word/document.xml", xml)))
    expect(result).toMatchObject({ _tag: "Left", left: { _tag: "BadRequest", message: "file is not a readable DOCX document" } })
    expect(performance.now() - started).toBeLessThan(10_000)
  })

  it("answers 400 for what is not a zip, or a zip that does not inflate", async () => {
    expect(await parse(Buffer.from("PK not really a zip"))).toMatchObject({ _tag: "Left", left: { _tag: "BadRequest" } })
    const broken = { ...entry("word/document.xml", DOCUMENT_HEAD + "x" + DOCUMENT_TAIL), deflated: Buffer.from("garbage!") }
    expect(await parse(docxOf(broken))).toMatchObject({ _tag: "Left", left: { _tag: "BadRequest" } })
  })
})

describe("HTML and CSV read in linear time", () => {
  it("drops comments and hidden elements, an unclosed one to the end, as a browser does", () => {
    expect(Documents.htmlText("<p>a<!-- x --->b</p><SCRIPT>alert(1)</script >c<br/>d")).toBe("ab\nc\nd")
    expect(Documents.htmlText("<p>kept</p><style>p{}</style><template><b>t</b></template>after")).toBe("kept\nafter")
    expect(Documents.htmlText("before<!-- never closed <p>hidden</p>")).toBe("before")
    // A title, headings and table cells are apart, not run together ("My PageHeader", "c1c2").
    expect(Documents.htmlText("<html><head><title>My Page</title></head><body><h1>Header</h1><table><tr><td>c1</td><td>c2</td></tr></table></body></html>"))
      .toBe("My Page\nHeader\nc1 c2")
    expect(Documents.htmlText("before<script>never closed")).toBe("before")
    expect(Documents.htmlText("a &lt;b&gt; &#x41;&#66; &amp;")).toBe("a <b> AB &")
  })

  it("reads runs of unclosed openings (which backtracked from each one) as text", () => {
    for (const run of ["<", "<br", "<!--", "<script>", "<a "]) {
      const text = Documents.htmlText(run.repeat(30_000))
      expect(text.length).toBeLessThanOrEqual(run.length * 30_000)
    }
    expect(Documents.htmlText("<".repeat(5) + "b>x")).toBe("<<<<x")
  })

  it("parses CSV up to MAX_CSV_ROWS rows and MAX_CSV_FIELDS fields and refuses a larger one before it is counted", async () => {
    expect(Documents.parseCsv("a,b\r\n\"c,\"\"d\"\"\",e\n")).toEqual([["a", "b"], ["c,\"d\"", "e"]])
    expect(Documents.parseCsv("\n".repeat(Documents.MAX_CSV_ROWS))).toHaveLength(Documents.MAX_CSV_ROWS)
    expect(Documents.parseCsv("\n".repeat(Documents.MAX_CSV_ROWS + 1))).toMatch(/^file holds more than 200000 CSV rows/)
    expect((Documents.parseCsv(",".repeat(Documents.MAX_CSV_FIELDS - 1)) as Array<Array<string>>)[0]).toHaveLength(Documents.MAX_CSV_FIELDS)
    expect(Documents.parseCsv(",".repeat(Documents.MAX_CSV_FIELDS))).toMatch(/^file holds more than/)
    // An unclosed quote used to swallow every later row into one field.
    expect(Documents.parseCsv("a,b\r\n1,\"x\n2,y\r\n3,z\n")).toBe("file is not valid CSV: the quoted field opened on line 2 is never closed")
    expect(Documents.parseCsv("a\r\"b")).toBe("file is not valid CSV: the quoted field opened on line 2 is never closed")
    expect(Documents.parseCsv("\"a\nb\",c\n")).toEqual([["a\nb", "c"]])
    const refused = await Effect.runPromise(
      Effect.either(Documents.validateLocal(new File([",".repeat(Documents.MAX_CSV_FIELDS + 1)], "big.csv", { type: "text/csv" }), "a")).pipe(
        Effect.provide(Sandboxes.layer.pipe(Layer.provideMerge(GatewayConfig.layer({ limits }))))
      )
    )
    expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "BadRequest", message: "file holds more than 200000 CSV rows or 1000000 fields; split it into smaller documents" })
  })
})
