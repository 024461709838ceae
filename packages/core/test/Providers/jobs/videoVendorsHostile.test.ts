/**
 * Hostile replies to the Runway, Kling and HeyGen video adapters: non-JSON bodies, missing ids,
 * unknown states and Kling's "HTTP 200 with an error code" all end in a clean UpstreamError.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { heygen, VOICE_ID } from "../../../src/Providers/Video/HeyGen.ts"
import { kling, SECRET_KEY } from "../../../src/Providers/Video/Kling.ts"
import { runway } from "../../../src/Providers/Video/Runway.ts"
import type { VideoAdapter } from "../../../src/Providers/Video/VideoAdapter.ts"
import { videoProvider } from "../../support/mockVideoVendors.ts"

/** Answers every request with the next queued reply (status, raw body). */
let replies: Array<[number, string]> = []
let server: Server
let url: string

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      const [status, body] = replies.shift() ?? [500, "no reply queued"]
      res.writeHead(status, { "content-type": "application/json" })
      res.end(body)
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
})
afterAll(() => new Promise<void>((r) => server.close(() => r())))

const provider = (id: string) => videoProvider(id, url, "k", { [SECRET_KEY]: "s", [VOICE_ID]: "v", HEYGEN_AVATAR_ID: "a" })

const cases: Array<[string, VideoAdapter, string]> = [["runway", runway, "t-1"], ["kling", kling, "text2video/1"], ["heygen", heygen, "abc"]]

describe.each(cases)("%s against hostile replies", (id, adapter, upstreamId) => {
  const submit = async (status: number, body: string) => {
    replies = [[status, body]]
    return Effect.runPromise(Effect.either(adapter.submit(provider(id), { prompt: "p" })))
  }
  const poll = async (body: string) => {
    replies = [[200, body]]
    return Effect.runPromise(Effect.either(adapter.poll(provider(id), upstreamId)))
  }

  it("a non-JSON body is a protocol error", async () => {
    const r = await submit(200, "<html>gateway</html>")
    expect(Either.isLeft(r) && r.left).toMatchObject({ _tag: "UpstreamError", provider: id, kind: "protocol", retryable: false })
  })

  it("a created job without an id is a protocol error", async () => {
    const r = await submit(200, JSON.stringify({ code: 0, data: {}, error: null }))
    expect(Either.isLeft(r) && r.left).toMatchObject({ kind: "protocol" })
  })

  it("an unknown or missing state is a protocol error", async () => {
    for (const body of ["{}", "[]", "null", JSON.stringify({ code: 0, code100: 1, data: { status: "weird", task_status: "weird" }, status: "WEIRD" })]) {
      const r = await poll(body)
      expect(Either.isLeft(r) && r.left).toMatchObject({ kind: "protocol" })
    }
  })

  it("an HTML 502 is a retryable HTTP error", async () => {
    const r = await submit(502, "<html>bad gateway</html>")
    expect(Either.isLeft(r) && r.left).toMatchObject({ kind: "http", status: 502, retryable: true })
  })
})

it("Kling: HTTP 200 with a non-zero code is an error carrying Kling's message", async () => {
  replies = [[200, JSON.stringify({ code: 1301, message: "content security policy triggered", request_id: "r" })]]
  const r = await Effect.runPromise(Effect.either(kling.submit(provider("kling"), { prompt: "p" })))
  expect(Either.isLeft(r) && r.left).toMatchObject({ kind: "protocol" })
  if (Either.isLeft(r)) expect(r.left.message).toContain("content security policy triggered")
})
