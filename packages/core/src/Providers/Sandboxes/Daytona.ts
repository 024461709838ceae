/**
 * Daytona as a remote sandbox: one sandbox per run, created, used once and always deleted.
 *
 * Wire format (https://www.daytona.io/docs/en/tools/api, the toolbox's process API):
 *  - `POST {base}/sandbox` (the catalogue's base is `https://app.daytona.io/api`), bearer key, with
 *    `{labels: {"code-toolbox-language": python|typescript|javascript}}` → the sandbox `{id, state,
 *    toolboxProxyUrl?}`; while `state` is not `started`, `GET {base}/sandbox/{id}` until it is
 *    (`error` and `build_failed` are failures).
 *  - `POST {toolbox}/process/execute` `{command, timeout (seconds)}` → `{exitCode, result}`, where
 *    `{toolbox}` is `{toolboxProxyUrl}/{id}` when the sandbox names its proxy, else the API's own
 *    proxy `{base}/toolbox/{id}/toolbox`. `result` holds stdout and stderr merged.
 *  - `DELETE {base}/sandbox/{id}`; errors `{statusCode, message, error}`.
 * The program is sent base64-encoded and decoded into the interpreter's stdin inside the sandbox, so
 * no shell quoting of the caller's code is involved.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { type JobState, pollJob } from "../internal/jobs.ts"
import { authHeaders, deleteResource, getJson, postJson } from "../internal/http.ts"
import type { Served } from "../Served.ts"
import { protocolError } from "../UpstreamError.ts"
import { type CodeEndpoint, type CodeLanguage, type CodeRun, exitCodeOf } from "./CodeEndpoint.ts"

/** How long a sandbox may take to start, polls included. */
const START_DEADLINE_MS = 60_000
const STARTING = { deadlineMs: START_DEADLINE_MS, maxPolls: 60, task: "start a sandbox", finish: "start the sandbox" }

/** The interpreter each language's program is piped into. */
const interpreters: Partial<Record<CodeLanguage, string>> = { python: "python3 -u", javascript: "node", bash: "bash" }

/** The shell command that runs `run.code` in its interpreter. */
export const commandOf = (run: CodeRun) =>
  `sh -c 'echo ${Buffer.from(run.code, "utf8").toString("base64")} | base64 -d | ${interpreters[run.language]}'`

interface Sandbox {
  readonly id: string
  readonly state: string
  readonly toolboxProxyUrl: string | undefined
}

const sandboxOf = (provider: string, answer: any): Effect.Effect<Sandbox, ReturnType<typeof protocolError>> =>
  typeof answer?.id === "string" && /^[\w.-]{1,200}$/.test(answer.id) && typeof answer.state === "string"
    ? Effect.succeed({ id: answer.id, state: answer.state, toolboxProxyUrl: typeof answer.toolboxProxyUrl === "string" ? answer.toolboxProxyUrl : undefined })
    : Effect.fail(protocolError(provider, "the sandbox answer has no id and state"))

/**
 * Where the sandbox's toolbox answers. The key goes there too: a proxy the sandbox names must be
 * https or on the API's own origin.
 */
const toolboxOf = (provider: ConfiguredProvider, sandbox: Sandbox) => {
  const proxy = sandbox.toolboxProxyUrl
  if (proxy === undefined) return Effect.succeed(`${provider.endpoint}/toolbox/${sandbox.id}/toolbox`)
  const url = URL.canParse(proxy) ? new URL(proxy) : undefined
  return url !== undefined && (url.protocol === "https:" || url.origin === new URL(provider.endpoint).origin)
    ? Effect.succeed(`${proxy.replace(/\/+$/, "")}/${sandbox.id}`)
    : Effect.fail(protocolError(provider.id, "the sandbox names a toolbox proxy that is neither https nor on the API's origin"))
}

const started = (provider: ConfiguredProvider, created: Sandbox, pollMs: number) => {
  const stateOf = (sandbox: Sandbox): JobState<Sandbox> =>
    sandbox.state === "started" ? { status: "done", value: sandbox }
    : sandbox.state === "error" || sandbox.state === "build_failed" ? { status: "failed", reason: `the sandbox is in state ${sandbox.state}` }
    : { status: "running" }
  if (created.state === "started") return Effect.succeed(created)
  const poll = Effect.map(
    Effect.flatMap(getJson(provider.id, `${provider.endpoint}/sandbox/${created.id}`, authHeaders(provider)), (a) => sandboxOf(provider.id, a)),
    stateOf
  )
  return pollJob(provider.id, poll, pollMs, STARTING)
}

const runIn = (provider: ConfiguredProvider, sandbox: Sandbox, run: CodeRun) =>
  Effect.flatMap(toolboxOf(provider, sandbox), (toolbox) =>
    Effect.flatMap(
      postJson(provider.id, `${toolbox}/process/execute`, authHeaders(provider), { command: commandOf(run), timeout: Math.ceil(run.timeoutMs / 1000) }),
      (answer) => {
        const exitCode = exitCodeOf(answer?.exitCode)
        if (exitCode === undefined || typeof answer.result !== "string") return Effect.fail(protocolError(provider.id, "the execute answer has no exitCode and result"))
        return Effect.succeed({ stdout: answer.result, stderr: "", exitCode })
      }
    ))

/** Deletes the sandbox; a failed delete is logged (the vendor's auto-stop ends it later), never the run's error. */
const remove = (provider: ConfiguredProvider, sandbox: Sandbox) =>
  deleteResource(provider.id, `${provider.endpoint}/sandbox/${sandbox.id}`, authHeaders(provider)).pipe(
    Effect.catchAll((e) => Effect.logWarning(`${provider.id}: sandbox ${sandbox.id} was not deleted: ${e.message}`))
  )

export const daytona: CodeEndpoint = {
  languages: ["python", "javascript", "bash"],
  execute: (provider, run, options) =>
    Effect.acquireUseRelease(
      Effect.flatMap(
        postJson(provider.id, `${provider.endpoint}/sandbox`, authHeaders(provider), { labels: { "code-toolbox-language": run.language === "javascript" ? "javascript" : "python" } }),
        (a) => sandboxOf(provider.id, a)
      ),
      (created) => Effect.flatMap(started(provider, created, options.pollMs), (sandbox) => runIn(provider, sandbox, run)),
      (created) => remove(provider, created)
    )
}

/** What aigw serves through Daytona (a bespoke provider). */
export const served: Served = { code: daytona }
