/**
 * IBM watsonx.ai: `POST {endpoint}/text/chat?version=…` and `/text/chat_stream` (SSE), whose
 * messages, tools, answers and chunks are OpenAI's (the OpenAI-compatible wire's functions are
 * reused) with watsonx's names around them: `model_id`, `project_id` / `space_id`,
 * `tool_choice_option` for the string choices, errors as `{errors:[{code,message}], trace,
 * status_code}`. Authorized with an IBM Cloud IAM access token for the API key
 * (`{WATSONX_IAM_URL}/identity/token`, grant type `urn:ibm:params:oauth:grant-type:apikey`).
 * Embeddings: `POST {endpoint}/text/embeddings` (`inputs` -> `results[].embedding`).
 */
import { refusal, extraFieldOf, type ChatRequest, type ChatWire, type Target, type WireRequest } from "./Chat.ts"
import type { EmbeddingWire } from "./Embeddings.ts"
import { cachedToken, requestToken } from "./internal/accessTokens.ts"
import { eventJson } from "./internal/http.ts"
import * as OpenAiCompatible from "./OpenAiCompatible.ts"
import type { AuthorizeView, Served } from "./Served.ts"
import { protocolError, UpstreamError } from "./UpstreamError.ts"

const PROJECT = "WATSONX_PROJECT_ID"
const SPACE = "WATSONX_SPACE_ID"
const IAM_URL = "WATSONX_IAM_URL"
const VERSION = "WATSONX_VERSION"
const DEFAULT_IAM_URL = "https://iam.cloud.ibm.com"
/** The API version date sent with every call (IBM's chat reference uses it). */
const DEFAULT_VERSION = "2024-10-08"

/** Request fields of the OpenAI format that watsonx's chat API takes under the same name, forwarded as they came. */
const forwarded = new Set(["logprobs", "top_logprobs", "logit_bias", "max_completion_tokens", "time_limit", "reasoning_effort"])

const urlOf = (target: Target, path: string) =>
  `${target.provider.endpoint}/${path}?version=${encodeURIComponent(target.provider.settings[VERSION] ?? DEFAULT_VERSION)}`

/** Where the call is billed: the project, else the deployment space. */
const scopeOf = (target: Target): Record<string, string> => {
  const project = target.provider.settings[PROJECT]
  if (project !== undefined) return { project_id: project }
  const space = target.provider.settings[SPACE]
  return space !== undefined ? { space_id: space } : {}
}

const toWireRequest = (target: Target, request: ChatRequest) => {
  // The OpenAI body, renamed: watsonx takes the model as `model_id` and a string tool choice as `tool_choice_option`.
  const { model, tool_choice, ...rest } = OpenAiCompatible.toWireRequest(target.provider.id, request, false) as Record<string, unknown>
  return {
    ...rest,
    model_id: model,
    ...scopeOf(target),
    ...(tool_choice === undefined ? {} : typeof tool_choice === "string" ? { tool_choice_option: tool_choice } : { tool_choice })
  }
}

const unsupported = (request: ChatRequest): string | undefined => {
  if (request.parallelToolCalls !== undefined) return refusal("watsonx", "parallel_tool_calls")
  const extra = Object.fromEntries(Object.entries(request.extra ?? {}).filter(([k]) => !forwarded.has(k)))
  const field = extraFieldOf({ ...request, extra })
  return field === undefined ? undefined : refusal("watsonx", field)
}

/** A watsonx error answer (`errors[]`), also sent as a stream event, as its message; or undefined. */
const errorOf = (body: any): string | undefined =>
  Array.isArray(body?.errors) && body.errors.length > 0
    ? body.errors.map((e: any) => (typeof e?.message === "string" ? e.message : String(e?.code ?? "error"))).join("; ")
    : undefined

const chat: ChatWire = {
  request: (target, request, stream) => ({ url: urlOf(target, stream ? "text/chat_stream" : "text/chat"), headers: {}, body: toWireRequest(target, request) }),
  result: OpenAiCompatible.wire.result,
  events: (provider) => {
    const decode = OpenAiCompatible.wire.events(provider)
    return (event) => {
      // Only an event that may be an error is read twice.
      if (event.event === "error" || event.data.includes("\"errors\"")) {
        const chunk = eventJson(provider, event)
        if (chunk instanceof UpstreamError) return chunk
        const message = errorOf(chunk)
        if (message !== undefined) return protocolError(provider, `stream error: ${message}`)
      }
      return decode(event)
    }
  },
  unsupported
}

const embeddings: EmbeddingWire = {
  request: (target, texts) => ({ url: urlOf(target, "text/embeddings"), headers: {}, body: { inputs: texts, model_id: target.model.id, ...scopeOf(target) } }),
  result: (provider, body, count) => {
    const vectors = Array.isArray(body?.results) ? body.results.map((r: any) => r?.embedding) : []
    if (vectors.length !== count || !vectors.every((v: unknown) => Array.isArray(v) && v.every((x) => typeof x === "number"))) {
      return protocolError(provider, `expected ${count} embeddings`)
    }
    return { vectors, promptTokens: typeof body.input_token_count === "number" ? body.input_token_count : undefined }
  }
}

/** Adds the IAM access token of the API key. */
const authorize = async (provider: AuthorizeView, request: WireRequest, signal: AbortSignal): Promise<WireRequest> => {
  const apiKey = provider.apiKey
  if (apiKey === undefined) {
    throw new UpstreamError({ provider: provider.id, kind: "protocol", message: `${provider.id} cannot be authorized: set WATSONX_API_KEY`, retryable: false })
  }
  const iam = (provider.settings[IAM_URL] ?? DEFAULT_IAM_URL).replace(/\/+$/, "")
  const token = await cachedToken(
    provider.id,
    `${iam}\0${apiKey}`,
    () => requestToken(provider.id, { url: `${iam}/identity/token`, form: { grant_type: "urn:ibm:params:oauth:grant-type:apikey", apikey: apiKey } }),
    signal
  )
  return { ...request, headers: { ...request.headers, authorization: `Bearer ${token}` } }
}

export const served: Served = {
  chat,
  embeddings,
  settings: [
    { name: PROJECT, description: "watsonx.ai project id the calls run in (or WATSONX_SPACE_ID)" },
    { name: SPACE, description: "watsonx.ai deployment space id, when no project id is set" },
    { name: IAM_URL, description: `IBM Cloud IAM URL the API key is exchanged at (default ${DEFAULT_IAM_URL})` },
    { name: VERSION, description: `watsonx.ai API version date (default ${DEFAULT_VERSION})` }
  ],
  credentials: (view, prefix) =>
    view.hasApiKey && (view.settings[PROJECT] !== undefined || view.settings[SPACE] !== undefined)
      ? undefined
      : `set ${prefix}_API_KEY and ${PROJECT} (or ${SPACE})`,
  authorize
}
