/**
 * Remote sandbox vendors (Riza, Daytona) against local mocks of their APIs over the real transport:
 * the exact requests (paths, bearer key, bodies), the mapped outcome, Daytona's sandbox lifecycle
 * (started after polls, deleted after every run, a failed one included), vendor errors and
 * hostile answers (a huge stdout stops at the reply limit). E2B is declared not served, with why.
 */
import * as net from "node:net"
import { Effect, Either, Option, Redacted } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../src/Catalog/Catalog.ts"
import type { ConfiguredProvider } from "../../src/Catalog/Catalog.ts"
import { defaultLimits } from "../../src/Config.ts"
import { setReplyLimit } from "../../src/Providers/internal/nodeFetch.ts"
import { endpointTypes, notServed, servedBy } from "../../src/Providers/Registry.ts"
import type { CodeRun, VendorRunOutcome } from "../../src/Providers/Sandboxes/CodeEndpoint.ts"
import { toolboxOf } from "../../src/Providers/Sandboxes/Daytona.ts"
import type { UpstreamError } from "../../src/Providers/UpstreamError.ts"
import { type SandboxVendor, type SandboxVendorMock, startSandboxVendorMock } from "../support/mockSandboxVendors.ts"

const KEY = "sandbox-key-123"

const providerFor = (id: string, url: string, key = KEY): ConfiguredProvider => {
  const entry = data.providers.find((p) => p.id === id)!
  return { ...entry, capabilities: endpointTypes(entry), endpoint: url, apiKey: Option.some(Redacted.make(key)), configured: true, settings: {}, missing: undefined }
}

const run = (provider: ConfiguredProvider, overrides: Partial<CodeRun> = {}) =>
  Effect.runPromise(Effect.either(servedBy(provider).code!.execute(provider, { language: "python", code: "print(1)", timeoutMs: 5000, ...overrides }, { pollMs: 1 })))

const left = (result: Either.Either<unknown, UpstreamError>): UpstreamError => {
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}
const right = (result: Either.Either<VendorRunOutcome, UpstreamError>): VendorRunOutcome => {
  if (Either.isLeft(result)) throw new Error(`expected an outcome, got ${result.left.message}`)
  return result.right
}

const withMock = (vendor: SandboxVendor) => {
  const ctx = {} as { mock: SandboxVendorMock; provider: ConfiguredProvider }
  beforeAll(async () => {
    ctx.mock = await startSandboxVendorMock(vendor, KEY)
    ctx.provider = providerFor(vendor, ctx.mock.url)
  })
  afterAll(() => ctx.mock.close())
  afterEach(() => {
    ctx.mock.requests.length = 0
    ctx.mock.setBehaviour({})
    setReplyLimit(defaultLimits.maxUpstreamResponseBytes)
  })
  return ctx
}

describe("sandbox vendors in the registry", () => {
  it("serve code through riza and daytona, each with the languages it runs", () => {
    expect(servedBy({ id: "riza", adapter: "bespoke" }).code?.languages).toEqual(["python", "javascript", "typescript", "ruby", "php"])
    expect(servedBy({ id: "daytona", adapter: "bespoke" }).code?.languages).toEqual(["python", "javascript", "bash"])
    for (const id of ["riza", "daytona"]) expect(endpointTypes(data.providers.find((p) => p.id === id)!), id).toContain("code")
  })

  it("declare e2b's code not served, saying why and what to use instead", () => {
    const e2b = data.providers.find((p) => p.id === "e2b")!
    expect(endpointTypes(e2b)).not.toContain("code")
    expect(notServed(e2b)).toEqual([{ type: "code", reason: expect.stringMatching(/process API inside each sandbox.*riza or daytona/) }])
  })
})

describe("Riza", () => {
  const ctx = withMock("riza")

  it("posts the language and code to /execute with the bearer key and answers stdout, stderr and the exit code", async () => {
    expect(right(await run(ctx.provider, { language: "ruby", code: "puts 1" }))).toEqual({ stdout: "ruby:puts 1\n", stderr: "", exitCode: 0 })
    expect(ctx.mock.requests).toEqual([expect.objectContaining({ method: "POST", path: "/v1/execute", body: { language: "ruby", code: "puts 1" } })])
    expect(ctx.mock.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`)
  })

  it("answers a failing program's exit code and stderr as a result, not an error", async () => {
    expect(right(await run(ctx.provider, { code: "import sys; sys.exit(3) # exit 3" }))).toMatchObject({ exitCode: 3, stderr: "failed\n" })
  })

  it("maps a wrong key to a non-retryable upstream error with Riza's message", async () => {
    const error = left(await run(providerFor("riza", ctx.mock.url, "wrong")))
    expect(error).toMatchObject({ kind: "http", status: 401, retryable: false })
    expect(error.message).toContain("invalid API key")
  })

  it("answers a protocol error for an answer without exit_code", async () => {
    ctx.mock.rawNext(JSON.stringify({ stdout: "x" }))
    expect(left(await run(ctx.provider))).toMatchObject({ kind: "protocol" })
    ctx.mock.rawNext("not json")
    expect(left(await run(ctx.provider))).toMatchObject({ kind: "protocol" })
  })

  it("stops a huge stdout at the reply limit", async () => {
    setReplyLimit(64 * 1024)
    ctx.mock.setBehaviour({ stdout: "A".repeat(1024 * 1024) })
    const error = left(await run(ctx.provider))
    expect(error.kind).toBe("protocol")
  })
})

describe("Daytona", () => {
  const ctx = withMock("daytona")

  it("creates a sandbox, waits for it to start, runs the program through the toolbox and deletes the sandbox", async () => {
    ctx.mock.setBehaviour({ pendingPolls: 2 })
    expect(right(await run(ctx.provider, { language: "bash", code: "echo 'it''s' \"$HOME\"" }))).toEqual({ stdout: "bash:echo 'it''s' \"$HOME\"\n", stderr: "", exitCode: 0 })
    const calls = ctx.mock.requests.map((r) => `${r.method} ${r.path}`)
    expect(calls).toEqual([
      "POST /api/sandbox", "GET /api/sandbox/sb-1", "GET /api/sandbox/sb-1", "GET /api/sandbox/sb-1",
      "POST /api/toolbox/sb-1/toolbox/process/execute", "DELETE /api/sandbox/sb-1"
    ])
    expect(ctx.mock.requests[0]!.body).toEqual({ labels: { "code-toolbox-language": "python" } })
    expect(ctx.mock.requests[4]!.body).toMatchObject({ timeout: 5 })
    for (const r of ctx.mock.requests) expect(r.headers.authorization).toBe(`Bearer ${KEY}`)
    expect(ctx.mock.live.size).toBe(0)
  })

  it("pipes python into python3 and javascript into node, through the proxy the sandbox names", async () => {
    ctx.mock.setBehaviour({ proxy: true })
    expect(right(await run(ctx.provider, { language: "python" })).stdout).toBe("python3 -u:print(1)\n")
    expect(right(await run(ctx.provider, { language: "javascript", code: "console.log(1)" })).stdout).toBe("node:console.log(1)\n")
    expect(ctx.mock.requests.filter((r) => r.path.endsWith("/process/execute")).map((r) => r.path)).toEqual([
      expect.stringMatching(/^\/toolbox-proxy\/sb-\d+\/process\/execute$/), expect.stringMatching(/^\/toolbox-proxy\/sb-\d+\/process\/execute$/)
    ])
    expect(ctx.mock.live.size).toBe(0)
  })

  it("deletes the sandbox when the command fails, and answers the vendor's error", async () => {
    ctx.mock.setBehaviour({ executeFails: true })
    const error = left(await run(ctx.provider))
    expect(error).toMatchObject({ kind: "http", status: 500 })
    expect(error.message).toContain("toolbox unavailable")
    expect(ctx.mock.requests.at(-1)).toMatchObject({ method: "DELETE" })
    expect(ctx.mock.live.size).toBe(0)
  })

  it("deletes a sandbox that never starts, and says so", async () => {
    ctx.mock.setBehaviour({ startFails: true })
    expect(left(await run(ctx.provider)).message).toContain("state error")
    expect(ctx.mock.live.size).toBe(0)
  })

  it("deletes the sandbox when a huge result stops at the reply limit", async () => {
    setReplyLimit(64 * 1024)
    ctx.mock.setBehaviour({ stdout: "B".repeat(1024 * 1024) })
    expect(left(await run(ctx.provider)).kind).toBe("protocol")
    expect(ctx.mock.live.size).toBe(0)
  })

  it("refuses a toolbox proxy that is neither https nor on the API's origin, and still deletes the sandbox", async () => {
    ctx.mock.rawNext(JSON.stringify({ id: "sb-x", state: "started", toolboxProxyUrl: "http://169.254.169.254/toolbox" }))
    const error = left(await run(ctx.provider))
    expect(error.kind).toBe("protocol")
    expect(ctx.mock.requests.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /api/sandbox", "DELETE /api/sandbox/sb-x"])
  })

  // An attack run: a sandbox answer naming https://127.0.0.1:…/internal-admin had the key and the program
  // POSTed there, and the internal service's answer came back as stdout.
  it("never sends the key and the program to a toolbox proxy off the API's origin that is not Daytona's, https or not", async () => {
    const internal = await internalService()
    try {
      const { port } = internal
      for (const proxyUrl of [
        `https://127.0.0.1:${port}/internal-admin`,
        `https://localhost:${port}/internal-admin`,
        `https://[::1]:${port}/x`,
        "https://attacker.example/toolbox",
        // Daytona look-alikes, and a sandbox's own preview host (served by the program in the sandbox).
        "https://proxy.app.daytona.io.attacker.example/toolbox",
        "https://proxy-app-daytona.io/toolbox",
        "https://3000-sb-1.proxy.app.daytona.io/toolbox",
        "https://3000-sb-1.proxy.daytona.works/toolbox",
        "http://proxy.app.daytona.io/toolbox"
      ]) {
        ctx.mock.requests.length = 0
        ctx.mock.setBehaviour({ proxyUrl })
        const error = left(await run(ctx.provider))
        expect([error.kind, error.retryable], proxyUrl).toEqual(["protocol", false])
        expect(error.message, proxyUrl).toContain("the sandbox names a toolbox proxy the key may not go to")
        // Created, polled until started, deleted: no execute anywhere.
        expect(ctx.mock.requests.map((r) => r.method), proxyUrl).toEqual(["POST", "GET", "DELETE"])
      }
      expect(internal.connections()).toBe(0)
      expect(ctx.mock.live.size).toBe(0)
    } finally {
      await internal.close()
    }
  })

  it("takes an https Daytona proxy only when every address it resolves to is public", async () => {
    const provider = providerFor("daytona", "https://app.daytona.io/api")
    const sandbox = { id: "sb-1", state: "started", toolboxProxyUrl: "https://proxy.app.daytona.io/toolbox/" }
    const at = (addresses: ReadonlyArray<string>) => Effect.runPromise(Effect.either(toolboxOf(provider, sandbox, async () => addresses)))
    expect(await at(["34.120.1.2"])).toEqual(Either.right("https://proxy.app.daytona.io/toolbox/sb-1"))
    for (const addresses of [["127.0.0.1"], ["34.120.1.2", "10.0.0.7"], ["169.254.169.254"], ["::ffff:192.168.1.1"]]) {
      const refused = left(await at(addresses))
      expect([refused.kind, refused.message], addresses.join()).toEqual(["protocol", expect.stringContaining("private, loopback, link-local")])
    }
    // A name that does not resolve now may later: a retryable connect error, nothing sent.
    const unresolved = left(await Effect.runPromise(Effect.either(toolboxOf(provider, sandbox, () => Promise.reject(new Error("ENOTFOUND"))))))
    expect([unresolved.kind, unresolved.retryable]).toEqual(["connect", true])
    // Credentials in the vendor's URL are refused; a query it carries does not swallow the id.
    expect(left(await Effect.runPromise(Effect.either(toolboxOf(provider, { ...sandbox, toolboxProxyUrl: "https://u:p@proxy.app.daytona.io/toolbox" }, async () => ["34.120.1.2"])))).kind)
      .toBe("protocol")
    expect(await Effect.runPromise(toolboxOf(provider, { ...sandbox, toolboxProxyUrl: "https://proxy.us.daytona.io/toolbox?x=1#y" }, async () => ["34.120.1.2"])))
      .toBe("https://proxy.us.daytona.io/toolbox/sb-1")
  })

  it("refuses a sandbox id that is a dot segment (`.`, `..`): nothing further is sent", async () => {
    for (const id of ["..", "."]) {
      ctx.mock.requests.length = 0
      ctx.mock.rawNext(JSON.stringify({ id, state: "started" }))
      const error = left(await run(ctx.provider))
      expect([error.kind, error.message], id).toEqual(["protocol", expect.stringContaining("the sandbox answer has no id and state")])
      expect(ctx.mock.requests.map((r) => `${r.method} ${r.path}`), id).toEqual(["POST /api/sandbox"])
    }
  })
})

/** A loopback service standing for an internal one: it counts the connections made to it and answers none. */
const internalService = async () => {
  let count = 0
  const server = net.createServer((socket) => {
    count++
    socket.destroy()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
