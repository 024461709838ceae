/**
 * Sandboxed code execution, in-process (provider `local`):
 * - javascript: QuickJS compiled to WebAssembly — no file system, network or host objects; a
 *   memory limit and a deadline enforced by the interpreter's interrupt handler.
 * - python: CPython compiled to WebAssembly (Pyodide) in a worker thread, with the standard
 *   library only, no network; a worker that runs past the deadline is terminated. One worker is
 *   kept warm, and each run gets a fresh interpreter.
 * - bash: needs a remote sandbox (e2b), which is not supported: a clear 422.
 */
import { Context, Effect, Layer } from "effect"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { Unprocessable } from "../Errors.ts"

export type Language = "python" | "javascript" | "bash"

export interface ExecutionResult {
  readonly language: Language
  readonly stdout: string
  readonly stderr: string
  /** The value of the last expression (javascript) as JSON text, when there is one. */
  readonly result: string | null
  readonly exitCode: number
  readonly error: string | null
  readonly timedOut: boolean
  readonly durationMs: number
  readonly provider: "local"
}

export const MEMORY_LIMIT_BYTES = 64 * 1024 * 1024
/** Output beyond this is cut (and said so). */
export const MAX_OUTPUT = 100_000

const clip = (s: string) => (s.length > MAX_OUTPUT ? `${s.slice(0, MAX_OUTPUT)}\n[output truncated]` : s)

/** The QuickJS WebAssembly module, loaded once; a deployment without it gets a clear 422. */
const quickjs = Effect.runSync(Effect.cached(
  Effect.tryPromise({
    try: async () => {
      const core = await import("quickjs-emscripten-core")
      const module = await core.newQuickJSWASMModuleFromVariant(import("@jitl/quickjs-wasmfile-release-sync") as any)
      return { module, shouldInterruptAfterDeadline: core.shouldInterruptAfterDeadline }
    },
    catch: () => new Unprocessable({ message: "The JavaScript sandbox (QuickJS WebAssembly) is not available in this deployment." })
  })
))

const runJavascript = (code: string, timeoutMs: number) =>
  Effect.flatMap(quickjs, ({ module: quickjs, shouldInterruptAfterDeadline }) => Effect.sync((): ExecutionResult => {
    const started = performance.now()
    const runtime = quickjs.newRuntime()
    runtime.setMemoryLimit(MEMORY_LIMIT_BYTES)
    runtime.setMaxStackSize(1024 * 1024)
    const deadline = Date.now() + timeoutMs
    runtime.setInterruptHandler(shouldInterruptAfterDeadline(deadline))
    const vm = runtime.newContext()
    const stdout: Array<string> = []
    const stderr: Array<string> = []
    try {
      const consoleObject = vm.newObject()
      for (const [name, sink] of [["log", stdout], ["info", stdout], ["debug", stdout], ["error", stderr], ["warn", stderr]] as const) {
        const fn = vm.newFunction(name, (...args) => {
          sink.push(args.map((a) => {
            const v = vm.dump(a)
            return typeof v === "string" ? v : JSON.stringify(v)
          }).join(" "))
        })
        vm.setProp(consoleObject, name, fn)
        fn.dispose()
      }
      vm.setProp(vm.global, "console", consoleObject)
      consoleObject.dispose()
      const outcome = vm.evalCode(code, "main.js")
      const timedOut = Date.now() >= deadline
      if (outcome.error) {
        const err = vm.dump(outcome.error)
        outcome.error.dispose()
        const message = typeof err === "object" && err !== null ? `${err.name ?? "Error"}: ${err.message ?? JSON.stringify(err)}` : String(err)
        return { language: "javascript", stdout: clip(stdout.join("\n")), stderr: clip(stderr.join("\n")), result: null, exitCode: 1, error: timedOut ? `time limit of ${timeoutMs} ms exceeded` : message, timedOut, durationMs: Math.round(performance.now() - started), provider: "local" }
      }
      const value = vm.dump(outcome.value)
      outcome.value.dispose()
      return {
        language: "javascript",
        stdout: clip(stdout.join("\n")),
        stderr: clip(stderr.join("\n")),
        result: value === undefined ? null : JSON.stringify(value) ?? null,
        exitCode: 0,
        error: null,
        timedOut: false,
        durationMs: Math.round(performance.now() - started),
        provider: "local"
      }
    } finally {
      vm.dispose()
      runtime.dispose()
    }
  }))

/** The worker: loads Pyodide, waits for one program, runs it, answers, exits. */
const PYTHON_WORKER = `
const { parentPort, workerData } = require("node:worker_threads")
const { loadPyodide } = require(workerData.pyodide)
const ready = loadPyodide({ stdout: () => {}, stderr: () => {} })
/** The user's part of a traceback (Pyodide's own frames left out). */
const userTrace = (message) => {
  const lines = message.trim().split("\\n")
  const at = lines.findIndex((l) => l.includes('File "<exec>"'))
  return at > 0 ? [lines[0], ...lines.slice(at)].join("\\n") : message.trim()
}
parentPort.once("message", async (code) => {
  const py = await ready
  const out = [], err = []
  py.setStdout({ batched: (s) => out.push(s) })
  py.setStderr({ batched: (s) => err.push(s) })
  parentPort.postMessage({ type: "started" })
  try {
    await py.runPythonAsync(code)
    parentPort.postMessage({ type: "done", stdout: out.join("\\n"), stderr: err.join("\\n"), error: null })
  } catch (e) {
    const trace = userTrace(String((e && e.message) || e))
    const lines = trace.split("\\n")
    parentPort.postMessage({ type: "done", stdout: out.join("\\n"), stderr: [...err, trace].join("\\n"), error: lines[lines.length - 1] })
  }
})
`

const makeService = Effect.sync(() => {
  const require = createRequire(import.meta.url)
  let pyodidePath: string | undefined
  try {
    pyodidePath = require.resolve("pyodide/pyodide.js")
  } catch {
    pyodidePath = undefined
  }
  let warm: Worker | undefined
  const spawn = () => new Worker(PYTHON_WORKER, { eval: true, workerData: { pyodide: pyodidePath }, resourceLimits: { maxOldGenerationSizeMb: 256 } })
  const takeWorker = () => {
    const w = warm ?? spawn()
    warm = spawn()
    warm.unref()
    return w
  }

  /** Interpreter start-up allowance (a cold worker loads Pyodide first). */
  const LOAD_MS = 30_000

  const runPython = (code: string, timeoutMs: number) =>
    Effect.async<ExecutionResult>((resume) => {
      const started = performance.now()
      const worker = takeWorker()
      let timer: ReturnType<typeof setTimeout>
      const finish = (r: Omit<ExecutionResult, "language" | "durationMs" | "provider">) => {
        clearTimeout(timer)
        void worker.terminate()
        resume(Effect.succeed({ ...r, stdout: clip(r.stdout), stderr: clip(r.stderr), language: "python", durationMs: Math.round(performance.now() - started), provider: "local" }))
      }
      const expire = (ms: number, what: string) => {
        clearTimeout(timer)
        timer = setTimeout(() => finish({ stdout: "", stderr: "", result: null, exitCode: 124, error: what, timedOut: true }), ms)
      }
      // The run's own budget starts once the interpreter is up and the program begins.
      expire(LOAD_MS, "the Python sandbox did not start in time")
      worker.on("message", (m: { type: "started" } | { type: "done"; stdout: string; stderr: string; error: string | null }) => {
        if (m.type === "started") return expire(timeoutMs, `time limit of ${timeoutMs} ms exceeded`)
        finish({ stdout: m.stdout, stderr: m.stderr, result: null, exitCode: m.error ? 1 : 0, error: m.error, timedOut: false })
      })
      worker.once("error", (e) => finish({ stdout: "", stderr: String(e), result: null, exitCode: 1, error: `sandbox failed: ${e.message}`, timedOut: false }))
      worker.postMessage(code)
      return Effect.sync(() => {
        clearTimeout(timer)
        void worker.terminate()
      })
    })

  const execute = (input: { readonly code: string; readonly language: Language; readonly provider: string; readonly timeoutMs: number }) =>
    Effect.suspend((): Effect.Effect<ExecutionResult, Unprocessable> => {
      if (input.provider !== "auto" && input.provider !== "local") {
        return Effect.fail(new Unprocessable({ message: `Code runs in the in-process sandbox (provider local); provider ${input.provider} is not supported for code execution yet.` }))
      }
      switch (input.language) {
        case "javascript":
          return runJavascript(input.code, input.timeoutMs)
        case "python":
          return pyodidePath
            ? runPython(input.code, input.timeoutMs)
            : Effect.fail(new Unprocessable({ message: "Python execution needs the pyodide package, which is not installed in this deployment." }))
        case "bash":
          return Effect.fail(new Unprocessable({ message: "bash needs a remote sandbox provider (e2b), which is not supported yet; use python or javascript." }))
      }
    })

  return { execute }
})

export class CodeExecution extends Context.Tag("aigw/CodeExecution")<CodeExecution, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(CodeExecution, makeService)
