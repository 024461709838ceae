/**
 * Sandboxed code execution (provider `local`): python (Pyodide) and javascript (QuickJS), both
 * WebAssembly interpreters, each run in a sandbox process of its own (Sandbox.ts; never in the
 * gateway's process). Runs are bounded per process (503 when all are busy) and per avatar (429).
 * bash needs a remote sandbox (e2b), which is not supported: a clear 422.
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "../Config.ts"
import { Busy, NotAvailable, TooManyRequests, Unprocessable } from "../Errors.ts"
import { type Launcher, makeLauncher, makeSandbox, type RunOutcome, type Sandbox } from "./Sandbox.ts"

export type Language = "python" | "javascript" | "bash"

export interface ExecutionResult extends RunOutcome {
  readonly language: Language
  readonly durationMs: number
  readonly provider: "local"
  /** How the run was isolated (`bwrap` or `process`; docs/security.md). */
  readonly isolation: string
}

/** Output beyond this is cut (and said so). */
export const MAX_OUTPUT = 100_000

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const { limits } = config
  /** The sandbox, set up on the first run (probing bubblewrap costs a process start). */
  let setUp: { readonly launcher: Launcher | { readonly unavailable: string }; readonly sandbox?: Sandbox } | undefined
  const sandboxNow = Effect.suspend(() => {
    if (setUp) return Effect.succeed(setUp)
    const launcher = makeLauncher(config.sandbox, limits.sandboxMemoryMb)
    setUp = "unavailable" in launcher ? { launcher } : { launcher, sandbox: makeSandbox(launcher, { memoryMb: limits.sandboxMemoryMb, maxOutput: MAX_OUTPUT }) }
    return setUp.sandbox?.isolation === "process" && config.sandbox === "auto"
      ? Effect.as(Effect.logWarning("Code sandboxes run without bubblewrap (not installed or not usable here): no network namespace; see docs/security.md"), setUp)
      : Effect.succeed(setUp)
  })
  yield* Effect.addFinalizer(() => Effect.sync(() => setUp?.sandbox?.close()))
  let running = 0
  const perAvatar = new Map<string, number>()

  /** Takes a slot for `avatarId`, or says why not. */
  const acquire = (avatarId: string): Effect.Effect<void, Busy | TooManyRequests> =>
    Effect.suspend((): Effect.Effect<void, Busy | TooManyRequests> => {
      const mine = perAvatar.get(avatarId) ?? 0
      if (mine >= limits.sandboxMaxPerAvatar) {
        return Effect.fail(new TooManyRequests({ message: `At most ${limits.sandboxMaxPerAvatar} code run(s) at once per avatar; wait for the running one.`, retryAfterSeconds: 1 }))
      }
      if (running >= limits.sandboxMaxConcurrent) {
        return Effect.fail(new Busy({ message: `All ${limits.sandboxMaxConcurrent} code sandboxes are busy; retry shortly.`, retryAfterSeconds: 1 }))
      }
      running++
      perAvatar.set(avatarId, mine + 1)
      return Effect.void
    })
  const release = (avatarId: string) =>
    Effect.sync(() => {
      running--
      const mine = (perAvatar.get(avatarId) ?? 1) - 1
      if (mine > 0) perAvatar.set(avatarId, mine)
      else perAvatar.delete(avatarId)
    })

  type Input = { readonly code: string; readonly language: Language; readonly provider: string; readonly timeoutMs: number }
  type Refusal = Unprocessable | NotAvailable

  /** What the run needs (a sandbox for its language), or the refusal that depends only on the request and configuration. */
  const prepare = (input: Input) =>
    Effect.suspend((): Effect.Effect<{ readonly language: "python" | "javascript"; readonly sandbox: Sandbox }, Refusal> => {
      if (input.provider !== "auto" && input.provider !== "local") {
        return Effect.fail(new Unprocessable({ message: `Code runs in the local sandbox (provider local); provider ${input.provider} is not supported for code execution yet.` }))
      }
      const language = input.language
      if (language === "bash") {
        return Effect.fail(new Unprocessable({ message: "bash needs a remote sandbox provider (e2b), which is not supported yet; use python or javascript." }))
      }
      return Effect.flatMap(sandboxNow, ({ launcher, sandbox }) => {
        if ("unavailable" in launcher || !sandbox) return Effect.fail(new NotAvailable({ message: "unavailable" in launcher ? launcher.unavailable : "The code sandbox is not available." }))
        if (launcher.missing.includes(language)) {
          return Effect.fail(new NotAvailable({ message: `${language} needs the ${language === "python" ? "pyodide" : "quickjs-emscripten-core"} package, which is not installed in this deployment.` }))
        }
        return Effect.succeed({ language, sandbox })
      })
    })

  /** Refusals answered before the call is counted (docs/quota.md). */
  const check = (input: Input) => Effect.asVoid(prepare(input))

  const execute = (input: Input, avatarId: string) =>
    Effect.flatMap(prepare(input), ({ language, sandbox }): Effect.Effect<ExecutionResult, Refusal | Busy | TooManyRequests> => {
      const started = performance.now()
      return Effect.acquireUseRelease(
        acquire(avatarId),
        () =>
          Effect.tryPromise({
            try: (signal) => sandbox.run(language, { code: input.code, timeoutMs: input.timeoutMs }, signal),
            catch: (e) => new NotAvailable({ message: `The code sandbox failed: ${String(e)}` })
          }).pipe(Effect.map((r): ExecutionResult => ({ ...r, language, durationMs: Math.round(performance.now() - started), provider: "local", isolation: sandbox.isolation }))),
        () => release(avatarId)
      )
    })

  return { check, execute }
})

export class CodeExecution extends Context.Tag("aigw/CodeExecution")<CodeExecution, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.scoped(CodeExecution, makeService)
