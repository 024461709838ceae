/**
 * Sandboxed code execution (provider `local`): python (Pyodide) and javascript (QuickJS), both
 * WebAssembly interpreters, each run in a sandbox process of its own (Sandbox.ts; never in the
 * gateway's process). Runs are bounded per process (503 when all are busy) and per avatar (429).
 * bash needs a remote sandbox (e2b), which is not supported: a clear 422.
 */
import { Context, Effect, Layer } from "effect"
import { Busy, NotAvailable, TooManyRequests, Unprocessable } from "../Errors.ts"
import type { RunOutcome, Sandbox } from "./Sandbox.ts"
import { Sandboxes } from "./Sandboxes.ts"

export type Language = "python" | "javascript" | "bash"

export interface ExecutionResult extends RunOutcome {
  readonly language: Language
  readonly durationMs: number
  readonly provider: "local"
  /** How the run was isolated (`bwrap` or `process`; docs/security.md). */
  readonly isolation: string
}

const makeService = Effect.gen(function*() {
  const sandboxes = yield* Sandboxes

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
      return Effect.map(sandboxes.available(language, language === "python" ? "pyodide" : "quickjs-emscripten-core"), (sandbox) => ({ language, sandbox }))
    })

  /** Refusals answered before the call is counted (docs/quota.md), a full sandbox pool among them. */
  const check = (input: Input, avatarId: string) => Effect.zipRight(prepare(input), sandboxes.vacancy(avatarId))

  const execute = (input: Input, avatarId: string) =>
    Effect.flatMap(prepare(input), ({ language, sandbox }): Effect.Effect<ExecutionResult, Refusal | Busy | TooManyRequests> => {
      const started = performance.now()
      return Effect.map(
        sandboxes.run(sandbox, language, { code: input.code, timeoutMs: input.timeoutMs }, avatarId),
        (r): ExecutionResult => ({ ...r, language, durationMs: Math.round(performance.now() - started), provider: "local", isolation: sandbox.isolation })
      )
    })

  return { check, execute }
})

export class CodeExecution extends Context.Tag("aigw/CodeExecution")<CodeExecution, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(CodeExecution, makeService)
