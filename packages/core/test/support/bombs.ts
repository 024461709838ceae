/**
 * Hostile replies for tests: a gzip body that inflates to `totalBytes` of zeros, written lazily
 * (1 MiB per gzip member, about 1 KB on the wire each) and only as fast as the reader takes it,
 * so neither side holds it.
 */
import type * as http from "node:http"
import * as zlib from "node:zlib"

const MEMBER_BYTES = 1024 * 1024
const member = zlib.gzipSync(Buffer.alloc(MEMBER_BYTES), { level: 9 })

/** Writes the bomb to `res` (headers included); resolves with the inflated bytes sent when it ends or the reader goes away. */
export const sendGzipBomb = (res: http.ServerResponse, totalBytes: number, contentType = "application/json", status = 200): Promise<number> =>
  new Promise((resolve) => {
    res.writeHead(status, { "content-type": contentType, "content-encoding": "gzip" })
    let sent = 0
    const done = () => resolve(sent * MEMBER_BYTES)
    res.once("close", done)
    const pump = () => {
      while (sent * MEMBER_BYTES < totalBytes) {
        if (res.destroyed) return
        sent++
        if (!res.write(member)) return void res.once("drain", pump)
      }
      res.end()
    }
    pump()
  })

export const GiB = 1024 * 1024 * 1024
