/**
 * `AIGW_CONFIG`: a JSON file `{ "NAME": "value" }` holding any configuration variable. The
 * environment wins over the file. Hosts pass the path; core never reads process.env.
 * A key that is not a variable aigw reads (a typo, a variable of another program) stops the start
 * with the key named: a silently ignored setting is worse than a refused one.
 */
import { ConfigProvider, Effect, Layer } from "effect"
import * as fs from "node:fs"
import { data as catalogue } from "./Catalog/Catalog.ts"
import { envPrefix, limitVariables } from "./Config.ts"
import { servedBy } from "./Providers/Registry.ts"
import { type StartupError, startupError } from "./StartupError.ts"
import { jsonSyntaxProblem } from "./JsonText.ts"

/**
 * Every variable the gateway reads through its ConfigProvider: Config.ts `fromEnv` and
 * `limitVariables`, and the few read elsewhere (DATABASE_URL and AIGW_KEY_CACHE_SECONDS in Layers.ts, AIGW_TRACING in
 * Tracing.ts, AIGW_LOG_REQUESTS and AIGW_METRICS in Http/Observability.ts, AIGW_LOG_FORMAT in
 * Logging.ts, AIGW_API_KEY in the MCP stdio host, AIGW_FAST_LANE and AIGW_SHUTDOWN_GRACE_SECONDS in the node host, AIGW_MALLOC_TRIM_MS in MallocTrim.ts). A test
 * (test/ConfigFile.test.ts) checks the sources for names missing here.
 */
export const generalVariables: ReadonlyArray<string> = [
  "HOST",
  "PORT",
  "PUBLIC_URL",
  "DATABASE_URL",
  "AIGW_KEY_CACHE_SECONDS",
  "SMTP_URL",
  "MAIL_FROM",
  "JWT_SECRET",
  "JWT_PRIVATE_KEY",
  "WEBHOOK_SECRET",
  "AIGW_ADMIN_USERNAME",
  "AIGW_ADMIN_EMAIL",
  "AIGW_ADMIN_PASSWORD",
  "AIGW_ALLOW_PRIVATE_URLS",
  "AIGW_PLAN_LIMITS",
  "AIGW_DATA_DIR",
  "AIGW_MAX_BODY_BYTES",
  "AIGW_TRUST_PROXY",
  "AIGW_WEBHOOK_RETRY_BASE_MS",
  "AIGW_JOB_POLL_MS",
  "AIGW_WORKER_INTERVAL_MS",
  "AIGW_USAGE_RETENTION_DAYS",
  "AIGW_MALLOC_TRIM_MS",
  "AIGW_SANDBOX",
  "AIGW_LOCAL_EMBEDDER",
  "AIGW_TRACING",
  "AIGW_LOG_REQUESTS",
  "AIGW_FAST_LANE",
  "AIGW_SHUTDOWN_GRACE_SECONDS",
  "AIGW_LOG_FORMAT",
  "AIGW_METRICS",
  "AIGW_MODELS",
  "AIGW_MODEL_ALIASES",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_SERVICE_NAME",
  "AIGW_API_KEY"
]

/** Read from the process environment only, never from the file (AIGW_SINGLE_THREADED_GC: by the launcher, before node starts). */
export const environmentOnly: ReadonlyArray<string> = ["AIGW_CONFIG", "AIGW_DEBUG", "AIGW_SINGLE_THREADED_GC", "AIGW_WORKERS"]

let known: ReadonlySet<string> | undefined

/** The keys a configuration file may hold: the variables above, the limits, and `<ID>_API_KEY` / `<ID>_BASE_URL` and the own settings of catalogued providers. */
export const knownVariables = (): ReadonlySet<string> =>
  (known ??= new Set([
    ...generalVariables,
    ...Object.values(limitVariables),
    ...catalogue.providers.flatMap((p) => [
      `${envPrefix(p.id)}_API_KEY`,
      `${envPrefix(p.id)}_BASE_URL`,
      ...(servedBy(p).settings ?? []).map((s) => s.name)
    ])
  ]))

const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The known variable a mistyped key most likely meant, if one is close. */
const suggestionFor = (key: string, names: ReadonlySet<string>): string | undefined => {
  const upper = key.toUpperCase()
  let best: string | undefined
  let bestDistance = 3
  for (const name of names) {
    const d = distance(upper, name)
    if (d < bestDistance) {
      best = name
      bestDistance = d
    }
  }
  return best
}

/**
 * The problem with a file's keys, or undefined when every key is a variable aigw reads.
 * Names each unknown key (with the likely intended variable) and each environment-only key.
 */
export const checkKeys = (keys: ReadonlyArray<string>, file: string): string | undefined => {
  const names = knownVariables()
  const envOnly = keys.filter((k) => environmentOnly.includes(k))
  if (envOnly.length > 0) {
    return `AIGW_CONFIG: ${envOnly.map((k) => `"${k}"`).join(", ")} in ${file} ${envOnly.length > 1 ? "are" : "is"} read from the environment only`
  }
  const unknown = keys.filter((k) => !names.has(k))
  if (unknown.length === 0) return undefined
  const described = unknown.map((k) => {
    const suggestion = suggestionFor(k, names)
    return suggestion ? `"${k}" (did you mean "${suggestion}"?)` : `"${k}"`
  })
  return `AIGW_CONFIG: unknown key${unknown.length > 1 ? "s" : ""} ${described.join(", ")} in ${file}; the keys are the variables of docs/configuration.md`
}

/**
 * The environment's variables, an empty one as unset: `VAR=` (as compose's `${VAR:-}` passes an
 * unset variable on) takes the default rather than meaning "" or 0 (an empty WEBHOOK_SECRET would
 * sign with an empty key, an empty HOST listen on every interface).
 */
const environment = (): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromMap(new Map(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== "")), {
    pathDelim: "_",
    seqDelim: ","
  })

/** The environment, then the file at `path`; throws a StartupError for an unreadable file or an unknown key. */
export const providerFor = (path: string | undefined): ConfigProvider.ConfigProvider => {
  const env = environment()
  if (!path) return env
  let text: string
  try {
    // A byte order mark (as some Windows editors save UTF-8) is no JSON, but no mistake either.
    text = fs.readFileSync(path, "utf8").replace(/^\uFEFF/, "")
  } catch (e) {
    throw startupError(`AIGW_CONFIG: cannot read ${path}: ${(e as Error).message}`, "check AIGW_CONFIG")
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (e) {
    throw startupError(`AIGW_CONFIG: ${path} is ${jsonSyntaxProblem(e)}`, "check AIGW_CONFIG")
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw startupError(`AIGW_CONFIG: ${path} must hold a JSON object of NAME -> value`, "check AIGW_CONFIG")
  }
  const problem = checkKeys(Object.keys(parsed), path)
  if (problem !== undefined) throw startupError(problem, "check AIGW_CONFIG")
  const entries = Object.entries(parsed).filter(([, v]) => v !== "").map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)] as const)
  return ConfigProvider.orElse(env, () => ConfigProvider.fromMap(new Map(entries)))
}

/** Sets the ConfigProvider; the file is read when the layer is built, so a bad file is a start-up failure, not a crash at load. */
export const layer = (path: string | undefined): Layer.Layer<never, StartupError> =>
  Layer.unwrapEffect(
    Effect.try({ try: () => Layer.setConfigProvider(providerFor(path)), catch: (e) => e as StartupError })
  )
