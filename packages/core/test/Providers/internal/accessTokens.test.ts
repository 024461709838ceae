/**
 * The shared access-token source: reuse until shortly before expiry, one request for concurrent
 * calls, failures not kept; and the token request over the transport against a local server.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type AccessToken, cachedToken, clearTokens, requestToken } from "../../../src/Providers/internal/accessTokens.ts"
import { UpstreamError } from "../../../src/Providers/UpstreamError.ts"

const HOUR = 3_600_000
const signal = new AbortController().signal

afterEach(() => clearTokens())

describe("cachedToken", () => {
  it("reuses a token until shortly before it expires, then fetches a new one", async () => {
    let clock = 1_000_000
    let fetched = 0
    const fetch = async (): Promise<AccessToken> => ({ token: `t${++fetched}`, expiresAt: clock + HOUR })
    const get = () => cachedToken("p", "key", fetch, signal, () => clock)
    expect(await get()).toBe("t1")
    clock += HOUR / 2
    expect(await get()).toBe("t1")
    clock += HOUR / 2 - 60_000 // one minute before expiry: renewed
    expect(await get()).toBe("t2")
    expect(fetched).toBe(2)
  })

  it("keeps tokens per provider and per credential", async () => {
    let fetched = 0
    const fetch = async (): Promise<AccessToken> => ({ token: `t${++fetched}`, expiresAt: Date.now() + HOUR })
    expect(await cachedToken("p", "a", fetch, signal)).toBe("t1")
    expect(await cachedToken("p", "b", fetch, signal)).toBe("t2")
    expect(await cachedToken("q", "a", fetch, signal)).toBe("t3")
    expect(await cachedToken("p", "a", fetch, signal)).toBe("t1")
  })

  it("shares one in-flight fetch among concurrent calls", async () => {
    let fetched = 0
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const fetch = async (): Promise<AccessToken> => {
      fetched++
      await gate
      return { token: "shared", expiresAt: Date.now() + HOUR }
    }
    const calls = Array.from({ length: 5 }, () => cachedToken("p", "key", fetch, signal))
    release()
    expect(await Promise.all(calls)).toEqual(Array(5).fill("shared"))
    expect(fetched).toBe(1)
  })

  it("does not keep a failure: the next call fetches again", async () => {
    let fetched = 0
    const fetch = async (): Promise<AccessToken> => {
      if (++fetched === 1) throw new UpstreamError({ provider: "p", kind: "http", status: 503, message: "down", retryable: true })
      return { token: "ok", expiresAt: Date.now() + HOUR }
    }
    const first = await cachedToken("p", "key", fetch, signal).catch((e) => e)
    expect(first).toBeInstanceOf(UpstreamError)
    expect(await cachedToken("p", "key", fetch, signal)).toBe("ok")
    expect(fetched).toBe(2)
  })

  it("a caller already gone when it asks leaves no unhandled rejection behind if the token request fails (Node would end the process)", async () => {
    const unhandled: Array<unknown> = []
    const onUnhandled = (reason: unknown) => void unhandled.push(reason)
    process.on("unhandledRejection", onUnhandled)
    try {
      const gone = new AbortController()
      gone.abort(new Error("client left"))
      const fetch = async (): Promise<AccessToken> => {
        throw new UpstreamError({ provider: "p2", kind: "http", status: 503, message: "down", retryable: true })
      }
      expect(((await cachedToken("p2", "key", fetch, gone.signal).catch((e) => e)) as Error).message).toBe("client left")
      await new Promise((r) => setTimeout(r, 50))
      expect(unhandled).toEqual([])
    } finally {
      process.off("unhandledRejection", onUnhandled)
    }
  })

  it("a caller that aborts stops waiting; the others still get the token", async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const fetch = async (): Promise<AccessToken> => {
      await gate
      return { token: "late", expiresAt: Date.now() + HOUR }
    }
    const controller = new AbortController()
    const leaving = cachedToken("p", "key", fetch, controller.signal).catch((e) => e)
    const staying = cachedToken("p", "key", fetch, signal)
    controller.abort(new Error("client left"))
    expect(((await leaving) as Error).message).toBe("client left")
    release()
    expect(await staying).toBe("late")
  })
})

describe("requestToken", () => {
  let server: Server
  let url: string
  let answer: { status: number; body: string } = { status: 200, body: "{}" }
  const seen: Array<{ contentType: string | undefined; body: string }> = []
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = ""
      req.on("data", (c) => (body += c))
      req.on("end", () => {
        seen.push({ contentType: req.headers["content-type"], body })
        res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body)
      })
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`
  })
  afterAll(() => new Promise<void>((r) => server.close(() => r())))

  it("posts the form and reads access_token and expires_in", async () => {
    answer = { status: 200, body: JSON.stringify({ access_token: "abc", expires_in: 120, token_type: "Bearer" }) }
    const token = await requestToken("p", { url, form: { grant_type: "g", apikey: "k&=" } }, () => 5_000)
    expect(token).toEqual({ token: "abc", expiresAt: 5_000 + 120_000 })
    expect(seen.at(-1)).toEqual({ contentType: "application/x-www-form-urlencoded", body: "grant_type=g&apikey=k%26%3D" })
  })

  it("maps a refusal to an UpstreamError naming the provider, retryable by status", async () => {
    answer = { status: 400, body: JSON.stringify({ errorCode: "BXNIM0415E", errorMessage: "Provided API key could not be found." }) }
    const refused = (await requestToken("watsonx", { url, form: {} }).catch((e) => e)) as UpstreamError
    expect(refused).toBeInstanceOf(UpstreamError)
    expect(refused).toMatchObject({ provider: "watsonx", status: 400, retryable: false })
    expect(refused.message).toContain("Provided API key could not be found.")
    answer = { status: 503, body: JSON.stringify({ error: "temporarily_unavailable", error_description: "try later" }) }
    const down = (await requestToken("vertex", { url, form: {} }).catch((e) => e)) as UpstreamError
    expect(down).toMatchObject({ provider: "vertex", status: 503, retryable: true })
    expect(down.message).toContain("try later")
  })

  it("a 2xx answer without a token, or not JSON, is a protocol error", async () => {
    answer = { status: 200, body: JSON.stringify({ token_type: "Bearer" }) }
    expect(await requestToken("p", { url, form: {} }).catch((e) => e)).toMatchObject({ kind: "protocol", retryable: false })
    answer = { status: 200, body: "<html>" }
    expect(await requestToken("p", { url, form: {} }).catch((e) => e)).toMatchObject({ kind: "protocol" })
  })

  it("an unreachable token endpoint is a retryable connect error", async () => {
    const closed = createServer()
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r))
    const port = (closed.address() as AddressInfo).port
    await new Promise<void>((r) => closed.close(() => r()))
    expect(await requestToken("p", { url: `http://127.0.0.1:${port}/token`, form: {} }).catch((e) => e)).toMatchObject({ kind: "connect", retryable: true })
  })
})
