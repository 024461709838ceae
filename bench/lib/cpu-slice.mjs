/**
 * CPU slices for the benchmark's scaling runs (SLICE, PG_SLICE): a cgroup whose CPU quota is a fraction
 * of one CPU per 10 ms period, so that a gateway process (or PostgreSQL) gets a core of a smaller machine
 * and several of them fit on this one (docs/performance.md, "Scaling out: 1, 2 and 4 processes").
 * cgroup v1's cpu controller (cpu.cfs_quota_us) where it is mounted, else cgroup v2 (cpu.max). Needs root.
 */
import * as fs from "node:fs"
import * as path from "node:path"

const PERIOD_US = 10_000
const V1 = "/sys/fs/cgroup/cpu"
const V2 = "/sys/fs/cgroup"

/** Where slices are made, or a reason there is none. */
const hierarchy = () => {
  if (fs.existsSync(path.join(V1, "cpu.cfs_quota_us"))) return { kind: "v1", root: V1 }
  const controllers = path.join(V2, "cgroup.controllers")
  if (fs.existsSync(controllers) && fs.readFileSync(controllers, "utf8").split(/\s+/).includes("cpu")) {
    try {
      fs.writeFileSync(path.join(V2, "cgroup.subtree_control"), "+cpu")
    } catch {}
    return { kind: "v2", root: V2 }
  }
  return { problem: `no cgroup cpu controller to write (${V1} or ${V2} with the cpu controller); SLICE and PG_SLICE need one, and root` }
}

/**
 * A slice of `cpus` CPUs (0.2 = a fifth of one) named `name`. `wrap(argv)` runs argv inside it (a shell
 * that joins the group, then execs, so the launcher already sees its quota); `join(pid)` moves a running
 * process in; `remove()` deletes the group once its processes are gone.
 */
export const cpuSlice = (name, cpus) => {
  const h = hierarchy()
  if (h.problem) throw new Error(h.problem)
  const dir = path.join(h.root, `aigw-bench-${name}`)
  fs.mkdirSync(dir, { recursive: true })
  const quota = Math.max(1_000, Math.round(cpus * PERIOD_US))
  if (h.kind === "v1") {
    fs.writeFileSync(path.join(dir, "cpu.cfs_period_us"), String(PERIOD_US))
    fs.writeFileSync(path.join(dir, "cpu.cfs_quota_us"), String(quota))
  } else fs.writeFileSync(path.join(dir, "cpu.max"), `${quota} ${PERIOD_US}`)
  const procs = path.join(dir, "cgroup.procs")
  return {
    dir,
    wrap: (argv) => ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, ...argv],
    join: (pid) => {
      try {
        fs.writeFileSync(procs, String(pid))
      } catch {}
    },
    remove: () => {
      try {
        fs.rmdirSync(dir)
      } catch {}
    }
  }
}
