/**
 * Measures a running gateway while an attack is under way: how long `/v1/health` takes (a
 * blocked event loop shows as a slow health answer) and how much memory the server's process
 * tree holds (the tsx wrapper and the server it starts, and any sandbox children).
 */
import * as fs from "node:fs"
import { Worker } from "node:worker_threads"
import { expect } from "vitest"
import type { RunningServer } from "./server.ts"

/**
 * The fields of /proc/<pid>/stat after the command name (0 state, 1 ppid, 2 pgrp, 11 utime, 12 stime),
 * or undefined when the process is gone. The command name may hold spaces and parentheses: the
 * fields follow the last ")".
 */
export const procStat = (pid: number | string): Array<string> | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/** The pids of the processes running now, read from /proc. */
export const allPids = (): Array<number> => fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number)

/** The pids of `root` and all its descendants, read from /proc. */
export const processTree = (root: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const pid of allPids()) {
    const stat = procStat(pid)
    // gone while we read
    if (stat === undefined) continue
    const ppid = Number(stat[1])
    const list = children.get(ppid) ?? []
    list.push(pid)
    children.set(ppid, list)
  }
  const out: Array<number> = []
  const visit = (pid: number) => {
    out.push(pid)
    for (const c of children.get(pid) ?? []) visit(c)
  }
  visit(root)
  return out
}

/** The live (not zombie) processes of a process group. */
export const groupMembers = (pgid: number) =>
  allPids().filter((pid) => {
    const stat = procStat(pid)
    return stat !== undefined && Number(stat[2]) === pgid && stat[0] !== "Z"
  })

const rssKb = (pid: number) => {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return m ? Number(m[1]) : 0
  } catch {
    return 0
  }
}

/** user + system CPU ticks of a process (0 once it is gone). */
export const cpuTicks = (pid: number) => {
  const stat = procStat(pid)
  return stat === undefined ? 0 : Number(stat[11]) + Number(stat[12])
}

/** CPU time the server's whole process tree has used so far, in ms (Linux's clock tick is 10 ms). */
export const treeCpuMs = (server: RunningServer) => processTree(server.child.pid!).reduce((sum, pid) => sum + cpuTicks(pid), 0) * 10

/** Resident memory of the server's whole process tree, in MB. */
export const treeRssMb = (server: RunningServer) =>
  processTree(server.child.pid!).reduce((sum, pid) => sum + rssKb(pid), 0) / 1024

export interface AttackFigures {
  /** The slowest `/v1/health` answer seen while the attack ran (ms). */
  readonly maxHealthMs: number
  /** Health probes made. */
  readonly probes: number
  /** Largest resident memory of the server's process tree seen (MB). */
  readonly peakRssMb: number
  /** Resident memory before the attack started (MB). */
  readonly baselineRssMb: number
  /** Largest resident memory of the server's own process seen (MB): sandbox children not counted. */
  readonly peakServerRssMb: number
}

/**
 * The health probe loop, run in a worker thread of its own: the test's own work while it attacks (building
 * a 10 MB body, parsing large answers) holds the test's event loop, and a probe timed there counted that
 * stall as the server's. A probe that has not answered counts its time so far, so a loop blocked past the
 * attack's end is still seen.
 */
const PROBE_LOOP = `
const { parentPort, workerData } = require("node:worker_threads")
let running = true
let maxMs = 0
let probes = 0
parentPort.on("message", () => { running = false })
;(async () => {
  while (running) {
    const started = performance.now()
    try {
      const answer = await fetch(workerData.url, { signal: AbortSignal.timeout(60000) })
      await answer.arrayBuffer()
    } catch {
      // a refused or timed-out probe still counts its time
    }
    maxMs = Math.max(maxMs, performance.now() - started)
    probes++
    if (running) await new Promise((r) => setTimeout(r, workerData.intervalMs))
  }
  parentPort.postMessage({ maxMs, probes })
})()
`

/** Runs `attack` while probing health every `intervalMs` (from a worker thread) and sampling memory. */
export const underAttack = async <A>(server: RunningServer, attack: () => Promise<A>, intervalMs = 50): Promise<{ value: A; figures: AttackFigures }> => {
  const baselineRssMb = treeRssMb(server)
  let peakRssMb = baselineRssMb
  let peakServerRssMb = rssKb(server.child.pid!) / 1024
  const sampleMemory = () => {
    peakRssMb = Math.max(peakRssMb, treeRssMb(server))
    peakServerRssMb = Math.max(peakServerRssMb, rssKb(server.child.pid!) / 1024)
  }
  const sampler = setInterval(sampleMemory, intervalMs)
  const prober = new Worker(PROBE_LOOP, { eval: true, workerData: { url: `${server.url}/v1/health`, intervalMs } })
  // The loop's figures, posted once it has stopped; a worker that ends without them fails the test.
  const probed = new Promise<{ maxMs: number; probes: number }>((resolve, reject) => {
    prober.once("message", resolve)
    prober.once("error", reject)
    prober.once("exit", () => reject(new Error("the health probe worker ended without its figures")))
  })
  let value: A
  let figures: { maxMs: number; probes: number }
  try {
    value = await attack()
  } finally {
    prober.postMessage("stop")
    figures = await probed
    await prober.terminate()
    clearInterval(sampler)
    sampleMemory()
  }
  const { maxMs: maxHealthMs, probes } = figures
  // Printed so a CI log shows each bound's margin, not only the runs that broke it.
  console.log(
    `[attack] ${expect.getState().currentTestName}: health max ${Math.round(maxHealthMs)} ms over ${probes} probes; ` +
      `RSS ${Math.round(baselineRssMb)} -> peak ${Math.round(peakRssMb)} MB`
  )
  return { value, figures: { maxHealthMs, probes, peakRssMb, baselineRssMb, peakServerRssMb } }
}

/** Bounds that only a blocked loop or exploding memory break (a busy 2-core CI machine stays well under). */
export const LOOP_BLOCKED_MS = 1_500
export const MEMORY_EXPLODED_MB = 600
