/**
 * The HTTP side of .ci/image.sh: what a user of the container image relies on, checked against
 * running containers (a mock OpenAI upstream behind them).
 *
 *   node .ci/image-check.mjs single   BASE DATA_DIR CONTAINER
 *   node .ci/image-check.mjs replicas PROXY DATA_DIR_1 REPLICA_1 REPLICA_2
 *   node .ci/image-check.mjs workers  BASE DATA_DIR CONTAINER   (started with AIGW_WORKERS=2)
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { createApiKey } from "../bench/lib/aigw-account.mjs"

const [mode, base, dataDir, ...rest] = process.argv.slice(2)
const podman = (...args) => execFileSync("podman", ["--runtime", "runc", "--cgroup-manager", "cgroupfs", ...args], { encoding: "utf8" }).trim()
const fail = (message) => {
  console.error(`image-check: ${message}`)
  process.exit(1)
}
const check = (ok, message) => ok || fail(message)

const waitHealthy = async (url) => {
  const started = Date.now()
  while (Date.now() - started < 90_000) {
    try {
      const res = await fetch(`${url}/v1/health`)
      if (res.status === 200) return Date.now() - started
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  fail(`${url}/v1/health did not answer 200 within 90 s`)
}

const chat = (url, apiKey, stream = false) =>
  fetch(`${url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hello" }], ...(stream ? { stream } : {}) })
  })

/**
 * A stream through the image's node, whole: its finish chunk, then [DONE], then the end of the body. Node 22's
 * response cork once put a stream's last events after the end of its body (hosts/node-http/test/nodeVersions.e2e.test.ts).
 */
const completeStream = async (url, apiKey) => {
  const res = await chat(url, apiKey, true)
  const text = await res.text()
  const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6))
  const last = data.length > 1 ? JSON.parse(data.at(-2)) : undefined
  const whole = res.status === 200 && data.at(-1) === "[DONE]" && last?.choices?.[0]?.finish_reason === "stop"
  if (!whole) console.error(`image-check: a stream that is not whole: ${res.status} ${data.length} events, ending ${JSON.stringify(text.slice(-300))}`)
  return whole
}

const rssMb = (container) => Math.round(Number(/VmRSS:\s+(\d+)/.exec(podman("exec", container, "cat", "/proc/1/status"))[1]) / 1024)

if (mode === "single") {
  const [container] = rest
  const ready = await waitHealthy(base)
  console.log(`image-check: healthy ${ready} ms after the container was started`)
  check(podman("exec", container, "id", "-u") === "1000", "the gateway must run as the unprivileged node user (uid 1000)")
  check(podman("exec", container, "printenv", "HOST") === "0.0.0.0", "HOST must be 0.0.0.0 inside the image")
  podman("healthcheck", "run", container) // throws (exit 1) when the image's HEALTHCHECK fails
  // The build stage compiled the malloc_trim addon (MallocTrim.ts): the gateway gives freed C heap back.
  // The launcher (scripts/node.sh) ran node in its place as PID 1, which gets the container's signals; on the one
  // CPU this container is given (image.sh: --cpuset-cpus), with V8's single-threaded garbage collector.
  check(podman("exec", container, "cat", "/proc/1/comm") === "node", "PID 1 must be node itself (scripts/node.sh execs it)")
  const argv = podman("exec", container, "cat", "/proc/1/cmdline").split("\0")
  check(podman("exec", container, "nproc") === "1" && argv.includes("--single-threaded-gc"), `on one CPU the gateway runs with --single-threaded-gc: ${argv.join(" ")}`)
  const trimmer = podman("exec", "-w", "/app", container, "node", "-e", "const m = require('@aigw/malloc-trim'); process.stdout.write(m.trim ? 'built' : String(m.problem))")
  check(trimmer === "built", `the image must carry the built @aigw/malloc-trim addon: ${trimmer}`)
  const idle = rssMb(container)
  const { apiKey } = await createApiKey(base, dataDir)
  const res = await chat(base, apiKey)
  const body = await res.json()
  check(res.status === 200 && typeof body.choices?.[0]?.message?.content === "string", `chat through the image: ${res.status} ${JSON.stringify(body).slice(0, 200)}`)
  // Before the 200 calls below, which use up the Free plan's 100 calls a day. Alone, and sixteen at once (under load a stream's writes are held for its end).
  check(await completeStream(base, apiKey), "a stream through the image must end with its finish chunk and [DONE]")
  const streams = await Promise.all(Array.from({ length: 16 }, () => completeStream(base, apiKey)))
  check(streams.every(Boolean), `sixteen streams at once through the image must each be complete: ${streams.filter(Boolean).length} of 16 were`)
  for (let i = 0; i < 200; i++) await (await chat(base, apiKey)).arrayBuffer()
  check(fs.existsSync(path.join(dataDir, "aigw.sqlite")), "the SQLite database must live in the /data volume")
  console.log(`image-check: runs as uid 1000 with HOST=0.0.0.0; PID 1 is node, with --single-threaded-gc on its one CPU; HEALTHCHECK passes; malloc_trim addon built; a chat call answers, streams end whole (alone and 16 at once); data in /data; RSS ${idle} MB idle, ${rssMb(container)} MB after 201 calls and 17 streams`)
} else if (mode === "replicas") {
  const [one, two] = rest
  for (const url of [one, two, base]) await waitHealthy(url)
  const { apiKey, jwt } = await createApiKey(one, dataDir)
  // The plan allows 5 calls a day: 8 concurrent calls through the proxy, spread over both replicas.
  const statuses = await Promise.all(Array.from({ length: 8 }, () => chat(base, apiKey).then(async (r) => (await r.arrayBuffer(), r.status))))
  const ok = statuses.filter((s) => s === 200).length
  const refused = statuses.filter((s) => s === 429).length
  check(ok === 5 && refused === 3, `exactly 5 of 8 calls may pass the shared quota of 5, got ${JSON.stringify(statuses)}`)
  // A token issued by one replica is accepted by the other, which sees the same usage.
  const usage = await fetch(`${two}/v1/usage`, { headers: { authorization: `Bearer ${jwt}` } })
  const summary = (await usage.json()).result
  check(usage.status === 200 && summary.dailyCallsUsed === 5, `replica 2 must accept replica 1's token and see 5 calls used: ${usage.status} ${JSON.stringify(summary)}`)
  console.log(`image-check: two replicas behind nginx on one PostgreSQL: 5 of 8 concurrent calls admitted (quota 5), 3 refused with 429; replica 2 accepts replica 1's token and counts 5`)
} else if (mode === "workers") {
  const [container] = rest
  await waitHealthy(base)
  // PID 1 (node, the supervisor) and its two serving workers, both node.
  const children = () =>
    podman("exec", container, "sh", "-c", "grep -l '^PPid:[[:space:]]*1$' /proc/[0-9]*/status || true").split("\n").filter(Boolean)
      .map((f) => podman("exec", container, "cat", f.replace("/status", "/comm")))
  check(podman("exec", container, "cat", "/proc/1/comm") === "node", "PID 1 must be node (the workers' supervisor)")
  const started = Date.now()
  while (children().length < 2 && Date.now() - started < 30_000) await new Promise((r) => setTimeout(r, 200))
  check(JSON.stringify(children()) === JSON.stringify(["node", "node"]), `AIGW_WORKERS=2 must run two node workers under PID 1: ${JSON.stringify(children())}`)
  const { apiKey } = await createApiKey(base, dataDir)
  const statuses = await Promise.all(Array.from({ length: 20 }, () => chat(base, apiKey).then(async (r) => (await r.arrayBuffer(), r.status))))
  check(statuses.every((s) => s === 200), `chat through two workers: ${JSON.stringify(statuses)}`)
  // `podman stop` sends SIGTERM to PID 1: the supervisor stops both workers gracefully and exits 0 (not SIGKILLed at the timeout).
  const stopping = Date.now()
  podman("stop", "-t", "20", container)
  const stopMs = Date.now() - stopping
  const code = podman("inspect", "--format", "{{.State.ExitCode}}", container)
  check(code === "0" && stopMs < 15_000, `podman stop must end the supervisor and its workers with exit code 0 well within the timeout: exit ${code} after ${stopMs} ms`)
  console.log(`image-check: AIGW_WORKERS=2: PID 1 supervises two node workers; 20 chat calls answered; podman stop ends them with exit 0 in ${stopMs} ms`)
} else {
  fail(`unknown mode ${mode}`)
}
