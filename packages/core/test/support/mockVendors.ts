/**
 * Local mocks of the Cohere v2 API and of the embedding and rerank vendors (Voyage, Jina,
 * Mixedbread, Nomic), each speaking its documented wire format on 127.0.0.1:0. Answers are
 * computed from the request (rerank scores from word overlap, embeddings from a hash of the text,
 * a tool call when the last message is the user's and tools are offered), so a test can tell a
 * right translation from a wrong one. Unknown request fields are a 400, as the real APIs answer.
 *
 * References (wire details):
 *  - Cohere v2: https://docs.cohere.com/reference/chat and chat-stream (body fields; answer
 *    {id, finish_reason COMPLETE|MAX_TOKENS|TOOL_CALL|..., message {role, content[{type:"text"}],
 *    tool_plan, tool_calls}, usage {billed_units, tokens}}; SSE events message-start,
 *    content-start, content-delta {delta.message.content.text}, content-end, tool-plan-delta,
 *    tool-call-start {index, delta.message.tool_calls {id, type, function {name, arguments}}},
 *    tool-call-delta, tool-call-end, message-end {delta {finish_reason, usage}}), /embed
 *    (embeddings.float, meta.billed_units.input_tokens), /rerank (results[{index,
 *    relevance_score}], meta.billed_units.search_units); errors {"message": "..."}.
 *  - Voyage https://docs.voyageai.com/reference/reranker-api (POST /v1/rerank {query, documents,
 *    model, top_k} -> {object:"list", data[{relevance_score, index}], model, usage.total_tokens}).
 *  - Jina https://jina.ai/reranker (POST /v1/rerank {model, query, documents, top_n} ->
 *    {model, results[{index, relevance_score}], usage {total_tokens}}), /v1/embeddings (OpenAI format).
 *  - Mixedbread https://www.mixedbread.com/api-reference/endpoints/reranking (POST /v1/reranking
 *    {model, query, input, top_k} -> {object:"list", data[{index, score}], usage}), /v1/embeddings.
 *  - Nomic https://docs.nomic.ai/reference/endpoints/nomic-embed-text (POST /v1/embedding/text
 *    {model, texts, task_type} -> {embeddings, usage {prompt_tokens, total_tokens}, model}).
 */
import { createHash } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export type Vendor = "cohere" | "voyage" | "jina" | "mixedbread" | "nomic"

export interface VendorMock {
  /** The base URL, as `<ID>_BASE_URL` takes it. */
  readonly url: string
  readonly requests: Array<{ path: string; headers: IncomingMessage["headers"]; body: any }>
  /** The next answer is this HTTP error, in the vendor's error shape. */
  failNext(status: number, message: string): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(contentType: string, body: string): void
  close(): Promise<void>
}

const words = (s: string) => new Set(s.toLowerCase().match(/[a-z0-9]+/g) ?? [])
const tokenCount = (s: string) => (s.match(/\S+/g) ?? []).length

/** Relevance as the share of query words a document holds: deterministic and order-revealing. */
export const relevance = (query: string, doc: string) => {
  const q = words(query)
  const d = words(doc)
  let hits = 0
  for (const w of q) if (d.has(w)) hits++
  return q.size === 0 ? 0 : Math.round((hits / q.size) * 1000) / 1000
}

const vectorOf = (text: string) => [...createHash("sha256").update(text).digest().subarray(0, 8)].map((b) => b / 255)

const ranked = (query: string, docs: ReadonlyArray<string>, top: number | undefined) =>
  docs.map((d, index) => ({ index, score: relevance(query, d) })).sort((a, b) => b.score - a.score || a.index - b.index).slice(0, top ?? docs.length)

const allowed: Record<string, ReadonlySet<string>> = {
  "cohere /chat": new Set([
    "model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "p", "k", "stop_sequences", "seed",
    "frequency_penalty", "presence_penalty", "response_format", "stream", "documents", "safety_mode", "strict_tools"
  ]),
  "cohere /embed": new Set(["model", "texts", "images", "inputs", "input_type", "embedding_types", "truncate", "output_dimension"]),
  "cohere /rerank": new Set(["model", "query", "documents", "top_n", "max_tokens_per_doc"]),
  "voyage /rerank": new Set(["model", "query", "documents", "top_k", "return_documents", "truncation"]),
  "jina /rerank": new Set(["model", "query", "documents", "top_n", "return_documents"]),
  "mixedbread /reranking": new Set(["model", "query", "input", "top_k", "rank_fields", "return_input"]),
  "nomic /embedding/text": new Set(["model", "texts", "task_type", "long_text_mode", "max_tokens_per_text", "dimensionality"]),
  embeddings: new Set(["model", "input", "encoding_format", "dimensions", "normalized", "prompt", "task", "user"])
}

const errorBody = (vendor: Vendor, message: string) => (vendor === "cohere" ? { message } : { detail: message })

/** Cohere v2 chat: text, or a call of the first tool when the user spoke last and tools are offered. */
const cohereChat = (body: any) => {
  const last = body.messages.at(-1)
  const tool = Array.isArray(body.tools) && last?.role === "user" && body.tool_choice !== "NONE" ? body.tools[0] : undefined
  const prompt = body.messages.map((m: any) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? ""))).join(" ")
  const text = last?.role === "tool" ? `The tool said: ${last.content}` : "Hello from Cohere"
  const usage = { billed_units: { input_tokens: tokenCount(prompt), output_tokens: tokenCount(text) }, tokens: { input_tokens: tokenCount(prompt) + 7, output_tokens: tokenCount(text) } }
  return { tool, text, usage }
}

const sse = (type: string, payload: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`

const cohereFrames = (body: any): Array<string> => {
  const { text, tool, usage } = cohereChat(body)
  const frames = [sse("message-start", { id: "msg-1", delta: { message: { role: "assistant" } } })]
  if (tool) {
    const args = JSON.stringify({ city: "Paris" })
    frames.push(
      sse("tool-plan-delta", { delta: { message: { tool_plan: "I will look it up." } } }),
      sse("tool-call-start", { index: 0, delta: { message: { tool_calls: { id: "call_1", type: "function", function: { name: tool.function.name, arguments: "" } } } } }),
      sse("tool-call-delta", { index: 0, delta: { message: { tool_calls: { function: { arguments: args.slice(0, 5) } } } } }),
      sse("tool-call-delta", { index: 0, delta: { message: { tool_calls: { function: { arguments: args.slice(5) } } } } }),
      sse("tool-call-end", { index: 0 })
    )
  } else {
    frames.push(sse("content-start", { index: 0, delta: { message: { content: { type: "text", text: "" } } } }))
    for (const piece of text.match(/\S+\s*/g) ?? []) frames.push(sse("content-delta", { index: 0, delta: { message: { content: { text: piece } } } }))
    frames.push(sse("content-end", { index: 0 }))
  }
  frames.push(sse("message-end", { delta: { finish_reason: tool ? "TOOL_CALL" : "COMPLETE", usage } }))
  return frames
}

const answer = (vendor: Vendor, route: string, body: any): unknown => {
  switch (`${vendor} ${route}`) {
    case "cohere /chat": {
      const { text, tool, usage } = cohereChat(body)
      return tool
        ? {
          id: "chat-1",
          finish_reason: "TOOL_CALL",
          message: { role: "assistant", tool_plan: "I will look it up.", tool_calls: [{ id: "call_1", type: "function", function: { name: tool.function.name, arguments: JSON.stringify({ city: "Paris" }) } }] },
          usage
        }
        : { id: "chat-1", finish_reason: "COMPLETE", message: { role: "assistant", content: [{ type: "text", text }] }, usage }
    }
    case "cohere /embed":
      return { id: "emb-1", embeddings: { float: body.texts.map(vectorOf) }, texts: body.texts, meta: { billed_units: { input_tokens: body.texts.map(tokenCount).reduce((a: number, b: number) => a + b, 0) } } }
    case "cohere /rerank":
      return {
        id: "rr-1",
        results: ranked(body.query, body.documents, body.top_n).map((r) => ({ index: r.index, relevance_score: r.score })),
        meta: { api_version: { version: "2" }, billed_units: { search_units: Math.ceil(body.documents.length / 100) } }
      }
    case "voyage /rerank":
      return {
        object: "list",
        data: ranked(body.query, body.documents, body.top_k).map((r) => ({ relevance_score: r.score, index: r.index })),
        model: body.model,
        usage: { total_tokens: tokenCount(body.query) * body.documents.length + body.documents.map(tokenCount).reduce((a: number, b: number) => a + b, 0) }
      }
    case "jina /rerank":
      return { model: body.model, results: ranked(body.query, body.documents, body.top_n).map((r) => ({ index: r.index, relevance_score: r.score })), usage: { total_tokens: 42 } }
    case "mixedbread /reranking":
      return { object: "list", model: body.model, top_k: body.top_k, data: ranked(body.query, body.input, body.top_k).map((r) => ({ index: r.index, score: r.score, object: "rank_result" })), usage: { prompt_tokens: 40, total_tokens: 40 } }
    case "nomic /embedding/text":
      return { embeddings: body.texts.map(vectorOf), usage: { prompt_tokens: 9, total_tokens: 9 }, model: body.model }
    default: {
      // OpenAI-format /embeddings (Voyage, Jina, Mixedbread).
      const input: Array<string> = Array.isArray(body.input) ? body.input : [body.input]
      return { object: "list", model: body.model, data: input.map((t, index) => ({ object: "embedding", index, embedding: vectorOf(t) })), usage: { prompt_tokens: 12, total_tokens: 12 } }
    }
  }
}

export const readJson = (req: IncomingMessage): Promise<any> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")))
      } catch {
        resolve(undefined)
      }
    })
  })

const basePaths: Record<Vendor, string> = { cohere: "/v2", voyage: "/v1", jina: "/v1", mixedbread: "/v1", nomic: "/v1" }

export const startVendorMock = async (vendor: Vendor, apiKey: string): Promise<VendorMock> => {
  const requests: VendorMock["requests"] = []
  const pending: Array<(res: ServerResponse) => void> = []
  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body)
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    res.end(text)
  }
  const server = createServer((req, res) => {
    void readJson(req).then(async (body) => {
      const base = basePaths[vendor]
      const path = req.url ?? "/"
      requests.push({ path, headers: req.headers, body })
      const next = pending.shift()
      if (next) return next(res)
      if (req.headers.authorization !== `Bearer ${apiKey}`) return json(res, 401, errorBody(vendor, "invalid api token"))
      const route = path.startsWith(base) ? path.slice(base.length) : path
      const key = route === "/embeddings" ? "embeddings" : `${vendor} ${route}`
      const fields = allowed[key]
      if (req.method !== "POST" || fields === undefined) return json(res, 404, errorBody(vendor, `no route ${req.method} ${path}`))
      if (typeof body !== "object" || body === null) return json(res, 400, errorBody(vendor, "invalid request: body is not JSON"))
      const unknown = Object.keys(body).find((k) => !fields.has(k))
      if (unknown !== undefined) return json(res, 400, errorBody(vendor, `invalid request: unknown field ${unknown}`))
      if (typeof body.model !== "string" || body.model === "") return json(res, 400, errorBody(vendor, "invalid request: model is required"))
      if (vendor === "cohere" && route === "/chat" && body.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
        for (const frame of cohereFrames(body)) {
          res.write(frame)
          await new Promise((r) => setTimeout(r, 2))
        }
        return res.end()
      }
      return json(res, 200, answer(vendor, route, body))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}${basePaths[vendor]}`,
    requests,
    failNext: (status, message) => pending.push((res) => json(res, status, errorBody(vendor, message))),
    rawNext: (contentType, body) =>
      pending.push((res) => {
        res.writeHead(200, { "content-type": contentType })
        res.end(body)
      }),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((e) => (e ? reject(e) : resolve()))
        server.closeAllConnections()
      })
  }
}
