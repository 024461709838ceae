#!/usr/bin/env node
/**
 * The soak run: does the gateway's memory stay flat over a long life of varied and hostile traffic?
 *
 *   npm run soak        (SOAK_PHASES [4] phases of SOAK_SECONDS [60] each after SOAK_WARMUP_SECONDS [20], SOAK_CONNS [16] connections)
 *
 * Starts the mock upstream and the gateway as `npm start` runs it (its launcher, V8 flags and C library
 * settings; SQLite in a scratch directory), creates an account, an API key and a JWT through the API, then
 * drives a mix in which nearly every request carries values never seen before: unknown API keys and JWTs,
 * model names, request ids, paths, user names at login, extraction schemas, MCP clients, documents, code,
 * client addresses (127.0.0.2-127.0.0.254, all loopback), malformed bodies, streams the client drops after
 * the first event, beside ordinary calls and streams. After each phase the server's heap is collected
 * (twice, through the inspector, which the process opens on SIGUSR1 at a port it picks) and its live heap
 * (without V8's code space), its external memory, its RSS and the SQLite file and write-ahead log read.
 *
 * A structure keyed by such values and never evicted grows the heap phase after phase. Heap snapshots after
 * the first phase and the last say what grew, by kind and constructor; the run fails (exit 1) when the
 * objects other than V8's own code and feedback (which grow as the optimiser reaches more of the mix, and
 * level off), with external memory, grew more than SOAK_MAX_GROWTH_MB [4] per 100,000 requests, or when a
 * request gets no answer or another status than its kind expects. (A snapshot takes a hundred MB or more
 * of the server's memory for a moment: the peak RSS after the first phase is the snapshot's.)
 * SOAK_DATABASE_URL runs it on another database (a PostgreSQL one: postgres://...) instead of a scratch SQLite file.
 * SOAK_KINDS (a regular expression) sends only the kinds whose names match.
 * Figures and the latest run: docs/performance.md, "The soak run".
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
// ws: a dependency of @effect/platform-node (Node 20 has no WebSocket client of its own)
import WebSocket from "ws"
import { nodeLauncher, startEnvironment, startNodeOptions } from "../scripts/node-options.mjs"
import { createApiKey } from "./lib/aigw-account.mjs"
import { freePort } from "./lib/ports.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const phases = Number(process.env.SOAK_PHASES ?? 4)
const seconds = Number(process.env.SOAK_SECONDS ?? 60)
const conns = Number(process.env.SOAK_CONNS ?? 16)
const maxGrowthMb = Number(process.env.SOAK_MAX_GROWTH_MB ?? 4)
const log = (m) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${m}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "aigw-soak-"))
const groups = []
const cleanup = () => {
  for (const g of groups) {
    try {
      process.kill(-g, "SIGKILL")
    } catch {}
  }
  fs.rmSync(tmp, { recursive: true, force: true })
}
process.on("exit", cleanup)
for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => process.exit(130))

/** A process in its own group (killed as a group at exit); resolves with it and its output so far once `ready` matches. */
const start = (argv, env, ready) =>
  new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true })
    groups.push(child.pid)
    // The output's last 64 KB: what it said at start, on SIGUSR1, or before it exited (the access log may run on).
    let out = ""
    let started = false
    const onData = (d) => {
      out = (out + d).slice(-65_536)
      const m = started ? null : ready.exec(out)
      if (m) {
        started = true
        resolve({ child, match: m, output: () => out })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => reject(new Error(`${argv.join(" ")} exited (${code}):\n${out.slice(-2000)}`)))
  })

const upstream = await start(["node", path.join(root, "bench/lib/mock-upstream.mjs")], { PORT: "0" }, /READY (\d+)/)
const upBase = `http://127.0.0.1:${upstream.match[1]}`
const dataDir = path.join(tmp, "data")
fs.mkdirSync(dataDir)
const port = await freePort()
const base = `http://127.0.0.1:${port}`
// As `npm start` starts node, with the inspector's port chosen at activation (SIGUSR1), not opened at start.
const gateway = await start(
  [...nodeLauncher(), ...startNodeOptions(), "--inspect-port=127.0.0.1:0", path.join(root, "scripts/start.mjs"), "node-http"],
  {
    ...startEnvironment(),
    NODE_ENV: "production",
    HOST: "127.0.0.1",
    PORT: String(port),
    AIGW_DATA_DIR: dataDir,
    DATABASE_URL: process.env.SOAK_DATABASE_URL ?? `sqlite:${path.join(dataDir, "aigw.sqlite")}`,
    AIGW_PLAN_LIMITS: JSON.stringify({ Free: 1_000_000_000 }),
    OPENAI_API_KEY: "sk-soak",
    OPENAI_BASE_URL: `${upBase}/v1`
  },
  /Listening on/
)
for (let i = 0; i < 100; i++) {
  if ((await fetch(`${base}/v1/health`).catch(() => undefined))?.ok) break
  await sleep(100)
}
const account = await createApiKey(base, dataDir)
log(`gateway pid ${gateway.child.pid} on ${base}, upstream ${upBase}, data in ${tmp}`)

// ---------------------------------------------------------------------------------------------------
// The server's memory: live heap after two full collections, through the inspector

let inspector
const inspect = async () => {
  if (!inspector) {
    process.kill(gateway.child.pid, "SIGUSR1")
    let url
    for (let i = 0; i < 100 && !url; i++) {
      url = /Debugger listening on (ws:\/\/\S+)/.exec(gateway.output())?.[1]
      if (!url) await sleep(50)
    }
    if (!url) throw new Error("the gateway did not open its inspector on SIGUSR1")
    const ws = new WebSocket(url)
    await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)))
    let id = 0
    const pending = new Map()
    const chunks = []
    ws.on("message", (m) => {
      const d = JSON.parse(m)
      if (d.method === "HeapProfiler.addHeapSnapshotChunk") chunks.push(d.params.chunk)
      pending.get(d.id)?.(d)
      pending.delete(d.id)
    })
    inspector = (method, params = {}) =>
      new Promise((r) => {
        pending.set(++id, r)
        ws.send(JSON.stringify({ id, method, params }))
      })
    inspector.close = () => ws.close()
    /** A heap snapshot (after a collection), parsed. */
    inspector.snapshot = async () => {
      chunks.length = 0
      await inspector("HeapProfiler.takeHeapSnapshot", { reportProgress: false })
      return JSON.parse(chunks.join(""))
    }
  }
  return inspector
}

const status = (field) => Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(fs.readFileSync(`/proc/${gateway.child.pid}/status`, "utf8"))?.[1] ?? NaN) / 1024

const measure = async () => {
  const call = await inspect()
  await call("HeapProfiler.collectGarbage")
  await call("HeapProfiler.collectGarbage")
  // V8's compiled code is left out of the live heap: it grows as the optimiser reaches more of the mix, and levels off.
  const expression = `JSON.stringify({ ...process.memoryUsage(), code: require("v8").getHeapSpaceStatistics().filter((s) => s.space_name.startsWith("code")).reduce((n, s) => n + s.space_used_size, 0) })`
  const r = await call("Runtime.evaluate", { expression, includeCommandLineAPI: true, returnByValue: true })
  const m = JSON.parse(r.result.result.value)
  m.heapUsed -= m.code
  const fileMb = (suffix) => (fs.statSync(path.join(dataDir, `aigw.sqlite${suffix}`), { throwIfNoEntry: false })?.size ?? NaN) / 1048576
  return { heapMb: m.heapUsed / 1048576, externalMb: m.external / 1048576, rssMb: status("VmRSS"), hwmMb: status("VmHWM"), dbMb: fileMb(""), walMb: fileMb("-wal") }
}

/** A heap snapshot's objects by type and constructor (or string, code, ...): count and bytes. */
const census = (snapshot) => {
  const { node_fields: fields, node_types: [types] } = snapshot.snapshot.meta
  const [typeAt, nameAt, sizeAt, step] = [fields.indexOf("type"), fields.indexOf("name"), fields.indexOf("self_size"), fields.length]
  const out = new Map()
  const nodes = snapshot.nodes
  for (let i = 0; i < nodes.length; i += step) {
    const type = types[nodes[i + typeAt]]
    // Strings and code by kind only: their "names" are their text.
    const key = type === "object" || type === "closure" || type === "native" ? `${type} ${snapshot.strings[nodes[i + nameAt]]}` : type
    const c = out.get(key) ?? { count: 0, bytes: 0 }
    c.count++
    c.bytes += nodes[i + sizeAt]
    out.set(key, c)
  }
  return out
}

// ---------------------------------------------------------------------------------------------------
// The traffic

const chatBody = JSON.parse(fs.readFileSync(path.join(root, "bench/bodies/chat.json"), "utf8"))
const agent = new http.Agent({ keepAlive: true, maxSockets: conns * 2 })
let seq = 0
const unique = () => `${process.pid.toString(36)}${(++seq).toString(36)}${Math.random().toString(36).slice(2, 8)}`
const json = (o) => JSON.stringify(o)

/** One request; resolves with its status once the answer ended (or, with `dropAfterFirst`, once the client dropped it). */
const send = (request) =>
  new Promise((resolve) => {
    const { method = "POST", route, headers = {}, body, localAddress, dropAfterFirst = false, retried = false } = request
    const req = http.request(
      `${base}${route}`,
      { method, agent: dropAfterFirst ? false : agent, localAddress, headers: { "content-type": "application/json", ...headers } },
      (res) => {
        res.on("data", () => {
          if (dropAfterFirst) {
            req.destroy()
            resolve(res.statusCode)
          }
        })
        res.on("end", () => resolve(res.statusCode))
        res.on("error", () => resolve(res.statusCode))
      }
    )
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")))
    req.on("error", (e) => {
      if (dropAfterFirst && e.code === "ECONNRESET") return resolve(0)
      // A kept-alive socket the server closed at its idle timeout as this request went out (the pauses between
      // phases): sent again once on a new socket, as node's documentation advises for `reusedSocket`.
      if (req.reusedSocket && e.code === "ECONNRESET" && !retried) return resolve(send({ ...request, retried: true }))
      resolve(`error ${e.message}`)
    })
    req.end(body)
  })

const key = { authorization: `Bearer ${account.apiKey}` }
const chat = "/openai/v1/chat/completions"
/** The mix: each kind's weight, the statuses it may get, and the request it sends (values unique per request where a client picks them). */
const kinds = [
  [6, "chat", [200], () => ({ route: chat, headers: { ...key, "x-request-id": unique() }, body: json(chatBody) })],
  [3, "stream", [200], () => ({ route: chat, headers: key, body: json({ ...chatBody, stream: true, stream_options: { include_usage: true } }) })],
  [2, "chat, JWT", [200], () => ({ route: chat, headers: { authorization: `Bearer ${account.jwt}` }, body: json(chatBody) })],
  [2, "stream dropped after its first event", [0, 200], () => ({ route: chat, headers: key, body: json({ ...chatBody, stream: true }), dropAfterFirst: true })],
  [2, "unknown model", [404], () => ({ route: chat, headers: key, body: json({ ...chatBody, model: `soak-${unique()}` }) })],
  [2, "unknown model on /v1/complete", [404], () => ({ route: "/v1/complete", headers: key, body: json({ messages: chatBody.messages, model: `soak-${unique()}` }) })],
  [3, "unknown API key", [401], () => ({ route: chat, headers: { authorization: `Bearer aigw_${unique()}` }, body: json(chatBody) })],
  [2, "forged JWT", [401], () => ({ route: chat, headers: { authorization: `Bearer eyJhbGciOiJIUzI1NiJ9.${Buffer.from(json({ sub: unique() })).toString("base64url")}.${unique()}` }, body: json(chatBody) })],
  [2, "malformed body", [400], () => ({ route: chat, headers: key, body: `{"model":"gpt-4o-mini","messages":[${unique()}` })],
  [2, "unknown field on /v1/complete", [400], () => ({ route: "/v1/complete", headers: key, body: json({ messages: chatBody.messages, [`x_${unique()}`]: 1 }) })],
  [2, "unknown path", [404], () => ({ method: "GET", route: `/v1/${unique()}?q=${unique()}`, headers: key })],
  // The envelope's isError says the login failed (avatar-api.md), with 200 or 401 as the status; 429 once an
  // address passed AIGW_LOGIN_MAX_FAILURES_PER_ADDRESS in a window (a long run).
  [1, "login, unknown user", [200, 401, 429], () => ({ route: "/api/avatar/authenticate", body: json({ username: `u${unique()}`, password: "wrong password 1" }) })],
  [1, "embeddings", [200], () => ({ route: "/v1/embeddings", headers: key, body: json({ provider: "openai", model: "text-embedding-3-small", texts: [unique()] }) })],
  // Stateless MCP: a batch of initialize (a client never seen before) and a tool call.
  [1, "MCP: initialize and a tool call", [200], () => ({
    route: "/mcp",
    headers: { ...key, accept: "application/json, text/event-stream" },
    body: json([
      { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: `soak-${unique()}`, version: "1.0.0" } } },
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "gateway_list_models", arguments: {} } }
    ])
  })],
  // A sandbox process each: a full pool or the avatar's own limit answer 503 or 429.
  [1, "code, JavaScript", [200, 429, 503], () => ({ route: "/v1/code/execute", headers: key, body: json({ language: "javascript", code: `console.log(${json(unique())})` }) })],
  [1, "document, text", [200], () => {
    const boundary = `soak${unique()}`
    const text = `A document of its own: ${unique()}\n`.repeat(20)
    return {
      route: "/v1/documents/parse",
      headers: { ...key, "content-type": `multipart/form-data; boundary=${boundary}` },
      body: `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="${unique()}.txt"\r\ncontent-type: text/plain\r\n\r\n${text}\r\n--${boundary}--\r\n`
    }
  }],
  // A schema of its own each time (the mock's answer is prose, not the object asked for: a 502 after the schema compiled).
  [1, "extract, a schema of its own", [502], () => ({
    route: "/v1/extract",
    headers: key,
    body: json({ text: "Ada is 36.", schema: { type: "object", properties: { [`name_${unique()}`]: { type: "string", pattern: `^${unique()}` } } } })
  })]
]
// A sandbox run costs a process start, hundreds of calls' CPU: a quarter of the others' weight keeps the mix's rate.
// SOAK_KINDS: a regular expression; only the kinds whose names match are sent (to find which one grows).
const only = process.env.SOAK_KINDS ? new RegExp(process.env.SOAK_KINDS, "i") : undefined
const table = kinds.filter(([, name]) => only === undefined || only.test(name)).flatMap(([w, name, expected, make]) => Array.from({ length: name.startsWith("code") ? w : 4 * w }, () => [name, expected, make]))

const counts = new Map()
const problems = []
const drive = async (ms) => {
  const until = Date.now() + ms
  let n = 0
  let address = 0
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (Date.now() < until) {
        const [name, expected, make] = table[Math.floor(Math.random() * table.length)]
        // every client address of 127.0.0.0/8 but .0, .1 and .255, in turn
        const localAddress = `127.0.0.${2 + (address++ % 253)}`
        const got = await send({ ...make(), localAddress })
        n++
        const k = `${name}: ${got}`
        counts.set(k, (counts.get(k) ?? 0) + 1)
        if (!expected.includes(got)) {
          problems.push(k)
          if (problems.length <= 5) log(`unexpected: ${k}`)
        }
      }
    })
  )
  return n
}

// ---------------------------------------------------------------------------------------------------

// Heap snapshots after the first phase and the last: what grew between them, by kind and constructor.
const censuses = []
const rows = []
const warmup = Number(process.env.SOAK_WARMUP_SECONDS ?? 20)
await drive(warmup * 1000)
rows.push({ phase: `warm-up (${warmup} s)`, requests: 0, ...(await measure()) })
let total = 0
for (let p = 1; p <= phases; p++) {
  const n = await drive(seconds * 1000)
  total += n
  rows.push({ phase: `${p}`, requests: total, ...(await measure()) })
  if (p === 1 || p === phases) censuses.push(census(await (await inspect()).snapshot()))
  const r = rows.at(-1)
  log(`phase ${p}: ${n} requests; live heap ${r.heapMb.toFixed(1)} MB, external ${r.externalMb.toFixed(1)} MB, RSS ${r.rssMb.toFixed(0)} MB (peak ${r.hwmMb.toFixed(0)})`)
}
inspector?.close()
agent.destroy()

const first = rows[1]
const last = rows.at(-1)
const per100k = (mb) => (mb / Math.max(1, last.requests - first.requests)) * 100_000
const signed = (v) => `${v >= 0 ? "+" : ""}${v.toFixed(2)}`
// The SQLite file and its write-ahead log (n/a on another database): the log must not grow without end either.
const mb = (v) => (Number.isNaN(v) ? "n/a" : v.toFixed(1))
console.log(`\n| after phase | requests | live heap MB (no code space) | external MB | RSS MB | peak RSS MB | SQLite MB | its WAL MB |\n|---|---:|---:|---:|---:|---:|---:|---:|`)
for (const r of rows) console.log(`| ${r.phase} | ${r.requests.toLocaleString("en")} | ${r.heapMb.toFixed(1)} | ${r.externalMb.toFixed(1)} | ${r.rssMb.toFixed(0)} | ${r.hwmMb.toFixed(0)} | ${mb(r.dbMb)} | ${mb(r.walMb)} |`)
const [a, b] = censuses
const grown = [...b].map(([k, v]) => ({ k, count: v.count - (a.get(k)?.count ?? 0), bytes: v.bytes - (a.get(k)?.bytes ?? 0) }))
// V8's own: bytecode and optimised code, and their feedback, which grow as more of the mix is compiled and level off.
const ours = grown.filter((g) => g.k !== "code" && g.k !== "hidden").reduce((n, g) => n + g.bytes, 0) / 1048576
const growth = per100k(ours + last.externalMb - first.externalMb)
console.log(`\nFrom phase 1 to ${phases}: live heap ${signed(per100k(last.heapMb - first.heapMb))} MB per 100,000 requests; objects other than V8's code and feedback, with external memory, ${signed(growth)} MB per 100,000 requests (limit ${maxGrowthMb})`)
console.log(`\nWhat grew (heap snapshots), the 20 largest:\n\n| objects | count | bytes |\n|---|---:|---:|`)
for (const g of grown.sort((x, y) => y.bytes - x.bytes).slice(0, 20)) console.log(`| ${g.k.replace(/\|/g, "\\|").slice(0, 80)} | ${g.count.toLocaleString("en")} | ${g.bytes.toLocaleString("en")} |`)
console.log(`\n| request | answered | count |\n|---|---|---:|`)
for (const [k, v] of [...counts].sort()) console.log(`| ${k.replace(/: (\S+)$/, " | $1")} | ${v.toLocaleString("en")} |`)
const failed = growth > maxGrowthMb || problems.length > 0
if (problems.length > 0) console.log(`\n${problems.length} requests got no answer or an unexpected status: ${[...new Set(problems)].join("; ")}`)
process.exit(failed ? 1 : 0)
