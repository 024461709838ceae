/**
 * Remote sandbox vendors (Riza, Daytona): run one program at the vendor and answer its output.
 * Capabilities/CodeExecution.ts sends code here only when the caller names the vendor; it cuts
 * what comes back to the gateway's output limit (the transport already bounds the reply's size).
 */
import type { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import type { UpstreamError } from "../UpstreamError.ts"

/** Every language POST /v1/code/execute accepts; each sandbox serves some of them. */
export const CODE_LANGUAGES = ["python", "javascript", "typescript", "ruby", "php", "bash"] as const
export type CodeLanguage = (typeof CODE_LANGUAGES)[number]

export interface CodeRun {
  readonly language: CodeLanguage
  readonly code: string
  readonly timeoutMs: number
}

export interface RunOptions {
  /** The wait between two polls of a sandbox that is starting (`AIGW_JOB_POLL_MS`). */
  readonly pollMs: number
}

/** What the vendor answered; `stderr` is empty for vendors that merge it into stdout (Daytona). */
export interface VendorRunOutcome {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
}

export interface CodeEndpoint {
  /** The languages the vendor runs; any other is refused by name before the call. */
  readonly languages: ReadonlyArray<CodeLanguage>
  readonly execute: (provider: ConfiguredProvider, run: CodeRun, options: RunOptions) => Effect.Effect<VendorRunOutcome, UpstreamError>
}

/** The integer exit code the vendor sent, or undefined when it sent none. */
export const exitCodeOf = (value: unknown): number | undefined => (typeof value === "number" && Number.isInteger(value) ? value : undefined)
