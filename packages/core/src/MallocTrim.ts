/**
 * Gives the C heap's free pages back to the system: glibc's malloc_trim(0), through the
 * @aigw/malloc-trim addon, once when the layer starts and then every AIGW_MALLOC_TRIM_MS.
 *
 * Why: glibc's free() returns memory to the system only from the top of its main heap. What V8
 * frees below a live allocation stays resident: the parser's and compiler's memory of the host's
 * start, and later the buffers and compile jobs of busy periods. malloc_trim hands those pages back
 * (madvise); a page used again costs one page fault. docs/performance.md ("Memory") has the figures.
 *
 * Where there is nothing to call (not glibc, or the addon was not built) the layer logs why once
 * and does nothing else: the gateway works the same, with more resident memory.
 */
import { Config, Duration, Effect, Layer, Schedule } from "effect"
import { LIMIT_MAX } from "./Config.ts"

/** The default of AIGW_MALLOC_TRIM_MS. */
export const DEFAULT_INTERVAL_MS = 5_000

/** What the addon gives: `trim` where it can run, otherwise `problem` saying why not. */
export interface Trimmer {
  readonly trim: (() => boolean) | undefined
  readonly problem: string | undefined
}

/** AIGW_MALLOC_TRIM_MS: 0 turns trimming off; at most a timer's longest wait (a longer one never came: Effect takes it as forever). */
export const intervalMs = Config.integer("AIGW_MALLOC_TRIM_MS").pipe(
  Config.validate({ message: "must be 0 (off) or a number of milliseconds up to 2147483647", validation: (n) => n >= 0 && n <= LIMIT_MAX }),
  Config.withDefault(DEFAULT_INTERVAL_MS)
)

/** The addon, loaded on the layer's start (it is a native module: never on an import of core). */
export const loadTrimmer: Effect.Effect<Trimmer> = Effect.tryPromise(() => import("@aigw/malloc-trim")).pipe(
  Effect.map((m): Trimmer => m.default),
  Effect.catchAll((e) => Effect.succeed<Trimmer>({ trim: undefined, problem: `@aigw/malloc-trim could not be loaded (${String(e.error)})` }))
)

/** Trims with `trimmer` now and then every AIGW_MALLOC_TRIM_MS, until the layer's scope closes. */
export const layerWith = (trimmer: Effect.Effect<Trimmer>) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const everyMs = yield* intervalMs
    if (everyMs === 0) return
    const { problem, trim } = yield* trimmer
    if (trim === undefined) {
      yield* Effect.logInfo(`freed C heap memory is not returned to the system: ${problem}`)
      return
    }
    yield* Effect.forkScoped(Effect.repeat(Effect.sync(trim), Schedule.spaced(Duration.millis(everyMs))))
  }))

/** What the long-lived hosts (node, MCP stdio) run. */
export const layer = layerWith(loadTrimmer)
