/**
 * Local mocks of Pinecone Inference and NLP Cloud, each speaking its documented wire format on
 * 127.0.0.1:0 (the documents are named in packages/core/src/Providers/Pinecone.ts and NlpCloud.ts).
 * Answers are computed from the request (rerank scores from word overlap, vectors from the text,
 * the chatbot's answer from its input and history), so a test can tell a right translation from a
 * wrong one. Unknown request fields are a 400, a wrong key a 401, each in the vendor's error shape.
 *  - Pinecone: `POST /embed` and `POST /rerank`, `Api-Key` and `X-Pinecone-API-Version` headers;
 *    errors `{error: {code, message}, status}`.
 *  - NLP Cloud: `POST /v1/gpu/{model}/chatbot` and `/embeddings`, `Authorization: Token`; errors `{detail}`.
 */
import type { IncomingMessage } from "node:http"
import { type RecordingMock, startRecordingMock } from "./localServer.ts"
import { relevance } from "./mockVendors.ts"

export type MoreVendor = "pinecone" | "nlp-cloud"

export type MoreVendorMock = RecordingMock

type Answer = readonly [status: number, body: unknown]

/** A small vector that differs for different texts. */
export const vectorOf = (text: string) => [text.length, [...text].reduce((sum, c) => sum + c.charCodeAt(0), 0) % 97, 1]

const unknownField = (body: any, allowed: ReadonlyArray<string>) => Object.keys(body).find((f) => !allowed.includes(f))

const pineconeError = (status: number, message: string): Answer => [status, { error: { code: status === 401 ? "UNAUTHENTICATED" : "INVALID_ARGUMENT", message }, status }]

const pinecone = (method: string, path: string, headers: IncomingMessage["headers"], body: any, apiKey: string): Answer => {
  if (headers["api-key"] !== apiKey) return pineconeError(401, "Invalid API Key")
  if (headers["x-pinecone-api-version"] !== "2025-04") return pineconeError(400, "missing or unknown X-Pinecone-API-Version")
  if (typeof body !== "object" || body === null) return pineconeError(400, "body is not JSON")
  if (method === "POST" && path === "/embed") {
    const unknown = unknownField(body, ["model", "parameters", "inputs"])
    if (unknown !== undefined) return pineconeError(400, `unknown field ${unknown}`)
    if (!Array.isArray(body.inputs) || !body.inputs.every((i: any) => typeof i?.text === "string")) return pineconeError(400, "inputs must be [{text}]")
    if (body.parameters?.input_type !== "passage" && body.parameters?.input_type !== "query") return pineconeError(400, "input_type is required")
    const texts: Array<string> = body.inputs.map((i: any) => i.text)
    return [200, {
      model: body.model,
      vector_type: "dense",
      data: texts.map((t) => ({ values: vectorOf(t), vector_type: "dense" })),
      usage: { total_tokens: texts.join(" ").split(/\s+/).length }
    }]
  }
  if (method === "POST" && path === "/rerank") {
    const unknown = unknownField(body, ["model", "query", "documents", "top_n", "return_documents", "rank_fields", "parameters"])
    if (unknown !== undefined) return pineconeError(400, `unknown field ${unknown}`)
    if (!Array.isArray(body.documents) || !body.documents.every((d: any) => typeof d?.text === "string")) return pineconeError(400, "documents must be [{text}]")
    const docs: Array<string> = body.documents.map((d: any) => d.text)
    const ranked = docs
      .map((d, index) => ({ index, score: relevance(String(body.query), d), ...(body.return_documents === false ? {} : { document: { text: d } }) }))
      .sort((a, b) => b.score - a.score || a.index - b.index)
      .slice(0, typeof body.top_n === "number" ? body.top_n : docs.length)
    return [200, { model: body.model, data: ranked, usage: { rerank_units: 1 } }]
  }
  return pineconeError(404, `no route ${method} ${path}`)
}

const nlpError = (status: number, detail: string): Answer => [status, { detail }]

const nlpCloud = (method: string, path: string, headers: IncomingMessage["headers"], body: any, apiKey: string): Answer => {
  if (headers.authorization !== `Token ${apiKey}`) return nlpError(401, "Invalid token.")
  const route = path.match(/^\/v1\/gpu\/([^/]+)\/(chatbot|embeddings)$/)
  if (method !== "POST" || route === null) return nlpError(404, `no route ${method} ${path}`)
  if (typeof body !== "object" || body === null) return nlpError(400, "body is not JSON")
  if (route[2] === "embeddings") {
    const unknown = unknownField(body, ["sentences"])
    if (unknown !== undefined) return nlpError(400, `unknown field ${unknown}`)
    if (!Array.isArray(body.sentences)) return nlpError(400, "sentences: field required")
    return [200, { embeddings: body.sentences.map((s: string) => vectorOf(String(s))) }]
  }
  const unknown = unknownField(body, ["input", "context", "history"])
  if (unknown !== undefined) return nlpError(400, `unknown field ${unknown}`)
  if (typeof body.input !== "string") return nlpError(400, "input: field required")
  const history: Array<{ input: string; response: string }> = body.history ?? []
  const response = `${decodeURIComponent(route[1]!)} answers "${body.input}" after ${history.length} turns${body.context ? ` (context: ${body.context})` : ""}`
  return [200, { response, history: [...history, { input: body.input, response }] }]
}

export const startMoreVendorMock = (vendor: MoreVendor, apiKey: string): Promise<MoreVendorMock> =>
  vendor === "pinecone"
    ? startRecordingMock("", ({ body, headers, method, path }) => pinecone(method, path, headers, body, apiKey))
    : startRecordingMock("/v1", ({ body, headers, method, path }) => nlpCloud(method, path, headers, body, apiKey))
