/**
 * `AIGW_WORKERS=N`: N server processes share the port (node:cluster), for a machine with more cores
 * than one process can use. The processes share nothing but the database and the data directory,
 * exactly as replicas do (docs/deployment-node.md, "Containers and scaling out").
 *
 * The primary only supervises: the first worker starts alone (migrations, the generated JWT key in
 * the data directory), then the others; a worker that fails to start stops them all with its exit
 * code (its one-line reason is already on stderr); a worker that dies after it listened is replaced,
 * and so is a replacement that dies before it listened (the others serve on), unless they die faster
 * than `CRASH_LIMIT` in `CRASH_WINDOW_MS`; SIGTERM or SIGINT stops every worker
 * gracefully (SIGTERM: a worker that also got the terminal's SIGINT shuts down once), and the primary exits
 * once every worker has.
 */
import cluster, { type Worker } from "node:cluster"
import * as os from "node:os"

const VARIABLE = "AIGW_WORKERS"
const MAX_WORKERS = 64
const CRASH_LIMIT = 5
const CRASH_WINDOW_MS = 60_000

/** The number of processes AIGW_WORKERS asks for, or the one-line reason it cannot be used. */
export const workerCount = (value: string | undefined, cores = os.availableParallelism()): number | { readonly problem: string } => {
  const text = value?.trim() ?? ""
  if (text === "") return 1
  if (text === "auto") return Math.min(cores, MAX_WORKERS)
  const n = /^\d+$/.test(text) ? Number(text) : NaN
  return n >= 1 && n <= MAX_WORKERS
    ? n
    : { problem: `invalid configuration: ${VARIABLE} must be a whole number from 1 to ${MAX_WORKERS}, or auto (one per CPU); got "${text}" (check ${VARIABLE})` }
}

const say = (line: string) => process.stderr.write(`aigw: ${line}\n`)

/**
 * In the primary process with AIGW_WORKERS above 1: starts and supervises the workers and returns
 * true (this process serves nothing itself). Returns false where this process is to serve: a worker,
 * or a single process.
 */
export const superviseWorkers = (): boolean => {
  if (cluster.isWorker) return false
  const count = workerCount(process.env[VARIABLE])
  if (typeof count !== "number") {
    say(count.problem)
    process.exit(1)
  }
  if (count === 1) return false

  const workers = new Set<Worker>()
  const crashes: Array<number> = []
  let stopping: { code: number } | undefined

  const stop = (code: number) => {
    if (stopping) return
    stopping = { code }
    for (const w of workers) w.process.kill("SIGTERM")
    if (workers.size === 0) process.exit(code)
  }

  /** `replacing`: a replacement's failed start is a crash like any other (the workers still serving show the start works). */
  const start = (then?: () => void, replacing = false): void => {
    // A stop that came during the start (before the first worker listened) forks no more.
    if (stopping) return
    const worker = cluster.fork()
    workers.add(worker)
    let listening = false
    worker.once("listening", () => {
      listening = true
      then?.()
    })
    worker.once("exit", (code, signal) => {
      workers.delete(worker)
      if (stopping) {
        if (workers.size === 0) process.exit(stopping.code)
        return
      }
      // A first worker that never listened failed its start (its reason is on stderr): the others would too.
      if (!listening && !replacing) return stop(code || 1)
      const now = Date.now()
      crashes.push(now)
      while (crashes.length > 0 && crashes[0]! < now - CRASH_WINDOW_MS) crashes.shift()
      if (crashes.length >= CRASH_LIMIT) {
        say(`${CRASH_LIMIT} workers died within ${CRASH_WINDOW_MS / 1000} s; stopping`)
        return stop(1)
      }
      say(`worker ${worker.process.pid} exited${listening ? "" : " before it listened"} (${signal ?? `code ${code}`}); starting another`)
      start(undefined, true)
    })
  }

  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => stop(0))
  // The first worker alone (it applies migrations and creates the data directory's files), then the rest.
  start(() => {
    for (let i = 1; i < count; i++) start()
  })
  return true
}
