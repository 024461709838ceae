// Preload (node -r) for profiling a server over a chosen window only: the first SIGUSR2 starts the
// V8 CPU profiler, the next one stops it and writes $BENCH_PROFILE_DIR/<BENCH_PROFILE_NAME>-<n>.cpuprofile.
// Used by bench/run.mjs PROFILE=1 (start right before a measured run, stop right after it).
const inspector = require("node:inspector")
const fs = require("node:fs")
const path = require("node:path")
const dir = process.env.BENCH_PROFILE_DIR || "."
const name = process.env.BENCH_PROFILE_NAME || `pid${process.pid}`
const session = new inspector.Session()
session.connect()
session.post("Profiler.enable")
session.post("Profiler.setSamplingInterval", { interval: Number(process.env.BENCH_PROFILE_INTERVAL_US || 250) })
let running = false
let n = 0
process.on("SIGUSR2", () => {
  if (!running) {
    session.post("Profiler.start", () => (running = true))
    return
  }
  session.post("Profiler.stop", (err, res) => {
    running = false
    if (err) return console.error("profile stop failed", err)
    fs.mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `${name}-${++n}.cpuprofile`)
    fs.writeFileSync(file, JSON.stringify(res.profile))
    console.error(`cpu profile written: ${file}`)
  })
})
