/** Minimal one-page PDFs for tests: one with text, and a compression bomb. */
import * as zlib from "node:zlib"

/** A one-page PDF whose content stream is `stream` (with `filter` in its dictionary); offsets computed, so it is valid. */
const pdfOf = (stream: Buffer, filter?: string): Buffer => {
  const objects: Array<Buffer> = [
    Buffer.from("<< /Type /Catalog /Pages 2 0 R >>"),
    Buffer.from("<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
    Buffer.from("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"),
    Buffer.concat([Buffer.from(`<< /Length ${stream.length}${filter ? ` /Filter /${filter}` : ""} >>\nstream\n`), stream, Buffer.from("\nendstream")]),
    Buffer.from("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
  ]
  const parts: Array<Buffer> = [Buffer.from("%PDF-1.4\n")]
  let length = parts[0]!.length
  const offsets: Array<number> = []
  objects.forEach((o, i) => {
    offsets.push(length)
    const part = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), o, Buffer.from("\nendobj\n")])
    parts.push(part)
    length += part.length
  })
  parts.push(Buffer.from(
    `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, "0")} 00000 n \n`).join("")}` +
      `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`
  ))
  return Buffer.concat(parts)
}

/** A PDF whose page draws `text`. */
export const pdfWith = (text: string): Uint8Array => new Uint8Array(pdfOf(Buffer.from(`BT /F1 18 Tf 72 720 Td (${text}) Tj ET`)))

/** A PDF whose FlateDecode content stream inflates to `size` bytes (deflated 1 MiB at a time). */
export const pdfBomb = async (size: number): Promise<Buffer> => {
  const deflate = zlib.createDeflate({ level: 9 })
  const out: Array<Buffer> = []
  deflate.on("data", (c: Buffer) => out.push(c))
  const done = new Promise((resolve) => deflate.once("end", resolve))
  const block = Buffer.alloc(1024 * 1024, " ")
  for (let left = size; left > 0; left -= block.length) {
    if (!deflate.write(left >= block.length ? block : block.subarray(0, left))) await new Promise((r) => deflate.once("drain", r))
  }
  deflate.end()
  await done
  return pdfOf(Buffer.concat(out), "FlateDecode")
}
