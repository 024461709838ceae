/**
 * The external orchestrator registry: an avatar registers agent or orchestrator endpoints and
 * invokes them through the gateway over one of three protocols — `openai-chat` (an OpenAI-
 * compatible `/chat/completions`), `a2a` (Agent2Agent JSON-RPC `message/send`) and `http-json`
 * (POST the payload, return the JSON answer). URLs pass the SSRF guard at registration and at
 * every call (the connection uses the checked address). No credentials are stored: register
 * endpoints that need none, or put a gateway in front. Answers are read up to
 * `config.limits.maxUpstreamResponseBytes` after decompression (502 above) within INVOKE_TIMEOUT.
 */
import { Context, Duration, Effect, Layer, Option, Schema } from "effect"
import { GatewayConfig } from "../Config.ts"
import { NotFound, UpstreamFailed, UpstreamTimeout } from "../Errors.ts"
import { readWebBody } from "../Providers/internal/nodeFetch.ts"
import type { AvatarRecord } from "../Storage/AvatarStore.ts"
import { DocumentStore } from "../Storage/DocumentStore.ts"
import * as UrlGuard from "../UrlGuard.ts"
import { parseUpstreamJson } from "../JsonText.ts"
import { shownUpstreamText } from "../Providers/UpstreamError.ts"

export const KIND = "orchestrator"
export const Protocol = Schema.Literal("openai-chat", "a2a", "http-json")
export type Protocol = typeof Protocol.Type
export const INVOKE_TIMEOUT = Duration.seconds(60)

export interface OrchestratorEndpoint {
  readonly id: string
  readonly name: string
  readonly url: string
  readonly protocol: Protocol
  readonly model: string | null
  readonly description: string
}

export const Params = {
  register: {
    name: Schema.String.pipe(Schema.minLength(1, { message: () => "name must not be empty" }), Schema.maxLength(100)),
    url: Schema.String.pipe(Schema.maxLength(2048)).annotations({ description: "Base URL (openai-chat: the API base, e.g. https://host/v1; a2a and http-json: the endpoint)" }),
    protocol: Protocol.annotations({ description: "openai-chat, a2a or http-json", message: () => "protocol must be openai-chat, a2a or http-json" }),
    model: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({ description: "Model for openai-chat endpoints" }),
    description: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(2000)), { default: () => "" })
  },
  invoke: {
    orchestratorId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
    input: Schema.String.pipe(Schema.minLength(1, { message: () => "input must not be empty" }), Schema.maxLength(100_000)),
    payload: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({ description: "http-json only: the JSON body to send instead of { input }" })
  }
}

const textOfA2a = (result: any): string => {
  const parts: Array<any> = result?.parts ?? result?.status?.message?.parts ?? (result?.artifacts ?? []).flatMap((a: any) => a?.parts ?? [])
  return parts.filter((p) => p?.kind === "text" || p?.type === "text").map((p) => String(p.text)).join("")
}

const utf8 = new TextDecoder()

const makeService = Effect.gen(function*() {
  const docs = yield* DocumentStore
  const config = yield* GatewayConfig
  const client = UrlGuard.guardedClient(config.allowPrivateUrls)
  yield* Effect.addFinalizer(() => Effect.promise(() => client.close()))

  const checkUrl = (url: string) => UrlGuard.check(url, { allowPrivate: config.allowPrivateUrls, field: "url" })

  const register = Effect.fn("Orchestrators.register")(function*(avatar: AvatarRecord, input: { readonly name: string; readonly url: string; readonly protocol: Protocol; readonly model?: string | undefined; readonly description: string }) {
    const url = (yield* checkUrl(input.url)).toString().replace(/\/+$/, "")
    const endpoint: OrchestratorEndpoint = { id: crypto.randomUUID(), name: input.name, url, protocol: input.protocol, model: input.model ?? null, description: input.description }
    const now = Date.now()
    yield* docs.insert({ kind: KIND, id: endpoint.id, owner: avatar.id, key: input.protocol, data: endpoint, version: 0, createdAt: now, updatedAt: now })
    return endpoint
  })

  const list = (avatar: AvatarRecord) =>
    Effect.map(docs.list(KIND, { owner: avatar.id }), (ds) => ({ total: ds.length, orchestrators: ds.map((d) => d.data as OrchestratorEndpoint) }))

  const post = (endpoint: OrchestratorEndpoint, url: string, body: unknown) =>
    Effect.tryPromise({
      try: async (signal) => {
        const res = await client.fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json" },
          body: JSON.stringify(body),
          signal,
          redirect: "manual"
        })
        const text = utf8.decode(await readWebBody(res.body as ReadableStream<Uint8Array> | null, config.limits.maxUpstreamResponseBytes))
        if (!res.ok) throw new Error(`HTTP ${res.status}: ${shownUpstreamText(text, 300)}`)
        const parsed = parseUpstreamJson(text)
        if ("value" in parsed) return parsed.value as any
        throw new Error(parsed.malformed ? "the answer is not JSON" : `the answer is not usable JSON: ${parsed.problem}`)
      },
      catch: (e) => new UpstreamFailed({ provider: endpoint.name, message: `orchestrator ${endpoint.name} failed: ${(e as Error)?.message ?? e}` })
    }).pipe(Effect.timeoutFail({ duration: INVOKE_TIMEOUT, onTimeout: () => new UpstreamTimeout({ provider: endpoint.name, message: `orchestrator ${endpoint.name} did not answer in time` }) }))

  /** The caller's endpoint `orchestratorId` with a URL still allowed, or the refusal (answered before admission too). */
  const invocable = (avatar: AvatarRecord, orchestratorId: string) =>
    Effect.gen(function*() {
      const doc = yield* docs.get(KIND, orchestratorId)
      if (Option.isNone(doc) || doc.value.owner !== avatar.id) return yield* Effect.fail(new NotFound({ message: `No orchestrator ${orchestratorId}.` }))
      const endpoint = doc.value.data as OrchestratorEndpoint
      yield* checkUrl(endpoint.url)
      return endpoint
    })

  const checkInvoke = (avatar: AvatarRecord, input: { readonly orchestratorId: string }) => Effect.asVoid(invocable(avatar, input.orchestratorId))

  const invoke = Effect.fn("Orchestrators.invoke")(function*(avatar: AvatarRecord, input: { readonly orchestratorId: string; readonly input: string; readonly payload?: Record<string, unknown> | undefined }) {
    const endpoint = yield* invocable(avatar, input.orchestratorId)
    const started = performance.now()
    const answer = yield* (() => {
      switch (endpoint.protocol) {
        case "openai-chat":
          return Effect.map(
            post(endpoint, `${endpoint.url}/chat/completions`, { model: endpoint.model ?? "default", messages: [{ role: "user", content: input.input }] }),
            (body) => ({ output: String(body?.choices?.[0]?.message?.content ?? ""), raw: body })
          )
        case "a2a":
          return Effect.map(
            post(endpoint, endpoint.url, {
              jsonrpc: "2.0",
              id: crypto.randomUUID(),
              method: "message/send",
              params: { message: { kind: "message", role: "user", messageId: crypto.randomUUID(), parts: [{ kind: "text", text: input.input }] } }
            }),
            (body) => ({ output: body?.error ? `A2A error ${body.error.code}: ${body.error.message}` : textOfA2a(body?.result), raw: body })
          )
        case "http-json":
          return Effect.map(post(endpoint, endpoint.url, input.payload ?? { input: input.input }), (body) => ({ output: typeof body?.output === "string" ? body.output : JSON.stringify(body), raw: body }))
      }
    })()
    return { orchestratorId: endpoint.id, name: endpoint.name, protocol: endpoint.protocol, ...answer, latencyMs: Math.round(performance.now() - started) }
  })

  return { register, list, invoke, checkInvoke }
})

export class Orchestrators extends Context.Tag("aigw/Orchestrators")<Orchestrators, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.scoped(Orchestrators, makeService)
