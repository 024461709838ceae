/** A webhook receiver for tests: records raw bodies and headers; can fail N times first. */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface Received {
  readonly body: string
  readonly headers: http.IncomingHttpHeaders
  readonly status: number
}

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Array<Received>
  /** Answer the next `n` deliveries with HTTP 500. */
  failNext(n: number): void
  waitFor(count: number, timeoutMs?: number): Promise<Array<Received>>
  close(): Promise<void>
}

export const startReceiver = async (port = 0): Promise<Receiver> => {
  const received: Array<Received> = []
  let failures = 0
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      const status = failures > 0 ? 500 : 204
      if (failures > 0) failures--
      received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers, status })
      res.writeHead(status).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  const actual = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${actual}/hook`,
    port: actual,
    received,
    failNext: (n) => void (failures = n),
    waitFor: async (count, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs
      while (received.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
      if (received.length < count) throw new Error(`expected ${count} deliveries, got ${received.length}`)
      return received
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
