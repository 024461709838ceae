/** Start-up failures as one line naming the cause and the variable to fix (StartupError.ts), and the checks behind them. */
import { ServeError } from "@effect/platform/HttpServerError"
import { Cause, ConfigError, ConfigProvider, Effect, Exit, Layer, Option, Redacted } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import * as Jwt from "../src/Accounts/Jwt.ts"
import * as Catalog from "../src/Catalog/Catalog.ts"
import * as GatewayConfig from "../src/Config.ts"
import * as Database from "../src/Storage/Database.ts"
import { describeStartupFailure, ensureWritableDir, redactUrls, StartupError } from "../src/StartupError.ts"
import { kindOf } from "../src/Storage/Database.ts"
import * as Tracing from "../src/Tracing.ts"
import { scratchDir } from "./support/scratch.ts"

const oneLine = (line: string) => {
  expect(line.split("\n")).toHaveLength(1)
  expect(line).not.toMatch(/\bat .*:\d+:\d+/)
  expect(line.startsWith("aigw: ")).toBe(true)
  return line
}

/** The failure of reading the options from `env`, as the hosts print it. */
const configFailure = async (overrides: Record<string, string>) => {
  const env = { AIGW_DATA_DIR: path.join(scratchDir("aigw-startup-"), "data"), ...overrides }
  const exit = await Effect.runPromiseExit(
    Effect.provide(GatewayConfig.GatewayConfig, GatewayConfig.layerConfig.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))))
  )
  if (Exit.isSuccess(exit)) throw new Error("expected the configuration to be refused")
  return oneLine(describeStartupFailure(exit.cause))
}

/** The start-up line of a catalogue built from `overrides` (the providers' variables). */
const catalogueFailure = async (overrides: Record<string, string>) => {
  const env = { AIGW_DATA_DIR: path.join(scratchDir("aigw-startup-"), "data"), ...overrides }
  const config = GatewayConfig.layerConfig.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))
  const exit = await Effect.runPromiseExit(Effect.provide(Catalog.Catalog, Catalog.layer.pipe(Layer.provide(config))))
  if (Exit.isSuccess(exit)) throw new Error("expected the configuration to be refused")
  return oneLine(describeStartupFailure(exit.cause))
}

describe("describeStartupFailure", () => {
  it("a port in use names the address and PORT/HOST, not `ServeError: An error has occurred`", () => {
    const listen = Object.assign(new Error("listen EADDRINUSE: address already in use 127.0.0.1:8787"), {
      code: "EADDRINUSE",
      address: "127.0.0.1",
      port: 8787
    })
    expect(describeStartupFailure(Cause.fail(new ServeError({ cause: listen })))).toBe(
      "aigw: cannot listen on 127.0.0.1:8787: address already in use (set PORT or HOST)"
    )
  })

  it("a value that is there but wrong (from the AIGW_CONFIG file) is not also reported as unset", () => {
    const error = ConfigError.Or(
      ConfigError.MissingData(["AIGW_MAX_BODY_BYTES"], "Expected AIGW_MAX_BODY_BYTES to exist"),
      ConfigError.InvalidData(["AIGW_MAX_BODY_BYTES"], 'Expected an integer value but received "true"')
    )
    expect(describeStartupFailure(Cause.fail(error))).toBe(
      'aigw: invalid configuration: AIGW_MAX_BODY_BYTES: expected an integer value but received "true" (check AIGW_MAX_BODY_BYTES)'
    )
    expect(describeStartupFailure(Cause.fail(ConfigError.MissingData(["JWT_SECRET"], "missing")))).toBe("aigw: invalid configuration: JWT_SECRET is not set (check JWT_SECRET)")
  })

  it("a configuration error (failure or defect) names the variable", () => {
    const error = ConfigError.InvalidData(["PORT"], 'Expected an integer value but received "abc"')
    const expected = 'aigw: invalid configuration: PORT: expected an integer value but received "abc" (check PORT)'
    expect(describeStartupFailure(Cause.fail(error))).toBe(expected)
    expect(describeStartupFailure(Cause.die(error))).toBe(expected)
  })

  it("a StartupError is its message; a recognised error wins over an unknown one", () => {
    const known = new StartupError({ message: "cannot write to the data directory /x: permission denied (check AIGW_DATA_DIR)" })
    expect(describeStartupFailure(Cause.parallel(Cause.die(new Error("other")), Cause.die(known)))).toBe(`aigw: ${known.message}`)
  })

  it("an unknown error: one line, no stack, no password", () => {
    const inner = new Error("could not connect to postgres://admin:hunter2@db.example.com:5432/aigw\n  second line")
    const line = oneLine(describeStartupFailure(Cause.die(new Error("boom", { cause: inner }))))
    expect(line).not.toContain("hunter2")
    expect(line).toContain("postgres://admin:***@db.example.com:5432/aigw")
    expect(line).toContain("AIGW_DEBUG=1")
  })

  it("redactUrls hides URL passwords (also with @ in them) and password= query values", () => {
    expect(redactUrls("postgres://u:p@ss@h:1/db")).toBe("postgres://u:***@h:1/db")
    expect(redactUrls("postgres://h/db?user=u&password=s3cret&ssl=1")).toBe("postgres://h/db?user=u&password=***&ssl=1")
    expect(redactUrls("cannot reach postgres://h/db?password=s3:cret: connection refused")).toBe("cannot reach postgres://h/db?password=***: connection refused")
    expect(redactUrls("postgres://h/db?password=s3cret")).toBe("postgres://h/db?password=***")
    expect(redactUrls("smtp://mail.example.com:587")).toBe("smtp://mail.example.com:587")
    // A password with an unencoded slash, and a value that is no URL at all.
    expect(redactUrls("cannot reach the database at postgres://aigw:hun/ter2@db:5432/aigw: refused")).toBe("cannot reach the database at postgres://aigw:***@db:5432/aigw: refused")
    expect(redactUrls("Cannot create property 'mailer' on string 'mailer:hunter2@mail.example.com'")).toBe("Cannot create property 'mailer' on string 'mailer:***@mail.example.com'")
    expect(redactUrls("aigw: invalid configuration: PORT: expected an integer")).toBe("aigw: invalid configuration: PORT: expected an integer")
  })
})

describe("start-up checks", () => {
  it("invalid values name their variable", async () => {
    expect(await configFailure({ PORT: "abc" })).toContain("(check PORT)")
    expect(await configFailure({ PORT: "70000" })).toContain("PORT must be a port number")
    for (const bad of ["0x50", "1e3", "80.0"]) expect(await configFailure({ PORT: bad }), bad).toContain("PORT must be a port number")
    expect(await configFailure({ AIGW_SANDBOX: "weird" })).toContain("(check AIGW_SANDBOX)")
    expect(await configFailure({ AIGW_MAX_JSON_DEPTH: "-1" })).toBe(
      "aigw: invalid configuration: AIGW_MAX_JSON_DEPTH must be a positive integer up to 10000 (check AIGW_MAX_JSON_DEPTH)"
    )
    // A provider base URL that is no URL used to start and fail every call of the provider.
    for (const bad of ["notaurl", "ftp://files.example.com/v1", "https://api.example.com /v1"]) {
      expect(await catalogueFailure({ OPENAI_BASE_URL: bad }), bad).toBe(
        "aigw: OPENAI_BASE_URL must be an http:// or https:// URL: the provider's API base, e.g. https://api.openai.com/v1 (check OPENAI_BASE_URL)"
      )
    }
    // Paths are appended to the base as text: a query swallowed them, a fragment cut them off, and
    // user info was never sent. Each used to start and call the wrong URL.
    for (const [bad, problem] of [
      ["http://127.0.0.1:9/v1?x=1", "must not carry a query string"],
      ["http://127.0.0.1:9/v1#top", "must not carry a fragment"],
      ["http://proxy:hunter2@127.0.0.1:9/v1", "must not carry a user name or password"]
    ] as const) {
      const line = await catalogueFailure({ OPENAI_BASE_URL: bad })
      expect(line, bad).toContain(`OPENAI_BASE_URL ${problem}`)
      expect(line).not.toContain("hunter2")
    }
    // An "@" in the path is no user info.
    await expect(catalogueFailure({ OPENAI_BASE_URL: "http://127.0.0.1:9/@org/v1" })).rejects.toThrow("expected the configuration to be refused")
    // A depth that would fail every JSON request (its scan keeps a count per level) stops the start instead.
    expect(await configFailure({ AIGW_MAX_JSON_DEPTH: "10000000000" })).toBe(
      "aigw: invalid configuration: AIGW_MAX_JSON_DEPTH must be a positive integer up to 10000 (check AIGW_MAX_JSON_DEPTH)"
    )
    // Values that used to start and then spin a loop, refuse every body, or make links and mail unusable.
    for (const [name, value, message] of [
      ["AIGW_WEBHOOK_RETRY_BASE_MS", "-100", "must be a number of milliseconds from 1 to 86400000"],
      ["AIGW_WORKER_INTERVAL_MS", "0", "must be a number of milliseconds from 1 to 86400000"],
      ["AIGW_JOB_POLL_MS", "-1", "must be a number of milliseconds from 1 to 86400000"],
      ["AIGW_MAX_BODY_BYTES", "-5", "must be a positive number of bytes"],
      ["PUBLIC_URL", "aigw.example.com", "PUBLIC_URL must be an http:// or https:// URL"],
      ["PUBLIC_URL", "https://aigw.example.com/base?x=1", "PUBLIC_URL must be an http:// or https:// URL without a user, query or fragment"],
      ["PUBLIC_URL", "https://aigw.example.com/#top", "PUBLIC_URL must be an http:// or https:// URL without a user, query or fragment"],
      ["PUBLIC_URL", "https://u:pw@aigw.example.com/", "PUBLIC_URL must be an http:// or https:// URL without a user, query or fragment"],
      ["AIGW_MAX_BODY_BYTES", "99999999999", "must be a positive number of bytes up to 2147483647"],
      ["AIGW_TRUST_PROXY", "5000000000", "AIGW_TRUST_PROXY must be the number of trusted reverse proxies (0 up to 2147483647)"],
      ["AIGW_USAGE_RETENTION_DAYS", "-1", "AIGW_USAGE_RETENTION_DAYS must be a whole number of days from 1 to 36500, or 0 to keep every usage record"],
      ["AIGW_USAGE_RETENTION_DAYS", "36501", "AIGW_USAGE_RETENTION_DAYS must be a whole number of days from 1 to 36500"],
      ["AIGW_USAGE_RETENTION_DAYS", "30d", "AIGW_USAGE_RETENTION_DAYS"],
      ["SMTP_URL", "mailer:hunter2@mail.example.com", "SMTP_URL must be an smtp:// or smtps:// URL"]
    ]) {
      const line = await configFailure({ [name!]: value! })
      expect(line).toContain(message)
      expect(line).toContain(`(check ${name})`)
      expect(line).not.toContain("hunter2")
    }
    // The Admin avatar: all three variables or none.
    expect(await configFailure({ AIGW_ADMIN_USERNAME: "root_admin", AIGW_ADMIN_EMAIL: "root@example.com" })).toContain(
      "the Admin avatar needs AIGW_ADMIN_USERNAME, AIGW_ADMIN_EMAIL and AIGW_ADMIN_PASSWORD together; AIGW_ADMIN_PASSWORD is not set (check AIGW_ADMIN_PASSWORD)"
    )
    // An SQLite URL naming no file was a temporary database, gone (with every key) at the next start.
    for (const url of ["sqlite:", "sqlite://"]) expect(() => kindOf(url)).toThrow(/DATABASE_URL sqlite: names no file/)
    expect(kindOf("sqlite::memory:")).toBe("sqlite")
  })

  it("a JWT key that cannot be used names its variable, not OpenSSL's decoder", async () => {
    const failure = async (options: Partial<GatewayConfig.GatewayOptions>) => {
      const exit = await Effect.runPromiseExit(Effect.provide(Jwt.make, GatewayConfig.layer({ dataDir: scratchDir("aigw-jwt-"), ...options })))
      if (Exit.isSuccess(exit)) throw new Error("expected the key to be refused")
      return oneLine(describeStartupFailure(exit.cause))
    }
    expect(await failure({ jwtPrivateKey: Option.some(Redacted.make("not a key")) })).toBe(
      "aigw: JWT_PRIVATE_KEY is not a private key in PEM (-----BEGIN PRIVATE KEY-----) (check JWT_PRIVATE_KEY)"
    )
    const rsa = crypto.generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()
    expect(await failure({ jwtPrivateKey: Option.some(Redacted.make(rsa)) })).toContain("must be an Ed25519 private key (PEM) (check JWT_PRIVATE_KEY)")
    expect(await failure({ jwtSecret: Option.some(Redacted.make("short")) })).toContain("JWT_SECRET must be at least 32 bytes (check JWT_SECRET)")
  })

  it("the generated secret is written whole before it is in place, and one cut short names its file, not JWT_SECRET", async () => {
    const dataDir = scratchDir("aigw-jwt-")
    const secret = async () => Effect.runPromiseExit(Effect.provide(Jwt.make, GatewayConfig.layer({ dataDir })))
    expect(Exit.isSuccess(await secret())).toBe(true)
    const file = path.join(dataDir, "jwt-secret")
    const generated = fs.readFileSync(file, "utf8")
    expect([generated.length, fs.statSync(file).mode & 0o777, fs.readdirSync(dataDir)]).toEqual([64, 0o600, ["jwt-secret"]])
    // Kept across starts.
    expect(Exit.isSuccess(await secret())).toBe(true)
    expect(fs.readFileSync(file, "utf8")).toBe(generated)
    fs.writeFileSync(file, "short")
    const cut = await secret()
    if (Exit.isSuccess(cut)) throw new Error("expected the cut secret to be refused")
    expect(oneLine(describeStartupFailure(cut.cause))).toBe(
      `aigw: ${file} holds 5 bytes, not the generated secret of 64 (a secret needs at least 32) (delete it to have a new one generated (tokens signed with the old one stop working), or set JWT_SECRET)`
    )
  })

  it("a tracing endpoint that is no URL stops the start, naming it", async () => {
    const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(Tracing.layerFromEnv)).pipe(
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["OTEL_EXPORTER_OTLP_ENDPOINT", "notaurl"]])))
    ))
    if (Exit.isSuccess(exit)) throw new Error("expected the endpoint to be refused")
    expect(oneLine(describeStartupFailure(exit.cause))).toContain("OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL")
  })

  it("an unknown plan in AIGW_PLAN_LIMITS is refused with the valid plan names", async () => {
    const line = await configFailure({ AIGW_PLAN_LIMITS: '{"Fre":100}' })
    expect(line).toBe(
      'aigw: invalid configuration: AIGW_PLAN_LIMITS: unknown plan "Fre"; the plans are Free, Bronze, Silver, Gold, Enterprise (check AIGW_PLAN_LIMITS)'
    )
    expect(await configFailure({ AIGW_PLAN_LIMITS: '{"Gold":-1}' })).toContain("the limit of Gold must be a non-negative integer")
    expect(await configFailure({ AIGW_PLAN_LIMITS: "not json" })).toContain("(check AIGW_PLAN_LIMITS)")
    const ok = await Effect.runPromise(
      Effect.provide(GatewayConfig.fromEnv, Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AIGW_PLAN_LIMITS", '{"Gold":50000}']]))))
    )
    expect(ok.planLimits).toMatchObject({ Free: 100, Gold: 50_000 })
  })

  it("an unwritable data directory is refused at start, naming AIGW_DATA_DIR", async () => {
    const dir = scratchDir("aigw-startup-")
    fs.writeFileSync(path.join(dir, "file"), "")
    const line = await configFailure({ AIGW_DATA_DIR: path.join(dir, "file", "data") })
    expect(line).toContain(`cannot write to the data directory ${path.join(dir, "file", "data")}`)
    expect(line).toContain("(check AIGW_DATA_DIR)")
    await Effect.runPromise(ensureWritableDir(path.join(dir, "fresh", "data"), "AIGW_DATA_DIR"))
    expect(fs.readdirSync(path.join(dir, "fresh", "data"))).toEqual([])
  })

  it.runIf(fs.existsSync("/proc/self"))("a data directory under /proc is refused at once (node's recursive mkdir spins there forever)", async () => {
    const line = await configFailure({ AIGW_DATA_DIR: "/proc/aigw-test/data" })
    expect(line).toBe("aigw: cannot write to the data directory /proc/aigw-test/data: no such file or directory (check AIGW_DATA_DIR)")
  }, 5_000)

  it("an unreachable PostgreSQL names the URL without its password and DATABASE_URL", async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = srv.address() as net.AddressInfo
        srv.close(() => resolve(port))
      })
    })
    const exit = await Effect.runPromiseExit(Layer.build(Database.layerClient(`postgres://u:secret@127.0.0.1:${port}/db`)).pipe(Effect.scoped))
    if (Exit.isSuccess(exit)) throw new Error("expected a failure")
    expect(oneLine(describeStartupFailure(exit.cause))).toBe(
      `aigw: cannot reach the database at postgres://u:***@127.0.0.1:${port}/db: connection refused (check DATABASE_URL)`
    )
  })

  it("an unsupported DATABASE_URL scheme names DATABASE_URL", () => {
    let line = ""
    try {
      Database.kindOf("mysql://u:secret@h/db")
    } catch (e) {
      line = describeStartupFailure(Cause.die(e))
    }
    expect(line).toBe('aigw: unsupported database URL "mysql:…" (DATABASE_URL must start with postgres://, postgresql:// or sqlite:)')
  })
})
