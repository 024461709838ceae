/**
 * Sandboxed code execution. Provider `local` (and `auto`): python (Pyodide) and javascript
 * (QuickJS), both WebAssembly interpreters, each run in a sandbox process of its own (Sandbox.ts;
 * never in the gateway's process), bounded per process (503 when all are busy) and per avatar (429).
 * A named remote sandbox vendor (Riza, Daytona: Providers/Sandboxes/) runs the code at the vendor,
 * bash and the languages the local sandboxes lack among them. Code leaves the machine only when the
 * caller names a vendor: `auto` never sends it anywhere. What the vendor answers is cut to the
 * local sandboxes' output limit (the transport already bounds the reply's size).
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "../Config.ts"
import { type Busy, type Forbidden, type NotAvailable, type NotFound, type TooManyRequests, Unprocessable } from "../Errors.ts"
import type { Plan } from "../Plans.ts"
import type { CodeLanguage } from "../Providers/Sandboxes/CodeEndpoint.ts"
import { daytona } from "../Providers/Sandboxes/Daytona.ts"
import { riza } from "../Providers/Sandboxes/Riza.ts"
import { servedBy } from "../Providers/Registry.ts"
import { Routing } from "../Routing.ts"
import type { Usage } from "../Usage.ts"
import type { ProviderCalls } from "../Engine/ProviderCalls.ts"
import type { ConfiguredProvider } from "../Catalog/Catalog.ts"
import { text as cut, type RunOutcome, type Sandbox } from "./Sandbox.ts"
import { MAX_OUTPUT, Sandboxes, type Slot } from "./Sandboxes.ts"
import { vendorCall } from "./VendorCall.ts"

export type Language = CodeLanguage

export interface ExecutionResult extends RunOutcome {
  readonly language: Language
  readonly durationMs: number
  /** `local`, or the remote sandbox vendor that ran the code. */
  readonly provider: string
  /** How the run was isolated: `bwrap` or `process` locally (docs/security.md), `remote` at a vendor. */
  readonly isolation: string
}

/** The languages each remote vendor runs, for the refusal of a language the local sandboxes lack. */
const remoteOffer = `riza (${riza.languages.join(", ")}) or daytona (${daytona.languages.join(", ")})`

const isLocal = (provider: string) => provider === "auto" || provider === "local"

const makeService = Effect.gen(function*() {
  const sandboxes = yield* Sandboxes
  const routing = yield* Routing
  const config = yield* GatewayConfig

  type Input = { readonly code: string; readonly language: Language; readonly provider: string; readonly timeoutMs: number }
  type Refusal = Unprocessable | NotAvailable | NotFound | Forbidden
  type Prepared =
    | { readonly local: true; readonly language: "python" | "javascript"; readonly sandbox: Sandbox }
    | { readonly local: false; readonly vendor: ConfiguredProvider }
  /** What `check` hands the run: a local run holds its sandbox slot. */
  type Checked = Extract<Prepared, { local: false }> | (Extract<Prepared, { local: true }> & Slot)

  /** The local sandbox for a language it runs, or the refusal naming the vendors that run it. */
  const localFor = (language: Language): Effect.Effect<Prepared, Refusal> =>
    language === "python" || language === "javascript"
      ? Effect.map(sandboxes.available(language, language === "python" ? "pyodide" : "quickjs-emscripten-core"), (sandbox): Prepared => ({ local: true, language, sandbox }))
      : Effect.fail(new Unprocessable({ message: `${language} runs only in a remote sandbox, which receives your code: name provider ${remoteOffer}. The local sandbox runs python and javascript.` }))

  /** A named vendor that runs the language, or the refusal (unknown, not configured, above the plan, language not offered). */
  const vendorFor = (input: Input, plan: Plan) =>
    Effect.flatMap(routing.providerFor("code", input.provider, plan), (vendor): Effect.Effect<Prepared, Unprocessable> => {
      const endpoint = servedBy(vendor).code
      if (endpoint === undefined) return Effect.fail(new Unprocessable({ message: `Provider ${vendor.id} cannot run code.` }))
      if (!endpoint.languages.includes(input.language)) {
        return Effect.fail(new Unprocessable({ message: `Provider ${vendor.id} does not run ${input.language}; it runs ${endpoint.languages.join(", ")}.` }))
      }
      return Effect.succeed({ local: false, vendor })
    })

  /** What the run needs, or the refusal that depends only on the request and configuration. */
  const prepare = (input: Input, plan: Plan): Effect.Effect<Prepared, Refusal> =>
    Effect.suspend(() => (isLocal(input.provider) ? localFor(input.language) : vendorFor(input, plan)))

  /**
   * What the run needs, or the refusals answered before the call is counted (docs/quota.md), a full local
   * sandbox pool among them: the local sandbox's slot is taken here and held until the request ends
   * (Route.ts `Held`), so a burst cannot all pass the check and then be refused once counted.
   */
  const check = (input: Input, avatarId: string, plan: Plan) =>
    Effect.flatMap(prepare(input, plan), (p): Effect.Effect<Checked, Refusal | Busy | TooManyRequests> =>
      p.local ? Effect.map(sandboxes.reserve(avatarId), (slot) => ({ ...p, release: slot.release })) : Effect.succeed(p))

  const runRemote = (input: Input, vendor: ConfiguredProvider, avatarId: string, started: number) =>
    Effect.map(
      vendorCall(avatarId, vendor, "code", servedBy(vendor).code!.execute(vendor, { language: input.language, code: input.code, timeoutMs: input.timeoutMs }, { pollMs: config.jobPollMs })),
      (r): ExecutionResult => ({
        stdout: cut(r.stdout, MAX_OUTPUT),
        stderr: cut(r.stderr, MAX_OUTPUT),
        result: null,
        exitCode: r.exitCode,
        error: null,
        timedOut: false,
        language: input.language,
        durationMs: Math.round(performance.now() - started),
        provider: vendor.id,
        isolation: "remote"
      })
    )

  type RunError = Effect.Effect.Error<ReturnType<typeof runRemote>> | Effect.Effect.Error<ReturnType<typeof sandboxes.run>>

  /** Runs the code `check` prepared (in its slot, locally). */
  const execute = (input: Input, avatarId: string, p: Checked): Effect.Effect<ExecutionResult, RunError, Usage | ProviderCalls> => {
    const started = performance.now()
    if (!p.local) return runRemote(input, p.vendor, avatarId, started)
    return Effect.map(
      sandboxes.run(p.sandbox, p.language, { code: input.code, timeoutMs: input.timeoutMs }, p),
      (r): ExecutionResult => ({ ...r, language: p.language, durationMs: Math.round(performance.now() - started), provider: "local", isolation: p.sandbox.isolation })
    )
  }

  return { check, execute }
})

export class CodeExecution extends Context.Tag("aigw/CodeExecution")<CodeExecution, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(CodeExecution, makeService)
