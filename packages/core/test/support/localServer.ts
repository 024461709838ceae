/** What every local mock needs around its handler: JSON answers, listening on 127.0.0.1:0, closing with its connections. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { readJson } from "./mockVendors.ts"

/** A mock of an HTTP API that records each request and can be told its next answer. */
export interface RecordingMock {
  /** The base URL, as `<ID>_BASE_URL` takes it (the catalogue's path on the mock). */
  readonly url: string
  readonly requests: Array<{ method: string; path: string; headers: IncomingMessage["headers"]; body: any }>
  /** The next answer is this status with this body. */
  failNext(status: number, body: unknown): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(body: string): void
  close(): Promise<void>
}

export const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/** Listens on a random local port; `close` also drops kept-alive connections, so tests end at once. */
export const listenLocal = async (server: Server): Promise<{ readonly port: number; readonly close: () => Promise<void> }> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()))
        server.closeAllConnections()
      })
  }
}

type Request = RecordingMock["requests"][number]

/** A recording mock on a random local port whose answers (status, JSON body) `answer` computes from each request. */
export const startRecordingMock = async (basePath: string, answer: (request: Request) => readonly [status: number, body: unknown]): Promise<RecordingMock> => {
  const requests: Array<Request> = []
  const pending: Array<(res: ServerResponse) => void> = []
  const server = createServer((req, res) => {
    void readJson(req).then((body) => {
      const request = { method: req.method ?? "GET", path: req.url ?? "/", headers: req.headers, body }
      requests.push(request)
      const next = pending.shift()
      if (next) return next(res)
      const [status, reply] = answer(request)
      sendJson(res, status, reply)
    })
  })
  const { close, port } = await listenLocal(server)
  return {
    url: `http://127.0.0.1:${port}${basePath}`,
    requests,
    failNext: (status, body) => pending.push((res) => sendJson(res, status, body)),
    rawNext: (body) =>
      pending.push((res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(body)
      }),
    close
  }
}
