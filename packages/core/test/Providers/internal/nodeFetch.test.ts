/**
 * Every reply body read from outside is bounded after decompression: JSON and SSE from providers
 * (node:http and the fetch fallback), and undici bodies (orchestrators). Over the limit the read
 * stops, the connection is destroyed and the error says the reply exceeded the limit.
 */
import { Effect, Layer, Option } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { fetch as undiciFetch } from "undici"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { defaultLimits } from "../../../src/Config.ts"
import { data } from "../../../src/Catalog/Catalog.ts"
import * as ProviderCalls from "../../../src/Engine/ProviderCalls.ts"
import { postJsonNow, postMultipart, postSseNow } from "../../../src/Providers/internal/http.ts"
import * as ProviderHealth from "../../../src/Providers/ProviderHealth.ts"
import type { AvatarRecord } from "../../../src/Storage/AvatarStore.ts"
import { Metering } from "../../../src/Storage/Metering.ts"
import { crossOriginRefusal, nodeFetch, readWebBody, ReplyTooLarge, setReplyLimit } from "../../../src/Providers/internal/nodeFetch.ts"
import { GiB, sendGzipBomb } from "../../support/bombs.ts"
import { Cancel } from "../../../src/Providers/internal/cancel.ts"
import { getEventListeners } from "node:events"

const LIMIT = defaultLimits.maxUpstreamResponseBytes

describe("bounded reply bodies", () => {
  let server: http.Server
  let url: string
  // The connection of the last bomb: the reader must cut it (a ~1 MB bomb fits in the socket buffers, so the server has long finished writing).
  let bombSocket: import("node:net").Socket | undefined
  const cut = () =>
    new Promise<boolean>((resolve) => {
      if (bombSocket!.destroyed) return resolve(true)
      bombSocket!.once("close", () => resolve(true))
      setTimeout(() => resolve(false), 2000)
    })
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume()
      if (req.url === "/bomb" || req.url!.startsWith("/sse-bomb")) bombSocket = req.socket
      if (req.url === "/bomb") return void sendGzipBomb(res, GiB)
      if (req.url!.startsWith("/sse-bomb")) return void sendGzipBomb(res, GiB, "text/event-stream")
      if (req.url === "/plain") return res.end(JSON.stringify({ pad: "x".repeat(2000) }))
      if (req.url === "/port") return res.end(JSON.stringify({ port: req.socket.remotePort }))
      if (req.url === "/sse-html") return res.writeHead(200, { "content-type": "text/event-stream" }).end("<html><body>oops</body></html>")
      if (req.url === "/sse-json") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ choices: [] }))
      if (req.url === "/bad-gzip") return res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" }).end(JSON.stringify({ ok: true }))
      res.end(JSON.stringify({ ok: true }))
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterEach(() => setReplyLimit(LIMIT))
  afterAll(() => {
    server.closeAllConnections()
    server.close()
  })

  const withinMemory = async <A>(run: () => Promise<A>): Promise<A> => {
    const before = process.memoryUsage().rss
    const value = await run()
    expect(process.memoryUsage().rss - before).toBeLessThan(300 * 1024 * 1024)
    return value
  }

  it("stops a gzip bomb JSON reply at the limit with a protocol error naming it, and cuts the connection", async () => {
    const error = await withinMemory(() => postJsonNow("p", `${url}/bomb`, {}, {}, new Cancel()).catch((e) => e))
    expect(error).toMatchObject({ _tag: "UpstreamError", kind: "protocol", retryable: false })
    expect(error.message).toBe(`p sent an unexpected answer: the reply exceeded ${LIMIT} bytes (AIGW_MAX_UPSTREAM_RESPONSE_BYTES)`)
    expect(await cut()).toBe(true)
  })

  it("applies the configured limit to plain bodies too", async () => {
    setReplyLimit(1000)
    expect(await postJsonNow("p", `${url}/plain`, {}, {}, new Cancel()).catch((e) => e)).toMatchObject({ kind: "protocol", message: expect.stringMatching(/exceeded 1000 bytes/) })
    expect(await postJsonNow("p", `${url}/ok`, {}, {}, new Cancel())).toEqual({ ok: true })
    setReplyLimit(1_000_000)
    expect((await postJsonNow("p", `${url}/plain`, {}, {}, new Cancel())).pad).toHaveLength(2000)
  })

  it("breaks a gzip bomb SSE stream (fast lane) with ReplyTooLarge", async () => {
    const body = await postSseNow("p", `${url}/sse-bomb`, {}, {}, new Cancel())
    const error = await withinMemory(() =>
      new Promise((resolve) => {
        body.on("data", () => undefined)
        body.once("error", resolve)
        body.once("end", () => resolve("ended"))
      })
    )
    expect(error).toBeInstanceOf(ReplyTooLarge)
    expect(await cut()).toBe(true)
  })

  /** The chunks of a stream through the engine (over a metering that records nothing: only the stream loop is under test) from `path`. */
  const streamFrom = async (path: string): Promise<Array<ProviderCalls.StreamChunk>> => {
    const metering = Layer.succeed(Metering, {
      avatarOfKey: async () => undefined,
      activeAvatar: async () => undefined,
      admit: async () => 1,
      callsOn: async () => 0,
      record: async () => undefined
    })
    const engine = await Effect.runPromise(
      Effect.provide(ProviderCalls.ProviderCalls, ProviderCalls.layer.pipe(Layer.provide(Layer.merge(ProviderHealth.layer, metering))))
    )
    const openai = data.providers.find((p) => p.id === "openai")!
    const target = {
      provider: { ...openai, id: "p", endpoint: `${url}${path}`, apiKey: Option.none(), configured: true, settings: {}, missing: undefined },
      model: data.models.find((m) => m.id === "gpt-4o-mini")!
    }
    const messages = [{ role: "user" as const, content: "x" }]
    const chunks: Array<ProviderCalls.StreamChunk> = []
    const stream = await engine.openStream({
      avatar: { id: "a" } as AvatarRecord,
      targets: [target],
      cancel: new Cancel(),
      messages,
      request: (t) => ({ model: t.model.id, messages })
    })
    await stream.run((c) => void chunks.push(...c))
    return chunks
  }

  it("breaks a gzip bomb SSE stream (the engine's stream loop) with a 'stream broke' error naming the limit", async () => {
    const chunks = await withinMemory(() => streamFrom("/sse-bomb"))
    expect(chunks.at(-1)).toMatchObject({ done: true, error: `p stream broke: the reply exceeded ${LIMIT} bytes (AIGW_MAX_UPSTREAM_RESPONSE_BYTES)` })
  })

  it("ends a 2xx stream that holds no event (an HTML page, a JSON answer) with an error, not as an empty answer", async () => {
    for (const path of ["/sse-html", "/sse-json"]) {
      const chunks = await streamFrom(path)
      expect(chunks.map((c) => c.content).join("")).toBe("")
      expect(chunks.at(-1)).toMatchObject({ done: true, error: "p sent an unexpected answer: the stream ended without any event" })
      // No answer came: charged as a call whose answer was unusable is, nothing (docs/quota.md), not the prompt's estimate.
      expect(chunks.at(-1)).toMatchObject({ promptTokens: 0, completionTokens: 0, costUSD: 0 })
    }
  })

  it("takes a body that does not decode by its Content-Encoding for the upstream's fault (a protocol error), not an unreachable upstream", async () => {
    const error = await postJsonNow("p", `${url}/bad-gzip`, {}, {}, new Cancel()).catch((e) => e)
    expect(error).toMatchObject({ _tag: "UpstreamError", kind: "protocol", retryable: false })
    expect(error.message).toBe("p sent an unexpected answer: its body did not decode by its Content-Encoding: incorrect header check")
  })

  it("bounds the fetch fallback (multipart uploads) the same way", async () => {
    const form = new FormData()
    form.append("file", new Blob(["hello"]), "a.txt")
    const error = await withinMemory(() => Effect.runPromise(Effect.flip(postMultipart("p", `${url}/bomb`, {}, form))))
    expect(error).toMatchObject({ kind: "protocol", message: expect.stringMatching(/the reply exceeded \d+ bytes/) })
  })

  it("bounds undici bodies (orchestrators) with readWebBody", async () => {
    const res = await undiciFetch(`${url}/bomb`, { method: "POST", body: "{}" })
    const error = await withinMemory(() => readWebBody(res.body as ReadableStream<Uint8Array>, 1024 * 1024).catch((e) => e))
    expect(error).toBeInstanceOf(ReplyTooLarge)
    expect(error.message).toBe("the reply exceeded 1048576 bytes (AIGW_MAX_UPSTREAM_RESPONSE_BYTES)")
    expect(await cut()).toBe(true)
  })

  it("follows a caller's AbortSignal only while the exchange lasts: its listener goes with the body, or with a failure", async () => {
    const controller = new AbortController()
    const res = await nodeFetch(`${url}/plain`, { signal: controller.signal })
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1)
    expect((await res.json()).pad).toHaveLength(2000)
    await new Promise((resolve) => setImmediate(resolve))
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0)
    await nodeFetch("http://127.0.0.1:9/", { signal: controller.signal }).catch(() => undefined)
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0)
    // And an abort still reaches an exchange in flight.
    const pending = nodeFetch(`${url}/plain`, { signal: controller.signal })
    controller.abort()
    await expect(pending).rejects.toMatchObject({ name: "AbortError" })
  })

  it("limits every body with one shared push function, not a closure per body", async () => {
    // A closure assigned to each body's push is allocated in the old generation by V8 and kept every
    // exchange alive until a full collection (docs/performance.md, "Issue 18, fourteenth session").
    const [a, b] = await Promise.all([nodeFetch(`${url}/plain`), nodeFetch(`${url}/ok`)])
    const bodyA = (a as any).nodeBody() as import("node:stream").Readable
    const bodyB = (b as any).nodeBody() as import("node:stream").Readable
    expect(bodyA.push).not.toBe(Object.getPrototypeOf(bodyA).push)
    expect(bodyA.push).toBe(bodyB.push)
    bodyA.resume()
    bodyB.resume()
  })

  it("keeps working for ordinary answers, on one kept-alive connection", async () => {
    const a = await nodeFetch(`${url}/port`)
    const { port } = await a.json()
    const b = await nodeFetch(`${url}/port`)
    expect(await b.text()).toBe(JSON.stringify({ port }))
  })
})

describe("redirects of upstream calls", () => {
  const servers: Array<http.Server> = []
  const listen = async (handler: http.RequestListener) => {
    const server = http.createServer(handler)
    servers.push(server)
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    return server.address() as AddressInfo
  }
  afterAll(() => {
    for (const s of servers) s.close()
  })

  it("send no credential header on to another origin, and the body and its credentials on within one", async () => {
    const seen: Array<{ readonly host: string; readonly headers: http.IncomingHttpHeaders }> = []
    const target = await listen((req, res) => {
      seen.push({ host: "target", headers: req.headers })
      res.writeHead(200, { "content-type": "application/json" }).end("{\"ok\":true}")
    })
    const origin = await listen((req, res) => {
      seen.push({ host: "origin", headers: req.headers })
      // First to itself (same origin), then to the other server (localhost: another origin).
      res.writeHead(307, { location: req.url === "/first" ? "/second" : `http://localhost:${target.port}/landed` }).end()
    })
    const credentials = { "authorization": "Bearer sk-a", "x-api-key": "sk-b", "x-goog-api-key": "sk-c", "api-key": "sk-d", "anthropic-version": "2023-06-01" }
    const res = await nodeFetch(`http://127.0.0.1:${origin.port}/first`, { method: "POST", headers: { ...credentials, "content-type": "application/json" }, body: "{}" })
    expect(await res.json()).toEqual({ ok: true })
    expect(seen.map((s) => s.host)).toEqual(["origin", "origin", "target"])
    expect(seen[1]!.headers).toMatchObject(credentials)
    for (const name of Object.keys(credentials)) expect(seen[2]!.headers[name], name).toBeUndefined()
    expect(seen[2]!.headers["content-type"]).toBe("application/json")
  })

  it("never lead from a public origin into private or loopback address space, nor to another scheme", async () => {
    const publicOrigin = new URL("https://93.184.216.34/v1/messages")
    for (const to of ["http://127.0.0.1:9/latest/meta-data/", "http://169.254.169.254/", "http://10.0.0.5/x", "http://[::1]/x", "http://[::ffff:127.0.0.1]/"]) {
      expect((await crossOriginRefusal(publicOrigin, new URL(to)))?.message, to).toMatch(/a private or loopback address, which is not followed/)
    }
    expect((await crossOriginRefusal(publicOrigin, new URL("file:///etc/passwd")))?.message).toMatch(/a file: URL/)
    expect(await crossOriginRefusal(publicOrigin, new URL("https://93.184.216.35/v1/messages"))).toBeUndefined()
    // A self-hosted upstream (a private base URL, the operator's choice) may redirect within private space.
    expect(await crossOriginRefusal(new URL("http://10.0.0.4:8000/v1"), new URL("http://10.0.0.5:8000/v1"))).toBeUndefined()
  })

  it("answer a refused redirect as the upstream's fault, naming it", async () => {
    const origin = await listen((_req, res) => res.writeHead(302, { location: "ftp://127.0.0.1/x" }).end())
    const failed = await Effect.runPromise(Effect.flip(Effect.tryPromise({
      try: () => postJsonNow("anthropic", `http://127.0.0.1:${origin.port}/v1/messages`, { "x-api-key": "sk-x" }, {}, new Cancel()),
      catch: (e) => e
    })))
    expect(String((failed as Error).message)).toMatch(/anthropic.*redirected to a ftp: URL, which is not followed/)
  })
})
