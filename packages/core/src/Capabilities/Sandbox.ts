/**
 * Sandbox processes for untrusted code and documents. Neither is read in the gateway's process: each
 * run gets a fresh child process (runner.cjs) that loads one WebAssembly interpreter or one document
 * reader and is killed (with its whole process group) when the run ends or overruns. Layers
 * (docs/security.md):
 *
 * 1. bubblewrap (`bwrap`), when it works here: new user, PID, network, IPC, UTS and mount
 *    namespaces, no capabilities, only the Node runtime and the interpreter files visible, read-only.
 * 2. OS limits set by `/bin/sh`'s `ulimit` before it execs the rest (any POSIX system has the shell,
 *    Lambda's runtime included; prlimit is util-linux): address space (which bounds WebAssembly memory
 *    and the ArrayBuffers a document reader inflates), CPU time, open files, file size 0 (no writes),
 *    no core dumps.
 * 3. Node's permission model: file reads only of the interpreter files, no writes, no child
 *    processes, no workers, no native addons, no inspector; no code generation from strings (so
 *    Pyodide's bridge cannot run host JavaScript); an empty environment.
 * 4. In the runner: network, DNS and signals closed on the built-in modules themselves, host
 *    objects removed from the global scope; QuickJS has no host objects at all, Pyodide's `js`
 *    module sees an empty object.
 *
 * Runs are bounded per process and per avatar; a warm process per language is kept ready after
 * the first run of that language, so a run does not wait for the interpreter to load.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** An interpreter, or a document reader: `pdf` (PDF.js through unpdf), `docx` (mammoth). */
export type SandboxLanguage = "python" | "javascript" | "pdf" | "docx"
/** `auto`: bubblewrap when it works on this machine, else a plain child process. */
export type SandboxMode = "auto" | "bwrap" | "process" | "off"
export type Isolation = "bwrap" | "process"

export interface SandboxLimits {
  readonly memoryMb: number
  readonly maxOutput: number
}

export interface RunOutcome {
  readonly stdout: string
  readonly stderr: string
  /** The value of the last expression (javascript) as JSON text, when there is one. */
  readonly result: string | null
  readonly exitCode: number
  readonly error: string | null
  readonly timedOut: boolean
}

/** Interpreter start-up allowance (Pyodide loads its standard library first). */
const LOAD_MS = 30_000
/** CPU seconds a sandbox process may use in all (a backstop behind the wall-clock kill). */
const CPU_SECONDS = 90
/**
 * Address space the interpreters and document readers map as they load, beyond the bare runtime's
 * (WebAssembly code, Pyodide's standard library): with the memory limit, what a program gets.
 */
const LOADING_ADDRESS_SPACE_MB = 320
/**
 * The bare runtime's when it cannot be measured (no /proc): the largest measured, Node 24's and 26's
 * (about 1.25 GiB; Node 20's and 22's about 0.7 GiB).
 */
const FALLBACK_RUNTIME_ADDRESS_SPACE_MB = 1280
const MB = 1024 * 1024

interface Runtime {
  readonly runner: string
  readonly modules: Record<string, string>
  /** Directories the sandbox may read: the runner and the interpreter packages. */
  readonly readDirs: ReadonlyArray<string>
  readonly missing: ReadonlyArray<string>
}

/** The installed directory of package `name` (found from its entry point: not every package exports package.json). */
const packageDir = (require: NodeRequire, name: string): string | undefined => {
  let entry: string
  try {
    // A trailing slash skips a built-in module of the same name (readable-stream's string_decoder).
    entry = require.resolve(`${name}/`)
  } catch {
    try {
      entry = require.resolve(name)
    } catch {
      return undefined
    }
  }
  if (!path.isAbsolute(entry)) return undefined
  for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const manifest = path.join(dir, "package.json")
    try {
      if (JSON.parse(fs.readFileSync(manifest, "utf8")).name === name) return fs.realpathSync(dir)
    } catch {
      // no manifest here
    }
  }
  return undefined
}

/** The directories of package `name` and of everything it depends on, or undefined when one is missing. */
const packageClosure = (require: NodeRequire, name: string): ReadonlyArray<string> | undefined => {
  const dirs = new Set<string>()
  const visit = (from: NodeRequire, dependency: string): boolean => {
    const dir = packageDir(from, dependency)
    if (dir === undefined) return false
    if (dirs.has(dir)) return true
    dirs.add(dir)
    const manifest = path.join(dir, "package.json")
    const dependencies = Object.keys(JSON.parse(fs.readFileSync(manifest, "utf8")).dependencies ?? {})
    const inside = createRequire(manifest)
    return dependencies.every((d) => visit(inside, d))
  }
  return visit(require, name) ? [...dirs] : undefined
}

/** Where the runner and the interpreters are installed (absent ones make that language unavailable). */
const locateRuntime = (): Runtime => {
  const here = path.dirname(fileURLToPath(import.meta.url))
  const runner = path.join(here, "Sandbox", "runner.cjs")
  const require = createRequire(import.meta.url)
  const quickjs = packageDir(require, "quickjs-emscripten-core")
  const quickjsRequire = quickjs ? createRequire(path.join(quickjs, "package.json")) : require
  const dirs = {
    quickjs,
    variant: packageDir(require, "@jitl/quickjs-wasmfile-release-sync"),
    ffi: packageDir(quickjsRequire, "@jitl/quickjs-ffi-types"),
    pyodide: packageDir(require, "pyodide"),
    unpdf: packageDir(require, "unpdf")
  }
  // mammoth is plain CommonJS with dependencies of its own, each of which the sandbox must read.
  const mammoth = packageClosure(require, "mammoth")
  const missing = [
    ...(fs.existsSync(runner) ? [] : ["the sandbox runner"]),
    ...(dirs.quickjs && dirs.variant && dirs.ffi ? [] : ["javascript"]),
    ...(dirs.pyodide ? [] : ["python"]),
    ...(dirs.unpdf ? [] : ["pdf"]),
    ...(mammoth ? [] : ["docx"])
  ]
  return {
    runner: fs.existsSync(runner) ? fs.realpathSync(runner) : runner,
    modules: Object.fromEntries(Object.entries({ ...dirs, mammoth: mammoth?.[0] }).filter(([, d]) => d !== undefined)) as Record<string, string>,
    readDirs: [path.dirname(runner), ...Object.values(dirs).filter((d): d is string => d !== undefined), ...(mammoth ?? [])],
    missing
  }
}

const which = (command: string): string | undefined => {
  for (const dir of (process.env.PATH ?? "/usr/bin:/bin").split(":")) {
    const candidate = path.join(dir, command)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

const nodeFlags = (runtime: Runtime, memoryMb: number) => {
  const flags = process.allowedNodeEnvironmentFlags
  return [
    flags.has("--permission") ? "--permission" : "--experimental-permission",
    ...runtime.readDirs.map((d) => `--allow-fs-read=${d}/*`),
    // Without guard regions, WebAssembly memory is bounded by the address-space limit.
    ...(flags.has("--disable-wasm-trap-handler") ? ["--disable-wasm-trap-handler"] : []),
    `--max-old-space-size=${memoryMb}`,
    // No eval or Function constructor: Python cannot turn a string into host JavaScript at all.
    "--disallow-code-generation-from-strings",
    "--no-warnings"
  ]
}

/**
 * The address space a bare sandbox runtime maps before it runs anything (`VmSize`, with the
 * sandbox's flags), in MB. Node reserves it up front, and how much differs between versions by
 * half a gigabyte (V8's tables), so a fixed allowance either left Node 24 and later no room to load
 * Pyodide or gave programs on Node 20 and 22 half a gigabyte past their limit.
 */
const runtimeAddressSpaceMb = (flags: ReadonlyArray<string>): number => {
  const probe = spawnSync(process.execPath, [
    ...flags,
    "--allow-fs-read=/proc/self/status",
    "-e",
    'process.stdout.write(require("fs").readFileSync("/proc/self/status", "utf8").match(/^VmSize:\\s*(\\d+) kB/m)?.[1] ?? "")'
  ], { stdio: "pipe", timeout: 10_000, env: {} })
  const kB = Number(String(probe.stdout ?? ""))
  return probe.status === 0 && Number.isSafeInteger(kB) && kB > 0 ? Math.ceil(kB / 1024) : FALLBACK_RUNTIME_ADDRESS_SPACE_MB
}

const SHELL = "/bin/sh"

/**
 * The shell program that sets the OS limits (soft and hard) and execs its arguments. One limit per
 * `ulimit`: dash takes one option at a time. Sizes in KiB, as both dash and bash read them.
 */
const ulimits = (addressSpaceMb: number) =>
  [`-v ${addressSpaceMb * 1024}`, `-t ${CPU_SECONDS}`, "-n 64", "-f 0", "-c 0"].map((l) => `ulimit ${l}`).join(" && ") + ' && exec "$@"'

/** bubblewrap's arguments: an empty root with the system libraries, Node and the runtime, read-only. */
const bwrapArgs = (runtime: Runtime) => {
  const binds = new Set<string>(["/usr", ...runtime.readDirs])
  const node = fs.realpathSync(process.execPath)
  if (!node.startsWith("/usr/")) binds.add(path.dirname(node))
  // The empty mounts first: bubblewrap applies its arguments in order, and a tmpfs on /tmp after the
  // binds would hide a runtime installed under /tmp.
  const args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
  for (const dir of binds) args.push("--ro-bind", dir, dir)
  for (const top of ["/lib", "/lib64", "/bin"]) {
    try {
      const st = fs.lstatSync(top)
      if (st.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(top), top)
      else if (st.isDirectory()) args.push("--ro-bind", top, top)
    } catch {
      // absent on this system
    }
  }
  if (fs.existsSync("/etc/ld.so.cache")) args.push("--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache")
  args.push("--uid", "65534", "--gid", "65534", "--chdir", "/", "--")
  return { args, node }
}

export interface Launcher {
  readonly isolation: Isolation
  /** The command line of a sandbox process for `language`. */
  readonly command: (language: SandboxLanguage) => { readonly file: string; readonly args: ReadonlyArray<string> }
  /** Languages whose interpreter is not installed. */
  readonly missing: ReadonlyArray<string>
}

/**
 * Builds the sandbox command lines for `mode`, or explains why code execution is unavailable.
 * bubblewrap is tried once with the real arguments (it fails where user namespaces are disabled).
 */
export const makeLauncher = (mode: SandboxMode, memoryMb: number): Launcher | { readonly unavailable: string } => {
  if (mode === "off") return { unavailable: "Code execution is switched off (AIGW_SANDBOX=off)." }
  const runtime = locateRuntime()
  if (runtime.missing.includes("the sandbox runner")) return { unavailable: "The sandbox runner (code execution, PDF and DOCX documents) is not part of this deployment." }
  const flags = nodeFlags(runtime, memoryMb)
  const limits = fs.existsSync(SHELL)
    ? [SHELL, "-c", ulimits(runtimeAddressSpaceMb(flags) + LOADING_ADDRESS_SPACE_MB + memoryMb), "sandbox-limits"]
    : []
  const plain = (language: SandboxLanguage) => [...flags, runtime.runner, language, JSON.stringify(runtime.modules)]
  let isolation: Isolation = "process"
  let bwrap: { args: Array<string>; node: string; file: string } | undefined
  if (mode !== "process") {
    const file = which("bwrap")
    const probe = file ? spawnSync(file, [...bwrapArgs(runtime).args, fs.realpathSync(process.execPath), "-e", "0"], { stdio: "pipe", timeout: 10_000, env: {} }) : undefined
    if (file && probe?.status === 0) {
      bwrap = { ...bwrapArgs(runtime), file }
      isolation = "bwrap"
    } else if (mode === "bwrap") {
      const why = file ? String(probe?.stderr ?? probe?.error ?? "").trim().split("\n")[0] : "bwrap is not installed (Debian: apt-get install bubblewrap)"
      return { unavailable: `AIGW_SANDBOX=bwrap, but bubblewrap does not work here: ${why}` }
    }
  }
  const command = (language: SandboxLanguage) => {
    const inner = bwrap ? [bwrap.file, ...bwrap.args, bwrap.node, ...plain(language)] : [process.execPath, ...plain(language)]
    const all = [...limits, ...inner]
    return { file: all[0]!, args: all.slice(1) }
  }
  return { isolation, command, missing: runtime.missing }
}

/** One sandbox process: ready once its interpreter is loaded; answers one job. */
interface SandboxProcess {
  readonly child: ChildProcess
  /** Resolves on the runner's `ready` line. */
  readonly ready: Promise<void>
  /** Resolves with the runner's `result` line; rejects if the process breaks the protocol. */
  readonly answer: Promise<Record<string, unknown>>
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>
  readonly kill: () => void
}

/** Bytes read from a sandbox's pipes before it is killed: its answer is bounded by the runner. */
const PIPE_LIMIT = 16 * MB

const start = (launcher: Launcher, language: SandboxLanguage): SandboxProcess => {
  const { args, file } = launcher.command(language)
  // A process group of its own, so a kill reaches everything it started; an empty environment.
  const child = spawn(file, args, { env: {}, stdio: ["pipe", "pipe", "pipe"], detached: true })
  const kill = () => {
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {
      // already gone
    }
  }
  let stderr = ""
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    // "close": after the pipes are drained, so a last answer line is never lost to "exit".
    child.once("close", (code, signal) => resolve({ code, signal, stderr }))
  )
  let onReady!: () => void
  let onAnswer!: (message: Record<string, unknown>) => void
  let onViolation!: (error: Error) => void
  const ready = new Promise<void>((resolve, reject) => {
    onReady = resolve
    void exited.then((e) => reject(new Error(`the sandbox process ended before it was ready (${e.signal ?? `exit ${e.code}`}) ${e.stderr.split("\n")[0] ?? ""}`.trim())))
  })
  const answer = new Promise<Record<string, unknown>>((resolve, reject) => {
    onAnswer = resolve
    onViolation = reject
  })
  ready.catch(() => {})
  answer.catch(() => {})
  // The protocol is exactly one `ready` line, then (after the job) one `result` line. Anything
  // else means the program reached the pipe itself: the process is killed.
  let state: "loading" | "running" | "done" = "loading"
  const finished = () => state === "done"
  const violated = (what: string) => {
    state = "done"
    kill()
    onViolation(new Error(`the sandbox broke its protocol (${what})`))
  }
  const line = (text: string) => {
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      return violated("a line that is not JSON")
    }
    const type = typeof message === "object" && message !== null ? (message as { type?: unknown }).type : undefined
    if (state === "loading" && type === "ready") {
      state = "running"
      return onReady()
    }
    if (state === "loading" && type === "failed") return kill()
    if (state === "running" && type === "result") {
      state = "done"
      return onAnswer(message as Record<string, unknown>)
    }
    violated(`an unexpected ${String(type ?? "line")}`)
  }
  let bytes = 0
  // The pieces of the line not ended yet, joined once at its end: a line of megabytes arrives in many
  // chunks, and joining each to the text before it copied that text every time (quadratic).
  let pending: Array<string> = []
  child.stdout!.setEncoding("utf8")
  child.stdout!.on("data", (chunk: string) => {
    if (state === "done") return
    bytes += chunk.length
    if (bytes > PIPE_LIMIT) return violated(`more than ${PIPE_LIMIT} bytes`)
    let from = 0
    for (let nl = chunk.indexOf("\n"); nl >= 0 && !finished(); nl = chunk.indexOf("\n", from)) {
      pending.push(chunk.slice(from, nl))
      const text = pending.length === 1 ? pending[0]! : pending.join("")
      pending = []
      line(text)
      from = nl + 1
    }
    if (from < chunk.length) pending.push(chunk.slice(from))
  })
  child.stderr!.setEncoding("utf8")
  child.stderr!.on("data", (chunk: string) => {
    if (stderr.length < 8192) stderr += chunk.slice(0, 8192 - stderr.length)
  })
  child.stdin!.on("error", () => {})
  child.once("error", () => kill())
  return { child, ready, answer, exited, kill }
}

/** A sandbox's output cut to `max` characters, marked when cut (also for remote sandboxes: CodeExecution.ts). */
export const text = (value: unknown, max: number): string => {
  const s = typeof value === "string" ? value : ""
  // Well-formed: a lone surrogate (bytes a program wrote that are not UTF-8, or a cut through a pair) is U+FFFD,
  // which every JSON parser takes; a strict one refuses a lone surrogate.
  return wellFormed(s.length > max ? `${s.slice(0, max)}\n[output truncated]` : s)
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/** `s` with each lone surrogate replaced by U+FFFD (String.prototype.toWellFormed, which TypeScript's ES2022 library does not type). */
const wellFormed = (s: string) => s.replace(LONE_SURROGATE, "\uFFFD")

/**
 * A sandbox's JSON result (a document reader's) parsed with every string well-formed: the runner's
 * JSON escapes a lone surrogate (`\ud800`), which the check of the text before parsing does not see.
 */
export const parseResult = (json: string): unknown => JSON.parse(json, (_key, value) => (typeof value === "string" ? wellFormed(value) : value))

/** The runner's result line as a RunOutcome: fields typed and cut, whatever the line held. */
const outcomeOf = (m: Record<string, unknown>, maxOutput: number): RunOutcome => ({
  stdout: text(m.stdout, maxOutput),
  stderr: text(m.stderr, maxOutput),
  result: typeof m.result === "string" ? text(m.result, maxOutput) : null,
  exitCode: Number.isInteger(m.exitCode) ? (m.exitCode as number) : 1,
  error: typeof m.error === "string" ? text(m.error, 2_000) : null,
  timedOut: m.timedOut === true
})

/** Why a sandbox process ended without an answer, in the caller's terms. */
const endedWithout = (e: { code: number | null; signal: NodeJS.Signals | null; stderr: string }, memoryMb: number): string => {
  if (e.signal === "SIGXCPU") return "CPU time limit exceeded"
  if (/out of memory|Allocation failed|heap limit|OOM/i.test(e.stderr) || e.code === 134) return `memory limit of ${memoryMb} MB (AIGW_SANDBOX_MEMORY_MB) exceeded`
  // A failed allocation under the address-space limit often ends V8 with a segmentation fault.
  if (e.code === 139 || e.signal === "SIGSEGV" || e.signal === "SIGABRT") return `the sandbox process crashed, most likely at its memory limit of ${memoryMb} MB (AIGW_SANDBOX_MEMORY_MB)`
  if (e.signal === "SIGKILL") return "the sandbox process was killed (output or memory limit)"
  return `the sandbox process ended unexpectedly (${e.signal ?? `exit ${e.code}`})`
}

/**
 * One job: `code` is the program; `files` are a document reader's bytes (runner.cjs), sent raw after
 * the job line so the gateway holds no encoded copy of them; `maxOutput` overrides the default cut.
 */
export interface SandboxJob {
  readonly code: string
  readonly files?: ReadonlyArray<SandboxFile>
  readonly timeoutMs: number
  readonly maxOutput?: number
}

export interface SandboxFile {
  readonly name: string
  readonly bytes: Uint8Array
}

export interface Sandbox {
  readonly isolation: Isolation
  /** Runs `code`; the promise never rejects for the program's own failures. `signal` kills the run. */
  readonly run: (language: SandboxLanguage, job: SandboxJob, signal?: AbortSignal) => Promise<RunOutcome>
  /** Kills the warm processes. */
  readonly close: () => void
}

/** The job line (the files' names and sizes in it), then each file's bytes as they are. */
const writeJob = (stdin: NodeJS.WritableStream, job: SandboxJob, memoryMb: number, maxOutput: number) => {
  const files = job.files ?? []
  const header = { code: job.code, timeoutMs: job.timeoutMs, memoryMb, maxOutput, files: files.map((f) => ({ name: f.name, size: f.bytes.byteLength })) }
  stdin.write(`${JSON.stringify(header)}\n`)
  for (const f of files) stdin.write(f.bytes)
  stdin.end()
}

export const makeSandbox = (launcher: Launcher, limits: SandboxLimits): Sandbox => {
  const warm = new Map<SandboxLanguage, SandboxProcess>()
  const unrefWarm = (p: SandboxProcess) => {
    p.child.unref()
    for (const s of [p.child.stdin, p.child.stdout, p.child.stderr]) (s as unknown as { unref?: () => void } | null)?.unref?.()
  }
  const keepWarm = (language: SandboxLanguage) => {
    if (warm.has(language)) return
    const next = start(launcher, language)
    unrefWarm(next)
    warm.set(language, next)
    void next.exited.then(() => {
      if (warm.get(language) === next) warm.delete(language)
    })
  }
  /** The warm process of `language` if there is one (a new one is started behind it), else a fresh one. */
  const take = (language: SandboxLanguage): SandboxProcess => {
    const ready = warm.get(language)
    warm.delete(language)
    if (ready && ready.child.exitCode === null && ready.child.signalCode === null) {
      ready.child.ref()
      keepWarm(language)
      return ready
    }
    ready?.kill()
    const fresh = start(launcher, language)
    // Loading two interpreters at once would slow this run down: the warm one starts after.
    void fresh.ready.then(() => keepWarm(language), () => {})
    return fresh
  }

  const run = (language: SandboxLanguage, job: SandboxJob, signal?: AbortSignal) =>
    new Promise<RunOutcome>((resolve) => {
      const proc = take(language)
      let settled = false
      let timer: ReturnType<typeof setTimeout> | undefined
      const finish = (outcome: RunOutcome) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        signal?.removeEventListener("abort", onAbort)
        proc.kill()
        resolve(outcome)
      }
      const failed = (error: string, timedOut = false): RunOutcome => ({ stdout: "", stderr: "", result: null, exitCode: timedOut ? 124 : 1, error, timedOut })
      const onAbort = () => finish(failed("the run was cancelled"))
      if (signal?.aborted) return finish(failed("the run was cancelled"))
      signal?.addEventListener("abort", onAbort, { once: true })
      timer = setTimeout(() => finish(failed("the sandbox did not start in time")), LOAD_MS)
      const maxOutput = job.maxOutput ?? limits.maxOutput
      proc.answer.then((m) => finish(outcomeOf(m, maxOutput)), (e: Error) => finish(failed(e.message)))
      void proc.exited.then((e) => finish(failed(endedWithout(e, limits.memoryMb))))
      proc.ready.then(
        () => {
          if (settled) return
          clearTimeout(timer)
          // QuickJS stops itself at the deadline; the kill is the hard bound for both languages.
          const grace = language === "javascript" ? 1_000 : 0
          timer = setTimeout(() => finish(failed(`time limit of ${job.timeoutMs} ms exceeded`, true)), job.timeoutMs + grace)
          writeJob(proc.child.stdin!, job, limits.memoryMb, maxOutput)
        },
        (e: Error) => finish(failed(`the sandbox could not start: ${e.message}`))
      )
    })

  const close = () => {
    for (const p of warm.values()) p.kill()
    warm.clear()
  }
  return { isolation: launcher.isolation, run, close }
}
