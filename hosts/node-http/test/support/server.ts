/**
 * Starts the real node host in a child process on a free loopback port, with the environment a
 * test gives it: the bundle `npm start` runs (hosts/node-http/dist/aigw.mjs, built by the global
 * setup), or with `AIGW_TEST_HOST=tsx` its sources through tsx.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { scratchDir } from "../../../../packages/core/test/support/scratch.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..")
const main = path.join(root, "hosts/node-http/src/main.ts")
const bundle = path.join(root, "hosts/node-http/dist/aigw.mjs")
/**
 * The bundle runs in plain node. Sources (the MCP host, or AIGW_TEST_HOST=tsx) run in node itself with
 * tsx as its loader, not under the tsx CLI: the CLI's wrapper relays a SIGTERM and SIGKILLs the server
 * (exit 143) when the server does not confirm it within 30 ms, which a busy machine's graceful shutdown can miss.
 */
const hostCommand = (entry: string, node = process.execPath): [string, Array<string>] =>
  entry === main && process.env.AIGW_TEST_HOST !== "tsx"
    ? [node, [bundle]]
    : [node, ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href, entry]]

/** The command that runs the node host under test (the bundle, or its sources with AIGW_TEST_HOST=tsx). */
export const nodeHostCommand = () => hostCommand(main)

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = net.createServer()
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
    srv.on("error", reject)
  })

/** Signals the server's whole process group: the host and the processes it started. */
const signalGroup = (child: ChildProcess, signal: NodeJS.Signals) => {
  try {
    process.kill(-child.pid!, signal)
  } catch {
    // the group is gone already
  }
}

export interface RunningServer {
  readonly url: string
  readonly port: number
  readonly dataDir: string
  readonly output: () => string
  readonly child: ChildProcess
  /** SIGTERM to the process group and wait for exit (SIGKILL after 15 s); returns the exit code. */
  readonly stop: () => Promise<number | null>
  /** SIGKILL to the process group (a crash) and wait. */
  readonly kill: () => Promise<void>
}

/** The environment of a host under test: loopback, the port, everything under `dataDir`, then `env`. */
export const hostEnv = (port: number, dataDir: string, env: Record<string, string>) => ({
  PATH: process.env.PATH ?? "",
  HOME: process.env.HOME ?? "",
  PORT: String(port),
  HOST: "127.0.0.1",
  AIGW_DATA_DIR: path.join(dataDir, "data"),
  DATABASE_URL: `sqlite:${path.join(dataDir, "data", "aigw.sqlite")}`,
  ...env
})

/** `node`: the node binary the host runs on (by default the one running the tests). */
export const startServer = async (
  env: Record<string, string> = {},
  options: { dataDir?: string; port?: number; node?: string } = {}
): Promise<RunningServer> => {
  const port = options.port ?? (await freePort())
  const dataDir = options.dataDir ?? scratchDir("aigw-e2e-")
  let output = ""
  const child = spawn(...hostCommand(main, options.node), {
    cwd: dataDir,
    env: hostEnv(port, dataDir, env),
    stdio: ["ignore", "pipe", "pipe"],
    // A group of its own: signals reach the server and the sandbox processes it started.
    detached: true
  })
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  // A test process that ends early must not leave its server behind.
  const orphanGuard = () => signalGroup(child, "SIGKILL")
  process.once("exit", orphanGuard)
  void exited.then(() => {
    process.removeListener("exit", orphanGuard)
    // The host is gone; make sure nothing of its group outlives it.
    signalGroup(child, "SIGKILL")
  })
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${output}`)
    try {
      const res = await fetch(`${url}/v1/health`)
      if (res.ok) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      signalGroup(child, "SIGKILL")
      throw new Error(`server did not start within 60 s:\n${output}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return {
    url,
    port,
    dataDir,
    child,
    output: () => output,
    stop: async () => {
      signalGroup(child, "SIGTERM")
      const force = setTimeout(() => signalGroup(child, "SIGKILL"), 15_000)
      const code = await exited
      clearTimeout(force)
      return code
    },
    kill: async () => {
      signalGroup(child, "SIGKILL")
      await exited
    }
  }
}

export interface FailedStart {
  /** Exit code; null when the host was still running at the deadline (and was killed). */
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Starts a host (the node host, or `hosts/mcp/src/main.ts` with `host: "mcp"`) that is expected
 * NOT to start: waits for it to exit (killing its process group after `timeoutMs`) and returns the
 * exit code and what it wrote. The MCP host's stdin stays open, so it only exits on a failure.
 */
export const startExpectingFailure = async (
  env: Record<string, string> = {},
  options: { dataDir?: string; port?: number; host?: "node-http" | "mcp"; timeoutMs?: number } = {}
): Promise<FailedStart> => {
  const port = options.port ?? (await freePort())
  const dataDir = options.dataDir ?? scratchDir("aigw-e2e-")
  const entry = options.host === "mcp" ? path.join(root, "hosts/mcp/src/main.ts") : main
  const child = spawn(...hostCommand(entry), { cwd: dataDir, env: hostEnv(port, dataDir, env), stdio: ["pipe", "pipe", "pipe"], detached: true })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (d) => (stdout += d))
  child.stderr!.on("data", (d) => (stderr += d))
  const orphanGuard = () => signalGroup(child, "SIGKILL")
  process.once("exit", orphanGuard)
  const timer = setTimeout(() => signalGroup(child, "SIGKILL"), options.timeoutMs ?? 60_000)
  // "close", not "exit": every byte of stdout and stderr has been read by then.
  const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)))
  clearTimeout(timer)
  process.removeListener("exit", orphanGuard)
  signalGroup(child, "SIGKILL")
  return { code, stdout, stderr }
}

/** JSON request helper: returns status, headers and parsed body. */
export const call = async (
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; raw?: string | Uint8Array; token?: string; apiKey?: string; headers?: Record<string, string> } = {}
) => {
  const headers: Record<string, string> = { accept: "application/json", ...options.headers }
  if (options.body !== undefined || options.raw !== undefined) headers["content-type"] ??= "application/json"
  if (options.token) headers.authorization = `Bearer ${options.token}`
  if (options.apiKey) headers["x-api-key"] = options.apiKey
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: (options.raw as BodyInit | undefined) ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
  })
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: res.status, headers: res.headers, body }
}

/** The JSON-bodied POST/PUT routes of /openapi.json, with path parameters filled in. */
export const jsonRoutes = async (server: RunningServer) => {
  const doc = (await call(server.url, "GET", "/openapi.json")).body
  return Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([method, op]) => (method === "post" || method === "put") && op.requestBody?.content?.["application/json"] !== undefined)
      .map(([method]) => ({
        method: method.toUpperCase(),
        path: path.replace(/\{(\w+)\}/g, (_, p: string) => (p === "id" || p.endsWith("Id") ? crypto.randomUUID() : "x"))
      }))
  )
}

/** The message of an error answer on `path`: OpenAI's and Anthropic's surfaces carry it in `error.message`, the envelopes in `message`. */
export const errorMessageOf = (path: string, body: any): unknown =>
  path.includes("/openai/") || path.includes("/anthropic/") ? body?.error?.message : body?.message
