#!/usr/bin/env node
/**
 * Cold-start figures of the built bundle (run `npm run build -w hosts/lambda` first):
 * fresh `node` processes each import dist/handler.mjs and answer two `GET /v1/health`
 * HTTP API events; the first one builds the runtime (configuration, layers, PostgreSQL pool with
 * its connection check, schema check, router).
 *
 *   AIGW_TEST_PG_URL=postgres://… node hosts/lambda/scripts/measure-init.mjs [runs]
 *
 * Prints, per phase, the median and the slowest run in ms:
 *   node start  process start -> first line of this script (the Node.js runtime itself)
 *   load        import of the bundle (parse + module evaluation, argon2 binding)
 *   first call  first invocation = runtime build + the request
 *   warm call   second invocation on the built runtime
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const t0 = performance.now()
const here = path.dirname(fileURLToPath(import.meta.url))
const bundle = path.join(here, "..", "dist", "handler.mjs")
const healthEvent = {
  version: "2.0",
  routeKey: "$default",
  rawPath: "/v1/health",
  rawQueryString: "",
  headers: { accept: "application/json", host: "id.execute-api.us-east-1.amazonaws.com" },
  requestContext: { domainName: "id.execute-api.us-east-1.amazonaws.com", stage: "$default", http: { method: "GET", path: "/v1/health" } },
  isBase64Encoded: false
}

const mode = process.argv[2]
if (mode === "--child") {
  const mod = await import(bundle)
  const t1 = performance.now()
  const first = await mod.handler(healthEvent)
  const t2 = performance.now()
  const warm = await mod.handler(healthEvent)
  const t3 = performance.now()
  if (first.statusCode !== 200 || warm.statusCode !== 200) throw new Error(`health answered ${first.statusCode}: ${first.body}`)
  process.stdout.write(`\n@@${JSON.stringify({ nodeStart: t0, load: t1 - t0, first: t2 - t1, warm: t3 - t2 })}\n`)
  process.exit(0)
} else if (mode === "--migrate") {
  const mod = await import(bundle)
  await mod.migrate()
  process.exit(0)
}

if (!fs.existsSync(bundle)) throw new Error("build first: npm run build -w hosts/lambda")
const base = process.env.AIGW_TEST_PG_URL
if (!base) throw new Error("set AIGW_TEST_PG_URL (eval \"$(bash .ci/pg.sh start)\")")
const runs = Number(process.argv[2] ?? 10)

const require = createRequire(path.join(here, "..", "..", "..", "packages", "core", "package.json"))
const pg = require("pg")
const name = `aigw_init_${Date.now().toString(36)}`
const admin = new pg.Client({ connectionString: base })
await admin.connect()
await admin.query(`CREATE DATABASE ${name}`)
await admin.end()
const url = new URL(base)
url.pathname = `/${name}`

const env = {
  PATH: process.env.PATH ?? "",
  DATABASE_URL: url.toString(),
  JWT_SECRET: "measure-init-secret-0123456789abcdef",
  PUBLIC_URL: "https://gateway.example.com",
  AIGW_DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), "aigw-init-"))
}
// argon2 0.45's prebuilds need Node-API 10 (Node >= 22.14); older Node uses npm's source build.
if (Number(process.versions.napi) < 10) env.ARGON2_PREBUILD = path.dirname(require.resolve("argon2/package.json"))

execFileSync(process.execPath, [fileURLToPath(import.meta.url), "--migrate"], { env, stdio: "ignore" })
const samples = []
for (let i = 0; i < runs; i++) {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), "--child"], { env }).toString()
  samples.push(JSON.parse(out.slice(out.lastIndexOf("@@") + 2)))
}
const stat = (key) => {
  const v = samples.map((s) => s[key]).sort((a, b) => a - b)
  return `${v[Math.floor(v.length / 2)].toFixed(0).padStart(5)} ms median, ${v.at(-1).toFixed(0).padStart(5)} ms max`
}
const size = fs.statSync(bundle).size
console.log(`node ${process.version} ${process.arch}, ${os.cpus()[0]?.model ?? "cpu"}, ${runs} runs; bundle ${(size / 1024).toFixed(0)} KiB`)
console.log(`node start ${stat("nodeStart")}`)
console.log(`load       ${stat("load")}`)
console.log(`first call ${stat("first")}`)
console.log(`warm call  ${stat("warm")}`)
