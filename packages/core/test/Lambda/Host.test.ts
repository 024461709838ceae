/**
 * The Lambda host's answers without a database: malformed events, and the runtime build failures
 * (bad configuration, unreachable database) as clear 503s in each API's error shape.
 */
import { describe, expect, it } from "vitest"
import { makeLambdaHost, runtimeProblem } from "../../src/Lambda/Host.ts"
import { fixture, functionUrlEvent, json, RecordingStream, v1Event, v2Event } from "./support/events.ts"

describe("malformed events", () => {
  it("the handler answers 400 with an envelope, without building the runtime", async () => {
    const host = makeLambdaHost({ env: {} })
    for (const event of [null, {}, "x", { version: "2.0" }, fixture("scheduled-event")]) {
      const result = await host.handler(event)
      expect(result.statusCode).toBe(400)
      expect(result.headers["content-type"]).toBe("application/json")
      const body = json(result)
      expect(body.isError).toBe(true)
      expect(body.result).toBeNull()
      expect(body.message).toMatch(/^Bad Lambda event: /)
    }
  })

  it("the streaming handler answers a bad event with a 400 prelude and envelope", async () => {
    const host = makeLambdaHost({ env: {} })
    const stream = new RecordingStream()
    await host.streamingHandler({ nope: true }, stream)
    const { metadata, body } = stream.parts()
    expect(metadata.statusCode).toBe(400)
    expect(stream.contentType).toBe("application/vnd.awslambda.http-integration-response")
    expect(JSON.parse(body).isError).toBe(true)
  })
})

describe("events that fail their shape's check", () => {
  it("name the field and what it should be, never its value, in their path's envelope with the caller's id", async () => {
    const host = makeLambdaHost({ env: {} })
    const secretHeaders = { "x-request-id": "caller-id-1", authorization: "Bearer aigw_SECRETKEY123", "content-length": 42 }
    const v2 = { ...v2Event({ method: "POST", path: "/openai/v1/chat/completions" }), headers: secretHeaders }
    const answer = await host.handler(v2)
    expect(answer.statusCode).toBe(400)
    expect(answer.headers?.["x-request-id"]).toBe("caller-id-1")
    expect(answer.body).not.toContain("SECRETKEY")
    expect(json(answer).error).toMatchObject({ type: "invalid_request_error", code: "BadRequest" })
    expect(json(answer).error.message).toBe(
      "Bad Lambda event: not a valid payload 2.0 / Function URL event: headers.content-length: Expected string, actual a number"
    )
    // A body that is an object (a test tool's mistake) is not written out: it holds the password.
    const login = { ...v1Event({ method: "POST", path: "/api/avatar/authenticate" }), body: { username: "ada", password: "analytical engine" } }
    const refused = await host.handler(login)
    expect(refused.statusCode).toBe(400)
    expect(refused.body).not.toContain("analytical")
    expect(json(refused)).toMatchObject({ isError: true, result: null })
    expect(json(refused).message).toContain("body: Expected string or null, actual an object")
    // A 1.0 event's answer is a 1.0 result.
    expect(refused).toHaveProperty("multiValueHeaders")
  })

  it("a method that is not an HTTP token is a clear 400, not the Request's TypeError", async () => {
    const host = makeLambdaHost({ env: {} })
    const answer = await host.handler(v2Event({ method: "GET /X", path: "/v1/health" }))
    expect(answer.statusCode).toBe(400)
    expect(json(answer).message).toBe("Bad Lambda event: the method is not an HTTP method (a token of RFC 9110)")
    // Neither a source IP with a line break nor cookies no header can carry make the handler throw or quote them.
    const badIp = v2Event({ method: "GET", path: "/v1/health" }) as any
    badIp.requestContext.http.sourceIp = "1\nCANARY"
    const ipAnswer = await host.handler(badIp)
    expect([ipAnswer.statusCode, ipAnswer.body.includes("CANARY")]).toEqual([400, false])
    for (const cookies of [["sid=SECRET_SESSION", "a\nb"], ["name=€uro"]]) {
      const withCookies = { ...v2Event({ method: "GET", path: "/v1/nowhere" }), cookies }
      const result = await host.handler(withCookies)
      expect(result.body).not.toContain("SECRET_SESSION")
      // This host has no configuration: the request is read and answered as a failed start (it used to throw).
      expect(result.statusCode).toBe(503)
      const stream = new RecordingStream()
      await host.streamingHandler(withCookies, stream)
      expect(stream.parts().metadata.statusCode).toBe(503)
    }
  })
})

describe("paths it cannot route as sent", () => {
  it("answer 404 in their path's envelope, as the node host's router does, without building the runtime", async () => {
    const host = makeLambdaHost({ env: {} })
    const gateway = await host.handler(v2Event({ method: "GET", path: "/v1/x/../health" }))
    expect(gateway.statusCode).toBe(404)
    expect(json(gateway)).toMatchObject({ isError: true, message: "No route for GET /v1/x/../health." })
    const openai = await host.handler(v1Event({ method: "POST", path: "/openai/v1/../v1/models" }))
    expect(openai.statusCode).toBe(404)
    expect(json(openai)).toMatchObject({ error: { code: "NotFound", message: "No route for POST /openai/v1/../v1/models." } })
    // Methods a web Request cannot carry: 405 with Allow on a served path, as the node host answers them, else 404;
    // answers made here carry a request id.
    for (const method of ["TRACE", "CONNECT"]) {
      const answer = await host.handler(v2Event({ method, path: "/v1/health" }))
      expect([method, answer.statusCode, answer.headers?.["allow"]]).toEqual([method, 405, "GET"])
      expect(json(answer)).toMatchObject({ isError: true, message: `${method} is not served on /v1/health; it takes GET.` })
      expect(answer.headers?.["x-request-id"]).toMatch(/\S/)
      const nowhere = await host.handler(v2Event({ method, path: "/v1/nowhere" }))
      expect([nowhere.statusCode, json(nowhere).message]).toEqual([404, `No route for ${method} /v1/nowhere.`])
    }
    const openaiTrace = await host.handler(v1Event({ method: "TRACE", path: "/openai/v1/chat/completions" }))
    expect([openaiTrace.statusCode, json(openaiTrace).error.code]).toEqual([405, "MethodNotAllowed"])
  })
})

describe("answers made outside the application are the application's", () => {
  it("carry the caller's request id (or a new one) and their path's envelope", async () => {
    const host = makeLambdaHost({ env: { DATABASE_URL: "sqlite:./x.sqlite", JWT_SECRET: "s".repeat(32) } })
    const headers = { "x-request-id": "caller-id-123" }
    const unroutable = await host.handler(v2Event({ method: "GET", path: "/v1/x/../health", headers }))
    expect(unroutable.headers?.["x-request-id"]).toBe("caller-id-123")
    const undecodable = await host.handler({ ...v1Event({ method: "POST", path: "/openai/v1/chat/completions", headers }), body: "%%%", isBase64Encoded: true })
    expect(undecodable.statusCode).toBe(400)
    expect(undecodable.headers?.["x-request-id"]).toBe("caller-id-123")
    expect(json(undecodable)).toMatchObject({ error: { type: "invalid_request_error", code: "BadRequest", message: expect.stringMatching(/^Bad Lambda event: /) } })
    // A failed start: 503 with the id, in each API's shape.
    const failed = await host.handler(v2Event({ method: "GET", path: "/v1/health", headers }))
    expect([failed.statusCode, failed.headers?.["x-request-id"], failed.headers?.["retry-after"]]).toEqual([503, "caller-id-123", "5"])
    const anthropic = await host.handler(v2Event({ method: "POST", path: "/anthropic/v1/messages", body: {} }))
    expect(anthropic.headers?.["x-request-id"]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/)
    expect(json(anthropic)).toMatchObject({ type: "error", error: { type: "overloaded_error" } })
    const unclassified = await host.handler({ nope: true })
    expect(unclassified.headers?.["x-request-id"]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/)
  })

  // A twins review: the request was routed on the path without its stage, the host's own answers took their
  // envelope and id headers from the path with it (SDKs behind a named stage could not read a 503, 502 or 504).
  it("take their envelope from the path as routed: a named HTTP API stage removed, a malformed event's too", async () => {
    const host = makeLambdaHost({ env: {} })
    const staged = (path: string, extra: Record<string, unknown> = {}) => {
      const event = { ...v2Event({ method: "POST", path: `/prod${path}`, body: {} }), ...extra } as any
      event.requestContext.stage = "prod"
      return event
    }
    const anthropic = await host.handler(staged("/anthropic/v1/messages"))
    expect(anthropic.statusCode).toBe(503)
    expect(json(anthropic)).toMatchObject({ type: "error", error: { type: "overloaded_error" } })
    expect(anthropic.headers?.["request-id"]).toBe(anthropic.headers?.["x-request-id"])
    const openai = await host.handler(staged("/openai/v1/chat/completions"))
    expect(json(openai)).toMatchObject({ error: { type: "server_error", code: "Busy" } })
    // An event that fails its shape's check is answered in the envelope of its path as routed too.
    const malformed = await host.handler(staged("/openai/v1/chat/completions", { headers: { "content-length": 42 } }))
    expect(malformed.statusCode).toBe(400)
    expect(json(malformed)).toMatchObject({ error: { type: "invalid_request_error", code: "BadRequest" } })
  })
})

describe("runtime build failures answer a clear 503, not an opaque 502", () => {
  const health = v2Event({ method: "GET", path: "/v1/health" })

  it("a SQLite DATABASE_URL is refused before any layer is built", async () => {
    const host = makeLambdaHost({ env: { DATABASE_URL: "sqlite:./data/aigw.sqlite", JWT_SECRET: "s".repeat(32) } })
    const result = await host.handler(health)
    expect(result.statusCode).toBe(503)
    expect(result.headers["retry-after"]).toBe("5")
    expect(json(result)).toEqual({
      isError: true,
      message: "gateway failed to start: DATABASE_URL must be a postgres:// or postgresql:// URL on Lambda (got \"sqlite:…\"); SQLite is not bundled",
      result: null
    })
  })

  it("a runtime older than the bundled native modules need is named, with the runtime to choose", async () => {
    const node20 = { ...process.versions, node: "20.19.0", napi: "9" }
    expect(runtimeProblem(10, node20, {})?.message).toBe(
      "this Lambda bundle needs Node.js 22.14 or newer (Lambda runtime nodejs22.x): its argon2 binaries need Node-API 10, and this is Node.js 20.19.0 (Node-API 9)"
    )
    expect(runtimeProblem(10, { ...node20, node: "22.14.0", napi: "10" }, {})).toBeUndefined()
    expect(runtimeProblem(10, node20, { ARGON2_PREBUILD: "/opt/argon2" })).toBeUndefined()
    expect(runtimeProblem(undefined, node20, {})).toBeUndefined()
    if (Number(process.versions.napi) >= 10 || process.env.ARGON2_PREBUILD) return
    // On this (older) Node the host refuses before anything loads argon2, with a clear 503.
    const result = await makeLambdaHost({ env: { DATABASE_URL: "postgres://localhost/x", JWT_SECRET: "s".repeat(32) }, nodeApi: 10 }).handler(health)
    expect(result.statusCode).toBe(503)
    expect(json(result).message).toMatch(/^gateway failed to start: this Lambda bundle needs Node.js 22.14 or newer \(Lambda runtime nodejs22.x\)/)
  })

  it("a missing DATABASE_URL or JWT key is named", async () => {
    const noDb = await makeLambdaHost({ env: { JWT_SECRET: "x" } }).handler(health)
    expect(json(noDb).message).toBe("gateway failed to start: DATABASE_URL is not set; the Lambda host needs PostgreSQL (postgres://…)")
    const noKey = await makeLambdaHost({ env: { DATABASE_URL: "postgres://localhost/x" } }).handler(health)
    expect(noKey.statusCode).toBe(503)
    expect(json(noKey).message).toMatch(/^gateway failed to start: JWT_SECRET or JWT_PRIVATE_KEY must be set on Lambda/)
  })

  it("an unreachable database: the cause is given without the password; each API keeps its error shape", async () => {
    const host = makeLambdaHost({ env: { DATABASE_URL: "postgres://aigw:hunter2@127.0.0.1:9/aigw", JWT_SECRET: "s".repeat(32) } })
    const gateway = await host.handler(health)
    expect(gateway.statusCode).toBe(503)
    const message = json(gateway).message as string
    expect(message).toMatch(
      /^gateway failed to start: cannot reach the database at postgres:\/\/\S*@127\.0\.0\.1:9\/aigw: connection refused \(check DATABASE_URL\)$/
    )
    expect(message).not.toContain("hunter2")
    const avatar = json(await host.handler(v1Event({ method: "POST", path: "/api/avatar/authenticate", body: {} })))
    expect(avatar).toMatchObject({ isError: true, isWarning: false, result: null })
    expect(avatar.message).toMatch(/^gateway failed to start: /)
    const openai = json(await host.handler(functionUrlEvent({ method: "POST", path: "/openai/v1/chat/completions", body: {} })))
    expect(openai.error).toMatchObject({ type: "server_error", code: "Busy" })
    expect(openai.error.message).toMatch(/^gateway failed to start: /)
  })

  it("a value that cannot be used is named once, as the node host names it", async () => {
    const env = { DATABASE_URL: "postgres://aigw:pw@127.0.0.1:9/aigw", JWT_SECRET: "s".repeat(32), AIGW_MAX_BODY_BYTES: "abc" }
    const result = await makeLambdaHost({ env }).handler(health)
    expect(result.statusCode).toBe(503)
    expect(json(result).message).toBe(
      'gateway failed to start: invalid configuration: AIGW_MAX_BODY_BYTES: expected an integer value but received "abc" (check AIGW_MAX_BODY_BYTES)'
    )
  })

  it("a bad AIGW_CONFIG file is a startup failure, not a crash at module load", async () => {
    const previous = process.env.AIGW_CONFIG
    process.env.AIGW_CONFIG = "/nonexistent/aigw.json"
    try {
      const host = makeLambdaHost()
      const result = await host.handler(health)
      expect(result.statusCode).toBe(503)
      expect(json(result).message).toMatch(/^gateway failed to start: AIGW_CONFIG: cannot read \/nonexistent\/aigw.json/)
    } finally {
      if (previous === undefined) delete process.env.AIGW_CONFIG
      else process.env.AIGW_CONFIG = previous
    }
  })

  it("migrate refuses a non-PostgreSQL URL; scheduled fails when the runtime cannot start", async () => {
    const host = makeLambdaHost({ env: { DATABASE_URL: "sqlite::memory:", JWT_SECRET: "x" } })
    await expect(host.migrate()).rejects.toThrow(/^migration failed: DATABASE_URL must be a postgres/)
    await expect(host.scheduled(fixture("scheduled-event"))).rejects.toThrow(/^gateway failed to start: DATABASE_URL must be/)
  })
})
