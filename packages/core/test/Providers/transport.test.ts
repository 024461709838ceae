/** The promise transport of the fast lane: deadline (headers and body), abort, error mapping, JSON answers. */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { postJsonNow, postSseNow, REQUEST_TIMEOUT } from "../../src/Providers/internal/http.ts"
import { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { Duration } from "effect"
import { Cancel } from "../../src/Providers/internal/cancel.ts"

describe("postJsonNow", () => {
  let server: http.Server
  let url: string
  // Resolves when the last stalled request's connection closed (the gateway gave up on it).
  let stallClosed: Promise<void> = Promise.resolve()
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === "/hang" || req.url === "/stall") stallClosed = new Promise((resolve) => req.socket.once("close", () => resolve()))
      if (req.url === "/hang") return // never answers
      if (req.url === "/stall") {
        // Headers and half a body, then nothing.
        res.writeHead(200, { "content-type": "application/json" })
        return void res.write("{\"id\":")
      }
      if (req.url === "/500") {
        res.writeHead(500, { "content-type": "application/json" })
        return res.end(JSON.stringify({ error: { message: "exploded" } }))
      }
      if (req.url === "/events") {
        // A stream that has begun: headers and one event, then nothing (the model is still thinking).
        stallClosed = new Promise((resolve) => req.socket.once("close", () => resolve()))
        res.writeHead(200, { "content-type": "text/event-stream" })
        return void res.write("data: {\"choices\":[]}\n\n")
      }
      if (req.url === "/text") return res.end("not json")
      let body = ""
      req.on("data", (c) => (body += c))
      req.on("end", () => res.end(JSON.stringify({ echo: JSON.parse(body), auth: req.headers.authorization })))
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => {
    server.closeAllConnections()
    server.close()
  })

  it("posts JSON and parses the answer", async () => {
    const answer = await postJsonNow("p", `${url}/ok`, { authorization: "Bearer k" }, { a: 1 }, new Cancel())
    expect(answer).toEqual({ echo: { a: 1 }, auth: "Bearer k" })
  })

  it("maps failures: HTTP errors, bodies that are not JSON, refused connections", async () => {
    const failure = (path: string, base = url) => postJsonNow("p", `${base}${path}`, {}, {}, new Cancel()).catch((e) => e)
    expect(await failure("/500")).toMatchObject({ _tag: "UpstreamError", kind: "http", status: 500, retryable: true, message: "p answered HTTP 500: exploded" })
    expect(await failure("/text")).toMatchObject({ kind: "protocol", retryable: false })
    expect(await failure("", "http://127.0.0.1:9")).toMatchObject({ kind: "connect", retryable: true })
  })

  it.each(["/hang", "/stall"])("gives up on %s after REQUEST_TIMEOUT with a retryable timeout error and cuts the request", async (path) => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] })
    try {
      const cancel = new Cancel()
      const pending = postJsonNow("p", `${url}${path}`, {}, {}, cancel).catch((e) => e)
      await vi.advanceTimersByTimeAsync(Duration.toMillis(REQUEST_TIMEOUT) + 1)
      const error = await pending
      expect(error).toBeInstanceOf(UpstreamError)
      expect(error).toMatchObject({ kind: "timeout", retryable: true, message: "p did not answer in time" })
      // The caller's Cancel stays as it was: callers read an aborted one as "the client went
      // away" (the fast lane then answered 500 instead of 504).
      expect(cancel.aborted).toBe(false)
    } finally {
      vi.useRealTimers()
    }
    await stallClosed
  })

  it("rejects at once when its Cancel aborts (a client that went away)", async () => {
    const cancel = new Cancel()
    const pending = postJsonNow("p", `${url}/hang`, {}, {}, cancel).catch((e) => e)
    setTimeout(() => cancel.abort(), 20)
    const error = await pending
    expect(error).toBeInstanceOf(UpstreamError)
    expect(cancel.aborted).toBe(true)
  })

  it("a stream that began is closed upstream when its Cancel aborts, also before anyone read it", async () => {
    const cancel = new Cancel()
    const body = await postSseNow("p", `${url}/events`, {}, {}, cancel)
    cancel.abort()
    expect(body.destroyed).toBe(true)
    // The upstream sees its socket close: no connection is left open for a stream nobody reads.
    await stallClosed
  })
})
