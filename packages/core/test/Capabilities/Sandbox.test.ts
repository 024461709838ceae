/** The gateway's side of the sandbox protocol, against runners that misbehave (a program that reached the pipe); the OS limits its launcher sets. */
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { type Launcher, makeLauncher, makeSandbox } from "../../src/Capabilities/Sandbox.ts"

/** A launcher whose "runner" is `script` run by plain node. */
const fake = (script: string): Launcher => ({ isolation: "process", missing: [], command: () => ({ file: process.execPath, args: ["-e", script] }) })
const READY = `process.stdout.write(JSON.stringify({ type: "ready" }) + "\\n"); process.stdin.once("data", () => {`

describe("sandbox protocol", () => {
  it("types and cuts a forged result line", async () => {
    const sandbox = makeSandbox(fake(`${READY} process.stdout.write(JSON.stringify({ type: "result", stdout: "A".repeat(5e6), result: { obj: 1 }, exitCode: "x", error: { e: 1 }, timedOut: "yes" }) + "\\n") })`), { memoryMb: 64, maxOutput: 1000 })
    const outcome = await sandbox.run("javascript", { code: "", timeoutMs: 5000 })
    expect(outcome.stdout.length).toBeLessThan(1100)
    expect(outcome).toMatchObject({ result: null, exitCode: 1, error: null, timedOut: false })
    sandbox.close()
  })

  it("kills a process that floods lines after its job instead of parsing them all", async () => {
    const sandbox = makeSandbox(fake(`${READY} const b = "1\\n".repeat(1e6); for (let i = 0; i < 8; i++) process.stdout.write(b) })`), { memoryMb: 64, maxOutput: 1000 })
    const started = performance.now()
    const outcome = await sandbox.run("javascript", { code: "", timeoutMs: 10_000 })
    expect(outcome.error).toMatch(/broke its protocol/)
    expect(performance.now() - started).toBeLessThan(5_000)
    sandbox.close()
  })

  it("refuses a second ready line after the job", async () => {
    const sandbox = makeSandbox(fake(`${READY} process.stdout.write(JSON.stringify({ type: "ready" }) + "\\n") })`), { memoryMb: 64, maxOutput: 1000 })
    expect((await sandbox.run("javascript", { code: "", timeoutMs: 5000 })).error).toMatch(/broke its protocol \(an unexpected ready\)/)
    sandbox.close()
  })
})

describe("the sandbox's OS limits", () => {
  const MiB = 1024 * 1024
  /** What this node maps before it runs anything, measured apart from the launcher's own measurement. */
  const bareRuntimeMb = Number(
    /VmSize:\s*(\d+) kB/.exec(spawnSync(process.execPath, ["-e", "process.stdout.write(require('fs').readFileSync('/proc/self/status', 'utf8'))"], { encoding: "utf8" }).stdout)![1]
  ) / 1024

  it("are set by /bin/sh before it execs the sandbox process, in both isolations", () => {
    for (const mode of ["process", "bwrap"] as const) {
      const launcher = makeLauncher(mode, 256)
      if ("unavailable" in launcher) continue
      const { args, file } = launcher.command("pdf")
      expect(file).toBe("/bin/sh")
      const [, program, name] = args
      // The same prefix, exec'ing `cat` in place of the sandbox: the limits it runs under.
      const limits = spawnSync(file, ["-c", program!, name!, "cat", "/proc/self/limits"], { encoding: "utf8" }).stdout
      const row = (label: string) => new RegExp(`^${label}\\s+(\\S+)\\s+(\\S+)`, "m").exec(limits)?.slice(1)
      // The bare runtime's own address space, which differs by half a gigabyte between Node versions, plus
      // room to load an interpreter and the memory limit: not less (Python could not load on Node 24), and
      // not so much more that a program gets far past its limit.
      const [soft, hard] = row("Max address space")!.map(Number)
      expect(soft, mode).toBe(hard)
      const extraMb = soft! / MiB - bareRuntimeMb
      expect(extraMb, mode).toBeGreaterThanOrEqual(256 + 128)
      expect(extraMb, mode).toBeLessThanOrEqual(256 + 400)
      expect(row("Max cpu time"), mode).toEqual(["90", "90"])
      expect(row("Max open files"), mode).toEqual(["64", "64"])
      expect(row("Max file size"), mode).toEqual(["0", "0"])
      expect(row("Max core file size"), mode).toEqual(["0", "0"])
    }
  })
})
