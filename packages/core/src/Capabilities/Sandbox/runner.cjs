"use strict"
/**
 * The program inside a sandbox process (started by Sandbox.ts, never in the gateway's process).
 * It loads one interpreter (QuickJS or Pyodide, both WebAssembly) or a document reader (PDF.js,
 * mammoth), locks the process down, then runs one untrusted program (or reads one untrusted
 * document) and exits.
 *
 * Protocol on the pipes: argv[2] is the language, argv[3] the interpreter packages' directories; this process writes `{"type":"ready"}` once the
 * interpreter is loaded, reads one job line `{ code, timeoutMs, memoryMb, maxOutput, files: [{ name, size }] }` from
 * stdin followed by the files' bytes as they are (a document reader's input), and writes one result line. It exits when the job is done or when stdin closes (its gateway
 * went away).
 *
 * The lockdown is the in-process layer only; the outer layers (empty environment, Node's permission
 * model, bubblewrap namespaces, OS limits) are set by the parent. See docs/security.md.
 */
const fs = require("node:fs")

const language = process.argv[2]
/** Installed directories of the interpreter packages, resolved by the parent. */
const modules = JSON.parse(process.argv[3])
const writeLine = (message) => fs.writeSync(1, `${JSON.stringify(message)}\n`)

// The host's console writes to stdout, the protocol pipe, and a program can reach it: Pyodide's ctypes
// finds Emscripten's console imports (`emscripten_console_log`). It writes to stderr instead, which the
// gateway never reads as protocol. Set before an interpreter loads, so whatever binds it binds this one.
globalThis.console = new (require("node:console").Console)({ stdout: process.stderr, stderr: process.stderr })

/** What a result's `error` keeps (a thrown message, a traceback's last line): the gateway shows 2,000 characters of it. */
const MAX_ERROR = 10_000
const stdin = process.stdin
const exit = process.exit.bind(process)

/** Pyodide's Emscripten file systems read one table through process.binding at load. */
const fsConstants = fs.constants
process.binding = (name) => {
  if (name === "constants") return { fs: fsConstants }
  throw new Error("process.binding is not available in the sandbox")
}

const refuse = (what) => () => {
  throw new Error(`${what} is not available in the sandbox`)
}

/**
 * Closes every way out that the permission model leaves open on this Node version (network,
 * signals), on the shared built-in objects themselves, so `import("node:net")` from the global
 * scope finds them closed too; then removes host objects from the global scope.
 */
const lockDown = () => {
  const net = require("node:net")
  const dgram = require("node:dgram")
  const dns = require("node:dns")
  net.Socket.prototype.connect = refuse("network access")
  net.Server.prototype.listen = refuse("network access")
  net.Server.prototype._listen2 = refuse("network access")
  for (const m of ["bind", "send", "connect"]) dgram.Socket.prototype[m] = refuse("network access")
  for (const target of [dns, dns.promises, dns.Resolver.prototype, dns.promises.Resolver.prototype]) {
    for (const key of Object.keys(target)) {
      if (typeof target[key] === "function" && /^(lookup|resolve|reverse)/.test(key)) target[key] = refuse("name resolution")
    }
  }
  // The parent passes an empty environment; bubblewrap adds PWD.
  for (const key of Object.keys(process.env)) delete process.env[key]
  // The permission model refuses child processes; Pyodide's os.system takes that refusal as fatal (the run
  // ended without its output), so a command is answered as a shell that cannot run it would be: status 127.
  const childProcess = require("node:child_process")
  for (const m of ["spawn", "exec", "execFile", "fork", "execSync", "execFileSync"]) childProcess[m] = refuse("processes")
  childProcess.spawnSync = () => ({ pid: 0, output: [null, null, null], stdout: null, stderr: null, status: 127, signal: null, error: new Error("processes are not available in the sandbox") })
  process.kill = refuse("process.kill")
  process._kill = refuse("process.kill")
  process.dlopen = refuse("native addons")
  process.chdir = refuse("process.chdir")
  for (const m of ["setuid", "setgid", "seteuid", "setegid", "setgroups", "initgroups"]) process[m] = refuse(`process.${m}`)
  require("node:os").setPriority = refuse("os.setPriority")
  // Runtime V8 flags (e.g. --allow-natives-syntax) would open the engine's internals to the program.
  require("node:v8").setFlagsFromString = refuse("v8.setFlagsFromString")
  for (const name of ["process", "fetch", "WebSocket", "EventSource", "Request", "Response", "Headers", "FormData", "navigator", "global"]) {
    try {
      delete globalThis[name]
    } catch {
      globalThis[name] = undefined
    }
  }
}

const clip = (text, max) => (text.length > max ? `${text.slice(0, max)}\n[output truncated]` : text)

/** JavaScript in QuickJS: no host objects at all; its own memory limit and interrupt deadline. */
const loadJavascript = async () => {
  const core = require(modules.quickjs)
  const variant = require(modules.variant)
  const module = await core.newQuickJSWASMModuleFromVariant(variant.default ?? variant)
  return (job) => {
    const started = performance.now()
    const runtime = module.newRuntime()
    runtime.setMemoryLimit(job.memoryMb * 1024 * 1024)
    // Under the sandbox process's own stack (about 1 MB, which QuickJS's frames in WebAssembly use too).
    runtime.setMaxStackSize(256 * 1024)
    const deadline = Date.now() + job.timeoutMs
    runtime.setInterruptHandler(core.shouldInterruptAfterDeadline(deadline))
    const vm = runtime.newContext()
    const stdout = []
    const stderr = []
    let printed = 0
    const consoleObject = vm.newObject()
    for (const [name, sink] of [["log", stdout], ["info", stdout], ["debug", stdout], ["error", stderr], ["warn", stderr]]) {
      const fn = vm.newFunction(name, (...args) => {
        if (printed > job.maxOutput) return
        const line = args.map((a) => {
          const v = vm.dump(a)
          return typeof v === "string" ? v : JSON.stringify(v)
        }).join(" ")
        printed += line.length
        sink.push(line)
      })
      vm.setProp(consoleObject, name, fn)
      fn.dispose()
    }
    vm.setProp(vm.global, "console", consoleObject)
    consoleObject.dispose()
    const output = () => ({ stdout: clip(stdout.join("\n"), job.maxOutput), stderr: clip(stderr.join("\n"), job.maxOutput), durationMs: Math.round(performance.now() - started) })
    /**
     * `step()`, or, when it overflows a stack, the program's RangeError naming `what`: recursion past QuickJS's
     * limit is the program's own error, and Node's stack, which a deeper limit would reach first (the process
     * ended and the output was lost), is caught the same way.
     */
    const unlessTooDeep = (what, step) => {
      try {
        return { value: step() }
      } catch (e) {
        if (!(e instanceof RangeError)) throw e
        return { failed: { ...output(), result: null, exitCode: 1, error: `RangeError: ${what} nests too deeply (stack overflow)`, timedOut: false } }
      }
    }
    const ran = unlessTooDeep("the program", () => vm.evalCode(job.code, "main.js"))
    if (ran.failed) return ran.failed
    const outcome = ran.value
    const timedOut = Date.now() >= deadline
    const base = output()
    if (outcome.error) {
      const thrown = unlessTooDeep("the error thrown", () => vm.dump(outcome.error))
      if (thrown.failed) return thrown.failed
      const err = thrown.value
      const message = typeof err === "object" && err !== null ? `${err.name ?? "Error"}: ${err.message ?? JSON.stringify(err)}` : String(err)
      // A run its deadline interrupted exits 124, as one the parent kills at the deadline does (`timeout`'s status).
      return { ...base, result: null, exitCode: timedOut ? 124 : 1, error: timedOut ? `time limit of ${job.timeoutMs} ms exceeded` : message, timedOut }
    }
    const dumped = unlessTooDeep("the result", () => vm.dump(outcome.value))
    if (dumped.failed) return dumped.failed
    const value = dumped.value
    const result = value === undefined ? null : JSON.stringify(value) ?? null
    return { ...base, result: result === null ? null : clip(result, job.maxOutput), exitCode: 0, error: null, timedOut: false }
  }
}

/** The user's part of a Python traceback (Pyodide's own frames left out). */
const userTrace = (message) => {
  const lines = message.trim().split("\n")
  const at = lines.findIndex((l) => l.includes("File \"<exec>\""))
  return at > 0 ? [lines[0], ...lines.slice(at)].join("\n") : message.trim()
}

/** Runs `__aigw_src` as the program (`<exec>`, top-level await allowed) and sets `__aigw_exit` to its SystemExit code (None: none). */
const EXIT_DRIVER = `
from pyodide.code import eval_code_async as __aigw_eval
__aigw_exit = None
try:
    await __aigw_eval(__aigw_src, globals(), filename="<exec>")
except SystemExit as __aigw_e:
    __aigw_exit = __aigw_e.code
`

/** Python in Pyodide, whose `js` module sees an empty object instead of the global scope. */
const loadPython = async () => {
  const { loadPyodide } = require(modules.pyodide)
  const out = []
  const err = []
  let printed = 0
  const sink = (list) => (s) => {
    if (printed > 0 && printed + s.length > 4 * 1024 * 1024) return
    printed += s.length
    list.push(s)
  }
  // The program's bytes, decoded as a stream: a character split across writes stays whole, and bytes that are
  // not UTF-8 become U+FFFD (Pyodide's line batching decoded each write alone, dropping and mangling characters).
  const decoders = []
  const bytesTo = (list) => {
    const decoder = new TextDecoder("utf-8")
    const push = sink(list)
    decoders.push(() => push(decoder.decode()))
    return { write: (bytes) => (push(decoder.decode(bytes, { stream: true })), bytes.length) }
  }
  const py = await loadPyodide({ jsglobals: {}, stdout: sink(out), stderr: sink(err) })
  py.setStdout(bytesTo(out))
  py.setStderr(bytesTo(err))
  /** What the program wrote, as `print` lines joined: without the last line's newline. */
  const written = (list) => list.join("").replace(/\n$/, "")
  // The interpreter's own API (file systems that mount host directories, the loader) stays out of reach.
  py.unregisterJsModule("pyodide_js")
  py.runPython("import sys\nfor name in [m for m in sys.modules if m == 'pyodide_js' or m.startswith('pyodide_js.')]:\n    sys.modules.pop(name)")
  return async (job) => {
    const started = performance.now()
    const base = () => {
      for (const flush of decoders) flush()
      return { stdout: clip(written(out), job.maxOutput), stderr: clip(written(err), job.maxOutput), result: null, timedOut: false, durationMs: Math.round(performance.now() - started) }
    }
    try {
      // The program runs under a driver that catches SystemExit (`sys.exit(3)`, `raise SystemExit`), as Python's
      // own entry point does: left to Pyodide, it ended the whole sandbox process and lost what the program printed.
      py.globals.set("__aigw_src", job.code)
      await py.runPythonAsync(EXIT_DRIVER, { filename: "<aigw>" })
      const code = py.globals.get("__aigw_exit")
      if (code === undefined || code === null) return { ...base(), exitCode: 0, error: null }
      if (typeof code === "number" && Number.isInteger(code)) return { ...base(), exitCode: code & 255, error: code === 0 ? null : `SystemExit: ${code}` }
      // A message instead of a status: Python writes it to stderr and exits 1.
      const message = String(code && code.toString ? code.toString() : code)
      err.push(`${err.length > 0 && !err.at(-1).endsWith("\n") ? "\n" : ""}${message}`)
      return { ...base(), exitCode: 1, error: `SystemExit: ${message.split("\n")[0]}` }
    } catch (e) {
      const trace = userTrace(String((e && e.message) || e))
      err.push(`${err.length > 0 && !err.at(-1).endsWith("\n") ? "\n" : ""}${trace}`)
      const lines = trace.split("\n")
      return { ...base(), exitCode: 1, error: lines[lines.length - 1] }
    }
  }
}

/** A PDF's text per page with PDF.js (unpdf); the document is the job's one file. */
const loadPdf = async () => {
  const { extractText, getDocumentProxy } = require(modules.unpdf)
  return async (job) => {
    const base = { stdout: "", stderr: "", timedOut: false }
    let pdf
    try {
      const [bytes] = job.files.values()
      pdf = await getDocumentProxy(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    } catch {
      return { ...base, result: null, exitCode: 1, error: "file is not a readable PDF" }
    }
    try {
      const pages = await extractText(pdf, { mergePages: false })
      const result = JSON.stringify({ totalPages: pages.totalPages, text: pages.text })
      if (result.length > job.maxOutput) return { ...base, result: null, exitCode: 1, error: `the PDF's text exceeds ${job.maxOutput} characters` }
      return { ...base, result, exitCode: 0, error: null }
    } catch {
      return { ...base, result: null, exitCode: 1, error: "could not extract text from the PDF" }
    }
  }
}

/**
 * A DOCX document's text with mammoth. The job's files are the archive's XML parts, inflated by the
 * gateway's bounded zip reader (Zip.ts), so no zip is opened here.
 */
const loadDocx = async () => {
  const mammoth = require(modules.mammoth)
  return async (job) => {
    const base = { stdout: "", stderr: "", timedOut: false }
    const parts = job.files
    // mammoth's zip interface (lib/unzip.js), which it also takes as `file` in place of a path or buffer.
    const file = {
      exists: (name) => parts.has(name),
      read: async (name, encoding) => {
        const bytes = parts.get(name)
        if (bytes === undefined) throw new Error(`no ${name} in the document`)
        if (encoding === "base64") return bytes.toString("base64")
        return encoding ? new TextDecoder(encoding).decode(bytes) : bytes
      }
    }
    let text
    try {
      text = (await mammoth.extractRawText({ file })).value.trim()
    } catch {
      return { ...base, result: null, exitCode: 1, error: "file is not a readable DOCX document" }
    }
    const result = JSON.stringify({ text })
    if (result.length > job.maxOutput) return { ...base, result: null, exitCode: 1, error: `the document's text exceeds ${job.maxOutput} characters` }
    return { ...base, result, exitCode: 0, error: null }
  }
}

const loaders = { python: loadPython, javascript: loadJavascript, pdf: loadPdf, docx: loadDocx }

const main = async () => {
  const run = await loaders[language]()
  lockDown()
  writeLine({ type: "ready" })
  const chunks = []
  let received = 0
  let job
  let filesAt = 0
  let needed = Infinity
  let running = false
  // The gateway closed the pipe without a job (it went away, or drops a warm process).
  stdin.on("end", () => running || exit(0))
  stdin.on("data", async (chunk) => {
    if (running) return
    chunks.push(chunk)
    received += chunk.length
    // Only the new chunk is searched for the line's end: a program's job line may be megabytes long.
    const newline = job === undefined ? chunk.indexOf(10) : -1
    if (newline >= 0) {
      const lineEnd = received - chunk.length + newline
      job = JSON.parse(Buffer.concat(chunks).toString("utf8", 0, lineEnd))
      filesAt = lineEnd + 1
      needed = filesAt + job.files.reduce((n, f) => n + f.size, 0)
    }
    if (received < needed) return
    running = true
    const input = Buffer.concat(chunks)
    chunks.length = 0
    let at = filesAt
    job.files = new Map(job.files.map((f) => [f.name, input.subarray(at, (at += f.size))]))
    const result = await run(job)
    writeLine({ type: "result", ...result, error: typeof result.error === "string" ? result.error.slice(0, MAX_ERROR) : result.error })
    exit(0)
  })
}

main().catch((e) => {
  writeLine({ type: "failed", error: String((e && e.message) || e) })
  exit(1)
})
