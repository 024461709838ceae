/**
 * The fast lane of the node host: `POST /openai/v1/chat/completions` with an API key, served on
 * node:http directly instead of through the Effect HTTP stack. A metered chat call is the
 * gateway's hottest request, and the per-request cost of the HttpServer / HttpRouter / route
 * wrapper pipeline (fibers, scopes, context copies: ~0.5 ms of CPU) was several times the work of
 * the call itself (docs/performance.md).
 *
 * Same contract as the route in OpenAiRoutes.ts, built from the same parts: the body schema and
 * conversions, Auth's API-key checks (Metering), quota admission with the same headers and
 * refusal, Completions' routing plan, ChatCalls for the upstream, fallback and usage, the OpenAI
 * answer and chunk shapes and the error envelopes of Route.ts. Requests it does not claim (other
 * paths, JWTs, no credentials) go to the Effect app unchanged. Calls that need Effect-only steps
 * cannot arrive here: the OpenAI body has no avatar-context, FAHRN or braid options.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import { Config, Effect, Runtime } from "effect"
import { INVALID } from "../Accounts/Auth.ts"
import { KEY_PREFIX } from "../Accounts/ApiKeys.ts"
import { sha256 } from "../Accounts/Secrets.ts"
import { ChatCalls, type StreamChunk } from "../Capabilities/ChatCalls.ts"
import { Completions } from "../Capabilities/Completions.ts"
import { GatewayConfig } from "../Config.ts"
import { BadRequest, type GatewayError, isGatewayError, Unauthorized } from "../Errors.ts"
import { headersOf, Quota, quotaExceeded, quotaState, utcDay } from "../Quota.ts"
import { Metering } from "../Storage/Metering.ts"
import { ChatCompletionBody, chatInputOf, completionId, toChatCompletion, toChunks } from "./OpenAiRoutes.ts"
import { decoderNow, errorBody, errorParts, parseJsonBody, tooLargeError } from "./Route.ts"

export const FAST_PATH = "/openai/v1/chat/completions"

export interface FastLane {
  /** Serves the request and returns true, or returns false without touching it. */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => boolean
}

const utf8 = new TextDecoder()
const clientGone = new DOMException("The client closed the connection", "AbortError")

/** The API key of a request, if it authenticates with one (Auth.resolve's precedence). */
const apiKeyOf = (req: IncomingMessage): string | undefined => {
  const header = req.headers["x-api-key"]
  const apiKey = (Array.isArray(header) ? header.join(", ") : header)?.trim()
  if (apiKey) return apiKey
  const match = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization?.trim() ?? "")
  return match && match[1]!.startsWith(KEY_PREFIX) ? match[1] : undefined
}

const TOO_LARGE = Symbol("too large")
const GONE = Symbol("client gone")

/** The body as text within `limit` bytes; TOO_LARGE when it is larger, GONE when the client left first. */
const readBody = (req: IncomingMessage, limit: number): Promise<string | typeof TOO_LARGE | typeof GONE> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        req.removeAllListeners("data")
        req.resume()
        return resolve(TOO_LARGE)
      }
      chunks.push(chunk)
    })
    req.once("end", () => resolve(utf8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks))))
    // An aborted upload: nothing to answer (resolve is a no-op after "end").
    req.once("error", () => resolve(GONE))
    req.once("close", () => resolve(GONE))
  })

const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string>) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

const sendError = (res: ServerResponse, error: GatewayError, headers: Record<string, string> = {}) => {
  const parts = errorParts("openai", error, headers)
  sendJson(res, parts.status, parts.body, parts.headers)
}

export const make = Effect.gen(function*() {
  const { maxBodyBytes } = yield* GatewayConfig
  const metering = yield* Metering
  const quota = yield* Quota
  const completions = yield* Completions
  const calls = yield* ChatCalls
  const logRequests = yield* Config.boolean("AIGW_LOG_REQUESTS").pipe(Config.withDefault(false))
  const run = Runtime.runPromise(yield* Effect.runtime<never>())
  const decodeBody = decoderNow(ChatCompletionBody, "request body")

  const serve = async (req: IncomingMessage, res: ServerResponse, apiKey: string) => {
    // The order of the route: credentials, body, admission, then the call.
    const avatar = await metering.avatarOfKey(sha256(apiKey))
    if (avatar === undefined) return sendError(res, new Unauthorized({ message: INVALID }))
    if (Number(req.headers["content-length"] ?? "0") > maxBodyBytes) return sendError(res, tooLargeError(maxBodyBytes))
    const text = await readBody(req, maxBodyBytes)
    if (text === GONE) return
    if (text === TOO_LARGE) return sendError(res, tooLargeError(maxBodyBytes))
    const json = parseJsonBody(text)
    if (json instanceof BadRequest) return sendError(res, json)
    const body = decodeBody(json)
    if (body instanceof BadRequest) return sendError(res, body)

    const now = Date.now()
    const day = utcDay(now)
    const limit = quota.limitOf(avatar.plan, avatar.karmaTotal)
    const used = await metering.admit(avatar.id, day, limit, 1)
    if (used === undefined) {
      const state = quotaState(avatar, limit, await metering.callsOn(avatar.id, day), now)
      return sendError(res, quotaExceeded(limit, avatar.plan, 1, now), headersOf(state))
    }
    const headers = headersOf(quotaState(avatar, limit, used, now))

    const input = chatInputOf(body)
    if (input instanceof BadRequest) return sendError(res, input, headers)
    const { messages, request, targets } = completions.plan(avatar, input, input.messages)
    if (!Array.isArray(targets)) return sendError(res, targets as GatewayError, headers)
    const controller = new AbortController()
    res.once("close", () => {
      if (!res.writableFinished) controller.abort(clientGone)
    })
    const call = { avatar, messages, targets, request, controller }
    const id = completionId()
    try {
      if (!body.stream) return sendJson(res, 200, toChatCompletion(id, await calls.complete(call)), headers)
      const stream = await calls.openStream(call)
      const { convert, opening } = toChunks(id, body.model, body.stream_options?.include_usage === true)
      res.writeHead(200, { ...headers, "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" })
      res.write(`data: ${JSON.stringify(opening)}\n\n`)
      await stream.run((chunks: ReadonlyArray<StreamChunk>) => {
        let frames = ""
        for (const chunk of chunks) for (const out of convert(chunk)) frames += `data: ${JSON.stringify(out)}\n\n`
        if (frames !== "") res.write(frames)
      })
      res.end("data: [DONE]\n\n")
    } catch (e) {
      if (isGatewayError(e) && !res.headersSent) return sendError(res, e, headers)
      throw e
    }
  }

  const handle = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== "POST") return false
    const url = req.url ?? ""
    if (url !== FAST_PATH && !url.startsWith(`${FAST_PATH}?`)) return false
    const apiKey = apiKeyOf(req)
    if (apiKey === undefined) return false
    const started = performance.now()
    serve(req, res, apiKey).then(
      () => {
        if (logRequests) void run(Effect.logInfo(`POST ${FAST_PATH} ${res.statusCode} ${(performance.now() - started).toFixed(1)}ms`))
      },
      (e) => {
        // As Route.ts's last resort: log the cause, answer a generic 500 envelope (or cut a started stream).
        void run(Effect.logError("unexpected failure", e))
        if (res.headersSent) return res.destroy()
        sendJson(res, 500, errorBody("openai", { _tag: "Internal", message: "Internal server error." }), {})
      }
    )
    return true
  }

  return { handle } satisfies FastLane
})

/**
 * Puts the fast lane in front of a node:http server's request listeners (the Effect app added
 * by NodeHttpServer): requests it claims never reach them.
 */
export const attach = <S extends Server>(server: S, lane: FastLane): S => {
  const emit = server.emit as (this: S, event: string | symbol, ...args: Array<any>) => boolean
  server.emit = function(this: S, event: string | symbol, ...args: Array<any>) {
    if (event === "request" && lane.handle(args[0], args[1])) return true
    return emit.call(this, event, ...args)
  } as S["emit"]
  return server
}
