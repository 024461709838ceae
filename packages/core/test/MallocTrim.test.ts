/**
 * MallocTrim: the addon really hands freed C heap pages back (a child process frees 64 MB of
 * buffers below a live one: resident until the trim, gone after it), and the layer trims at start
 * and on its interval, is switched off by AIGW_MALLOC_TRIM_MS=0, refuses a negative value, and says
 * why when there is nothing to call.
 */
import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Exit, Layer, Logger, TestClock } from "effect"
import * as MallocTrim from "../src/MallocTrim.ts"

const addonPath = createRequire(import.meta.url).resolve("@aigw/malloc-trim")
const glibc = process.platform === "linux" && Boolean((process.report?.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime)

describe("the @aigw/malloc-trim addon", () => {
  it.runIf(glibc)("returns freed heap memory that glibc keeps resident", () => {
    // 1,024 buffers of 64 KiB (below the mmap threshold: in the heap), then a small live one above
    // them, so that their memory cannot go back by shrinking the heap's top.
    const script = `
      const { trim } = require(${JSON.stringify(addonPath)})
      const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(require("fs").readFileSync("/proc/self/status", "utf8"))[1]) / 1024
      const base = rss()
      let buffers = Array.from({ length: 1024 }, () => Buffer.allocUnsafeSlow(64 * 1024).fill(1))
      const above = Buffer.allocUnsafeSlow(1024).fill(1)
      buffers = null
      gc(); gc()
      setTimeout(() => {
        const freed = rss()
        const released = trim()
        console.log(JSON.stringify({ base, freed, released, trimmed: rss(), above: above.length }))
      }, 200)`
    // glibc's own mmap threshold (128 KiB), whatever the caller's environment sets: a lower one would
    // give each buffer its own mapping, which free() returns without a trim. And no trimming by free():
    // where the live buffer lands is the allocator's choice (once, on Node 24 under a loaded suite, in a
    // hole below most of the buffers, and free() gave back the ones above it), so the heap's top is kept
    // whatever the order; malloc_trim does not heed this threshold.
    const env = { ...process.env, MALLOC_MMAP_THRESHOLD_: "131072", MALLOC_TRIM_THRESHOLD_: String(1024 * 1024 * 1024) }
    const out = JSON.parse(execFileSync(process.execPath, ["--expose-gc", "-e", script], { encoding: "utf8", timeout: 30_000, env }))
    // freed but resident: what glibc's free() alone does
    expect(out.freed - out.base, JSON.stringify(out)).toBeGreaterThan(48)
    expect(out.released).toBe(true)
    expect(out.freed - out.trimmed, JSON.stringify(out)).toBeGreaterThan(48)
  })
})

/**
 * Runs `layer` for `advance` of test time, with `env` as the configuration, then closes its scope and
 * lets as much time pass again; the log lines it wrote.
 */
const runLayer = (layer: Layer.Layer<never, unknown>, env: Record<string, string>, advance: Duration.DurationInput = 0) => {
  const lines: Array<string> = []
  const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => void lines.push([message].flat().join(" "))))
  return Effect.scoped(Layer.build(layer).pipe(Effect.zipRight(TestClock.adjust(advance)))).pipe(
    Effect.zipLeft(TestClock.adjust(advance)),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
    Effect.provide(capture),
    Effect.as(lines)
  )
}

const counting = () => {
  const calls = { n: 0 }
  const trimmer = Effect.succeed<MallocTrim.Trimmer>({ trim: () => (calls.n++, true), problem: undefined })
  return { calls, layer: MallocTrim.layerWith(trimmer) }
}

describe("MallocTrim.layer", () => {
  it.effect("trims when it starts and then every AIGW_MALLOC_TRIM_MS, until its scope closes", () =>
    Effect.gen(function*() {
      const a = counting()
      yield* runLayer(a.layer, {}, Duration.millis(MallocTrim.DEFAULT_INTERVAL_MS * 3))
      expect(a.calls.n).toBe(4)
      const b = counting()
      yield* runLayer(b.layer, { AIGW_MALLOC_TRIM_MS: "1000" }, "2500 millis")
      expect(b.calls.n).toBe(3)
    }))

  it.effect("AIGW_MALLOC_TRIM_MS=0 never trims, and a negative value is refused naming the variable", () =>
    Effect.gen(function*() {
      const off = counting()
      yield* runLayer(off.layer, { AIGW_MALLOC_TRIM_MS: "0" }, "1 minute")
      expect(off.calls.n).toBe(0)
      const exit = yield* Effect.exit(runLayer(counting().layer, { AIGW_MALLOC_TRIM_MS: "-5" }))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) && exit.cause)).toContain("AIGW_MALLOC_TRIM_MS")
    }))

  it.effect("where there is nothing to call it says why, once, and the host starts", () =>
    Effect.gen(function*() {
      const unavailable = MallocTrim.layerWith(Effect.succeed({ trim: undefined, problem: "the native module was not built" }))
      const lines = yield* runLayer(unavailable, {}, "1 minute")
      expect(lines).toEqual(["freed C heap memory is not returned to the system: the native module was not built"])
    }))

  it.effect("the real addon loads here (npm install builds it)", () =>
    Effect.gen(function*() {
      const trimmer = yield* MallocTrim.loadTrimmer
      if (glibc) {
        expect(trimmer.problem).toBeUndefined()
        expect(trimmer.trim?.()).toBeTypeOf("boolean")
      } else expect(trimmer.problem).toBeTypeOf("string")
    }))
})
