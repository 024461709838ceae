#!/usr/bin/env node
/**
 * aigw overhead benchmark: `npm run bench` at the repository root. See docs/performance.md.
 *
 * One interleaved run on this machine, everything on 127.0.0.1:
 *   direct       the mock OpenAI upstream itself (bench/lib/mock-upstream.mjs), no hop
 *   proxy        a bare node:http reverse proxy with a keep-alive agent (bench/lib/proxy.mjs): the limit
 *   floor        the least work of a metered gateway that answers in its own name (bench/lib/floor.mjs:
 *                parse, one admission, the exchange, the answer re-serialised, one record; SQLite, group commit)
 *   portkey      @portkey-ai/gateway 1.15.2 as published on npm (installed under bench/ only)
 *   aigw-sqlite  our node host as `npm start` runs it (hosts/node-http/dist/aigw.mjs, its flags and environment), on SQLite
 *   aigw-pg      the same on PostgreSQL (a throw-away cluster from .ci/pg.sh)
 *   aigw-sqlite-effect, aigw-pg-effect  the same with AIGW_FAST_LANE=false: every request through the
 *                Effect app, the path of the Lambda host, the MCP server and the routes without a lane
 *                (not in the default targets; "-effect", "-xN" and "-before" combine in that order)
 * aigw runs its full path: API-key auth, atomic quota admission, routing to provider `openai`
 * (OPENAI_BASE_URL = the mock), usage recording, on POST /openai/v1/chat/completions.
 * Scenarios (SCENARIOS): chat (every target), jwt (the same chat call with the avatar's JWT instead of the
 * API key; aigw targets), embeddings (POST /v1/embeddings with the API key; aigw targets), translate
 * (POST /v1/translate with the API key: a chat-model task endpoint; aigw targets), rerank (POST /v1/rerank,
 * BM25 in-process: no rerank provider is configured), guardrails (POST /v1/guardrails/check, the
 * in-process rules) and moderation (POST /v1/moderation on provider openai: a route whose own Effects
 * the lane runs, Lane.onLane); aigw targets.
 *
 * Knobs (environment): ROUNDS [3], DURATION [7] and WARMUP [3] seconds per load run, CONNS ["1 16 64"],
 * SSE_CONNS ["1 16 64"], STREAM_N [200], STREAM_WARMUP [20], PACED_N [10], PACED_MS [5],
 * TARGETS ["direct proxy floor portkey aigw-sqlite aigw-pg"], SCENARIOS ["chat jwt embeddings translate rerank guardrails moderation"], CLIENT_CPUS [0], SERVER_CPUS [1], PG_CPUS [CLIENT_CPUS], PIN [auto],
 * AIGW_RUNNER [bundle | tsx], AIGW_BUNDLE [a prebuilt bundle instead of building one], STAGES [1],
 * AIGW_BEFORE_BUNDLE [with targets aigw-sqlite-before / aigw-pg-before: A/B against another build],
 * AIGW_NODE_FLAGS [the V8 flags of `npm start`], AIGW_BEFORE_NODE_FLAGS [AIGW_NODE_FLAGS; for the -before targets],
 * AIGW_NODE_ENV [the variables `npm start` sets, as "NAME=value …"], AIGW_BEFORE_NODE_ENV [AIGW_NODE_ENV; for the -before targets],
 * PROFILE [0], RESULTS_DIR [bench/results/<timestamp>], RESTART [0; 1: a fresh process of each aigw target
 * for every round after the first, so that its medians are over processes, not over one process's rounds].
 * Scaling (docs/performance.md, "Scaling out"): a target aigw-pg-xN (or aigw-sqlite-xN) runs AIGW_WORKERS=N;
 * SLICE [unset] gives each gateway process that fraction of one CPU (a cgroup quota of N x SLICE for the
 * target), PG_SLICE [unset] gives PostgreSQL a fraction of one CPU, so that a machine with a core per
 * process is modelled on this one. Needs root (cgroups). UPSTREAM_CPUS [SERVER_CPUS]: the mock upstream's CPUs.
 * Quick run: ROUNDS=1 DURATION=3 WARMUP=1 npm run bench
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { nodeLauncher, parseAssignments, startEnvironment, startNodeOptions } from "../scripts/node-options.mjs"
import { cpuSlice } from "./lib/cpu-slice.mjs"
import { freePort } from "./lib/ports.mjs"

const bench = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(bench, "..")
const lib = path.join(bench, "lib")
const env = process.env
const num = (name, dflt) => Number(env[name] ?? dflt)
const list = (name, dflt) => (env[name] ?? dflt).split(/[\s,]+/).filter(Boolean)

const cfg = {
  rounds: num("ROUNDS", 3),
  duration: num("DURATION", 7),
  warmup: num("WARMUP", 3),
  conns: list("CONNS", "1 16 64").map(Number),
  sseConns: list("SSE_CONNS", "1 16 64").map(Number),
  streamN: num("STREAM_N", 200),
  streamWarmup: num("STREAM_WARMUP", 20),
  pacedN: num("PACED_N", 10),
  pacedMs: num("PACED_MS", 5),
  targets: list("TARGETS", "direct proxy floor portkey aigw-sqlite aigw-pg"),
  scenarios: list("SCENARIOS", "chat jwt embeddings translate rerank guardrails moderation"),
  clientCpus: env.CLIENT_CPUS ?? "0",
  serverCpus: env.SERVER_CPUS ?? "1",
  // PostgreSQL on another core than the gateway, as deployments run it (on 2 vCPUs: the client's)
  pgCpus: env.PG_CPUS ?? env.CLIENT_CPUS ?? "0",
  pin: env.PIN ?? "auto",
  runner: env.AIGW_RUNNER ?? "bundle",
  // aigw runs with the node options of `npm start` unless told otherwise ("" for none)
  nodeFlags: env.AIGW_NODE_FLAGS !== undefined ? list("AIGW_NODE_FLAGS", "") : startNodeOptions(),
  // and the environment it sets (the C library's malloc settings)
  nodeEnv: env.AIGW_NODE_ENV !== undefined ? parseAssignments(env.AIGW_NODE_ENV) : startEnvironment(),
  stages: (env.STAGES ?? "1") !== "0",
  profile: (env.PROFILE ?? "0") !== "0",
  slice: env.SLICE ? Number(env.SLICE) : undefined,
  pgSlice: env.PG_SLICE ? Number(env.PG_SLICE) : undefined,
  readyTimeout: num("READY_TIMEOUT", 60),
  // a fresh process of every aigw target for each round after the first (same database and key)
  restart: (env.RESTART ?? "0") !== "0"
}
const stamp = new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19)
const results = path.resolve(env.RESULTS_DIR ?? path.join(bench, "results", stamp))

const log = (...a) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...a)
const die = (msg) => {
  log(`ERROR: ${msg}`)
  process.exit(1)
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
const clkTck = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100
const has = (cmd) => spawnSync("sh", ["-c", `command -v ${cmd}`]).status === 0

// ------------------------------------------------------------------------------ preflight
const preflight = () => {
  if (!has("wrk")) {
    if (process.getuid?.() === 0 && has("apt-get")) {
      log("wrk is missing: apt-get install -y wrk")
      spawnSync("sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk"], { stdio: "inherit" })
    }
    if (!has("wrk")) die("wrk is required (Debian/Ubuntu: apt-get install wrk)")
  }
  if (!has("curl")) die("curl is required")
  const ncpu = os.availableParallelism?.() ?? os.cpus().length
  if (cfg.pin === "auto") cfg.pin = ncpu >= 2 && has("taskset") ? "1" : "0"
  const portkeyPkg = path.join(bench, "node_modules/@portkey-ai/gateway/package.json")
  const wanted = { "@portkey-ai/gateway": "1.15.2", "@hono/node-server": "1.13.5", hono: "4.9.7" }
  const installed = Object.entries(wanted).every(([p, v]) => {
    try {
      return JSON.parse(fs.readFileSync(path.join(bench, "node_modules", p, "package.json"), "utf8")).version === v
    } catch {
      return false
    }
  })
  if (cfg.targets.includes("portkey") && !installed) {
    log(`installing the bench's own dependencies (${Object.entries(wanted).map(([p, v]) => `${p}@${v}`).join(", ")}) under bench/`)
    const r = spawnSync("npm", ["install", "--prefix", bench, "--no-audit", "--no-fund"], {
      stdio: "inherit",
      env: { ...env, npm_config_nodedir: env.npm_config_nodedir ?? "/usr" }
    })
    if (r.status !== 0 || !fs.existsSync(portkeyPkg)) die("npm install --prefix bench failed")
  }
  return ncpu
}

// ---------------------------------------------------------------------- process bookkeeping
/** Process groups started here (each child is its own group leader), stopped on any exit. */
const groups = new Set()
let pg = null // { url, dir, postmaster }
let current = null // the running client child
const slices = [] // CPU slices (cgroups) made for this run

const groupPids = (pgid) => {
  const out = []
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue
    try {
      const f = statOf(Number(d))
      if (Number(f[2]) === pgid && f[0] !== "Z") out.push(Number(d))
    } catch {}
  }
  return out
}
const statOf = (pid) => {
  const s = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  return s.slice(s.lastIndexOf(")") + 2).split(" ") // [0]=state [1]=ppid [2]=pgrp ... [11]=utime [12]=stime
}
const ticks = (pids) =>
  pids.reduce((sum, pid) => {
    try {
      const f = statOf(pid)
      return sum + Number(f[11]) + Number(f[12])
    } catch {
      return sum
    }
  }, 0)
const memKb = (pids) =>
  pids.reduce((acc, pid) => {
    try {
      const s = fs.readFileSync(`/proc/${pid}/status`, "utf8")
      acc.hwm += Number(/VmHWM:\s+(\d+)/.exec(s)?.[1] ?? 0)
      acc.rss += Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0)
    } catch {}
    return acc
  }, { hwm: 0, rss: 0 })
const resetHwm = (pids) => pids.every((pid) => {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, "5")
    return true
  } catch {
    return false
  }
})
/** The PostgreSQL cluster's processes: the postmaster and its children (backends, checkpointer, ...). */
const pgPids = () => {
  if (!pg) return []
  const out = [pg.postmaster]
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue
    try {
      if (Number(statOf(Number(d))[1]) === pg.postmaster) out.push(Number(d))
    } catch {}
  }
  return out
}

/**
 * CPU ticks of the whole cluster, monotonic: the postmaster's own and its reaped children's
 * (cutime + cstime, so backends that exit during a run still count) plus the live children's.
 */
const pgTicks = () => {
  if (!pg) return 0
  let total = 0
  try {
    const f = statOf(pg.postmaster)
    total += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])
  } catch {}
  return total + ticks(pgPids().filter((pid) => pid !== pg.postmaster))
}

/** Sends `sig` to every process of a group (those already gone are skipped). */
const signalGroup = (group, sig) => {
  for (const pid of groupPids(group)) {
    try {
      process.kill(pid, sig)
    } catch {}
  }
}

const cleanup = () => {
  if (current) {
    try {
      process.kill(current.pid, "SIGTERM")
    } catch {}
  }
  for (const sig of ["SIGTERM", "SIGKILL"]) {
    for (const g of groups) signalGroup(g, sig)
    for (let i = 0; i < 50 && [...groups].some((g) => groupPids(g).length > 0); i++) sleepSync(100)
  }
  groups.clear()
  if (pg) {
    spawnSync("bash", [path.join(root, ".ci/pg.sh"), "stop", pg.dir], { stdio: "ignore" })
    pg = null
  }
  for (const slice of slices.splice(0)) slice.remove()
}
process.on("exit", cleanup)
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    log(`${sig}: stopping`)
    process.exit(130)
  })
}

const pin = (cpus) => (cfg.pin === "1" && cpus ? ["taskset", "-c", cpus] : [])

/** Starts a server in its own process group; resolves once `readyUrl` answers. */
const startServer = async (name, argv, { envExtra = {}, cwd = bench, readyUrl, cpus = cfg.serverCpus, slice } = {}) => {
  const out = fs.openSync(path.join(results, "logs", `${name}.log`), "a")
  const cmd = [...pin(cpus), ...(slice ? slice.wrap(argv) : argv)]
  const child = spawn(cmd[0], cmd.slice(1), { cwd, env: { ...env, ...envExtra }, stdio: ["ignore", out, out], detached: true })
  groups.add(child.pid)
  let exited = false
  child.on("exit", () => (exited = true))
  const deadline = Date.now() + cfg.readyTimeout * 1000
  while (Date.now() < deadline) {
    if (exited) die(`${name} exited during start; see ${path.join(results, "logs", `${name}.log`)}`)
    if (spawnSync("curl", ["-s", "-o", "/dev/null", "--max-time", "1", readyUrl]).status === 0) return child.pid
    await sleep(100)
  }
  die(`${name} did not answer at ${readyUrl} within ${cfg.readyTimeout}s`)
}

/** Stops one process group started here (TERM, then KILL after 5 s) and forgets it; `cleanup` does the same for all, synchronously. */
const stopGroup = async (group) => {
  for (const sig of ["SIGTERM", "SIGKILL"]) {
    signalGroup(group, sig)
    for (let i = 0; i < 50 && groupPids(group).length > 0; i++) await sleep(100)
    if (groupPids(group).length === 0) break
  }
  groups.delete(group)
}

/** Runs a client (wrk, stream client) pinned to the client CPUs; resolves with its stdout. */
const runClient = (argv, envExtra = {}) =>
  new Promise((resolve) => {
    const cmd = [...pin(cfg.clientCpus), ...argv]
    const child = spawn(cmd[0], cmd.slice(1), { env: { ...env, ...envExtra }, stdio: ["ignore", "pipe", "pipe"] })
    current = child
    let out = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (out += d))
    child.on("close", () => {
      current = null
      resolve(out)
    })
  })

const curlJson = (args) => {
  const r = spawnSync("curl", ["-s", "--max-time", "15", "-H", "Expect:", ...args], { encoding: "utf8" })
  return r.stdout
}

// ------------------------------------------------------------------------------ the run
const main = async () => {
  const ncpu = preflight()
  fs.mkdirSync(path.join(results, "logs"), { recursive: true })
  fs.mkdirSync(path.join(results, "targets"), { recursive: true })
  const rawFile = path.join(results, "raw.jsonl")
  const record = (row) => fs.appendFileSync(rawFile, JSON.stringify(row) + "\n")
  log(`results: ${path.relative(root, results)}`)

  // request bodies: JSON, stream, and the same for the sequential stream client
  const chatBody = path.join(bench, "bodies/chat.json")
  const body = JSON.parse(fs.readFileSync(chatBody, "utf8"))
  const sseBody = path.join(results, "targets/_body-stream.json")
  fs.writeFileSync(sseBody, JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }))
  // scenarios other than chat: their own route and body on the aigw targets; none of them streams
  const unstreamed = {
    embeddings: { route: "/v1/embeddings", body: path.join(bench, "bodies/embeddings.json"), valid: (out) => /"embeddings":\[\[-?\d/.test(out) },
    translate: { route: "/v1/translate", body: path.join(bench, "bodies/translate.json"), valid: (out) => /"translation":"Ein Gateway/.test(out) },
    rerank: { route: "/v1/rerank", body: path.join(bench, "bodies/rerank.json"), valid: (out) => /"model":"bm25"/.test(out) && /"results":\[\{"index":0/.test(out) },
    guardrails: { route: "/v1/guardrails/check", body: path.join(bench, "bodies/guardrails.json"), valid: (out) => /"flagged":true/.test(out) && /"prompt_injection"/.test(out) },
    moderation: { route: "/v1/moderation", body: path.join(bench, "bodies/moderation.json"), valid: (out) => /"flagged":false/.test(out) && /"provider":"openai"/.test(out) }
  }
  const scenarioNames = ["chat", "jwt", ...Object.keys(unstreamed)]
  for (const s of cfg.scenarios) if (!scenarioNames.includes(s)) die(`unknown scenario ${s} (${scenarioNames.join(", ")})`)

  // our gateway: `npm start`'s program, the bundle of the repository as it is (or run through tsx)
  let aigwArgv
  let stagesBundle = path.join(bench, ".build/stages.mjs")
  if (cfg.targets.some((t) => t.startsWith("aigw"))) {
    if (cfg.runner === "tsx") {
      aigwArgv = ["node", "--import", "tsx", path.join(root, "hosts/node-http/src/main.ts")]
    } else if (env.AIGW_BUNDLE) {
      // a bundle built elsewhere (e.g. `node bench/lib/build.mjs --out F --overlay DIR` for an A/B run)
      aigwArgv = ["node", path.resolve(env.AIGW_BUNDLE)]
      stagesBundle = path.resolve(env.AIGW_BUNDLE).replace(/\.mjs$/, "-stages.mjs")
      log(`using the prebuilt bundle ${env.AIGW_BUNDLE}`)
    } else {
      const { ensureBuilt } = await import("../scripts/build.mjs")
      const { hostBundle } = await import("../scripts/bundle.mjs")
      const { buildStages } = await import("./lib/build.mjs")
      ensureBuilt()
      const stages = cfg.stages ? await buildStages() : undefined
      log(`running ${path.relative(root, hostBundle)} (npm start's program)${stages ? `; bundled ${path.relative(root, stages.path)}` : ""}`)
      aigwArgv = ["node", hostBundle]
    }
    if (cfg.profile) aigwArgv.splice(1, 0, "-r", path.join(lib, "profile-preload.cjs"))
    aigwArgv.splice(1, 0, ...cfg.nodeFlags)
  }

  // PostgreSQL: a throw-away cluster, pinned to PG_CPUS (not the gateway's core), and a database per target
  const isPg = (name) => name.startsWith("aigw-pg")
  if (cfg.targets.some(isPg)) {
    const out = execFileSync("bash", ["-c", `${pin(cfg.pgCpus).join(" ")} bash ${path.join(root, ".ci/pg.sh")} start`], { encoding: "utf8" })
    const url = /AIGW_TEST_PG_URL=(\S+)/.exec(out)?.[1]
    const dir = /AIGW_TEST_PG_DIR=(\S+)/.exec(out)?.[1]
    if (!url || !dir) die(`could not start PostgreSQL: ${out}`)
    const postmaster = Number(fs.readFileSync(path.join(dir, "data/postmaster.pid"), "utf8").split("\n")[0])
    pg = { url, dir, postmaster }
    // a database per PostgreSQL target (aigw_pg, aigw_pg_before)
    for (const t of cfg.targets.filter(isPg)) execFileSync("psql", [url, "-q", "-c", `CREATE DATABASE ${t.replace(/-/g, "_")}`], { stdio: "ignore" })
    pg.base = url.replace(/\/[^/]*$/, "")
    if (cfg.pgSlice) {
      // the postmaster's later children (backends) join its group
      const slice = cpuSlice("postgres", cfg.pgSlice)
      slices.push(slice)
      for (const pid of pgPids()) slice.join(pid)
      log(`PostgreSQL in a CPU slice of ${cfg.pgSlice} CPU`)
    }
    log(`PostgreSQL ${pg.base} (postmaster ${postmaster}; fsync=off, synchronous_commit=off as .ci/pg.sh starts it)`)
  }

  // the mock upstream
  const upPort = await freePort()
  const upPid = await startServer("upstream", ["node", path.join(lib, "mock-upstream.mjs")], {
    envExtra: { PORT: String(upPort) },
    cpus: env.UPSTREAM_CPUS ?? cfg.serverCpus,
    readyUrl: `http://127.0.0.1:${upPort}/health`
  })
  const upHost = `http://127.0.0.1:${upPort}`
  const pace = (ms) => curlJson(["-X", "POST", `${upHost}/__bench/pace?ms=${ms}`])
  log(`mock upstream ${upHost}`)

  const targets = []
  // per aigw target: the "Listening on" lines of its log so far (a restart appends to it)
  const listeningLines = new Map()
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "aigw-bench-"))
  for (const name of cfg.targets) {
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    let pid, url, headers, kind = "gateway", dataDir, account, launch
    if (name === "direct") {
      pid = upPid
      url = `${upHost}/v1/chat/completions`
      headers = ["Authorization: Bearer sk-bench"]
      kind = "upstream"
    } else if (name === "proxy") {
      pid = await startServer(name, ["node", path.join(lib, "proxy.mjs")], { envExtra: { PORT: String(port), UPSTREAM: upHost }, readyUrl: `${base}/health` })
      url = `${base}/v1/chat/completions`
      headers = ["Authorization: Bearer sk-bench"]
    } else if (name === "floor") {
      const envExtra = { PORT: String(port), UPSTREAM: upHost, FLOOR_DB: path.join(tmp, "floor.sqlite") }
      pid = await startServer(name, ["node", path.join(lib, "floor.mjs")], { envExtra, readyUrl: `${base}/health` })
      url = `${base}/v1/chat/completions`
      headers = ["Authorization: Bearer sk-bench"]
    } else if (name === "portkey") {
      pid = await startServer(name, [
        "node", "-r", path.join(lib, "loopback.cjs"),
        path.join(bench, "node_modules/@portkey-ai/gateway/build/start-server.js"), `--port=${port}`, "--headless"
      ], { envExtra: { NODE_ENV: "production" }, readyUrl: `${base}/` })
      url = `${base}/v1/chat/completions`
      headers = ["x-portkey-provider: openai", `x-portkey-custom-host: ${upHost}/v1`, "Authorization: Bearer sk-bench"]
    } else if (/^aigw-(sqlite|pg)(-effect)?(-x\d+)?(-before)?$/.test(name)) {
      // "-before": the same gateway from AIGW_BEFORE_BUNDLE, interleaved with the current one (A/B of a change)
      const before = name.endsWith("-before")
      if (before && !env.AIGW_BEFORE_BUNDLE) die(`${name} needs AIGW_BEFORE_BUNDLE (node bench/lib/build.mjs --out FILE --overlay DIR)`)
      // The before bundle runs with the same node options (the profile preload with PROFILE=1).
      const argv = before ? [...aigwArgv.slice(0, -1), path.resolve(env.AIGW_BEFORE_BUNDLE)] : aigwArgv
      if (before && env.AIGW_BEFORE_NODE_FLAGS !== undefined) argv.splice(1, cfg.nodeFlags.length, ...list("AIGW_BEFORE_NODE_FLAGS", ""))
      dataDir = path.join(tmp, name)
      fs.mkdirSync(dataDir, { recursive: true })
      // "-xN": N server processes (AIGW_WORKERS), each with SLICE of a CPU when SLICE is set
      const workers = Number(/-x(\d+)(?:-before)?$/.exec(name)?.[1] ?? 1)
      const slice = cfg.slice ? cpuSlice(name, cfg.slice * workers) : undefined
      if (slice) slices.push(slice)
      // Started as `npm start` starts node: through its launcher, which adds --single-threaded-gc on one CPU.
      launch = () => startServer(name, [...nodeLauncher(), ...argv.slice(1)], {
        cwd: root,
        envExtra: {
          ...(before && env.AIGW_BEFORE_NODE_ENV !== undefined ? parseAssignments(env.AIGW_BEFORE_NODE_ENV) : cfg.nodeEnv),
          NODE_ENV: "production",
          HOST: "127.0.0.1",
          PORT: String(port),
          AIGW_DATA_DIR: dataDir,
          DATABASE_URL: isPg(name) ? `${pg.base}/${name.replace(/-/g, "_")}` : `sqlite:${path.join(dataDir, "aigw.sqlite")}`,
          AIGW_PLAN_LIMITS: JSON.stringify({ Free: 100_000_000 }),
          OPENAI_API_KEY: "sk-bench",
          OPENAI_BASE_URL: `${upHost}/v1`,
          BENCH_PROFILE_DIR: path.join(results, "profiles"),
          BENCH_PROFILE_NAME: name,
          ...(workers > 1 ? { AIGW_WORKERS: String(workers) } : {}),
          // "-effect": no fast lane, every request through the Effect app
          ...(name.includes("-effect") ? { AIGW_FAST_LANE: "false" } : {})
        },
        readyUrl: `${base}/v1/health`,
        slice
      }).then(async (started) => {
        // every worker listening, not only the first (the log is appended to: count from here)
        const logFile = path.join(results, "logs", `${name}.log`)
        const listening = () => (fs.readFileSync(logFile, "utf8").match(/Listening on /g) ?? []).length
        const before = listeningLines.get(name) ?? 0
        for (let i = 0; i < 100 && listening() - before < workers; i++) await sleep(100)
        listeningLines.set(name, listening())
        return started
      })
      pid = await launch()
      if (slice) log(`${name}: ${workers} process${workers > 1 ? "es" : ""} in a CPU slice of ${(cfg.slice * workers).toFixed(2)} CPU (${cfg.slice} each)`)
      const gcFlag = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("--single-threaded-gc")
      log(`${name}: node ${gcFlag ? "with --single-threaded-gc (one CPU)" : "with V8's default garbage collector threads"}`)
      const { createApiKey } = await import("./lib/aigw-account.mjs")
      account = await createApiKey(base, dataDir)
      url = `${base}/openai/v1/chat/completions`
      headers = [`Authorization: Bearer ${account.apiKey}`]
      log(`${name}: avatar ${account.username}, API key ${account.apiKey.slice(0, 11)}…`)
    } else {
      die(`unknown target ${name}`)
    }
    // the scenarios this target takes: chat everywhere; the others on aigw targets only
    const scenarios = cfg.scenarios.filter((s) => s === "chat" || account)
    for (const scenario of scenarios) {
      const label = scenario === "chat" ? name : `${name}/${scenario}`
      const own = unstreamed[scenario]
      const eUrl = own ? `${base}${own.route}` : url
      const eHeaders = scenario === "jwt" ? [`Authorization: Bearer ${account.jwt}`] : headers
      const headersFile = path.join(results, "targets", `${label.replace("/", ".")}.headers`)
      fs.writeFileSync(headersFile, eHeaders.join("\n") + "\n")
      const hArgs = eHeaders.flatMap((h) => ["-H", h])
      // validation: a JSON answer with choices (the other scenarios: their own result), a stream with >= 21 events and [DONE]
      const jsonOut = curlJson(["-H", "content-type: application/json", ...hArgs, "--data-binary", `@${own ? own.body : chatBody}`, eUrl])
      const sseOut = own ? "" : curlJson(["-N", "-H", "content-type: application/json", ...hArgs, "--data-binary", `@${sseBody}`, eUrl])
      fs.writeFileSync(path.join(results, "targets", `${label.replace("/", ".")}.json.out`), jsonOut)
      if (sseOut) fs.writeFileSync(path.join(results, "targets", `${label.replace("/", ".")}.sse.out`), sseOut)
      const events = (sseOut.match(/^data: /gm) ?? []).length
      const ok = own
        ? own.valid(jsonOut)
        : jsonOut.includes('"choices"') && sseOut.includes("data: [DONE]") && events >= 21
      const rssKb = memKb(groupPids(pid)).rss
      record({ kind: "validation", target: name, scenario, ok, events, rss_after_start_kb: rssKb, json: jsonOut.slice(0, 300) })
      if (!ok) {
        log(`WARNING: ${label} failed validation (json: ${jsonOut.slice(0, 200)} | stream events: ${events}) - skipped`)
        continue
      }
      log(`${label} ready: ${eUrl} (pid ${pid}, RSS ${(rssKb / 1024).toFixed(0)} MB${own ? "" : `, ${events} SSE events`})`)
      targets.push({ name, scenario, label, pid, url: eUrl, headersFile, kind, base, dataDir, launch, apiKey: account?.apiKey ?? headers[0].split("Bearer ")[1] })
    }
  }
  if (targets.length === 0) die("no target passed validation")

  const versions = () => {
    const v = (p) => {
      try {
        return JSON.parse(fs.readFileSync(path.join(bench, "node_modules", p, "package.json"), "utf8")).version
      } catch {
        return null
      }
    }
    const git = (args) => spawnSync("git", ["-C", root, ...args], { encoding: "utf8" }).stdout.trim()
    return {
      aigw: JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).version,
      aigw_commit: git(["rev-parse", "--short", "HEAD"]),
      aigw_worktree: git(["status", "--porcelain", "--", "packages", "hosts"]) ? "uncommitted changes" : "clean",
      aigw_runner: env.AIGW_BUNDLE ? `bundle ${path.basename(env.AIGW_BUNDLE)}` : cfg.runner,
      "@portkey-ai/gateway": v("@portkey-ai/gateway"),
      hono: v("hono"),
      "@hono/node-server": v("@hono/node-server"),
      effect: JSON.parse(fs.readFileSync(path.join(root, "node_modules/effect/package.json"), "utf8")).version,
      "@effect/platform-node": JSON.parse(fs.readFileSync(path.join(root, "node_modules/@effect/platform-node/package.json"), "utf8")).version,
      postgresql: pg ? spawnSync("psql", [pg.url, "-Atc", "SHOW server_version"], { encoding: "utf8" }).stdout.trim() : null,
      wrk: spawnSync("wrk", ["-v"], { encoding: "utf8" }).stdout.split("\n")[0].split(" ")[1] ?? null
    }
  }
  const meta = {
    date: new Date().toISOString(),
    command: `${Object.entries({ ROUNDS: env.ROUNDS, DURATION: env.DURATION, WARMUP: env.WARMUP, CONNS: env.CONNS, SSE_CONNS: env.SSE_CONNS, STREAM_N: env.STREAM_N, TARGETS: env.TARGETS, SCENARIOS: env.SCENARIOS, STAGES: env.STAGES, AIGW_BEFORE_BUNDLE: env.AIGW_BEFORE_BUNDLE, AIGW_RUNNER: env.AIGW_RUNNER, AIGW_BUNDLE: env.AIGW_BUNDLE, AIGW_NODE_FLAGS: env.AIGW_NODE_FLAGS, AIGW_BEFORE_NODE_FLAGS: env.AIGW_BEFORE_NODE_FLAGS, AIGW_NODE_ENV: env.AIGW_NODE_ENV, AIGW_BEFORE_NODE_ENV: env.AIGW_BEFORE_NODE_ENV, PROFILE: env.PROFILE, RESTART: env.RESTART }).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${JSON.stringify(v)} `).join("")}npm run bench`,
    machine: { ncpu, cpu: (/model name\s*:\s*(.*)/.exec(fs.readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?").trim(), kernel: os.release(), memory_gb: Math.round(os.totalmem() / 2 ** 30) },
    node: process.version,
    versions: versions(),
    config: { ...cfg, results: undefined },
    pinning: cfg.pin === "1" ? { client: cfg.clientCpus, servers: cfg.serverCpus, pg: cfg.pgCpus } : null,
    loadavg_start: fs.readFileSync("/proc/loadavg", "utf8").trim(),
    targets: [...new Set(targets.map((t) => t.name))],
    scenarios: cfg.scenarios
  }
  fs.writeFileSync(path.join(results, "meta.json"), JSON.stringify(meta, null, 2))

  // ---------------------------------------------------------------------- measurements
  const wrk = (t, c, seconds, bodyFile) =>
    runClient(["wrk", "-t1", `-c${c}`, `-d${seconds}s`, "--timeout", "10s", "-s", path.join(lib, "wrk-post.lua"), t.url], {
      BENCH_BODY: bodyFile,
      BENCH_HEADERS: t.headersFile
    })
  const loadRun = async (round, t, mode, c) => {
    const bodyFile = mode === "sse" ? sseBody : unstreamed[t.scenario]?.body ?? chatBody
    await wrk(t, c, cfg.warmup, bodyFile)
    const pids = groupPids(t.pid)
    const dbPids = isPg(t.name) ? pgPids() : []
    const dbTicks = () => (dbPids.length ? pgTicks() : 0)
    const hwmReset = resetHwm(pids)
    const cpu0 = ticks(pids)
    const db0 = dbTicks()
    // The first measured scenario of each aigw target (chat, unless SCENARIOS leaves it out) at 16 connections.
    const profiling = cfg.profile && t.name.startsWith("aigw") && t.scenario === cfg.scenarios[0] && c === 16 && round === 1
    if (profiling) process.kill(t.pid, "SIGUSR2")
    const out = await wrk(t, c, cfg.duration, bodyFile)
    if (profiling) process.kill(t.pid, "SIGUSR2")
    const cpu1 = ticks(pids)
    const db1 = dbTicks()
    const mem = memKb(pids)
    const line = /^WRKJSON (.*)$/m.exec(out)?.[1]
    const w = line ? JSON.parse(line) : { requests: 0, duration_us: 1, connect: -1 }
    if (!line) log(`  !! no result from wrk for ${t.label} ${mode} c=${c}: ${out.slice(-300)}`)
    const row = {
      kind: "load", round, target: t.name, scenario: t.scenario, mode, conns: c,
      rps: w.requests / (w.duration_us / 1e6), requests: w.requests,
      errors: (w.connect ?? 0) + (w.read ?? 0) + (w.write ?? 0) + (w.timeout ?? 0), non2xx: w.status ?? 0,
      p50_ms: w.p50_us / 1000, p90_ms: w.p90_us / 1000, p99_ms: w.p99_us / 1000, p999_ms: w.p999_us / 1000, max_ms: w.max_us / 1000,
      cpu_us_per_req: w.requests ? (((cpu1 - cpu0) / clkTck) * 1e6) / w.requests : null,
      db_cpu_us_per_req: dbPids.length && w.requests ? (((db1 - db0) / clkTck) * 1e6) / w.requests : null,
      peak_rss_kb: mem.hwm, hwm_reset: hwmReset, loadavg: fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")
    }
    record(row)
    log(`  r${round} ${t.label.padEnd(25)} ${mode} c=${String(c).padEnd(3)} ${Math.round(row.rps).toString().padStart(6)} rps  p50 ${row.p50_ms.toFixed(2)}  p99 ${row.p99_ms.toFixed(2)} ms  cpu/req ${row.cpu_us_per_req?.toFixed(0) ?? "-"}${row.db_cpu_us_per_req != null ? `+${row.db_cpu_us_per_req.toFixed(0)}db` : ""} us  peak ${(row.peak_rss_kb / 1024).toFixed(0)} MB  err ${row.errors}/${row.non2xx}`)
  }
  const streamRun = async (round, t, variant) => {
    const paced = variant === "paced"
    if (paced) pace(cfg.pacedMs)
    const out = await runClient(["node", path.join(lib, "stream-client.mjs"), t.url, t.headersFile, sseBody, String(paced ? cfg.pacedN : cfg.streamN), String(paced ? 2 : cfg.streamWarmup)])
    if (paced) pace(0)
    const line = /^STREAMJSON (.*)$/m.exec(out)?.[1]
    const s = line ? JSON.parse(line) : { n: 0, failed: 1, first_error: out.slice(-300) }
    record({ kind: "stream", round, target: t.name, scenario: t.scenario, variant, ...s })
    log(`  r${round} ${t.label.padEnd(25)} stream-${variant}: headers ${s.headers_p50_ms} ttfb ${s.ttfb_p50_ms} total ${s.total_p50_ms} ms  failed ${s.failed}`)
  }

  const loads = [...cfg.conns.map((c) => ["json", c]), ...cfg.sseConns.map((c) => ["sse", c])]
  log(`targets: ${targets.map((t) => t.label).join(", ")} | loads: ${loads.map(([m, c]) => `${m}:${c}`).join(" ")} | ${cfg.rounds} rounds x ${cfg.duration}s (+${cfg.warmup}s warm-up) | pin: ${cfg.pin === "1" ? `client ${cfg.clientCpus}, servers ${cfg.serverCpus}` : "off"}`)
  for (let round = 1; round <= cfg.rounds; round++) {
    log(`round ${round}/${cfg.rounds}`)
    if (cfg.restart && round > 1) {
      // A process keeps the collector state it settles in: a fresh one per round makes the medians over processes.
      for (const name of new Set(targets.filter((t) => t.launch).map((t) => t.name))) {
        const own = targets.filter((t) => t.name === name)
        await stopGroup(own[0].pid)
        const pid = await own[0].launch()
        for (const t of own) t.pid = pid
        log(`${name}: restarted (pid ${pid})`)
      }
    }
    // per load, scenario after scenario, every target (so a before and an after target run back to back)
    const ofScenario = (s) => targets.filter((t) => t.scenario === s)
    for (const [mode, c] of loads) {
      for (const s of cfg.scenarios) {
        if (mode === "sse" && unstreamed[s]) continue
        for (const t of ofScenario(s)) await loadRun(round, t, mode, c)
      }
    }
    const streamed = targets.filter((t) => !unstreamed[t.scenario])
    for (const t of streamed) await streamRun(round, t, "burst")
    for (const t of streamed) await streamRun(round, t, "paced")
  }

  // the full path really ran: every answered call was admitted and counted
  const aigwTargets = targets.filter((t, i) => t.name.startsWith("aigw") && targets.findIndex((u) => u.name === t.name) === i)
  for (const t of aigwTargets) {
    const usage = JSON.parse(curlJson(["-H", `X-Api-Key: ${t.apiKey}`, `${t.base}/v1/usage`]) || "{}")
    const sent = fs.readFileSync(rawFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
      .filter((r) => r.target === t.name && r.kind === "load").reduce((s, r) => s + r.requests, 0)
    record({ kind: "usage", target: t.name, daily_calls_used: usage.result?.dailyCallsUsed ?? null, daily_tokens_used: usage.result?.dailyTokensUsed ?? null, measured_requests: sent })
    log(`${t.name}: ${usage.result?.dailyCallsUsed} calls counted by quota (measured runs alone sent ${sent}; warm-ups, streams and validation add the rest)`)
  }

  // per-stage costs in-process (auth, quota, usage, upstream, completion) on each database
  if (cfg.stages && cfg.runner === "bundle") {
    for (const t of aigwTargets) {
      const dbUrl = isPg(t.name) ? `${pg.base}/${t.name.replace(/-/g, "_")}` : `sqlite:${path.join(t.dataDir, "stages.sqlite")}`
      const stagesDir = path.join(t.dataDir, "stages")
      fs.mkdirSync(stagesDir, { recursive: true })
      const bundleOf = t.name.endsWith("-before") ? path.resolve(env.AIGW_BEFORE_BUNDLE).replace(/\.mjs$/, "-stages.mjs") : stagesBundle
      const argv = [...pin(cfg.serverCpus), "node", bundleOf]
      const out = spawnSync(argv[0], argv.slice(1), {
        encoding: "utf8",
        env: { ...env, DATABASE_URL: dbUrl, AIGW_DATA_DIR: stagesDir, AIGW_PLAN_LIMITS: JSON.stringify({ Free: 100_000_000 }), OPENAI_API_KEY: "sk-bench", OPENAI_BASE_URL: `${upHost}/v1`, STAGE_N: env.STAGE_N ?? "3000" },
        timeout: 180_000
      })
      const line = /^STAGESJSON (.*)$/m.exec(out.stdout ?? "")?.[1]
      if (line) {
        record({ kind: "stages", target: t.name, ...JSON.parse(line) })
        log(`${t.name} stages: ${JSON.parse(line).stages.map((s) => `${s.stage.split(":")[0]} ${s.cpu_us}us`).join(", ")}`)
      } else log(`WARNING: stage benchmark failed for ${t.name}: ${(out.stderr ?? "").slice(-500)}`)
    }
  }

  meta.loadavg_end = fs.readFileSync("/proc/loadavg", "utf8").trim()
  fs.writeFileSync(path.join(results, "meta.json"), JSON.stringify(meta, null, 2))
  if (cfg.profile) {
    const { summarize } = await import("./lib/cpuprofile-summary.mjs")
    const dir = path.join(results, "profiles")
    for (const f of fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".cpuprofile")) : []) {
      fs.writeFileSync(path.join(dir, f.replace(/\.cpuprofile$/, ".txt")), summarize(path.join(dir, f), 60))
      log(`profile: ${path.relative(root, path.join(dir, f.replace(/\.cpuprofile$/, ".txt")))}`)
    }
  }
  cleanup()
  fs.rmSync(tmp, { recursive: true, force: true })
  const { report } = await import("./lib/summarize.mjs")
  const md = report(results)
  fs.writeFileSync(path.join(results, "results.md"), md)
  console.log(md)
  log(`report: ${path.relative(root, path.join(results, "results.md"))}`)
}

main().catch((e) => {
  log(e?.stack ?? String(e))
  process.exit(1)
})
