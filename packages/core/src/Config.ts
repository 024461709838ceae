/**
 * Typed configuration of the core. Hosts build it from the environment with `layerConfig`
 * (Effect's Config reads the ConfigProvider, never `process.env` directly); tests and embedders
 * pass options to `layer`.
 */
import { Config, ConfigError, Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { defaultPlanLimits, parsePlanLimits, type Plan } from "./Plans.ts"
import { ensureWritableDir } from "./StartupError.ts"

export const VERSION = "1.0.0"

export interface GatewayOptions {
  /** API version reported by /v1/health. */
  readonly version: string
  /** Base URL for links in e-mails; never taken from a request's Host header. */
  readonly publicUrl: string
  /** Where embedded defaults keep files: generated keys, mail copies. */
  readonly dataDir: string
  readonly planLimits: Readonly<Record<Plan, number>>
  readonly allowPrivateUrls: boolean
  readonly webhookSecret: Option.Option<Redacted.Redacted>
  readonly jwtSecret: Option.Option<Redacted.Redacted>
  readonly jwtPrivateKey: Option.Option<Redacted.Redacted>
  readonly admin: Option.Option<{ readonly username: string; readonly email: string; readonly password: Redacted.Redacted }>
  readonly smtpUrl: Option.Option<Redacted.Redacted>
  readonly mailFrom: string
  /** Largest accepted request body in bytes (413 above). */
  readonly maxBodyBytes: number
  /** Reverse proxies in front of aigw whose X-Forwarded-For entries are trusted (0: use the socket peer). */
  readonly trustProxy: number
  /** First webhook retry delay; later ones grow x3 (see docs/webhooks.md). */
  readonly webhookRetryBaseMs: number
  /** Pause between polls of upstream jobs (video, batch, fine-tuning). */
  readonly jobPollMs: number
  /** Pause between background rounds (jobs, webhook deliveries) of long-lived hosts. */
  readonly workerIntervalMs: number
  /** Days a per-call usage record is kept (UsageRetention.ts); 0 keeps every record. */
  readonly usageRetentionDays: number
  /** Bounds on everything an outsider controls (docs/security.md). */
  readonly limits: SecurityLimits
  /** How sandboxed code is isolated: `auto` (bubblewrap when it works, else a child process), `bwrap`, `process` or `off`. */
  readonly sandbox: "auto" | "bwrap" | "process" | "off"
  /** `AIGW_LOCAL_EMBEDDER`: the in-process text embedder, `use-lite` (a sentence model, loaded on first use) or `hash` (lexical). */
  readonly localEmbedder: "use-lite" | "hash"
  /** Reads `<ID>_API_KEY` / `<ID>_BASE_URL` for a provider id. */
  readonly providerEnv: (providerId: string) => { readonly apiKey: Option.Option<Redacted.Redacted>; readonly baseUrl: Option.Option<string> }
  /** Reads a provider's own setting by variable name (Providers/Served.ts `settings`, e.g. AWS_REGION). */
  readonly setting: (name: string) => Option.Option<string>
  /** `AIGW_MODELS`: models added to or overriding the catalogue (JSON, validated by the Catalog at start). */
  readonly models: Option.Option<string>
  /** `AIGW_MODEL_ALIASES`: names that stand for a model (JSON object, validated by the Catalog at start). */
  readonly modelAliases: Option.Option<string>
}

/** Bounds on untrusted input and outbound replies; each has an `AIGW_` variable (docs/configuration.md). */
export interface SecurityLimits {
  /** Deepest nesting of arrays and objects accepted in a JSON body (400 above). */
  readonly maxJsonDepth: number
  /** Most objects and arrays in a JSON body (400 above): each costs the parse an allocation. */
  readonly maxJsonContainers: number
  /** Largest reply read from an upstream, orchestrator or webhook receiver, after decompression. */
  readonly maxUpstreamResponseBytes: number
  /** Largest total an archive (e.g. a .docx) may inflate to. */
  readonly maxInflatedBytes: number
  /** Largest inflated/compressed ratio accepted for an archive entry. */
  readonly maxInflateRatio: number
  /** Most entries in one JSON-RPC batch on /mcp. */
  readonly mcpMaxBatch: number
  /** Sandboxed code runs at once in this process (503 with Retry-After above). */
  readonly sandboxMaxConcurrent: number
  /** Sandboxed code runs at once for one avatar (429 with Retry-After above). */
  readonly sandboxMaxPerAvatar: number
  /** Memory of one sandbox process in MB (heap and WebAssembly memory). */
  readonly sandboxMemoryMb: number
  /** Failed logins allowed per account within `loginWindowSeconds` before further attempts get 429. */
  readonly loginMaxFailuresPerAccount: number
  /** Failed logins allowed per client address within `loginWindowSeconds`. */
  readonly loginMaxFailuresPerAddress: number
  readonly loginWindowSeconds: number
  /** Registrations per client address per hour (each costs an argon2 hash and a mail). */
  readonly registerMaxPerAddress: number
}

export const defaultLimits: SecurityLimits = {
  maxJsonDepth: 64,
  maxJsonContainers: 100_000,
  maxUpstreamResponseBytes: 32 * 1024 * 1024,
  maxInflatedBytes: 50 * 1024 * 1024,
  maxInflateRatio: 100,
  mcpMaxBatch: 32,
  sandboxMaxConcurrent: 2,
  sandboxMaxPerAvatar: 1,
  sandboxMemoryMb: 256,
  loginMaxFailuresPerAccount: 10,
  loginMaxFailuresPerAddress: 100,
  loginWindowSeconds: 900,
  registerMaxPerAddress: 100
}

/** Environment variable of each limit. */
export const limitVariables: Readonly<Record<keyof SecurityLimits, string>> = {
  maxJsonDepth: "AIGW_MAX_JSON_DEPTH",
  maxJsonContainers: "AIGW_MAX_JSON_CONTAINERS",
  maxUpstreamResponseBytes: "AIGW_MAX_UPSTREAM_RESPONSE_BYTES",
  maxInflatedBytes: "AIGW_MAX_INFLATED_BYTES",
  maxInflateRatio: "AIGW_MAX_INFLATE_RATIO",
  mcpMaxBatch: "AIGW_MCP_MAX_BATCH",
  sandboxMaxConcurrent: "AIGW_SANDBOX_MAX_CONCURRENT",
  sandboxMaxPerAvatar: "AIGW_SANDBOX_MAX_PER_AVATAR",
  sandboxMemoryMb: "AIGW_SANDBOX_MEMORY_MB",
  loginMaxFailuresPerAccount: "AIGW_LOGIN_MAX_FAILURES_PER_ACCOUNT",
  loginMaxFailuresPerAddress: "AIGW_LOGIN_MAX_FAILURES_PER_ADDRESS",
  loginWindowSeconds: "AIGW_LOGIN_WINDOW_SECONDS",
  registerMaxPerAddress: "AIGW_REGISTER_MAX_PER_ADDRESS"
}

/**
 * The largest value of a limit: what a 32-bit count holds (timers, typed arrays), and for the JSON depth
 * what a nesting can mean (its scan keeps a count per level: a depth of 1e10 failed every JSON request).
 */
const limitMaxima: Partial<Record<keyof SecurityLimits, number>> = { maxJsonDepth: 10_000 }
export const LIMIT_MAX = 2_147_483_647

const limitsFromEnv: Config.Config<SecurityLimits> = Config.all(
  Object.fromEntries(
    (Object.keys(limitVariables) as Array<keyof SecurityLimits>).map((k) => {
      const max = limitMaxima[k] ?? LIMIT_MAX
      return [
        k,
        Config.integer(limitVariables[k]).pipe(
          Config.validate({ message: `${limitVariables[k]} must be a positive integer up to ${max}`, validation: (n) => n > 0 && n <= max }),
          Config.withDefault(defaultLimits[k])
        )
      ]
    })
  ) as { [K in keyof SecurityLimits]: Config.Config<number> }
)

export class GatewayConfig extends Context.Tag("aigw/GatewayConfig")<GatewayConfig, GatewayOptions>() {}

/** `together-ai` -> `TOGETHER_AI`: upper case, non-alphanumerics become `_`. */
export const envPrefix = (providerId: string): string => providerId.toUpperCase().replace(/[^A-Z0-9]/g, "_")

export const defaults = (overrides: Partial<GatewayOptions> = {}): GatewayOptions => ({
  version: VERSION,
  publicUrl: "http://127.0.0.1:8787",
  dataDir: "./data",
  planLimits: defaultPlanLimits,
  allowPrivateUrls: false,
  webhookSecret: Option.none(),
  jwtSecret: Option.none(),
  jwtPrivateKey: Option.none(),
  admin: Option.none(),
  smtpUrl: Option.none(),
  mailFrom: "aigw <no-reply@localhost>",
  maxBodyBytes: 10 * 1024 * 1024,
  trustProxy: 0,
  webhookRetryBaseMs: 2_000,
  jobPollMs: 5_000,
  workerIntervalMs: 1_000,
  usageRetentionDays: 0,
  limits: defaultLimits,
  sandbox: "auto",
  localEmbedder: "use-lite",
  providerEnv: () => ({ apiKey: Option.none(), baseUrl: Option.none() }),
  setting: () => Option.none(),
  models: Option.none(),
  modelAliases: Option.none(),
  ...overrides,
  ...plainOptions(overrides)
})

/**
 * The optional options as JavaScript callers give them: `jwtSecret: "…"` rather than
 * `Option.some(Redacted.make("…"))` (a plain string was taken for no secret at all, and tokens were
 * signed with a generated one). A string, or a Redacted for the secrets, is the option set to it.
 */
const plainOptions = (overrides: Partial<GatewayOptions>) => {
  const out: Record<string, unknown> = {}
  for (const key of ["webhookSecret", "jwtSecret", "jwtPrivateKey", "smtpUrl"] as const) {
    const value: unknown = overrides[key]
    if (typeof value === "string") out[key] = value === "" ? Option.none() : Option.some(Redacted.make(value))
    else if (Redacted.isRedacted(value)) out[key] = Option.some(value)
  }
  for (const key of ["models", "modelAliases"] as const) {
    const value: unknown = overrides[key]
    if (typeof value === "string") out[key] = value === "" ? Option.none() : Option.some(value)
  }
  return out as Partial<GatewayOptions>
}

/** Options given directly (tests, embedding); no provider is configured unless given (`providersFromEnv`). */
export const layer = (overrides: Partial<GatewayOptions> = {}) => Layer.succeed(GatewayConfig, defaults(overrides))

/**
 * The providers an environment configures, as the hosts read them (`<ID>_API_KEY`, `<ID>_BASE_URL`, and
 * the settings some providers take, e.g. `AZURE_OPENAI_API_VERSION`), for `layer` when embedding:
 * `GatewayConfig.layer({ ...providersFromEnv() })`. An empty value is an unset one.
 */
export const providersFromEnv = (env: Readonly<Record<string, string | undefined>> = process.env): Pick<GatewayOptions, "providerEnv" | "setting"> => {
  const value = (name: string) => Option.fromNullable(env[name]).pipe(Option.filter((v) => v !== ""))
  return {
    providerEnv: (id) => ({ apiKey: Option.map(value(`${envPrefix(id)}_API_KEY`), Redacted.make), baseUrl: value(`${envPrefix(id)}_BASE_URL`) }),
    setting: value
  }
}

const nonEmpty = <A>(config: Config.Config<A>) => Config.option(config)

/** A hundred years: a longer retention is no retention, and its cutoff would leave the dates JavaScript holds. */
export const MAX_RETENTION_DAYS = 36_500

/** A pause in milliseconds: at least 1, at most a day. */
const milliseconds = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a number of milliseconds from 1 to 86400000`, validation: (n) => n >= 1 && n <= 86_400_000 }),
    Config.withDefault(fallback)
  )

/**
 * The AIGW_ADMIN_* avatar: all three variables or none (two of three used to create no Admin, and
 * said nothing). Their values are the operator's: registration's rules are not applied (a test setup's
 * `admin@localhost` is no address registration takes), and a value they would refuse is logged at start.
 */
const adminOf = (username: Option.Option<string>, email: Option.Option<string>, password: Option.Option<Redacted.Redacted>) => {
  const given: ReadonlyArray<readonly [string, boolean]> = [
    ["AIGW_ADMIN_USERNAME", Option.isSome(username)],
    ["AIGW_ADMIN_EMAIL", Option.isSome(email)],
    ["AIGW_ADMIN_PASSWORD", Option.isSome(password)]
  ]
  const missing = given.filter(([, set]) => !set).map(([k]) => k)
  if (missing.length === 3) return Either.right(Option.none())
  if (missing.length > 0) {
    return Either.left(ConfigError.InvalidData([missing[0]!], `the Admin avatar needs AIGW_ADMIN_USERNAME, AIGW_ADMIN_EMAIL and AIGW_ADMIN_PASSWORD together; ${missing.join(" and ")} ${missing.length > 1 ? "are" : "is"} not set`))
  }
  return Either.right(Option.some({ username: Option.getOrThrow(username), email: Option.getOrThrow(email).trim(), password: Option.getOrThrow(password) }))
}

/**
 * What is wrong with a base URL the gateway appends paths to (PUBLIC_URL, `<ID>_BASE_URL`), or
 * undefined. Paths are appended as text, so a query or fragment would swallow them (`…?x=1/api/…`),
 * and user info would go nowhere: neither e-mail links nor upstream calls carry it.
 */
export const baseUrlProblem = (text: string) => {
  let url: URL | undefined
  try {
    url = /\s/.test(text) ? undefined : new URL(text)
  } catch {
    url = undefined
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") return "must be an http:// or https:// URL"
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password"
  if (text.includes("?")) return "must not carry a query string (paths are appended to it)"
  if (text.includes("#")) return "must not carry a fragment (paths are appended to it)"
  return undefined
}

/** HOST and PORT: where the node host listens (read here once, for the options and for the host itself). */
export const hostConfig = Config.string("HOST").pipe(Config.withDefault("127.0.0.1"))
// Digits only: a number reader takes `0x50` as 80 and `1e3` as 1000.
export const portConfig = Config.string("PORT").pipe(
  Config.validate({ message: "PORT must be a port number from 0 to 65535", validation: (t) => /^\d{1,5}$/.test(t.trim()) && Number(t) <= 65535 }),
  Config.map((t) => Number(t)),
  Config.withDefault(8787)
)
const publicUrlConfig = nonEmpty(Config.string("PUBLIC_URL").pipe(
  // No query or fragment: e-mail links are the URL with a path appended (`…?x=1/api/avatar/…` led nowhere).
  Config.validate({
    message: "PUBLIC_URL must be an http:// or https:// URL without a user, query or fragment (the address clients use, e.g. https://aigw.example.com)",
    validation: (u) => baseUrlProblem(u) === undefined
  })
))

/** Hosts that listen on every interface: a link to them leads nowhere, `localhost` reaches the server from its machine. */
const EVERY_INTERFACE = new Set(["0.0.0.0", "::", "[::]"])

/**
 * PUBLIC_URL when it is not set: the listen address, as a URL (an IPv6 address in brackets; a host
 * that listens on every interface as `localhost`).
 */
export const defaultPublicUrl = (host: string, port: number) => `http://${EVERY_INTERFACE.has(host) ? "localhost" : urlHost(host)}:${port}`

/** A host as a URL writes it: an IPv6 address in brackets. */
export const urlHost = (host: string) => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host)

/** Loopback listen addresses: the default PUBLIC_URL reaches them from the machine they run on, which is all they serve. */
const isLoopback = (host: string) => host === "localhost" || /^127\./.test(host) || host === "::1" || host === "[::1]"

/**
 * The start-up warning when PUBLIC_URL is unset and its default is no address that readers of the
 * gateway's mails or MCP clients elsewhere reach: on a host that listens beyond loopback or on port 0
 * (the system picks the port when the server listens, after the default was made), and always where
 * nothing listens (`listens: false`, Lambda).
 */
export const warnWithoutPublicUrl = (listens: boolean): Effect.Effect<void, ConfigError.ConfigError> =>
  Effect.gen(function*() {
    if (Option.isSome(yield* publicUrlConfig)) return
    const host = yield* hostConfig
    const port = yield* portConfig
    if (listens && isLoopback(host) && port !== 0) return
    const url = defaultPublicUrl(host, port)
    const why = listens && port === 0 ? " (PORT=0: the port is the one the server listens on, not known before)" : ""
    yield* Effect.logWarning(`PUBLIC_URL is not set: links in e-mails and the MCP discovery documents point at ${url}${why}; set PUBLIC_URL to the address clients use`)
  })

/** Options read from the environment with the names of DESIGN.md §3. */
export const fromEnv: Config.Config<GatewayOptions> = Config.all({
  host: hostConfig,
  port: portConfig,
  publicUrl: publicUrlConfig,
  dataDir: Config.string("AIGW_DATA_DIR").pipe(Config.withDefault("./data")),
  planLimits: nonEmpty(Config.string("AIGW_PLAN_LIMITS")),
  allowPrivateUrls: Config.boolean("AIGW_ALLOW_PRIVATE_URLS").pipe(Config.withDefault(false)),
  webhookSecret: nonEmpty(Config.redacted("WEBHOOK_SECRET")),
  jwtSecret: nonEmpty(Config.redacted("JWT_SECRET")),
  jwtPrivateKey: nonEmpty(Config.redacted("JWT_PRIVATE_KEY")),
  adminUsername: nonEmpty(Config.string("AIGW_ADMIN_USERNAME")),
  adminEmail: nonEmpty(Config.string("AIGW_ADMIN_EMAIL")),
  adminPassword: nonEmpty(Config.redacted("AIGW_ADMIN_PASSWORD")),
  smtpUrl: nonEmpty(Config.string("SMTP_URL").pipe(
    Config.validate({ message: "SMTP_URL must be an smtp:// or smtps:// URL (the user and password in it, as in a browser's URL)", validation: (u) => /^smtps?:\/\/\S+$/i.test(u) }),
    Config.map(Redacted.make)
  )),
  mailFrom: Config.string("MAIL_FROM").pipe(Config.withDefault("aigw <no-reply@localhost>")),
  maxBodyBytes: Config.integer("AIGW_MAX_BODY_BYTES").pipe(
    Config.validate({ message: "AIGW_MAX_BODY_BYTES must be a positive number of bytes up to 2147483647", validation: (n) => n >= 1 && n <= LIMIT_MAX }),
    Config.withDefault(10 * 1024 * 1024)
  ),
  trustProxy: Config.integer("AIGW_TRUST_PROXY").pipe(
    Config.validate({ message: "AIGW_TRUST_PROXY must be the number of trusted reverse proxies (0 up to 2147483647)", validation: (n) => n >= 0 && n <= LIMIT_MAX }),
    Config.withDefault(0)
  ),
  // Each a pause of a loop: zero or less would spin it (a failing webhook retried as fast as it fails).
  webhookRetryBaseMs: milliseconds("AIGW_WEBHOOK_RETRY_BASE_MS", 2_000),
  jobPollMs: milliseconds("AIGW_JOB_POLL_MS", 5_000),
  workerIntervalMs: milliseconds("AIGW_WORKER_INTERVAL_MS", 1_000),
  usageRetentionDays: Config.integer("AIGW_USAGE_RETENTION_DAYS").pipe(
    Config.validate({
      message: "AIGW_USAGE_RETENTION_DAYS must be a whole number of days from 1 to 36500, or 0 to keep every usage record",
      validation: (n) => n >= 0 && n <= MAX_RETENTION_DAYS
    }),
    Config.withDefault(0)
  ),
  limits: limitsFromEnv,
  sandbox: Config.literal("auto", "bwrap", "process", "off")("AIGW_SANDBOX").pipe(Config.withDefault("auto" as const)),
  localEmbedder: Config.literal("use-lite", "hash")("AIGW_LOCAL_EMBEDDER").pipe(Config.withDefault("use-lite" as const)),
  models: nonEmpty(Config.string("AIGW_MODELS")),
  modelAliases: nonEmpty(Config.string("AIGW_MODEL_ALIASES"))
}).pipe(
  Config.mapOrFail((c) => {
    const planLimits = Option.match(c.planLimits, {
      onNone: () => Either.right(defaultPlanLimits),
      onSome: (json) =>
        Either.mapLeft(parsePlanLimits(json), (problem) => ConfigError.InvalidData(["AIGW_PLAN_LIMITS"], problem))
    })
    const admin = adminOf(c.adminUsername, c.adminEmail, c.adminPassword)
    return Either.map(Either.all([planLimits, admin]), ([planLimits, admin]): GatewayOptions => ({
      ...defaults(),
      publicUrl: Option.getOrElse(c.publicUrl, () => defaultPublicUrl(c.host, c.port)).replace(/\/+$/, ""),
      dataDir: c.dataDir,
      planLimits,
      allowPrivateUrls: c.allowPrivateUrls,
      webhookSecret: c.webhookSecret,
      jwtSecret: c.jwtSecret,
      jwtPrivateKey: c.jwtPrivateKey,
      admin,
      smtpUrl: c.smtpUrl,
      mailFrom: c.mailFrom,
      maxBodyBytes: c.maxBodyBytes,
      trustProxy: c.trustProxy,
      webhookRetryBaseMs: c.webhookRetryBaseMs,
      jobPollMs: c.jobPollMs,
      workerIntervalMs: c.workerIntervalMs,
      usageRetentionDays: c.usageRetentionDays,
      limits: c.limits,
      sandbox: c.sandbox,
      localEmbedder: c.localEmbedder,
      models: c.models,
      modelAliases: c.modelAliases
    }))
  })
)

/** Reads the options from the environment; provider credentials are read per provider id. */
export const layerConfig = Layer.effect(
  GatewayConfig,
  Effect.gen(function*() {
    const options = yield* fromEnv
    // Checked at start: an unwritable data directory would otherwise fail on the first mail or key.
    yield* ensureWritableDir(options.dataDir, "AIGW_DATA_DIR")
    const provider = yield* Effect.configProviderWith(Effect.succeed)
    const setting = (name: string) =>
      Effect.runSync(
        Effect.provide(
          Config.option(Config.string(name)).pipe(Effect.orElseSucceed(() => Option.none<string>())),
          Layer.setConfigProvider(provider)
        )
      )
    const providerEnv = (id: string) => {
      const prefix = envPrefix(id)
      return Effect.runSync(
        Effect.provide(
          Effect.all({
            apiKey: Config.option(Config.redacted(`${prefix}_API_KEY`)).pipe(
              Config.map(Option.filter((key) => Redacted.value(key).length > 0))
            ),
            baseUrl: Config.option(Config.string(`${prefix}_BASE_URL`))
          }).pipe(Effect.orElseSucceed(() => ({ apiKey: Option.none(), baseUrl: Option.none() }))),
          Layer.setConfigProvider(provider)
        )
      )
    }
    return { ...options, providerEnv, setting }
  })
)
