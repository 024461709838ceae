/** The parser's refusals in the envelope of the request line's path, also when the head came and the body did not. */
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { answerUnreadableRequests } from "../../src/Http/UnreadableRequests.ts"

/** A server with the refusals answered, for the describe block; `answerTo` sends raw bytes and reads the whole answer. */
const rawServer = (options: http.ServerOptions, handler: http.RequestListener) => {
  let server: http.Server
  let port = 0
  beforeAll(async () => {
    server = answerUnreadableRequests(http.createServer(options, handler))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    port = (server.address() as AddressInfo).port
  })
  afterAll(() => server.close())
  return (text: string) =>
    new Promise<string>((resolve) => {
      let got = ""
      const socket = net.connect(port, "127.0.0.1", () => socket.write(text))
      socket.on("data", (d) => (got += d))
      socket.on("close", () => resolve(got))
    })
}

describe("a request whose body did not come in time", () => {
  const answerTo = rawServer({ requestTimeout: 300, connectionsCheckingInterval: 50 }, (req) => req.resume())

  it("is answered 408 in the envelope of its path (the OpenAI surface's here), not the gateway's", async () => {
    const got = await answerTo("POST /openai/v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mo")
    expect(got).toMatch(/^HTTP\/1\.1 408 Request Timeout/)
    const body = JSON.parse(got.slice(got.indexOf("\r\n\r\n") + 4))
    expect(body).toMatchObject({ error: { message: "The request could not be read: it did not arrive in time." } })
  })

  it("and a head that did not come in time, in the gateway's", async () => {
    const got = await answerTo("POST /v1/complete HTTP/1.1\r\nHost: a\r\n")
    expect(got).toMatch(/^HTTP\/1\.1 408 Request Timeout/)
    expect(JSON.parse(got.slice(got.indexOf("\r\n\r\n") + 4))).toMatchObject({ isError: true })
  })
})

describe("a request the parser refuses", () => {
  const answerTo = rawServer({}, (_req, res) => res.end())

  it("carries a request id, as every answer does (Anthropic's request-id header on its surface too)", async () => {
    const framing = await answerTo("POST /v1/complete HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    expect(framing).toMatch(/^HTTP\/1\.1 400 Bad Request/)
    expect(framing).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/)
    // The absolute form names its path after the authority: the OpenAI surface's envelope.
    const absolute = await answerTo("GET http://gw.example/openai/v1/models HTTP/1.1\r\nHost: gw.example\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
    expect(absolute).toMatch(/^HTTP\/1\.1 400 Bad Request/)
    expect(JSON.parse(absolute.slice(absolute.indexOf("\r\n\r\n") + 4))).toMatchObject({ error: { code: "BadRequest", message: expect.stringContaining("conflict") } })
    const anthropic = await answerTo("GET /anthropic/v1/messages HTTP/1.1\r\nHost: a\r\nX-Bad: a\u0001b\r\n\r\n")
    expect(anthropic).toMatch(/^HTTP\/1\.1 400 Bad Request/)
    const id = /\r\nx-request-id: ([0-9a-f-]{36})\r\n/.exec(anthropic)?.[1]
    expect(id).toBeDefined()
    expect(anthropic).toContain(`\r\nrequest-id: ${id}\r\n`)
  })
})
