/**
 * Local mock upstreams speaking the providers' real wire formats, for testing the gateway's
 * provider adapters. Plain `node:http`, no dependencies; every server listens on 127.0.0.1:0.
 *
 * References used for the wire details (paths, auth, bodies, errors, stream framing):
 *  OpenAI Chat Completions / streaming / embeddings / models / errors
 *   - https://platform.openai.com/docs/api-reference/chat (object + chunk object, stream_options.include_usage:
 *     "an additional chunk will be streamed before the data: [DONE] message ... choices field will always be an
 *     empty array. All other chunks will also include a usage field, but with a null value"; mirrored in
 *     https://docs.rs/openai-struct/latest/openai_struct/models/struct.ChatCompletionStreamOptions.html)
 *   - https://platform.openai.com/docs/api-reference/models/object (id, object "model", created, owned_by)
 *   - https://help.openai.com/en/articles/6891781-error-code-401-incorrect-api-key-provided
 *   - openai-node Stream: an SSE `data:` payload carrying `error` is raised as an APIError (mid-stream errors)
 *  Anthropic Messages / streaming / errors
 *   - https://docs.anthropic.com/en/api/messages , https://docs.anthropic.com/en/api/messages-streaming
 *     (event order message_start, content_block_start, ping, content_block_delta*, content_block_stop,
 *     message_delta, message_stop; tool input as input_json_delta.partial_json starting with "")
 *   - https://docs.anthropic.com/en/api/errors (400 invalid_request_error, 401 authentication_error,
 *     403 permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 500 api_error,
 *     529 overloaded_error; body {"type":"error","error":{type,message},"request_id"}; SSE `event: error`)
 *   - https://github.com/envoyproxy/ai-gateway/pull/1909 (exact "anthropic-version: header is required" body)
 *   - https://claude-error-handbook.vercel.app/errors/authentication-error.html ("invalid x-api-key")
 *   - Anthropic SDK types: tool_choice {type: auto|any|tool|none, name, disable_parallel_tool_use} (ToolChoiceAny),
 *     image blocks {type:"image", source:{type:"base64", media_type, data} | {type:"url", url}}, tool_result content
 *     as text/image blocks, structured output `output_config: {format: {type: "json_schema", schema}}`
 *     (https://platform.claude.com/docs/en/build-with-claude/structured-outputs); unknown fields are a 400
 *     "<field>: Extra inputs are not permitted"
 *  Gemini generateContent / streamGenerateContent / embeddings / errors
 *   - https://ai.google.dev/api (x-goog-api-key header, /v1beta/models/{model}:generateContent)
 *   - https://github.com/google-gemini/cookbook/blob/main/quickstarts/rest/Streaming_REST.ipynb (alt=sse: each
 *     event is one GenerateContentResponse; without alt=sse the body is one JSON array)
 *   - @google/genai ApiClient: responseLineRE = /^\s*data: (.*)(?:\n\n|\r\r|\r\n\r\n)/ and a chunk holding
 *     `error` {code,status} is raised as ApiError (the live service frames events with "\r\n\r\n")
 *   - https://ai.google.dev/gemini-api/docs/troubleshooting (400 INVALID_ARGUMENT, 403 PERMISSION_DENIED,
 *     404 NOT_FOUND, 429 RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE)
 *   - https://github.com/cequence-io/openai-scala-client/issues/109 (bad key: 400 INVALID_ARGUMENT with
 *     ErrorInfo reason API_KEY_INVALID), https://github.com/PublicAffairs/openai-gemini/issues/92 (no key:
 *     403 PERMISSION_DENIED "Method doesn't allow unregistered callers ...")
 *   - https://ai.google.dev/api/embeddings (batchEmbedContents: {requests:[{model,content}]} -> {embeddings:[{values}]})
 *   - GenerationConfig (googleapis js-genai / java-genai types): topP, stopSequences, seed, presencePenalty,
 *     frequencyPenalty, responseMimeType, responseJsonSchema ("an alternative to responseSchema that accepts JSON
 *     Schema. If set, responseSchema must be omitted, but responseMimeType is required"), mediaResolution;
 *     toolConfig.functionCallingConfig {mode AUTO|ANY|NONE|VALIDATED, allowedFunctionNames (mode ANY)};
 *     parts inlineData {mimeType, data} and fileData {mimeType, fileUri} (both required;
 *     https://ai.google.dev/gemini-api/docs/file-input-methods: public and signed https URLs since 2026-01);
 *     an unknown field is a 400 'Invalid JSON payload received. Unknown name "x": Cannot find field.'
 */
import { createHash, randomBytes } from "node:crypto"
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

export interface RecordedRequest {
  method: string
  /** pathname as received, e.g. "/v1/chat/completions" (query string excluded, see `query`) */
  path: string
  query: Record<string, string>
  headers: Record<string, string | string[] | undefined>
  /** parsed JSON, or the raw string when the body is not JSON, or undefined when empty */
  body: unknown
}

export interface MockUsage {
  prompt: number
  completion: number
}

export type Scenario =
  /**
   * `pieces`: how many content chunks a stream splits the text into (3 unless given; the OpenAI wire).
   * `frameDelayMs`: the pause between this stream's frames, instead of the mock's `chunkDelayMs`; before a plain answer, its delay.
   */
  | { kind: "text"; text: string; usage?: MockUsage; pieces?: number; frameDelayMs?: number }
  | { kind: "tool"; name: string; arguments: Record<string, unknown>; id?: string; usage?: MockUsage }
  /** `midStream: true` on a streaming request answers 200, streams a little, then sends the provider's in-stream error */
  | { kind: "error"; status: number; message?: string; midStream?: boolean; retryAfter?: string }
  | { kind: "hang" }
  | { kind: "stream-then-drop"; text: string }

export interface MockUpstream {
  readonly url: string
  readonly requests: RecordedRequest[]
  setScenario(s: Scenario): void
  queue(...s: Scenario[]): void
  /** Answers by request (e.g. by the system prompt of parallel calls) before the queue and the scenario; undefined falls through. */
  setResponder(f: ((request: RecordedRequest) => Scenario | undefined) | undefined): void
  /** responses whose client went away before the response finished (server-side drops and close() excluded) */
  readonly closedSockets: number
  close(): Promise<void>
}

export interface MockOptions {
  apiKey?: string
  /** pause between stream frames, default 5 ms */
  chunkDelayMs?: number
}

const DEFAULT_USAGE: MockUsage = { prompt: 11, completion: 5 }
const DEFAULT_TEXT = { kind: "text", text: "Hello from mock", usage: DEFAULT_USAGE } as const satisfies Scenario
export const DEFAULT_SCENARIO: Scenario = DEFAULT_TEXT

// ---------------------------------------------------------------------------------------------
// Shared helper: start / record / scenario / respond / close
// ---------------------------------------------------------------------------------------------

/** what a provider handler sees for one request */
interface Exchange {
  readonly method: string
  /** decoded pathname relative to the base path ("/chat/completions"), or undefined when outside it */
  readonly route: string | undefined
  readonly pathname: string
  readonly query: URLSearchParams
  readonly headers: IncomingHttpHeaders
  readonly body: unknown
  /** takes the scenario for this request (queue first, then the set scenario) */
  scenario(): Scenario
  json(status: number, body: unknown, headers?: Record<string, string>): void
  /** writes a non-JSON body (audio bytes, …) */
  raw(status: number, contentType: string, body: Uint8Array | string): void
  /** writes 200 + frames with a small delay (`delayMs`, else the mock's); `dropAfter` frames then destroys the socket instead of ending */
  stream(contentType: string, frames: readonly string[], dropAfter?: number, headers?: Record<string, string>, delayMs?: number): Promise<void>
  hang(): void
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const readBody = (req: IncomingMessage): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("error", reject)
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8")
      if (raw.length === 0) return resolve(undefined)
      try {
        resolve(JSON.parse(raw))
      } catch {
        resolve(raw)
      }
    })
  })

const writeAsync = (res: ServerResponse, chunk: string) =>
  new Promise<void>((resolve) => {
    res.write(chunk, () => resolve())
  })

const startMock = async (
  basePath: string,
  opts: MockOptions,
  handle: (ex: Exchange) => void | Promise<void>
): Promise<MockUpstream> => {
  const requests: RecordedRequest[] = []
  const pending: Scenario[] = []
  let current: Scenario = DEFAULT_SCENARIO
  let responder: ((request: RecordedRequest) => Scenario | undefined) | undefined
  let closedSockets = 0
  let closing = false
  const delay = opts.chunkDelayMs ?? 5

  const server = createServer((req, res) => {
    let droppedByServer = false
    res.on("close", () => {
      if (!res.writableFinished && !droppedByServer && !closing) closedSockets++
    })
    void (async () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      const body = await readBody(req)
      const recorded: RecordedRequest = {
        method: req.method ?? "GET",
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: { ...req.headers },
        body
      }
      requests.push(recorded)
      let decoded = url.pathname
      try {
        decoded = decodeURIComponent(url.pathname)
      } catch {
        // keep the raw pathname
      }
      const route =
        decoded === basePath ? "/" : decoded.startsWith(basePath + "/") ? decoded.slice(basePath.length) : undefined
      const ex: Exchange = {
        method: req.method ?? "GET",
        route,
        pathname: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body,
        scenario: () => responder?.(recorded) ?? pending.shift() ?? current,
        json: (status, payload, headers = {}) => {
          if (res.destroyed) return
          const text = JSON.stringify(payload)
          res.writeHead(status, {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(text),
            ...headers
          })
          res.end(text)
        },
        raw: (status, contentType, payload) => {
          if (res.destroyed) return
          res.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(payload) })
          res.end(payload)
        },
        stream: async (contentType, frames, dropAfter, headers = {}, delayMs = delay) => {
          if (res.destroyed) return
          res.writeHead(200, { "content-type": contentType, "cache-control": "no-cache", ...headers })
          res.flushHeaders()
          const count = dropAfter === undefined ? frames.length : Math.min(dropAfter, frames.length)
          for (let i = 0; i < count; i++) {
            if (res.destroyed) return
            await writeAsync(res, frames[i] as string)
            await sleep(delayMs)
          }
          if (res.destroyed) return
          if (dropAfter !== undefined) {
            droppedByServer = true
            res.destroy()
          } else {
            res.end()
          }
        },
        hang: () => {
          // accept and never answer; the socket stays open until the client leaves or close() runs
        }
      }
      await handle(ex)
    })().catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "text/plain" })
        res.end(`mock upstream crashed: ${String(err)}`)
      } else {
        res.destroy()
      }
    })
  })

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}${basePath}`,
    requests,
    setScenario: (s) => {
      current = s
    },
    queue: (...s) => {
      pending.push(...s)
    },
    setResponder: (f) => {
      responder = f
    },
    get closedSockets() {
      return closedSockets
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        closing = true
        server.close((err) => (err ? reject(err) : resolve()))
        server.closeAllConnections()
      })
  }
}

// ---------------------------------------------------------------------------------------------
// Shared scenario plumbing (provider-independent)
// ---------------------------------------------------------------------------------------------

/** a successful answer, normalised: usage filled in and the stop cause decided */
type Answer =
  | { kind: "text"; text: string; usage: MockUsage; stop: "end" | "length"; pieces?: number | undefined }
  | { kind: "tool"; name: string; args: Record<string, unknown>; id: string | undefined; usage: MockUsage; stop: "tool" }

/** per-request facts a provider needs to shape its reply */
interface Call {
  model: string
  stream: boolean
  /** output token limit from the request (max_tokens / max_completion_tokens / maxOutputTokens) */
  limit: number | undefined
  /** OpenAI only: stream_options.include_usage */
  includeUsage: boolean
  /** Gemini only: streamGenerateContent with alt=sse (otherwise a JSON array) */
  sse: boolean
}

interface Wire {
  streamContentType: (call: Call) => string
  body: (a: Answer, call: Call) => unknown
  /** stream frames plus how many of them make a "partial" stream (for drops and mid-stream errors) */
  frames: (a: Answer, call: Call) => { frames: string[]; partial: number }
  error: (status: number, message: string | undefined) => unknown
  streamError: (status: number, message: string | undefined, call: Call) => string
  headers: () => Record<string, string>
}

const toAnswer = (s: Scenario & { kind: "text" | "tool" | "stream-then-drop" }, limit: number | undefined): Answer => {
  const usage = { ...(("usage" in s && s.usage) || DEFAULT_USAGE) }
  if (s.kind === "tool") return { kind: "tool", name: s.name, args: s.arguments, id: s.id, usage, stop: "tool" }
  if (limit !== undefined && usage.completion > limit) {
    return { kind: "text", text: s.text, usage: { ...usage, completion: limit }, stop: "length", pieces: "pieces" in s ? s.pieces : undefined }
  }
  return { kind: "text", text: s.text, usage, stop: "end", pieces: "pieces" in s ? s.pieces : undefined }
}

const serve = async (ex: Exchange, call: Call, wire: Wire): Promise<void> => {
  const s = ex.scenario()
  const headers = wire.headers()
  switch (s.kind) {
    case "hang":
      return ex.hang()
    case "error": {
      if (call.stream && s.midStream) {
        const { frames, partial } = wire.frames(toAnswer(DEFAULT_TEXT, undefined), call)
        const out = [...frames.slice(0, partial), wire.streamError(s.status, s.message, call)]
        return ex.stream(wire.streamContentType(call), out, undefined, headers)
      }
      return ex.json(s.status, wire.error(s.status, s.message), s.retryAfter === undefined ? headers : { ...headers, "retry-after": s.retryAfter })
    }
    case "stream-then-drop": {
      const a = toAnswer(s, call.limit)
      if (call.stream) {
        const { frames, partial } = wire.frames(a, call)
        return ex.stream(wire.streamContentType(call), frames, partial, headers)
      }
      const text = JSON.stringify(wire.body(a, call))
      return ex.stream("application/json", [text.slice(0, Math.floor(text.length / 2))], 1, headers)
    }
    case "text":
    case "tool": {
      const a = toAnswer(s, call.limit)
      const delayMs = s.kind === "text" ? s.frameDelayMs : undefined
      if (call.stream) return ex.stream(wire.streamContentType(call), wire.frames(a, call).frames, undefined, headers, delayMs)
      if (delayMs !== undefined) await sleep(delayMs)
      return ex.json(200, wire.body(a, call), headers)
    }
  }
}

/** splits text into ~3 non-empty pieces, preferring word boundaries */
const splitText = (text: string, pieces = 3): string[] => {
  if (text.length === 0) return [""]
  const size = Math.ceil(text.length / pieces)
  const out: string[] = []
  let rest = text
  while (rest.length > 0) {
    if (rest.length <= size || out.length === pieces - 1) {
      out.push(rest)
      break
    }
    const space = rest.indexOf(" ", size)
    const cut = space > 0 && space < size * 2 ? space : size
    out.push(rest.slice(0, cut))
    rest = rest.slice(cut)
  }
  return out
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
const randomId = (length: number) =>
  Array.from(randomBytes(length), (b) => alnum[b % alnum.length]).join("")

/** deterministic unit vector derived from the text */
const embed = (text: string, dims: number): number[] => {
  const raw = Array.from({ length: dims }, (_, i) => {
    const h = createHash("sha256").update(`${i}:${text}`).digest()
    return (h.readUInt32BE(0) / 0xffffffff) * 2 - 1
  })
  const norm = Math.sqrt(raw.reduce((acc, x) => acc + x * x, 0)) || 1
  return raw.map((x) => Number((x / norm).toFixed(6)))
}

const approxTokens = (text: string) => Math.max(1, Math.ceil(text.length / 4))

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const header = (ex: Exchange, name: string): string | undefined => {
  const v = ex.headers[name]
  return Array.isArray(v) ? v[0] : v
}

const num = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)

// ---------------------------------------------------------------------------------------------
// OpenAI (Chat Completions, Embeddings, Models)
// ---------------------------------------------------------------------------------------------

const openAiErrorBody = (message: string, type: string, param: string | null, code: string | null) => ({
  error: { message, type, param, code }
})

const openAiError = (status: number, message: string | undefined) => {
  switch (status) {
    case 400:
      return openAiErrorBody(message ?? "Invalid request.", "invalid_request_error", null, null)
    case 401:
      return openAiErrorBody(message ?? "Incorrect API key provided.", "invalid_request_error", null, "invalid_api_key")
    case 403:
      return openAiErrorBody(message ?? "You are not allowed to access this resource.", "invalid_request_error", null, null)
    case 404:
      return openAiErrorBody(
        message ?? "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        null,
        "model_not_found"
      )
    case 429:
      return openAiErrorBody(
        message ?? "Rate limit reached for requests per min (RPM). Please try again in 1s.",
        "requests",
        null,
        "rate_limit_exceeded"
      )
    case 503:
      return openAiErrorBody(message ?? "The engine is currently overloaded, please try again later.", "server_error", null, null)
    default:
      return status >= 500
        ? openAiErrorBody(
            message ?? "The server had an error while processing your request. Sorry about that!",
            "server_error",
            null,
            null
          )
        : openAiErrorBody(message ?? `Request failed with status ${status}.`, "invalid_request_error", null, null)
  }
}

const redactKey = (key: string) => (key.length <= 8 ? "*".repeat(key.length) : `${key.slice(0, 3)}${"*".repeat(key.length - 7)}${key.slice(-4)}`)

const openAiWire = (): Wire => {
  const id = `chatcmpl-${randomId(29)}`
  const created = Math.floor(Date.now() / 1000)
  const usageOf = (u: MockUsage) => ({
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    total_tokens: u.prompt + u.completion
  })
  const toolId = (a: Answer & { kind: "tool" }) => a.id ?? `call_${randomId(24)}`
  const finish = (a: Answer) => (a.stop === "tool" ? "tool_calls" : a.stop === "length" ? "length" : "stop")
  const sse = (obj: unknown) => `data: ${JSON.stringify(obj)}\n\n`
  const chunk = (call: Call, delta: Record<string, unknown>, finishReason: string | null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model: call.model,
    system_fingerprint: "fp_mock",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(call.includeUsage ? { usage: null } : {})
  })
  return {
    streamContentType: () => "text/event-stream; charset=utf-8",
    headers: () => ({ "x-request-id": `req_${randomId(32)}` }),
    body: (a, call) => ({
      id,
      object: "chat.completion",
      created,
      model: call.model,
      system_fingerprint: "fp_mock",
      choices: [
        {
          index: 0,
          message:
            a.kind === "text"
              ? { role: "assistant", content: a.text, refusal: null }
              : {
                  role: "assistant",
                  content: null,
                  refusal: null,
                  tool_calls: [
                    { id: toolId(a), type: "function", function: { name: a.name, arguments: JSON.stringify(a.args) } }
                  ]
                },
          logprobs: null,
          finish_reason: finish(a)
        }
      ],
      usage: usageOf(a.usage)
    }),
    frames: (a, call) => {
      const frames: string[] = []
      if (a.kind === "text") {
        frames.push(sse(chunk(call, { role: "assistant", content: "", refusal: null }, null)))
        for (const piece of splitText(a.text, a.pieces)) frames.push(sse(chunk(call, { content: piece }, null)))
      } else {
        frames.push(
          sse(
            chunk(
              call,
              {
                role: "assistant",
                content: null,
                refusal: null,
                tool_calls: [{ index: 0, id: toolId(a), type: "function", function: { name: a.name, arguments: "" } }]
              },
              null
            )
          )
        )
        for (const piece of splitText(JSON.stringify(a.args))) {
          frames.push(sse(chunk(call, { tool_calls: [{ index: 0, function: { arguments: piece } }] }, null)))
        }
      }
      frames.push(sse(chunk(call, {}, finish(a))))
      if (call.includeUsage) {
        frames.push(
          sse({
            id,
            object: "chat.completion.chunk",
            created,
            model: call.model,
            system_fingerprint: "fp_mock",
            choices: [],
            usage: usageOf(a.usage)
          })
        )
      }
      frames.push("data: [DONE]\n\n")
      return { frames, partial: 2 }
    },
    error: openAiError,
    streamError: (status, message) => sse(openAiError(status, message))
  }
}

export const startOpenAiMock = (opts: MockOptions = {}): Promise<MockUpstream> =>
  startMock("/v1", opts, async (ex) => {
    if (opts.apiKey !== undefined) {
      const auth = header(ex, "authorization")
      if (!auth) {
        return ex.json(
          401,
          openAiErrorBody(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an API key from https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            null,
            null
          )
        )
      }
      const given = /^Bearer\s+(.*)$/i.exec(auth)?.[1]?.trim() ?? auth
      if (given !== opts.apiKey) {
        return ex.json(
          401,
          openAiErrorBody(
            `Incorrect API key provided: ${redactKey(given)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
            "invalid_request_error",
            null,
            "invalid_api_key"
          )
        )
      }
    }

    if (ex.method === "GET" && ex.route === "/models") {
      const created = 1_700_000_000
      return ex.json(200, {
        object: "list",
        data: ["gpt-4o", "gpt-4o-mini", "text-embedding-3-small"].map((id) => ({ id, object: "model", created, owned_by: "system" }))
      })
    }

    if (ex.method === "POST" && ex.route === "/chat/completions") {
      const b = ex.body
      if (!isRecord(b)) {
        return ex.json(
          400,
          openAiErrorBody(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
            "invalid_request_error",
            null,
            null
          )
        )
      }
      if (typeof b.model !== "string") {
        return ex.json(400, openAiErrorBody("you must provide a model parameter", "invalid_request_error", null, null))
      }
      if (!Array.isArray(b.messages)) {
        return ex.json(
          400,
          openAiErrorBody("Missing required parameter: 'messages'.", "invalid_request_error", "messages", "missing_required_parameter")
        )
      }
      const streamOptions = isRecord(b.stream_options) ? b.stream_options : {}
      return serve(
        ex,
        {
          model: b.model,
          stream: b.stream === true,
          limit: num(b.max_completion_tokens) ?? num(b.max_tokens),
          includeUsage: b.stream === true && streamOptions.include_usage === true,
          sse: true
        },
        openAiWire()
      )
    }

    // Images, moderation and audio (platform.openai.com/docs/api-reference/images, /moderations, /audio).
    if (ex.method === "POST" && ex.route === "/images/generations") {
      const b = ex.body
      if (!isRecord(b) || typeof b.prompt !== "string") {
        return ex.json(400, openAiErrorBody("Missing required parameter: 'prompt'.", "invalid_request_error", "prompt", "missing_required_parameter"))
      }
      const s = ex.scenario()
      if (s.kind === "hang") return ex.hang()
      if (s.kind === "error") return ex.json(s.status, openAiError(s.status, s.message))
      const n = num(b.n) ?? 1
      const b64 = b.response_format === "b64_json" || b.model === "gpt-image-1"
      return ex.json(200, {
        created: Math.floor(Date.now() / 1000),
        data: Array.from({ length: n }, (_, i) =>
          b64
            ? { b64_json: Buffer.from(`PNG:${b.prompt}:${i}:${String(b.size)}`).toString("base64") }
            : { url: `https://images.mock.openai.test/${i}.png`, revised_prompt: b.prompt }
        ),
        // gpt-image models bill by tokens and report them, and say how the images were made (OpenAI's images API reference).
        ...(b.model === "gpt-image-1"
          ? {
            usage: { input_tokens: 20, output_tokens: 272 * n, total_tokens: 20 + 272 * n, input_tokens_details: { text_tokens: 20, image_tokens: 0 } },
            background: "opaque",
            output_format: typeof b.output_format === "string" ? b.output_format : "png",
            quality: "high",
            size: typeof b.size === "string" ? b.size : "1024x1024"
          }
          : {})
      })
    }

    if (ex.method === "POST" && ex.route === "/moderations") {
      const b = ex.body
      if (!isRecord(b) || b.input === undefined) {
        return ex.json(400, openAiErrorBody("Missing required parameter: 'input'.", "invalid_request_error", "input", "missing_required_parameter"))
      }
      const s = ex.scenario()
      if (s.kind === "hang") return ex.hang()
      if (s.kind === "error") return ex.json(s.status, openAiError(s.status, s.message))
      const text = String(b.input).toLowerCase()
      const violent = /\bkill|murder|attack\b/.test(text)
      const hateful = /\bhate\b/.test(text)
      return ex.json(200, {
        id: `modr-${randomId(12)}`,
        model: typeof b.model === "string" ? b.model : "omni-moderation-latest",
        results: [{
          flagged: violent || hateful,
          categories: { violence: violent, hate: hateful, harassment: false, "self-harm": false, sexual: false },
          category_scores: { violence: violent ? 0.91 : 0.01, hate: hateful ? 0.87 : 0.01, harassment: 0.02, "self-harm": 0.001, sexual: 0.001 }
        }]
      })
    }

    if (ex.method === "POST" && ex.route === "/audio/speech") {
      const b = ex.body
      if (!isRecord(b) || typeof b.input !== "string" || typeof b.voice !== "string") {
        return ex.json(400, openAiErrorBody("Missing required parameter: 'input' or 'voice'.", "invalid_request_error", "input", "missing_required_parameter"))
      }
      const format = typeof b.response_format === "string" ? b.response_format : "mp3"
      // An ID3 header then bytes derived from the text: enough for a client to check framing.
      const audio = Buffer.concat([Buffer.from("ID3\x04\x00\x00", "latin1"), Buffer.from(`${b.voice}:${b.input}`)])
      return ex.raw(200, format === "wav" ? "audio/wav" : "audio/mpeg", audio)
    }

    if (ex.method === "POST" && ex.route === "/audio/transcriptions") {
      const type = String(ex.headers["content-type"] ?? "")
      if (!type.startsWith("multipart/form-data")) {
        return ex.json(400, openAiErrorBody("Invalid Content-Type header (expected multipart/form-data).", "invalid_request_error", null, null))
      }
      const form = await new Request("http://mock/", { method: "POST", headers: { "content-type": type }, body: String(ex.body ?? "") }).formData()
      const file = form.get("file")
      if (!(file instanceof Blob) || typeof form.get("model") !== "string") {
        return ex.json(400, openAiErrorBody("Missing required parameter: 'file' or 'model'.", "invalid_request_error", "file", "missing_required_parameter"))
      }
      const s = ex.scenario()
      if (s.kind === "hang") return ex.hang()
      if (s.kind === "error") return ex.json(s.status, openAiError(s.status, s.message))
      const name = (file as File).name ?? "audio"
      const text = `Transcript of ${name} (${file.size} bytes)${form.get("language") ? ` in ${form.get("language")}` : ""}.`
      // Mistral's transcription answer says the language it heard; OpenAI's json format does not.
      return ex.json(200, String(form.get("model")).startsWith("voxtral") ? { model: form.get("model"), text, language: form.get("language") ?? "en", segments: [] } : { text })
    }

    if (ex.method === "POST" && ex.route === "/embeddings") {
      const b = ex.body
      if (!isRecord(b) || b.input === undefined) {
        return ex.json(
          400,
          openAiErrorBody("Missing required parameter: 'input'.", "invalid_request_error", "input", "missing_required_parameter")
        )
      }
      const s = ex.scenario()
      if (s.kind === "hang") return ex.hang()
      if (s.kind === "error") return ex.json(s.status, openAiError(s.status, s.message))
      const inputs: string[] = (Array.isArray(b.input) ? b.input : [b.input]).map((x: unknown) =>
        typeof x === "string" ? x : JSON.stringify(x)
      )
      const dims = num(b.dimensions) ?? 8
      const base64 = b.encoding_format === "base64"
      const prompt = inputs.reduce((acc, t) => acc + approxTokens(t), 0)
      const payload = {
        object: "list",
        data: inputs.map((text, index) => {
          const vec = embed(text, dims)
          return {
            object: "embedding",
            index,
            embedding: base64 ? Buffer.from(new Float32Array(vec).buffer).toString("base64") : vec
          }
        }),
        model: typeof b.model === "string" ? b.model : "text-embedding-3-small",
        usage: { prompt_tokens: prompt, total_tokens: prompt }
      }
      if (s.kind === "stream-then-drop") {
        const text = JSON.stringify(payload)
        return ex.stream("application/json", [text.slice(0, Math.floor(text.length / 2))], 1)
      }
      return ex.json(200, payload)
    }

    return ex.json(
      404,
      openAiErrorBody(`Invalid URL (${ex.method} ${ex.pathname})`, "invalid_request_error", null, null)
    )
  })

// ---------------------------------------------------------------------------------------------
// Anthropic (Messages)
// ---------------------------------------------------------------------------------------------

const anthropicErrorType = (status: number): string => {
  switch (status) {
    case 400:
      return "invalid_request_error"
    case 401:
      return "authentication_error"
    case 403:
      return "permission_error"
    case 404:
      return "not_found_error"
    case 413:
      return "request_too_large"
    case 429:
      return "rate_limit_error"
    case 529:
      return "overloaded_error"
    default:
      return status >= 500 ? "api_error" : "invalid_request_error"
  }
}

const anthropicDefaultMessage: Record<string, string> = {
  invalid_request_error: "Invalid request",
  authentication_error: "invalid x-api-key",
  permission_error: "Your API key does not have permission to use the specified resource.",
  not_found_error: "Not found",
  request_too_large: "Request exceeds the maximum allowed number of bytes.",
  rate_limit_error: "Number of request tokens has exceeded your per-minute rate limit",
  api_error: "Internal server error",
  overloaded_error: "Overloaded"
}

const anthropicErrorBody = (type: string, message: string) => ({
  type: "error",
  error: { type, message },
  request_id: `req_011${randomId(21)}`
})

const anthropicError = (status: number, message: string | undefined) => {
  const type = anthropicErrorType(status)
  return anthropicErrorBody(type, message ?? anthropicDefaultMessage[type] ?? "Error")
}

/** A thinking block the mock answers with when thinking is on (its signature is one the mock issued). */
interface MockThought {
  readonly thinking: string
  readonly signature: string
}

const anthropicWire = (thought?: MockThought, cache: { creation: number; read: number } = { creation: 0, read: 0 }): Wire => {
  const id = `msg_01${randomId(22)}`
  const toolId = (a: Answer & { kind: "tool" }) => a.id ?? `toolu_01${randomId(22)}`
  const stopReason = (a: Answer) => (a.stop === "tool" ? "tool_use" : a.stop === "length" ? "max_tokens" : "end_turn")
  const usageOf = (input: number, output: number) => ({
    input_tokens: input,
    cache_creation_input_tokens: cache.creation,
    cache_read_input_tokens: cache.read,
    output_tokens: output
  })
  const thinkingBlocks = thought ? [{ type: "thinking", thinking: thought.thinking, signature: thought.signature }] : []
  /** The answer's block index after the thinking block (0 without one). */
  const first = thinkingBlocks.length
  const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
  return {
    streamContentType: () => "text/event-stream; charset=utf-8",
    headers: () => ({ "request-id": `req_011${randomId(21)}` }),
    body: (a, call) => ({
      id,
      type: "message",
      role: "assistant",
      model: call.model,
      content: [
        ...thinkingBlocks,
        a.kind === "text" ? { type: "text", text: a.text } : { type: "tool_use", id: toolId(a), name: a.name, input: a.args }
      ],
      stop_reason: stopReason(a),
      stop_sequence: null,
      usage: usageOf(a.usage.prompt, a.usage.completion)
    }),
    frames: (a, call) => {
      const frames = [
        event("message_start", {
          message: {
            id,
            type: "message",
            role: "assistant",
            model: call.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: usageOf(a.usage.prompt, 1)
          }
        })
      ]
      if (thought) {
        frames.push(event("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "", signature: "" } }))
        for (const piece of splitText(thought.thinking)) {
          frames.push(event("content_block_delta", { index: 0, delta: { type: "thinking_delta", thinking: piece } }))
        }
        frames.push(event("content_block_delta", { index: 0, delta: { type: "signature_delta", signature: thought.signature } }))
        frames.push(event("content_block_stop", { index: 0 }))
      }
      const index = first
      const before = frames.length
      if (a.kind === "text") {
        frames.push(event("content_block_start", { index, content_block: { type: "text", text: "" } }))
        frames.push(event("ping", {}))
        for (const piece of splitText(a.text)) {
          frames.push(event("content_block_delta", { index, delta: { type: "text_delta", text: piece } }))
        }
      } else {
        frames.push(
          event("content_block_start", {
            index,
            content_block: { type: "tool_use", id: toolId(a), name: a.name, input: {} }
          })
        )
        frames.push(event("ping", {}))
        for (const piece of ["", ...splitText(JSON.stringify(a.args))]) {
          frames.push(event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: piece } }))
        }
      }
      frames.push(event("content_block_stop", { index }))
      frames.push(
        event("message_delta", {
          delta: { stop_reason: stopReason(a), stop_sequence: null },
          usage: { output_tokens: a.usage.completion }
        })
      )
      frames.push(event("message_stop", {}))
      // message_start, (the thinking block,) content_block_start, ping, first delta
      return { frames, partial: before + 3 }
    },
    error: anthropicError,
    streamError: (status, message) => {
      const type = anthropicErrorType(status)
      return event("error", { error: { type, message: message ?? anthropicDefaultMessage[type] ?? "Error" } })
    }
  }
}

/** a cache_control value's problem (ephemeral, ttl 5m or 1h), or undefined */
const cacheControlProblem = (value: unknown, at: string): string | undefined => {
  if (value === undefined) return undefined
  if (!isRecord(value) || value.type !== "ephemeral") return `${at}.cache_control.type: Input should be 'ephemeral'`
  const extra = Object.keys(value).find((k) => k !== "type" && k !== "ttl")
  if (extra !== undefined) return `${at}.cache_control.${extra}: Extra inputs are not permitted`
  if (value.ttl !== undefined && value.ttl !== "5m" && value.ttl !== "1h") return `${at}.cache_control.ttl: Input should be '5m' or '1h'`
  return undefined
}

/** the thinking parameter's problem (enabled with budget_tokens >= 1024 and < max_tokens, disabled, adaptive), or undefined */
const thinkingProblem = (b: Record<string, unknown>): string | undefined => {
  const t = b.thinking
  if (t === undefined) return undefined
  if (!isRecord(t) || !["enabled", "disabled", "adaptive"].includes(String(t.type))) {
    return `thinking: Input tag '${String(isRecord(t) ? t.type : t)}' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'`
  }
  if (t.type !== "enabled") return t.budget_tokens !== undefined ? `thinking.${t.type}.budget_tokens: Extra inputs are not permitted` : undefined
  if (typeof t.budget_tokens !== "number" || !Number.isInteger(t.budget_tokens)) return "thinking.enabled.budget_tokens: Field required"
  if (t.budget_tokens < 1024) return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
  if (typeof b.max_tokens === "number" && t.budget_tokens >= b.max_tokens) return "`max_tokens` must be greater than `thinking.budget_tokens`"
  return undefined
}

/** the cache breakpoints of a request (system blocks, tools, message blocks), at most 4 as the API allows */
const cacheBreakpointsProblem = (b: Record<string, unknown>): string | undefined => {
  let count = 0
  const check = (block: unknown, at: string) => {
    if (!isRecord(block)) return undefined
    if (block.cache_control !== undefined) count++
    return cacheControlProblem(block.cache_control, at)
  }
  if (b.system !== undefined && typeof b.system !== "string") {
    if (!Array.isArray(b.system)) return "system: Input should be a valid string or list"
    for (const [i, block] of b.system.entries()) {
      const problem = check(block, `system.${i}`)
      if (problem) return problem
    }
  }
  for (const [i, tool] of (Array.isArray(b.tools) ? b.tools : []).entries()) {
    const problem = check(tool, `tools.${i}`)
    if (problem) return problem
  }
  for (const [i, m] of (b.messages as unknown[]).entries()) {
    for (const [j, block] of (isRecord(m) && Array.isArray(m.content) ? m.content : []).entries()) {
      const problem = check(block, `messages.${i}.content.${j}`)
      if (problem) return problem
    }
  }
  return count > 4 ? `A maximum of 4 blocks with cache_control may be provided. Found ${count}.` : undefined
}

const anthropicFields = new Set([
  "model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature", "top_p", "top_k", "stop_sequences",
  "stream", "metadata", "output_config", "thinking", "service_tier"
])
const anthropicMediaTypes = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"])

/** an image block's source problem (base64 with a supported media_type, or a url), or undefined */
const anthropicImageProblem = (block: Record<string, unknown>, at: string): string | undefined => {
  const source = isRecord(block.source) ? block.source : {}
  if (source.type === "base64") {
    if (typeof source.media_type !== "string" || !anthropicMediaTypes.has(source.media_type)) {
      return `${at}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`
    }
    return typeof source.data === "string" ? undefined : `${at}.source.base64.data: Field required`
  }
  if (source.type === "url") return typeof source.url === "string" ? undefined : `${at}.source.url.url: Field required`
  return `${at}.source: Input tag '${String(source.type)}' found using 'type' does not match any of the expected tags: 'base64', 'url'`
}

/**
 * what the Messages API rejects in the fields aigw translates (extra fields, tool_choice, image
 * blocks, output_config), as its 400 message, or undefined
 */
const anthropicProblem = (b: Record<string, unknown>, issued: ReadonlySet<string>): string | undefined => {
  const extra = Object.keys(b).find((k) => !anthropicFields.has(k))
  if (extra !== undefined) return `${extra}: Extra inputs are not permitted`
  const thinking = thinkingProblem(b) ?? cacheBreakpointsProblem(b)
  if (thinking !== undefined) return thinking
  if (b.top_k !== undefined && (typeof b.top_k !== "number" || !Number.isInteger(b.top_k) || b.top_k < 0)) {
    return "top_k: Input should be a valid integer greater than or equal to 0"
  }
  if (b.top_p !== undefined && (typeof b.top_p !== "number" || b.top_p < 0 || b.top_p > 1)) return "top_p: Input should be less than or equal to 1"
  if (b.stop_sequences !== undefined && (!Array.isArray(b.stop_sequences) || b.stop_sequences.some((x) => typeof x !== "string"))) {
    return "stop_sequences: Input should be a valid list of strings"
  }
  if (b.tool_choice !== undefined) {
    const c = isRecord(b.tool_choice) ? b.tool_choice : {}
    if (!["auto", "any", "tool", "none"].includes(String(c.type))) {
      return `tool_choice: Input tag '${String(c.type)}' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'`
    }
    if (c.type === "tool" && typeof c.name !== "string") return "tool_choice.tool.name: Field required"
    if (c.disable_parallel_tool_use !== undefined && (typeof c.disable_parallel_tool_use !== "boolean" || c.type === "none")) {
      return `tool_choice.${String(c.type)}.disable_parallel_tool_use: Extra inputs are not permitted`
    }
    if (c.type !== "none" && (!Array.isArray(b.tools) || b.tools.length === 0)) return "tool_choice: tools must be provided when tool_choice is set"
  }
  if (b.output_config !== undefined) {
    const format = isRecord(b.output_config) && isRecord(b.output_config.format) ? b.output_config.format : {}
    if (format.type !== "json_schema") return "output_config.format.type: Input should be 'json_schema'"
    if (!isRecord(format.schema)) return "output_config.format.schema: Field required"
  }
  for (const [i, m] of (b.messages as unknown[]).entries()) {
    const content = isRecord(m) && Array.isArray(m.content) ? m.content : []
    for (const [j, block] of content.entries()) {
      if (!isRecord(block)) continue
      const at = `messages.${i}.content.${j}`
      if (block.type === "image") {
        const problem = anthropicImageProblem(block, `${at}.image`)
        if (problem) return problem
      }
      if (block.type === "text" && block.text === "") return `${at}: text content blocks must be non-empty`
      if (block.type === "thinking") {
        if (!isRecord(m) || m.role !== "assistant") return `${at}: thinking blocks may only appear in assistant messages`
        if (typeof block.signature !== "string" || !issued.has(block.signature)) return `${at}: Invalid \`signature\` in \`thinking\` block`
      }
      if (block.type === "tool_result" && Array.isArray(block.content)) {
        for (const [k, inner] of block.content.entries()) {
          const problem = isRecord(inner) && inner.type === "image" ? anthropicImageProblem(inner, `${at}.tool_result.content.${k}.image`) : undefined
          if (problem) return problem
        }
      }
    }
  }
  return undefined
}

/**
 * With thinking on (enabled or adaptive) the answer opens with a thinking block whose signature the
 * mock issued (a later turn must send it back unchanged). A request with cache breakpoints reports
 * its prefix as written to the cache the first time and read from it afterwards.
 */
export const startAnthropicMock = (opts: MockOptions = {}): Promise<MockUpstream> => {
  const issued = new Set<string>()
  let cacheWritten = false
  return startMock("/v1", opts, async (ex) => {
    const reject = (status: number, message: string) => ex.json(status, anthropicError(status, message))
    if (opts.apiKey !== undefined) {
      const key = header(ex, "x-api-key")
      if (!key) return reject(401, "x-api-key header is required")
      if (key !== opts.apiKey) return reject(401, "invalid x-api-key")
    }
    if (!header(ex, "anthropic-version")) return reject(400, "anthropic-version: header is required")

    if (ex.method === "POST" && ex.route === "/messages") {
      const b = ex.body
      if (!isRecord(b)) return reject(400, "There was an issue with the format of your request: the body must be a JSON object")
      if (typeof b.model !== "string") return reject(400, "model: Field required")
      if (!Array.isArray(b.messages)) return reject(400, "messages: Field required")
      if (b.max_tokens === undefined) return reject(400, "max_tokens: Field required")
      if (typeof b.max_tokens !== "number" || !Number.isInteger(b.max_tokens) || b.max_tokens < 1) {
        return reject(400, "max_tokens: Input should be a valid integer greater than or equal to 1")
      }
      const problem = anthropicProblem(b, issued)
      if (problem !== undefined) return reject(400, problem)
      const thinking = isRecord(b.thinking) && b.thinking.type !== "disabled"
      const thought = thinking ? { thinking: `Considering ${b.messages.length} message(s).`, signature: `sig_${randomId(32)}` } : undefined
      if (thought) issued.add(thought.signature)
      const breakpoints = JSON.stringify([b.system, b.tools, b.messages]).includes("\"cache_control\"")
      const cache = breakpoints ? (cacheWritten ? { creation: 0, read: 9 } : { creation: 9, read: 0 }) : { creation: 0, read: 0 }
      if (breakpoints) cacheWritten = true
      return serve(
        ex,
        { model: b.model, stream: b.stream === true, limit: b.max_tokens, includeUsage: false, sse: true },
        anthropicWire(thought, cache)
      )
    }

    return ex.json(404, anthropicErrorBody("not_found_error", "Not Found"))
  })
}

// ---------------------------------------------------------------------------------------------
// Gemini (generateContent, streamGenerateContent, embedContent, batchEmbedContents)
// ---------------------------------------------------------------------------------------------

const geminiStatus = (status: number): string => {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT"
    case 401:
      return "UNAUTHENTICATED"
    case 403:
      return "PERMISSION_DENIED"
    case 404:
      return "NOT_FOUND"
    case 409:
      return "ABORTED"
    case 429:
      return "RESOURCE_EXHAUSTED"
    case 499:
      return "CANCELLED"
    case 501:
      return "UNIMPLEMENTED"
    case 503:
      return "UNAVAILABLE"
    case 504:
      return "DEADLINE_EXCEEDED"
    default:
      return status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION"
  }
}

const geminiDefaultMessage: Record<string, string> = {
  INVALID_ARGUMENT: "Request contains an invalid argument.",
  UNAUTHENTICATED: "Request had invalid authentication credentials.",
  PERMISSION_DENIED: "The caller does not have permission",
  NOT_FOUND: "Requested entity was not found.",
  RESOURCE_EXHAUSTED: "Resource has been exhausted (e.g. check quota).",
  INTERNAL: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
  UNAVAILABLE: "The model is overloaded. Please try again later.",
  DEADLINE_EXCEEDED: "Deadline expired before operation could complete."
}

const geminiError = (status: number, message: string | undefined, details?: unknown[]) => {
  const s = geminiStatus(status)
  return {
    error: {
      code: status,
      message: message ?? geminiDefaultMessage[s] ?? "Error",
      status: s,
      ...(details ? { details } : {})
    }
  }
}

/**
 * Gemini 3 and later sign each answer's first function call (`thoughtSignature`) and refuse a history whose
 * function calls come back without one (400), or with one they never issued that is not one of the values
 * Google documents for histories the model did not produce.
 */
const signsFunctionCalls = (model: string) => Number(/^gemini-(\d+)/.exec(model)?.[1] ?? 0) >= 3
const FOREIGN_SIGNATURES: ReadonlySet<string> = new Set(["skip_thought_signature_validator", "context_engineering_is_the_way_to_go"])
const signatureProblem = (contents: ReadonlyArray<unknown>, issued: ReadonlySet<string>): string | undefined => {
  for (const [i, c] of contents.entries()) {
    if (!isRecord(c) || c.role !== "model" || !Array.isArray(c.parts)) continue
    const first = c.parts.findIndex((p) => isRecord(p) && p.functionCall !== undefined)
    if (first < 0) continue
    const part = c.parts[first] as Record<string, unknown>
    const name = isRecord(part.functionCall) ? String(part.functionCall.name) : ""
    if (typeof part.thoughtSignature !== "string") {
      return `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${name}\` , position ${i + 1}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`
    }
    if (!issued.has(part.thoughtSignature) && !FOREIGN_SIGNATURES.has(part.thoughtSignature)) return "Corrupted thought signature."
  }
  return undefined
}

const geminiWire = (issued: Set<string>): Wire => {
  const responseId = randomId(22)
  const finishReason = (a: Answer) => (a.stop === "length" ? "MAX_TOKENS" : "STOP")
  const usageOf = (u: MockUsage) => ({
    promptTokenCount: u.prompt,
    candidatesTokenCount: u.completion,
    totalTokenCount: u.prompt + u.completion
  })
  const response = (call: Call, parts: unknown[], finish: string | undefined, usage: unknown) => ({
    candidates: [{ content: { parts, role: "model" }, ...(finish ? { finishReason: finish } : {}), index: 0 }],
    usageMetadata: usage,
    modelVersion: call.model,
    responseId
  })
  const callPart = (a: Answer & { kind: "tool" }, call: Call) => {
    const signature = signsFunctionCalls(call.model) ? `sig_${randomId(16)}` : undefined
    if (signature !== undefined) issued.add(signature)
    return { functionCall: { ...(a.id ? { id: a.id } : {}), name: a.name, args: a.args }, ...(signature !== undefined ? { thoughtSignature: signature } : {}) }
  }
  const frame = (call: Call, obj: unknown, first: boolean, last: boolean) =>
    call.sse
      ? `data: ${JSON.stringify(obj)}\r\n\r\n`
      : `${first ? "[" : ",\r\n"}${JSON.stringify(obj, null, 2)}${last ? "]" : ""}`
  return {
    streamContentType: (call) => (call.sse ? "text/event-stream" : "application/json; charset=UTF-8"),
    headers: () => ({}),
    body: (a, call) =>
      response(call, a.kind === "text" ? [{ text: a.text }] : [callPart(a, call)], finishReason(a), usageOf(a.usage)),
    frames: (a, call) => {
      const objs =
        a.kind === "text"
          ? splitText(a.text).map((piece, i, all) =>
              i === all.length - 1
                ? response(call, [{ text: piece }], finishReason(a), usageOf(a.usage))
                : response(call, [{ text: piece }], undefined, {
                    promptTokenCount: a.usage.prompt,
                    totalTokenCount: a.usage.prompt
                  })
            )
          : [response(call, [callPart(a, call)], finishReason(a), usageOf(a.usage))]
      const frames = objs.map((o, i) => frame(call, o, i === 0, i === objs.length - 1))
      return { frames, partial: Math.min(1, frames.length) }
    },
    error: (status, message) => geminiError(status, message),
    streamError: (status, message, call) =>
      call.sse ? `data: ${JSON.stringify(geminiError(status, message))}\r\n\r\n` : `,\r\n${JSON.stringify(geminiError(status, message), null, 2)}]`
  }
}

const geminiRequestFields = new Set(["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent"])
const geminiConfigFields = new Set([
  "temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences", "seed", "presencePenalty", "frequencyPenalty",
  "responseMimeType", "responseSchema", "responseJsonSchema", "responseModalities", "mediaResolution", "thinkingConfig",
  "responseLogprobs", "logprobs"
])
const unknownName = (name: string, at: string) => `Invalid JSON payload received. Unknown name "${name}"${at}: Cannot find field.`

/**
 * what generateContent rejects in the fields aigw translates (unknown fields, generationConfig,
 * toolConfig, inlineData / fileData parts), as its 400 message, or undefined
 */
const geminiProblem = (b: Record<string, unknown>): string | undefined => {
  const extra = Object.keys(b).find((k) => !geminiRequestFields.has(k))
  if (extra !== undefined) return unknownName(extra, "")
  const config = isRecord(b.generationConfig) ? b.generationConfig : {}
  const extraConfig = Object.keys(config).find((k) => !geminiConfigFields.has(k))
  if (extraConfig !== undefined) return unknownName(extraConfig, " at 'generation_config'")
  if (config.responseSchema !== undefined && config.responseJsonSchema !== undefined) {
    return "* GenerateContentRequest.generation_config.response_schema: response_schema and response_json_schema cannot both be set\n"
  }
  if ((config.responseSchema !== undefined || config.responseJsonSchema !== undefined) && config.responseMimeType !== "application/json") {
    return "* GenerateContentRequest.generation_config.response_mime_type: must be application/json when a response schema is set\n"
  }
  if (config.mediaResolution !== undefined && !["MEDIA_RESOLUTION_LOW", "MEDIA_RESOLUTION_MEDIUM", "MEDIA_RESOLUTION_HIGH"].includes(String(config.mediaResolution))) {
    return `Invalid value at 'generation_config.media_resolution', "${String(config.mediaResolution)}"`
  }
  if (config.thinkingConfig !== undefined) {
    const thinking = isRecord(config.thinkingConfig) ? config.thinkingConfig : {}
    const extraThinking = Object.keys(thinking).find((k) => !["thinkingBudget", "includeThoughts", "thinkingLevel"].includes(k))
    if (extraThinking !== undefined) return unknownName(extraThinking, " at 'generation_config.thinking_config'")
    if (thinking.thinkingBudget !== undefined && (!Number.isInteger(thinking.thinkingBudget) || (thinking.thinkingBudget as number) < -1)) {
      return `Invalid value at 'generation_config.thinking_config.thinking_budget', ${String(thinking.thinkingBudget)}`
    }
  }
  if (config.topK !== undefined && (!Number.isInteger(config.topK) || (config.topK as number) < 1)) {
    return `Invalid value at 'generation_config.top_k', ${String(config.topK)}`
  }
  if (b.toolConfig !== undefined) {
    const calling = isRecord(b.toolConfig) && isRecord(b.toolConfig.functionCallingConfig) ? b.toolConfig.functionCallingConfig : {}
    if (!["AUTO", "ANY", "NONE", "VALIDATED"].includes(String(calling.mode))) {
      return `Invalid value at 'tool_config.function_calling_config.mode', "${String(calling.mode)}"`
    }
    if (calling.allowedFunctionNames !== undefined && calling.mode !== "ANY") {
      return "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: only allowed with mode ANY\n"
    }
  }
  for (const [i, c] of (b.contents as unknown[]).entries()) {
    const parts = isRecord(c) && Array.isArray(c.parts) ? c.parts : []
    for (const [j, p] of parts.entries()) {
      if (!isRecord(p)) continue
      const at = `GenerateContentRequest.contents[${i}].parts[${j}]`
      const inline = p.inlineData
      if (inline !== undefined && !(isRecord(inline) && typeof inline.mimeType === "string" && typeof inline.data === "string")) {
        return `* ${at}.inline_data: mime_type and data are required\n`
      }
      const file = p.fileData
      if (file !== undefined && !(isRecord(file) && typeof file.mimeType === "string" && typeof file.fileUri === "string")) {
        return `* ${at}.file_data: mime_type and file_uri are required\n`
      }
    }
  }
  return undefined
}

export const startGeminiMock = (opts: MockOptions = {}): Promise<MockUpstream> => {
  const issuedSignatures = new Set<string>()
  return startMock("/v1beta", opts, async (ex) => {
    if (opts.apiKey !== undefined) {
      const key = header(ex, "x-goog-api-key") ?? ex.query.get("key") ?? undefined
      if (!key) {
        return ex.json(
          403,
          geminiError(
            403,
            "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."
          )
        )
      }
      if (key !== opts.apiKey) {
        const message = "API key not valid. Please pass a valid API key."
        return ex.json(
          400,
          geminiError(400, message, [
            {
              "@type": "type.googleapis.com/google.rpc.ErrorInfo",
              reason: "API_KEY_INVALID",
              domain: "googleapis.com",
              metadata: { service: "generativelanguage.googleapis.com" }
            },
            { "@type": "type.googleapis.com/google.rpc.LocalizedMessage", locale: "en-US", message }
          ])
        )
      }
    }

    const m = ex.route === undefined ? null : /^\/models\/([^/:]+):([A-Za-z]+)$/.exec(ex.route)
    const model = m?.[1]
    const method = m?.[2]
    if (ex.method !== "POST" || model === undefined || method === undefined) {
      return ex.json(404, geminiError(404, `Method not found: ${ex.method} ${ex.pathname}`))
    }
    const b = ex.body
    if (!isRecord(b)) return ex.json(400, geminiError(400, "Invalid JSON payload received."))

    if (method === "generateContent" || method === "streamGenerateContent") {
      if (!Array.isArray(b.contents) || b.contents.length === 0) {
        return ex.json(400, geminiError(400, "* GenerateContentRequest.contents: contents is not specified\n"))
      }
      const problem = geminiProblem(b) ?? (signsFunctionCalls(model) ? signatureProblem(b.contents, issuedSignatures) : undefined)
      if (problem !== undefined) return ex.json(400, geminiError(400, problem))
      const config = isRecord(b.generationConfig) ? b.generationConfig : {}
      return serve(
        ex,
        {
          model,
          stream: method === "streamGenerateContent",
          limit: num(config.maxOutputTokens),
          includeUsage: false,
          sse: ex.query.get("alt") === "sse"
        },
        geminiWire(issuedSignatures)
      )
    }

    if (method === "embedContent" || method === "batchEmbedContents") {
      const textOf = (req: unknown): string => {
        const content = isRecord(req) && isRecord(req.content) ? req.content : {}
        const parts = Array.isArray(content.parts) ? content.parts : []
        return parts.map((p: unknown) => (isRecord(p) && typeof p.text === "string" ? p.text : "")).join("")
      }
      const dimsOf = (req: unknown) => (isRecord(req) ? num(req.outputDimensionality) : undefined) ?? 8
      if (method === "batchEmbedContents" && !Array.isArray(b.requests)) {
        return ex.json(400, geminiError(400, "* BatchEmbedContentsRequest.requests: requests is not specified\n"))
      }
      const s = ex.scenario()
      if (s.kind === "hang") return ex.hang()
      if (s.kind === "error") return ex.json(s.status, geminiError(s.status, s.message))
      const payload =
        method === "embedContent"
          ? { embedding: { values: embed(textOf(b), dimsOf(b)) } }
          : { embeddings: (b.requests as unknown[]).map((r) => ({ values: embed(textOf(r), dimsOf(r)) })) }
      if (s.kind === "stream-then-drop") {
        const text = JSON.stringify(payload)
        return ex.stream("application/json", [text.slice(0, Math.floor(text.length / 2))], 1)
      }
      return ex.json(200, payload)
    }

    return ex.json(404, geminiError(404, `Method not found: ${method}`))
  })
}
