/** The AIGW_CONFIG file: unknown keys are refused with the key named; known keys are every variable aigw reads. */
import { Config, Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import * as ConfigFile from "../src/ConfigFile.ts"
import { limitVariables } from "../src/Config.ts"
import { StartupError } from "../src/StartupError.ts"
import { scratchDir } from "./support/scratch.ts"

const dir = scratchDir("aigw-configfile-")
let n = 0
const fileWith = (content: unknown) => {
  const file = path.join(dir, `config-${++n}.json`)
  fs.writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content))
  return file
}

const failureOf = (f: () => unknown): Error => {
  try {
    f()
  } catch (e) {
    return e as Error
  }
  throw new Error("expected a failure")
}

describe("AIGW_CONFIG file keys", () => {
  it("an unknown key stops the start, naming the key, the file and the likely intended variable", () => {
    const file = fileWith({ PROT: "8080", HOST: "127.0.0.1" })
    const error = failureOf(() => ConfigFile.providerFor(file))
    expect(error).toBeInstanceOf(StartupError)
    expect(error.message).toContain('unknown key "PROT"')
    expect(error.message).toContain('did you mean "PORT"?')
    expect(error.message).toContain(file)
    expect(error.message).toContain("AIGW_CONFIG")
  })

  it("names every unknown key; keys are case-sensitive like the environment", () => {
    const file = fileWith({ port: 1, SOMETHING_ELSE: "x", OPENIA_API_KEY: "k" })
    const { message } = failureOf(() => ConfigFile.providerFor(file))
    expect(message).toContain('unknown keys "port" (did you mean "PORT"?), "SOMETHING_ELSE", "OPENIA_API_KEY" (did you mean "OPENAI_API_KEY"?)')
  })

  it("variables read from the environment only are refused in the file", () => {
    const { message } = failureOf(() => ConfigFile.providerFor(fileWith({ AIGW_DEBUG: "1" })))
    expect(message).toContain('"AIGW_DEBUG"')
    expect(message).toContain("environment only")
    expect(failureOf(() => ConfigFile.providerFor(fileWith({ AIGW_CONFIG: "/x.json" }))).message).toContain('"AIGW_CONFIG"')
    // Read by the launcher of npm start and the image (scripts/node.sh) before node starts: a file cannot set it.
    expect(failureOf(() => ConfigFile.providerFor(fileWith({ AIGW_SINGLE_THREADED_GC: "true" }))).message).toContain('"AIGW_SINGLE_THREADED_GC" in')
  })

  it("takes an empty value, in the environment or the file, as unset: the default, never an empty secret or host", async () => {
    const saved = { ...process.env }
    process.env.WEBHOOK_SECRET = ""
    process.env.HOST = ""
    process.env.AIGW_MAX_BODY_BYTES = ""
    try {
      const read = (file: string | undefined) =>
        Effect.runPromise(Effect.withConfigProvider(
          Config.all([Config.option(Config.string("WEBHOOK_SECRET")), Config.string("HOST").pipe(Config.withDefault("127.0.0.1")), Config.integer("AIGW_MAX_BODY_BYTES").pipe(Config.withDefault(10)), Config.option(Config.string("PUBLIC_URL"))]),
          ConfigFile.providerFor(file)
        ))
      const [secret, host, bytes, publicUrl] = await read(fileWith({ PUBLIC_URL: "" }))
      expect([secret._tag, host, bytes, publicUrl._tag]).toEqual(["None", "127.0.0.1", 10, "None"])
    } finally {
      for (const k of ["WEBHOOK_SECRET", "HOST", "AIGW_MAX_BODY_BYTES"]) {
        if (saved[k] === undefined) delete process.env[k]
        else process.env[k] = saved[k]
      }
    }
  })

  it("accepts every variable of Config.ts, the limits, the hosts' variables and catalogued providers' keys", () => {
    const keys = [
      ...ConfigFile.generalVariables,
      ...Object.values(limitVariables),
      "OPENAI_API_KEY",
      "ANTHROPIC_BASE_URL",
      "TOGETHER_AI_API_KEY",
      "GMI_CLOUD_BASE_URL"
    ]
    const file = fileWith(Object.fromEntries(keys.map((k) => [k, "1"])))
    expect(() => ConfigFile.providerFor(file)).not.toThrow()
    // Saved with a byte order mark.
    fs.writeFileSync(file, `\uFEFF${fs.readFileSync(file, "utf8")}`)
    expect(() => ConfigFile.providerFor(file)).not.toThrow()
    expect(ConfigFile.checkKeys(["NOT_A_PROVIDER_API_KEY"], "f.json")).toContain('"NOT_A_PROVIDER_API_KEY"')
  })

  it("every variable the sources read through Config is a known key (no variable is forgotten here)", () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")
    const sources: Array<string> = []
    const walk = (d: string) => {
      for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, entry.name)
        if (entry.isDirectory()) walk(p)
        else if (entry.name.endsWith(".ts")) sources.push(p)
      }
    }
    walk(path.join(root, "packages/core/src"))
    for (const host of fs.readdirSync(path.join(root, "hosts"))) {
      if (fs.existsSync(path.join(root, "hosts", host, "src"))) walk(path.join(root, "hosts", host, "src"))
    }
    const read = new Set<string>()
    for (const file of sources) {
      // Config.string("NAME"), Config.literal(…)("NAME"), …
      for (const m of fs.readFileSync(file, "utf8").matchAll(/Config\.\w+(?:\([^()]*\))?\(\s*"([A-Z][A-Z0-9_]*)"/g)) read.add(m[1]!)
    }
    expect(read.size).toBeGreaterThan(20)
    const known = ConfigFile.knownVariables()
    const missing = [...read].filter((name) => !known.has(name) && !ConfigFile.environmentOnly.includes(name))
    expect(missing).toEqual([])
  })

  it("the file's values are read (the environment wins); the layer fails lazily with a StartupError", async () => {
    const file = fileWith({ AIGW_JOB_POLL_MS: 1234, AIGW_PLAN_LIMITS: { Free: 5 } })
    const value = await Effect.runPromise(
      Effect.all([Config.integer("AIGW_JOB_POLL_MS"), Config.string("AIGW_PLAN_LIMITS")]).pipe(Effect.provide(ConfigFile.layer(file)))
    )
    expect(value).toEqual([1234, '{"Free":5}'])

    const bad = ConfigFile.layer(fileWith({ AIGW_JOB_POL_MS: 1 }))
    const exit = await Effect.runPromiseExit(Effect.provide(Effect.void, bad))
    expect(Exit.isFailure(exit)).toBe(true)
    if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain('unknown key "AIGW_JOB_POL_MS"')
    const missing = await Effect.runPromiseExit(Effect.provide(Effect.void, ConfigFile.layer(path.join(dir, "nope.json"))))
    expect(Exit.isFailure(missing)).toBe(true)
  })
})
