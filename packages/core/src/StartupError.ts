/**
 * Start-up failures for people: a failed start is ONE line on stderr naming the cause and the
 * variable to fix (`aigw: cannot listen on 127.0.0.1:8787: address already in use (set PORT or
 * HOST)`), never a stack trace; `AIGW_DEBUG=1` adds the full cause. Every host wraps its main
 * effect in `reportStartupFailure`; the formatting lives here only (`describeStartupFailure`).
 * Credentials in URLs never reach the line.
 */
import { Cause, Config, ConfigError, Data, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { makeDirectory } from "./Directories.ts"

/** A start-up problem whose message already says what to change. */
export class StartupError extends Data.TaggedError("StartupError")<{ readonly message: string }> {}

/** `problem (fix)`: e.g. `startupError("cannot reach the database at …: connection refused", "check DATABASE_URL")`. */
export const startupError = (problem: string, fix: string) => new StartupError({ message: `${problem} (${fix})` })

/**
 * `scheme://user:pass@host` -> `scheme://user:***@host` (the password up to the token's last `@`: it
 * may hold `/` or `@` unencoded), the same without a scheme (`user:pass@host`, a value that is no
 * URL), and `password=…` query values -> `***`, anywhere in a text.
 */
export const redactUrls = (text: string): string =>
  text
    .replace(/([a-z][a-z0-9+.-]*:\/\/)([^/@\s:]*):\S*@(?=[^@\s]*(?:\s|$))/gi, "$1$2:***@")
    .replace(/(^|[\s'"(])([^\s:/@'"()]+):(?!\*\*\*@)[^\s'"/]+@(?=[A-Za-z0-9.-]+)/g, "$1$2:***@")
    // Up to the next parameter or space; a colon before a space is the sentence's (`…?password=***: connection refused`).
    .replace(/([?&](?:password|pass|pwd|sslpassword)=)[^&\s]*?(?=:?(?:\s|$)|&)/gi, "$1***")

/** Plain words for the system error codes a start meets. */
const codeReasons: Record<string, string> = {
  EADDRINUSE: "address already in use",
  EADDRNOTAVAIL: "address not available on this machine",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "connection timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  ENOENT: "no such file or directory",
  ENOTDIR: "a part of the path is not a directory",
  EISDIR: "is a directory",
  EEXIST: "a file is in the way",
  EROFS: "read-only file system",
  ENOSPC: "no space left on device"
}

const fieldOf = (u: unknown, key: string): unknown =>
  typeof u === "object" && u !== null ? (u as Record<string, unknown>)[key] : undefined

/** The error and its causes, outermost first (at most 6). */
const chainOf = (error: unknown): Array<unknown> => {
  const chain: Array<unknown> = []
  for (let current = error; current !== undefined && current !== null && chain.length < 6; current = fieldOf(current, "cause")) {
    if (chain.includes(current)) break
    chain.push(current)
  }
  return chain
}

const messageOf = (u: unknown): string => {
  const message = u instanceof Error || typeof u === "object" ? fieldOf(u, "message") : u
  return typeof message === "string" ? message.trim() : typeof message === "number" ? String(message) : ""
}

/**
 * Why an error happened, in a few words: the plain meaning of the first known system error code
 * in its cause chain, else the innermost message. Credentials in URLs are removed.
 */
export const reasonOf = (error: unknown): string => {
  const chain = chainOf(error)
  for (const e of chain) {
    const code = fieldOf(e, "code")
    if (typeof code === "string" && code in codeReasons) return codeReasons[code]!
  }
  for (let i = chain.length - 1; i >= 0; i--) {
    const message = messageOf(chain[i])
    if (message) return redactUrls(message.replace(/\.$/, ""))
  }
  return "unknown error"
}

/**
 * Creates `dir` when missing and proves it writable (a file is written and removed), or fails
 * naming `variable`.
 */
export const ensureWritableDir = (dir: string, variable: string, what = "the data directory") =>
  Effect.try({
    try: () => {
      makeDirectory(dir)
      const probe = path.join(dir, `.aigw-write-check-${process.pid}`)
      fs.writeFileSync(probe, "")
      fs.rmSync(probe, { force: true })
    },
    catch: (e) => startupError(`cannot write to ${what} ${path.resolve(dir)}: ${reasonOf(e)}`, `check ${variable}`)
  })

const lowerFirst = (s: string) => (/^[A-Z][a-z]/.test(s) ? s[0]!.toLowerCase() + s.slice(1) : s)

const configLeaves = (error: ConfigError.ConfigError): Array<{ readonly name: string; readonly problem: string; readonly missing: boolean }> => {
  switch (error._op) {
    case "And":
    case "Or":
      return [...configLeaves(error.left), ...configLeaves(error.right)]
    default: {
      const name = error.path.join("_") || "configuration"
      const message = error.message.trim()
      const problem = error._op === "MissingData"
        ? `${name} is not set`
        : message.includes(name) ? message : `${name}: ${lowerFirst(message)}`
      return [{ name, problem, missing: error._op === "MissingData" }]
    }
  }
}

/** `invalid configuration: PORT: expected an integer value but received "abc" (check PORT)`. */
const describeConfigError = (error: ConfigError.ConfigError): string => {
  const seen = new Set<string>()
  const all = configLeaves(error)
  // A value that is there but wrong (a file's `true` where a number goes) is not also "not set" by another source.
  const wrong = new Set(all.filter((l) => !l.missing).map((l) => l.name))
  const leaves = all.filter((l) => !(l.missing && wrong.has(l.name))).filter((l) => (seen.has(l.problem) ? false : (seen.add(l.problem), true)))
  const names = [...new Set(leaves.map((l) => l.name))]
  return `invalid configuration: ${leaves.map((l) => l.problem).join("; ")} (check ${names.join(", ")})`
}

/** The listen failure of the HTTP server (`ServeError` wraps the socket's error). */
const describeListenError = (cause: unknown): string => {
  const code = fieldOf(cause, "code")
  const address = fieldOf(cause, "address") ?? fieldOf(cause, "hostname")
  const port = fieldOf(cause, "port")
  const where = address !== undefined ? ` on ${String(address)}${port !== undefined ? `:${String(port)}` : ""}` : ""
  const fix = code === "EADDRNOTAVAIL" || code === "ENOTFOUND" || code === "EAI_AGAIN"
    ? "set HOST"
    : code === "EACCES"
    ? "set PORT to 1024 or above, or HOST"
    : "set PORT or HOST"
  return `cannot listen${where}: ${reasonOf(cause)} (${fix})`
}

const isServeError = (u: unknown) => fieldOf(u, "_tag") === "ServeError"
const isStartupError = (u: unknown): u is StartupError => u instanceof StartupError

const describeError = (error: unknown): string => {
  if (isStartupError(error)) return error.message
  if (ConfigError.isConfigError(error)) return describeConfigError(error)
  if (isServeError(error)) return describeListenError(fieldOf(error, "cause"))
  const parts: Array<string> = []
  for (const e of chainOf(error)) {
    const message = messageOf(e)
    if (message && !parts.some((p) => p.includes(message))) parts.push(message)
  }
  return `start-up failed: ${parts.join(": ") || "unknown error"} (AIGW_DEBUG=1 shows the details)`
}

/**
 * One line, `aigw: …`, saying why a start failed and which variable to fix. Typed failures and
 * defects are both looked at; a recognised one (a StartupError, a configuration error, a listen
 * failure) wins over others. Never a stack trace, never a password.
 */
const isKnown = (e: unknown) => isStartupError(e) || ConfigError.isConfigError(e) || isServeError(e)

/** A reason as one line, without credentials. */
const oneLine = (line: string) => redactUrls(line).replace(/\s*[\r\n]+\s*/g, " ")

/** The line of a recognised start-up failure (a StartupError, a configuration error, a listen failure) in a cause, if it has one. */
export const knownStartupReason = (cause: Cause.Cause<unknown>): string | undefined => {
  const known = [...Cause.failures(cause), ...Cause.defects(cause)].find(isKnown)
  return known === undefined ? undefined : oneLine(describeError(known))
}

export const describeStartupFailure = (cause: Cause.Cause<unknown>): string => {
  const errors: Array<unknown> = [...Cause.failures(cause), ...Cause.defects(cause)]
  const known = errors.find(isKnown)
  const line = errors.length === 0
    ? Cause.isInterruptedOnly(cause) ? "start-up interrupted" : "start-up failed"
    : describeError(known ?? errors[0])
  return `aigw: ${oneLine(line)}`
}

const debugEnabled = Config.boolean("AIGW_DEBUG").pipe(Config.withDefault(false), Effect.orElseSucceed(() => false))

/**
 * Wraps a host's main effect: when it fails (not when it is interrupted, e.g. by SIGTERM), writes
 * `describeStartupFailure` to stderr, and with `AIGW_DEBUG=1` (read from the environment) the
 * full cause after it. Run it with `runMain({ disableErrorReporting: true })`, which exits 1.
 */
export const reportStartupFailure = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tapErrorCause(self, (cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : Effect.flatMap(debugEnabled, (debug) =>
        Effect.sync(() => {
          process.stderr.write(`${describeStartupFailure(cause)}\n`)
          if (debug) process.stderr.write(`${Cause.pretty(cause, { renderErrorCause: true })}\n`)
        })))
