/**
 * Riza as a remote sandbox.
 *
 * Wire format (https://docs.riza.io/api-reference/command/execute):
 *  - `POST {base}/execute` (the catalogue's base is `https://api.riza.io/v1`), bearer key, with
 *    `{language, code, stdin?, env?, http?}`; languages python, javascript, typescript, ruby, php.
 *  - answer `{exit_code, stdout, stderr}`; errors `{message, code?}` with a 4xx/5xx status.
 * No network is granted to the program (no `http` allow list), like the local sandboxes; the
 * caller's timeoutMs (plus an allowance for the network) bounds the gateway's wait: past it, a 504.
 */
import { Effect } from "effect"
import { authHeaders, postJson } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError, UpstreamError } from "../UpstreamError.ts"
import { type CodeEndpoint, type CodeRun, exitCodeOf } from "./CodeEndpoint.ts"

export const executeBody = (run: CodeRun) => ({
  language: run.language,
  code: run.code
})

/** How long past the caller's timeoutMs the gateway waits for Riza's answer (network and start-up). */
const ALLOWANCE_MS = 15_000

export const riza: CodeEndpoint = {
  languages: ["python", "javascript", "typescript", "ruby", "php"],
  execute: (provider, run) =>
    Effect.flatMap(postJson(provider.id, `${provider.endpoint}/execute`, authHeaders(provider), executeBody(run)), (answer) => {
      const exitCode = exitCodeOf(answer?.exit_code)
      if (exitCode === undefined || typeof answer.stdout !== "string" || typeof answer.stderr !== "string") {
        return Effect.fail(protocolError(provider.id, "the execute answer has no exit_code, stdout and stderr"))
      }
      return Effect.succeed({ stdout: answer.stdout, stderr: answer.stderr, exitCode })
    }).pipe(Effect.timeoutFail({
      duration: run.timeoutMs + ALLOWANCE_MS,
      onTimeout: () => new UpstreamError({ provider: provider.id, kind: "timeout", message: `${provider.id} did not finish running the code in time`, retryable: false })
    }))
}

/** What aigw serves through Riza (a bespoke provider). */
export const served: Served = { code: riza }
