/** The gateway's side of the sandbox protocol, against runners that misbehave (a program that reached the pipe). */
import { describe, expect, it } from "vitest"
import { type Launcher, makeSandbox } from "../../src/Capabilities/Sandbox.ts"

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
