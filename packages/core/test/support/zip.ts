/**
 * Zip archives for tests, built by hand: normal DOCX files, and bombs (an entry of hundreds of MB
 * deflated in pieces, so the test never holds it) or entries whose declared size lies.
 */
import * as zlib from "node:zlib"

export interface ZipEntry {
  readonly name: string
  /** Raw deflate data. */
  readonly deflated: Buffer
  readonly crc: number
  readonly size: number
}

export const entry = (name: string, content: string | Buffer): ZipEntry => {
  const data = typeof content === "string" ? Buffer.from(content) : content
  return { name, deflated: zlib.deflateRawSync(data, { level: 9 }), crc: zlib.crc32(data), size: data.length }
}

/** An entry of `head`, then `size` bytes of `fill`, then `tail`, deflated 1 MiB at a time. */
export const bombEntry = async (name: string, size: number, head = "", tail = "", fill = "A"): Promise<ZipEntry> => {
  const deflate = zlib.createDeflateRaw({ level: 9 })
  const out: Array<Buffer> = []
  deflate.on("data", (c: Buffer) => out.push(c))
  const done = new Promise((resolve) => deflate.once("end", resolve))
  const block = Buffer.alloc(1024 * 1024, fill)
  let crc = zlib.crc32(head)
  deflate.write(head)
  for (let left = size; left > 0; left -= block.length) {
    const piece = left >= block.length ? block : block.subarray(0, left)
    crc = zlib.crc32(piece, crc)
    if (!deflate.write(piece)) await new Promise((r) => deflate.once("drain", r))
  }
  crc = zlib.crc32(tail, crc)
  deflate.end(tail)
  await done
  return { name, deflated: Buffer.concat(out), crc, size: Buffer.byteLength(head) + size + Buffer.byteLength(tail) }
}

/** A zip of deflated entries; `declared` overrides an entry's stated size (a lying archive). */
export const zipOf = (entries: ReadonlyArray<ZipEntry & { readonly declared?: number }>): Buffer => {
  const locals: Array<Buffer> = []
  const centrals: Array<Buffer> = []
  let offset = 0
  for (const e of entries) {
    const name = Buffer.from(e.name)
    const size = e.declared ?? e.size
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4)
    local.writeUInt16LE(8, 8)
    local.writeUInt32LE(e.crc >>> 0, 14)
    local.writeUInt32LE(e.deflated.length, 18)
    local.writeUInt32LE(size, 22)
    local.writeUInt16LE(name.length, 26)
    const central = Buffer.alloc(46)
    central.writeUInt32LE(0x02014b50, 0)
    central.writeUInt16LE(20, 4)
    central.writeUInt16LE(20, 6)
    central.writeUInt16LE(8, 10)
    central.writeUInt32LE(e.crc >>> 0, 16)
    central.writeUInt32LE(e.deflated.length, 20)
    central.writeUInt32LE(size, 24)
    central.writeUInt16LE(name.length, 28)
    central.writeUInt32LE(offset, 42)
    locals.push(local, name, e.deflated)
    centrals.push(central, name)
    offset += 30 + name.length + e.deflated.length
  }
  const directory = Buffer.concat(centrals)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(entries.length, 8)
  end.writeUInt16LE(entries.length, 10)
  end.writeUInt32LE(directory.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, directory, end])
}

export const CONTENT_TYPES = `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`
export const RELS = `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`
export const DOCUMENT_HEAD = `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>`
export const DOCUMENT_TAIL = `</w:t></w:r></w:p></w:body></w:document>`

/** A DOCX whose word/document.xml is `document` (use DOCUMENT_HEAD/TAIL around text). */
export const docxOf = (document: ZipEntry & { readonly declared?: number }): Buffer =>
  zipOf([entry("[Content_Types].xml", CONTENT_TYPES), entry("_rels/.rels", RELS), document])

export const docxWithText = (text: string): Buffer => docxOf(entry("word/document.xml", DOCUMENT_HEAD + text + DOCUMENT_TAIL))

/** A DOCX whose document.xml inflates to about `size` bytes of text. */
export const docxBomb = async (size: number): Promise<Buffer> => docxOf(await bombEntry("word/document.xml", size, DOCUMENT_HEAD, DOCUMENT_TAIL))

/** A DOCX of `count` paragraphs of varied words, as a long real document has (it deflates about fivefold, well inside the ratio limit). */
export const docxWithParagraphs = (count: number): Buffer => {
  let seed = 7
  const word = () => {
    seed = (seed * 48271) % 2147483647
    return seed.toString(36).slice(0, 3 + (seed % 6))
  }
  const paragraphs = Array.from({ length: count }, (_, i) => `Paragraph ${i} ${Array.from({ length: 12 }, word).join(" ")}.`)
  return docxOf(entry("word/document.xml", DOCUMENT_HEAD + paragraphs.join("</w:t></w:r></w:p><w:p><w:r><w:t>") + DOCUMENT_TAIL))
}
