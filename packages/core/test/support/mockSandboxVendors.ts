/**
 * Local mocks of the remote sandbox vendors, each speaking its documented wire format on
 * 127.0.0.1:0 (references in the adapters: src/Providers/Sandboxes/*.ts). The "run" is a
 * transform a test can check: the output names the language (Riza) or the interpreter the
 * command pipes into (Daytona) and the program, decoded. A program containing `exit 3` exits 3.
 * A wrong key is a 401 in the vendor's error shape.
 *  - riza: POST /v1/execute {language, code} → {exit_code, stdout, stderr}; errors {code, message}.
 *  - daytona: POST /api/sandbox {labels} → {id, state "creating"}; GET /api/sandbox/{id} → the
 *    sandbox, `started` after `pendingPolls` polls (or `error`); POST
 *    /api/toolbox/{id}/toolbox/process/execute (or {toolboxProxyUrl}/{id}/process/execute when the
 *    mock names a proxy on itself; `proxyUrl` names any other) {command, timeout} → {exitCode, result}; DELETE /api/sandbox/{id};
 *    errors {statusCode, message, error}. Bearer.
 */
import { type RecordingMock, startRecordingMock } from "./localServer.ts"

export type SandboxVendor = "riza" | "daytona"

export interface SandboxBehaviour {
  /** The stdout of every run, instead of the transform (hostile sizes). */
  readonly stdout?: string
  /** Daytona: how many polls answer `creating` before `started`. */
  readonly pendingPolls?: number
  /** Daytona: the sandbox ends in `error` instead of starting. */
  readonly startFails?: boolean
  /** Daytona: the execute call answers a 500. */
  readonly executeFails?: boolean
  /** Daytona: the sandbox names its toolbox proxy (on the mock itself). */
  readonly proxy?: boolean
  /** Daytona: the sandbox names this toolbox proxy instead (a hostile answer: anywhere at all). */
  readonly proxyUrl?: string
}

export interface SandboxVendorMock extends RecordingMock {
  setBehaviour(behaviour: SandboxBehaviour): void
  /** Daytona: the sandboxes created and not deleted. */
  readonly live: Set<string>
}

const RIZA_LANGUAGES = ["python", "javascript", "typescript", "ruby", "php"]

const unauthorized = (vendor: SandboxVendor): readonly [number, unknown] =>
  vendor === "riza" ? [401, { code: 16, message: "invalid API key" }] : [401, { statusCode: 401, message: "Invalid API key", error: "Unauthorized" }]

/** The interpreter and the program of a command `sh -c 'echo <base64> | base64 -d | <interpreter>'`. */
const decodeCommand = (command: unknown): { interpreter: string; program: string } | undefined => {
  const m = typeof command === "string" ? /^sh -c 'echo ([A-Za-z0-9+/=]*) \| base64 -d \| ([a-z0-9 -]+)'$/.exec(command) : null
  return m ? { interpreter: m[2]!, program: Buffer.from(m[1]!, "base64").toString("utf8") } : undefined
}

export const startSandboxVendorMock = async (vendor: SandboxVendor, key: string): Promise<SandboxVendorMock> => {
  let behaviour: SandboxBehaviour = {}
  const live = new Set<string>()
  const polls = new Map<string, number>()
  let created = 0
  let origin = ""
  const proxyOf = () => behaviour.proxyUrl ?? (behaviour.proxy ? `${origin}/toolbox-proxy` : undefined)
  const sandbox = (id: string, state: string) => ({ id, state, labels: {}, ...(proxyOf() !== undefined ? { toolboxProxyUrl: proxyOf() } : {}) })

  const riza = (path: string, body: any): readonly [number, unknown] => {
    if (path !== "/v1/execute") return [404, { code: 5, message: "not found" }]
    if (typeof body?.code !== "string" || !RIZA_LANGUAGES.includes(body.language)) return [400, { code: 3, message: `unsupported language: ${body?.language}` }]
    const exit = body.code.includes("exit 3") ? 3 : 0
    return [200, { exit_code: exit, stdout: behaviour.stdout ?? `${body.language}:${body.code}\n`, stderr: exit === 0 ? "" : "failed\n" }]
  }

  const execute = (id: string, body: any): readonly [number, unknown] => {
    if (!live.has(id)) return [404, { statusCode: 404, message: `Sandbox ${id} not found`, error: "Not Found" }]
    if (behaviour.executeFails) return [500, { statusCode: 500, message: "toolbox unavailable", error: "Internal Server Error" }]
    const run = decodeCommand(body?.command)
    if (run === undefined || !Number.isInteger(body.timeout)) return [400, { statusCode: 400, message: "bad command", error: "Bad Request" }]
    const exit = run.program.includes("exit 3") ? 3 : 0
    return [200, { exitCode: exit, result: behaviour.stdout ?? `${run.interpreter}:${run.program}\n` }]
  }

  const daytona = (method: string, path: string, body: any): readonly [number, unknown] => {
    if (method === "POST" && path === "/api/sandbox") {
      if (typeof body?.labels?.["code-toolbox-language"] !== "string") return [400, { statusCode: 400, message: "labels required", error: "Bad Request" }]
      const id = `sb-${++created}`
      live.add(id)
      polls.set(id, 0)
      return [200, sandbox(id, "creating")]
    }
    const one = /^\/api\/sandbox\/([\w-]+)$/.exec(path)
    if (one && method === "GET") {
      if (!live.has(one[1]!)) return [404, { statusCode: 404, message: "not found", error: "Not Found" }]
      const n = polls.get(one[1]!)! + 1
      polls.set(one[1]!, n)
      return [200, sandbox(one[1]!, behaviour.startFails ? "error" : n > (behaviour.pendingPolls ?? 0) ? "started" : "creating")]
    }
    if (one && method === "DELETE") return live.delete(one[1]!) ? [200, {}] : [404, { statusCode: 404, message: "not found", error: "Not Found" }]
    const run = /^\/api\/toolbox\/([\w-]+)\/toolbox\/process\/execute$/.exec(path) ?? /^\/toolbox-proxy\/([\w-]+)\/process\/execute$/.exec(path)
    if (run && method === "POST") return execute(run[1]!, body)
    return [404, { statusCode: 404, message: `Cannot ${method} ${path}`, error: "Not Found" }]
  }

  const mock = await startRecordingMock(vendor === "riza" ? "/v1" : "/api", (r) => {
    if (r.headers.authorization !== `Bearer ${key}`) return unauthorized(vendor)
    return vendor === "riza" ? (r.method === "POST" ? riza(r.path, r.body) : [405, { code: 12, message: "method not allowed" }]) : daytona(r.method, r.path, r.body)
  })
  origin = new URL(mock.url).origin
  return { ...mock, live, setBehaviour: (b) => (behaviour = b) }
}
