/**
 * Google Vertex AI: the Gemini wire format (Gemini.ts, reused unchanged) at Vertex's paths,
 * `{base}/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent`,
 * authorized with an OAuth access token obtained with a service account key (a JWT signed RS256
 * with the key, exchanged at its `token_uri`, https://developers.google.com/identity/protocols/oauth2/service-account),
 * or, in express mode, an API key (`x-goog-api-key`, paths without project and location).
 * Embeddings: the `:predict` method of the text-embedding models (`instances: [{content}]`).
 */
import * as jose from "jose"
import { readFileSync } from "node:fs"
import type { ChatWire, Target, WireRequest } from "./Chat.ts"
import { checked, type EmbeddingWire } from "./Embeddings.ts"
import * as Gemini from "./Gemini.ts"
import { cachedToken, requestToken } from "./internal/accessTokens.ts"
import type { AuthorizeView, Served } from "./Served.ts"
import { UpstreamError } from "./UpstreamError.ts"

const ACCOUNT = "VERTEX_SERVICE_ACCOUNT"
const PROJECT = "VERTEX_PROJECT"
const LOCATION = "VERTEX_LOCATION"
const SCOPE = "https://www.googleapis.com/auth/cloud-platform"
const GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"

/** The fields of a service account key (the JSON file Google issues) that aigw uses. */
interface ServiceAccount {
  readonly client_email: string
  readonly private_key: string
  readonly private_key_id?: string
  readonly project_id?: string
  readonly token_uri: string
}

const accounts = new Map<string, ServiceAccount | string>()

/** The service account key from its setting (JSON text or a file path), or why it cannot be used. */
const accountOf = (setting: string): ServiceAccount | string => {
  let account = accounts.get(setting)
  if (account === undefined) accounts.set(setting, (account = readAccount(setting)))
  return account
}

const readAccount = (setting: string): ServiceAccount | string => {
  let text = setting.trim()
  if (!text.startsWith("{")) {
    try {
      text = readFileSync(text, "utf8")
    } catch (e) {
      return `${ACCOUNT} is neither JSON nor a readable file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`
    }
  }
  let key: any
  try {
    key = JSON.parse(text)
  } catch {
    return `${ACCOUNT} is not valid JSON`
  }
  if (typeof key?.client_email !== "string" || typeof key?.private_key !== "string") {
    return `${ACCOUNT} is not a service account key (client_email and private_key are required)`
  }
  return {
    client_email: key.client_email,
    private_key: key.private_key,
    ...(typeof key.private_key_id === "string" ? { private_key_id: key.private_key_id } : {}),
    ...(typeof key.project_id === "string" ? { project_id: key.project_id } : {}),
    token_uri: typeof key.token_uri === "string" ? key.token_uri : GOOGLE_TOKEN_URI
  }
}

/** The location's host name part: a region such as `us-central1`, or `global`. */
const LOCATION_PATTERN = /^[a-z0-9-]+$/

const credentials: Served["credentials"] = (view, prefix) => {
  const location = view.settings[LOCATION]
  if (location !== undefined && !LOCATION_PATTERN.test(location)) return `${LOCATION} must be a location such as us-central1 or global`
  const setting = view.settings[ACCOUNT]
  if (setting === undefined) return view.hasApiKey ? undefined : `set ${ACCOUNT} (a service account key, JSON text or a file path) or ${prefix}_API_KEY (express mode)`
  const account = accountOf(setting)
  if (typeof account === "string") return account
  if (view.settings[PROJECT] === undefined && account.project_id === undefined) return `set ${PROJECT} (the service account key names no project_id)`
  return undefined
}

/**
 * The model path of a call: under the project and location with a service account, at the top in
 * express mode. A regional location has its own host unless VERTEX_BASE_URL says otherwise.
 */
const modelUrl = (target: Target, method: string): string => {
  const { provider } = target
  const settings = provider.settings
  const model = `publishers/google/models/${encodeURIComponent(target.model.id)}:${method}`
  const setting = settings[ACCOUNT]
  const account = setting === undefined ? undefined : accountOf(setting)
  if (account === undefined) return `${provider.endpoint}/${model}`
  const location = settings[LOCATION] ?? "global"
  const base = location !== "global" && provider.endpoint === provider.baseUrl ? `https://${location}-aiplatform.googleapis.com/v1` : provider.endpoint
  const project = settings[PROJECT] ?? (typeof account === "string" ? undefined : account.project_id) ?? ""
  return `${base}/projects/${encodeURIComponent(project)}/locations/${location}/${model}`
}

/** The signed assertion of the JWT bearer grant (RFC 7523), valid for an hour. */
const assertion = async (account: ServiceAccount): Promise<string> => {
  const key = await jose.importPKCS8(account.private_key, "RS256")
  const now = Math.floor(Date.now() / 1000)
  return new jose.SignJWT({ scope: SCOPE })
    .setProtectedHeader({ alg: "RS256", typ: "JWT", ...(account.private_key_id ? { kid: account.private_key_id } : {}) })
    .setIssuer(account.client_email)
    .setAudience(account.token_uri)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(key)
}

const unusableKey = (provider: string, detail: string) =>
  new UpstreamError({ provider, kind: "protocol", message: `${provider} cannot be authorized: ${detail}`, retryable: false })

/** Adds the service account's access token (or the express-mode API key) to a request. */
const authorize = async (provider: AuthorizeView, request: WireRequest, signal: AbortSignal): Promise<WireRequest> => {
  const setting = provider.settings[ACCOUNT]
  if (setting === undefined) {
    if (provider.apiKey === undefined) throw unusableKey(provider.id, `set ${ACCOUNT} or the API key`)
    return { ...request, headers: { ...request.headers, "x-goog-api-key": provider.apiKey } }
  }
  const account = accountOf(setting)
  if (typeof account === "string") throw unusableKey(provider.id, account)
  const token = await cachedToken(provider.id, setting, async () => {
    const signed = await assertion(account).catch((e) => Promise.reject(unusableKey(provider.id, `${ACCOUNT}'s private_key cannot sign (${(e as Error).message})`)))
    return requestToken(provider.id, { url: account.token_uri, form: { grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: signed } })
  }, signal)
  return { ...request, headers: { ...request.headers, authorization: `Bearer ${token}` } }
}

/** Gemini's request and answers at Vertex's URL; the credentials come from `authorize`. */
const chat: ChatWire = {
  ...Gemini.wire,
  request: (target, request, stream) => ({
    url: modelUrl(target, stream ? "streamGenerateContent?alt=sse" : "generateContent"),
    headers: {},
    body: Gemini.wire.request(target, request, stream).body
  })
}

/** Text embeddings through `:predict`: one instance per text, one prediction per instance. */
const embeddings: EmbeddingWire = {
  request: (target, texts) => ({ url: modelUrl(target, "predict"), headers: {}, body: { instances: texts.map((content) => ({ content })) } }),
  result: (provider, body, count) => {
    const predictions: Array<any> = Array.isArray(body?.predictions) ? body.predictions : []
    const counts = predictions.map((p) => p?.embeddings?.statistics?.token_count)
    const promptTokens = counts.every((c) => typeof c === "number") ? counts.reduce((a, b) => a + b, 0) : undefined
    return checked(provider, predictions.map((p) => p?.embeddings?.values), count, promptTokens)
  }
}

export const served: Served = {
  chat,
  embeddings,
  settings: [
    { name: ACCOUNT, description: "Service account key: its JSON text, or the path of the JSON file", secret: true },
    { name: PROJECT, description: "Google Cloud project id (default: the key's project_id)" },
    { name: LOCATION, description: "Vertex AI location, e.g. us-central1 (default: global)" }
  ],
  credentials,
  authorize
}
