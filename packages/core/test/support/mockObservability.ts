/**
 * Local mocks of the observability vendors the usage exporters send to (Observability/*.ts), each
 * on 127.0.0.1:0 speaking its documented ingestion wire and keeping every request it gets:
 *  - Langfuse: `POST /api/public/ingestion`, Basic auth (public key : secret key), `{ batch }` of
 *    envelopes `{ id, type, timestamp, body }`; answers 207 `{ successes, errors }`, an envelope
 *    without id/type/timestamp/body or of an unknown type being an error (not a 4xx), as Langfuse does.
 *  - PromptLayer: `POST /log-request`, `X-API-KEY`; `provider`, `model`, `input`, `output`
 *    required (422 `{ success: false, message }` otherwise); answers `{ id, status }`.
 *  - Braintrust: `POST /v1/project_logs/{project_id}/insert`, bearer; `{ events: [...] }`
 *    (400 otherwise); answers `{ row_ids }`.
 * A wrong credential is a 401. `down()` answers 503 to everything, `hang()` never answers.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { readJson } from "./mockVendors.ts"

export type ObservabilityVendor = "langfuse" | "promptlayer" | "braintrust"

export interface ObservabilityMock {
  /** The base URL, as `<ID>_BASE_URL` takes it (the catalogue's path on the mock). */
  readonly url: string
  /** Accepted requests (2xx) and refused ones alike, in arrival order. */
  readonly requests: Array<{ path: string; headers: IncomingMessage["headers"]; body: any; status: number }>
  /** Every request answers 503 until `up()`. */
  down(): void
  /** Requests are never answered until `up()` (the held ones are then answered 503). */
  hang(): void
  up(): void
  /** The next `n` requests answer this status. */
  failNext(status: number, n?: number): void
  /** The next request answers 200 with this raw body (hostile replies). */
  rawNext(body: string): void
  close(): Promise<void>
}

export const LANGFUSE_KEY = "pk-lf-test:sk-lf-test"
export const PROMPTLAYER_KEY = "pl_test_key"
export const BRAINTRUST_KEY = "bt-test-key"
export const BRAINTRUST_PROJECT = "proj-8d2c"

const basePaths: Record<ObservabilityVendor, string> = { langfuse: "/api/public", promptlayer: "", braintrust: "/v1" }

const authorized = (vendor: ObservabilityVendor, headers: IncomingMessage["headers"]) => {
  switch (vendor) {
    case "langfuse":
      return headers.authorization === `Basic ${Buffer.from(LANGFUSE_KEY).toString("base64")}`
    case "promptlayer":
      return headers["x-api-key"] === PROMPTLAYER_KEY
    case "braintrust":
      return headers.authorization === `Bearer ${BRAINTRUST_KEY}`
  }
}

const send = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

/** The vendor's answer to an authorized request: status and body. */
const answer = (vendor: ObservabilityVendor, path: string, body: any): [number, unknown] => {
  switch (vendor) {
    case "langfuse": {
      if (path !== "/api/public/ingestion") return [404, { message: "Not found" }]
      if (!Array.isArray(body?.batch)) return [400, { message: "batch is required" }]
      const successes: Array<unknown> = []
      const errors: Array<unknown> = []
      for (const e of body.batch) {
        const valid = typeof e?.id === "string" && typeof e?.timestamp === "string" && typeof e?.body === "object" &&
          (e.type === "trace-create" || e.type === "generation-create")
        if (valid) successes.push({ id: e.id, status: 201 })
        else errors.push({ id: e?.id ?? "", status: 400, message: "Invalid request data" })
      }
      return [207, { successes, errors }]
    }
    case "promptlayer": {
      if (path !== "/log-request") return [404, { success: false, message: "Not found" }]
      const missing = ["provider", "model", "input", "output"].filter((f) => body?.[f] === undefined)
      if (missing.length > 0) return [422, { success: false, message: `missing ${missing.join(", ")}` }]
      return [200, { id: 1, status: "SUCCESS" }]
    }
    case "braintrust": {
      const match = /^\/v1\/project_logs\/([^/]+)\/insert$/.exec(path)
      if (!match || match[1] !== BRAINTRUST_PROJECT) return [404, { error: "project not found" }]
      if (!Array.isArray(body?.events)) return [400, { error: "events is required" }]
      return [200, { row_ids: body.events.map((e: any) => e.id) }]
    }
  }
}

export const startObservabilityMock = (vendor: ObservabilityVendor): Promise<ObservabilityMock> => {
  const requests: ObservabilityMock["requests"] = []
  let mode: "up" | "down" | "hang" = "up"
  let failing: { status: number; n: number } | undefined
  let raw: string | undefined
  const held: Array<ServerResponse> = []
  const server = createServer((req, res) => {
    void readJson(req).then((body) => {
      const path = req.url ?? "/"
      const record = (status: number) => requests.push({ path, headers: req.headers, body, status })
      if (mode === "hang") return void held.push(res)
      if (mode === "down") return record(503), send(res, 503, { message: "Service Unavailable" })
      if (raw !== undefined) {
        res.writeHead(200, { "content-type": "application/json" }).end(raw)
        raw = undefined
        return record(200)
      }
      if (failing && failing.n > 0) {
        failing.n--
        return record(failing.status), send(res, failing.status, { message: `failing with ${failing.status}` })
      }
      if (req.method !== "POST") return record(405), send(res, 405, { message: "Method not allowed" })
      if (!authorized(vendor, req.headers)) return record(401), send(res, 401, { message: "Unauthorized" })
      const [status, reply] = answer(vendor, path, body)
      record(status)
      send(res, status, reply)
    })
  })
  const release = () => {
    for (const res of held.splice(0)) send(res, 503, { message: "Service Unavailable" })
  }
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}${basePaths[vendor]}`,
        requests,
        down: () => void (mode = "down"),
        hang: () => void (mode = "hang"),
        up: () => {
          mode = "up"
          release()
        },
        failNext: (status, n = 1) => void (failing = { status, n }),
        rawNext: (body) => void (raw = body),
        close: () =>
          new Promise<void>((done) => {
            release()
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  )
}
