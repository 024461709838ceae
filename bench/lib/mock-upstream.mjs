/**
 * Mock OpenAI-compatible upstream for the benchmark: node:http, every answer precomputed.
 *
 *   POST /v1/chat/completions   chat.completion JSON (with usage), or with "stream": true an SSE stream:
 *                               role chunk, 20 content chunks, finish chunk, usage chunk when
 *                               stream_options.include_usage, then [DONE]  (23-24 data events)
 *                               A request whose system prompt is aigw's translation task (POST /v1/translate)
 *                               gets the JSON answer that task asks for: {"sourceLanguage", "translation"}
 *   POST /v1/embeddings         OpenAI's embeddings list: one vector of MOCK_EMBED_DIMS [1536] numbers per input
 *                               (text-embedding-3-small's default size), usage from the input count
 *   POST /v1/moderations        OpenAI's moderation answer for one input: not flagged, every category scored
 *   GET  /health                {"status":"ok"}
 *   POST /__bench/pace?ms=N     sets the pause between SSE events (0 = the whole stream in one write)
 *
 * Pacing is process-wide state set by the driver between runs (MOCK_PACE_MS sets the initial value):
 * gateways do not forward arbitrary request fields or headers, so the pace cannot travel in the request.
 * Listens on 127.0.0.1:$PORT and prints "READY <port>".
 */
import http from "node:http"

const PORT = Number(process.env.PORT ?? 0)
let paceMs = Number(process.env.MOCK_PACE_MS ?? 0)

const MODEL = "gpt-4o-mini-2024-07-18"
const ID = "chatcmpl-benchmock000000000000000000"
const CREATED = 1767225600
const TEXT = "A gateway sits between applications and model providers. It authenticates callers, " +
  "enforces quotas, picks a provider and model, forwards the request, and records what each call " +
  "cost, so that applications talk to one stable API whatever model answers behind it. Its own " +
  "overhead should stay far below the time a model needs to produce the first token."
const usage = { prompt_tokens: 205, completion_tokens: 64, total_tokens: 269 }

const completion = Buffer.from(JSON.stringify({
  id: ID, object: "chat.completion", created: CREATED, model: MODEL, system_fingerprint: "fp_bench",
  choices: [{ index: 0, message: { role: "assistant", content: TEXT, refusal: null }, logprobs: null, finish_reason: "stop" }],
  usage
}))

// the JSON answer of aigw's translation task (its system prompt starts "You are a translation engine")
const translation = Buffer.from(JSON.stringify({
  id: ID, object: "chat.completion", created: CREATED, model: MODEL, system_fingerprint: "fp_bench",
  choices: [{ index: 0, message: { role: "assistant", content: JSON.stringify({ sourceLanguage: "en", translation: "Ein Gateway sitzt zwischen Anwendungen und Modellanbietern." }), refusal: null }, logprobs: null, finish_reason: "stop" }],
  usage: { prompt_tokens: 120, completion_tokens: 24, total_tokens: 144 }
}))

const frame = (obj) => Buffer.from(`data: ${JSON.stringify(obj)}\n\n`)
const chunk = (delta, finish_reason = null) =>
  frame({ id: ID, object: "chat.completion.chunk", created: CREATED, model: MODEL, system_fingerprint: "fp_bench",
    choices: [{ index: 0, delta, logprobs: null, finish_reason }] })
const words = TEXT.split(/(?<= )/)
const parts = Array.from({ length: 20 }, (_, i) => words.slice(Math.floor((i * words.length) / 20), Math.floor(((i + 1) * words.length) / 20)).join(""))
const events = [chunk({ role: "assistant", content: "" }), ...parts.map((p) => chunk({ content: p })), chunk({}, "stop")]
const usageEvent = frame({ id: ID, object: "chat.completion.chunk", created: CREATED, model: MODEL, choices: [], usage })
const done = Buffer.from("data: [DONE]\n\n")
const burst = Buffer.concat([...events, done])
const burstWithUsage = Buffer.concat([...events, usageEvent, done])

// embeddings: the same fixed vector for every input, the answer precomputed per input count
const DIMS = Number(process.env.MOCK_EMBED_DIMS ?? 1536)
const vector = Array.from({ length: DIMS }, (_, i) => Math.round(Math.sin(i * 12.9898) * 1e9) / 1e10)
const embeddingAnswers = new Map()
const embeddingsOf = (count) => {
  let body = embeddingAnswers.get(count)
  if (!body) {
    body = Buffer.from(JSON.stringify({
      object: "list",
      data: Array.from({ length: count }, (_, index) => ({ object: "embedding", index, embedding: vector })),
      model: "text-embedding-3-small",
      usage: { prompt_tokens: 8 * count, total_tokens: 8 * count }
    }))
    if (embeddingAnswers.size < 64) embeddingAnswers.set(count, body)
  }
  return body
}

const moderationCategories = ["harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent", "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence", "violence/graphic"]
const moderation = Buffer.from(JSON.stringify({
  id: "modr-bench",
  model: "omni-moderation-latest",
  results: [{
    flagged: false,
    categories: Object.fromEntries(moderationCategories.map((c) => [c, false])),
    category_scores: Object.fromEntries(moderationCategories.map((c, i) => [c, 0.0001 * (i + 1)])),
    category_applied_input_types: Object.fromEntries(moderationCategories.map((c) => [c, ["text"]]))
  }]
}))

const jsonHeaders = (n) => ({ "content-type": "application/json", "content-length": n, "x-request-id": "req_bench" })
const sseHeaders = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-request-id": "req_bench" }
const notFound = Buffer.from('{"error":{"message":"not found (mock upstream)","type":"invalid_request_error","code":"not_found"}}')
const ok = Buffer.from('{"status":"ok"}')

const stream = (res, text) => {
  const withUsage = /"include_usage"\s*:\s*true/.test(text)
  res.writeHead(200, sseHeaders)
  if (paceMs <= 0) return res.end(withUsage ? burstWithUsage : burst)
  const pace = paceMs
  const tail = withUsage ? [usageEvent, done] : [done]
  let i = 0
  const next = () => {
    if (res.destroyed) return
    if (i < events.length) {
      res.write(events[i++])
      setTimeout(next, pace)
    } else res.end(Buffer.concat(tail))
  }
  next()
}

const server = http.createServer((req, res) => {
  if (req.method === "GET") {
    const body = req.url === "/health" || req.url === "/" ? ok : notFound
    res.writeHead(body === ok ? 200 : 404, jsonHeaders(body.length))
    return res.end(body)
  }
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    if (req.url.startsWith("/__bench/pace")) {
      paceMs = Number(new URL(req.url, "http://x").searchParams.get("ms") ?? 0)
      const body = Buffer.from(JSON.stringify({ paceMs }))
      res.writeHead(200, jsonHeaders(body.length))
      return res.end(body)
    }
    if (req.url.endsWith("/embeddings")) {
      let input
      try {
        input = JSON.parse(Buffer.concat(chunks).toString("utf8")).input
      } catch {}
      const body = embeddingsOf(Array.isArray(input) ? Math.max(1, input.length) : 1)
      res.writeHead(200, jsonHeaders(body.length))
      return res.end(body)
    }
    if (req.url.endsWith("/moderations")) {
      res.writeHead(200, jsonHeaders(moderation.length))
      return res.end(moderation)
    }
    if (!req.url.endsWith("/chat/completions")) {
      res.writeHead(404, jsonHeaders(notFound.length))
      return res.end(notFound)
    }
    const text = chunks.length === 1 ? chunks[0].toString("latin1") : Buffer.concat(chunks).toString("latin1")
    if (/"stream"\s*:\s*true/.test(text)) return stream(res, text)
    const answer = text.includes("You are a translation engine") ? translation : completion
    res.writeHead(200, jsonHeaders(answer.length))
    res.end(answer)
  })
})
server.keepAliveTimeout = 120_000
server.headersTimeout = 121_000
server.listen(PORT, "127.0.0.1", () => console.log(`READY ${server.address().port}`))
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0))
