/**
 * Daytona as a remote sandbox: one sandbox per run, created, used once and always deleted.
 *
 * Wire format (https://www.daytona.io/docs/en/tools/api, the toolbox's process API):
 *  - `POST {base}/sandbox` (the catalogue's base is `https://app.daytona.io/api`), bearer key, with
 *    `{labels: {"code-toolbox-language": python|typescript|javascript}}` → the sandbox `{id, state,
 *    toolboxProxyUrl?}`; while `state` is not `started`, `GET {base}/sandbox/{id}` until it is
 *    (`error` and `build_failed` are failures).
 *  - `POST {toolbox}/process/execute` `{command, timeout (seconds)}` → `{exitCode, result}`, where
 *    `{toolbox}` is `{toolboxProxyUrl}/{id}` when the sandbox names its proxy (Daytona's cloud names
 *    `https://proxy.app.daytona.io/toolbox`), else the API's own proxy `{base}/toolbox/{id}/toolbox`.
 *    `result` holds stdout and stderr merged.
 *  - `DELETE {base}/sandbox/{id}`; errors `{statusCode, message, error}`.
 * The program is sent base64-encoded and decoded into the interpreter's stdin inside the sandbox, so
 * no shell quoting of the caller's code is involved.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { type JobState, pollJob } from "../internal/jobs.ts"
import { authHeaders, deleteResource, getJson, postJson } from "../internal/http.ts"
import { isVendorId } from "../internal/vendorId.ts"
import type { Served } from "../Served.ts"
import { protocolError, UpstreamError } from "../UpstreamError.ts"
import * as UrlGuard from "../../UrlGuard.ts"
import { type CodeEndpoint, type CodeLanguage, type CodeRun, exitCodeOf } from "./CodeEndpoint.ts"

/** How long a sandbox may take to start, polls included. */
const START_DEADLINE_MS = 60_000
const STARTING = { deadlineMs: START_DEADLINE_MS, maxPolls: 60, task: "start a sandbox", finish: "start the sandbox" }

/** The interpreter each language's program is piped into. */
const interpreters: Partial<Record<CodeLanguage, string>> = { python: "python3 -u", javascript: "node", bash: "bash" }

/** The shell command that runs `run.code` in its interpreter. */
export const commandOf = (run: CodeRun) =>
  `sh -c 'echo ${Buffer.from(run.code, "utf8").toString("base64")} | base64 -d | ${interpreters[run.language]}'`

export interface Sandbox {
  readonly id: string
  readonly state: string
  readonly toolboxProxyUrl: string | undefined
}

// The id goes into paths as it is: word characters, `.` and `-` only, and not `.` or `..` (a dot segment).
const sandboxOf = (provider: string, answer: any): Effect.Effect<Sandbox, ReturnType<typeof protocolError>> =>
  typeof answer?.id === "string" && /^[\w.-]{1,200}$/.test(answer.id) && isVendorId(answer.id) && typeof answer.state === "string"
    ? Effect.succeed({ id: answer.id, state: answer.state, toolboxProxyUrl: typeof answer.toolboxProxyUrl === "string" ? answer.toolboxProxyUrl : undefined })
    : Effect.fail(protocolError(provider, "the sandbox answer has no id and state"))

/**
 * Daytona's own toolbox proxies: `proxy.app.daytona.io` and other `proxy.` hosts under daytona.io. Not
 * every daytona.io or daytona.work(s) host: a sandbox's preview URLs (`{port}-{id}.proxy.app.daytona.io`,
 * `….proxy.daytona.works`) are served by the program in the sandbox, which must never see the key.
 */
const DAYTONA_PROXY_HOST = /^proxy\.(?:[a-z0-9-]+\.)*daytona\.io$/

/**
 * Where the sandbox's toolbox answers. The key and the caller's program go there, so a proxy the
 * sandbox names (the vendor's answer, not the operator's setting) is taken only on the API's own
 * origin (the operator chose it, a loopback one included), or as https on a Daytona proxy host whose
 * every address is public (`UrlGuard.inspect`; AIGW_ALLOW_PRIVATE_URLS does not lift this: it is for
 * URLs callers send, and this one carries the gateway's credential). Anything else is refused. The call
 * resolves the name again; it is Daytona's own name, so both answers come from Daytona's DNS.
 */
export const toolboxOf = (provider: ConfiguredProvider, sandbox: Sandbox, resolve: UrlGuard.Resolver = UrlGuard.systemResolver) => {
  const proxy = sandbox.toolboxProxyUrl
  if (proxy === undefined) return Effect.succeed(`${provider.endpoint}/toolbox/${sandbox.id}/toolbox`)
  const refused = (why: string) => protocolError(provider.id, `the sandbox names a toolbox proxy the key may not go to: ${why}`)
  const url = URL.canParse(proxy) ? new URL(proxy) : undefined
  if (url === undefined) return Effect.fail(refused("not a URL"))
  // Origin and path only: a query or fragment in the vendor's URL would swallow the id appended to it.
  const toolbox = Effect.succeed(`${url.origin}${url.pathname.replace(/\/+$/, "")}/${sandbox.id}`)
  if (url.origin === new URL(provider.endpoint).origin) return toolbox
  if (url.protocol !== "https:" || !DAYTONA_PROXY_HOST.test(url.hostname)) {
    return Effect.fail(refused(`${url.protocol}//${url.host.slice(0, 100)} is neither the API's origin nor an https Daytona proxy (proxy.*.daytona.io)`))
  }
  return UrlGuard.inspect(proxy, { allowPrivate: false, field: "toolboxProxyUrl", resolve }).pipe(
    Effect.flatMap(() => toolbox),
    Effect.catchTags({
      Unprocessable: (e) => Effect.fail(refused(e.message)),
      // Not resolving now may pass later: a connect error, as the call itself would have been.
      Unresolved: (e) => Effect.fail(new UpstreamError({ provider: provider.id, kind: "connect", message: `toolbox proxy: ${e.message}`, retryable: true }))
    })
  )
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
