/**
 * The floor: the least a metered gateway that answers in its own name must do per call, written as
 * plainly as node allows, to show what part of the proxy's throughput that work leaves. Per call:
 * parse the request, admit it (one SQLite upsert), build the upstream body, one upstream exchange on
 * a keep-alive agent, parse the answer (each SSE event of a stream) and write it back re-serialised
 * with the gateway's own id, `created` and requested model, record the usage (one SQLite insert),
 * then end the answer. The writes of one event-loop turn are group-committed, as aigw commits them.
 * Nothing else: no credentials, no validation, no routing or fallbacks, no limits, no metrics, no
 * error mapping (a failed upstream is a 502). It reads the mock's framing (events end with a blank
 * line, LF only), not every SSE stream. Not a gateway: a measuring stick beside the bare proxy.
 *
 *   UPSTREAM=http://127.0.0.1:N PORT=M FLOOR_DB=/tmp/floor.sqlite node floor.mjs
 */
import Database from "better-sqlite3"
import http from "node:http"
import { StringDecoder } from "node:string_decoder"

const upstream = new URL(process.env.UPSTREAM ?? "http://127.0.0.1:9000")
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, scheduling: "lifo" })

const db = new Database(process.env.FLOOR_DB ?? ":memory:")
db.pragma("journal_mode = WAL")
db.pragma("synchronous = NORMAL")
db.exec(`CREATE TABLE IF NOT EXISTS daily (day TEXT PRIMARY KEY, calls INTEGER NOT NULL, tokens INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, day TEXT NOT NULL, model TEXT NOT NULL, tokens INTEGER NOT NULL, at INTEGER NOT NULL)`)
const admitStatement = db.prepare("INSERT INTO daily VALUES (?, 1, 0) ON CONFLICT (day) DO UPDATE SET calls = calls + 1 RETURNING calls")
const recordStatement = db.prepare("INSERT INTO events (day, model, tokens, at) VALUES (?, ?, ?, ?)")
const begin = db.prepare("BEGIN")
const commit = db.prepare("COMMIT")

// Group commit: the writes of one turn run in one transaction at its end.
let queue = []
const flush = () => {
  const batch = queue
  queue = []
  begin.run()
  for (const w of batch) w.resolve(w.run())
  commit.run()
}
const write = (run) =>
  new Promise((resolve) => {
    if (queue.push({ run, resolve }) === 1) setImmediate(flush)
  })
const today = () => new Date().toISOString().slice(0, 10)

let calls = 0
const badGateway = Buffer.from('{"error":{"message":"upstream failed","type":"api_error"}}')
const fail = (res) => {
  if (res.headersSent) return res.destroy()
  res.writeHead(502, { "content-type": "application/json", "content-length": badGateway.length })
  res.end(badGateway)
}

/** A body read whole and parsed as JSON; undefined for text that is not JSON. */
const readJson = (stream) =>
  new Promise((resolve) => {
    let text = ""
    stream.setEncoding("utf8")
    stream.on("data", (c) => (text += c))
    stream.on("end", () => {
      try {
        resolve(JSON.parse(text))
      } catch {
        resolve(undefined)
      }
    })
  })

/** One upstream event's chunk in the gateway's name: our head, the upstream's choices and usage. */
const chunkOf = (head, event) =>
  `data: ${head},${JSON.stringify(event.usage ? { choices: event.choices, usage: event.usage } : { choices: event.choices }).slice(1)}\n\n`

const answer = (body, res, up) => {
  const id = `chatcmpl-${(++calls).toString(36)}`
  const created = Math.floor(Date.now() / 1000)
  const record = (tokens) => write(() => recordStatement.run(today(), body.model, tokens, Date.now()))
  if (!body.stream) {
    return readJson(up).then(async (a) => {
      if (a === undefined) return fail(res)
      await record(a.usage?.total_tokens ?? 0)
      const out = JSON.stringify({ id, object: "chat.completion", created, model: body.model, choices: a.choices, usage: a.usage })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) })
      res.end(out)
    })
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  const head = JSON.stringify({ id, object: "chat.completion.chunk", created, model: body.model }).slice(0, -1)
  const decoder = new StringDecoder("utf8")
  let partial = ""
  let tokens = 0
  let done = false
  up.on("data", (bytes) => {
    const text = partial + decoder.write(bytes)
    let start = 0
    let out = ""
    for (let end; (end = text.indexOf("\n\n", start)) !== -1; start = end + 2) {
      const data = text.slice(start + 6, end)
      if (data === "[DONE]") {
        done = true
        continue
      }
      let event
      try {
        event = JSON.parse(data)
      } catch {
        up.destroy()
        return res.destroy()
      }
      if (event.usage) tokens = event.usage.total_tokens
      out += chunkOf(head, event)
    }
    partial = text.slice(start)
    if (out !== "") res.write(out)
  })
  up.on("end", async () => {
    await record(tokens)
    res.end(done ? "data: [DONE]\n\n" : "")
  })
}

const server = http.createServer((req, res) => {
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json", "content-length": 15 })
    return res.end('{"status":"ok"}')
  }
  readJson(req).then(async (body) => {
    if (body === undefined) {
      res.writeHead(400, { "content-type": "application/json" })
      return res.end('{"error":{"message":"bad JSON","type":"invalid_request_error"}}')
    }
    await write(() => admitStatement.get(today()))
    const wire = JSON.stringify({
      model: body.model,
      messages: body.messages,
      temperature: body.temperature,
      max_completion_tokens: body.max_completion_tokens ?? body.max_tokens,
      stream: body.stream,
      stream_options: body.stream_options
    })
    const out = http.request({
      agent,
      hostname: upstream.hostname,
      port: upstream.port,
      method: "POST",
      path: req.url,
      headers: { "content-type": "application/json", authorization: req.headers.authorization ?? "", "content-length": Buffer.byteLength(wire) }
    }, (up) => (up.statusCode === 200 ? answer(body, res, up) : (up.resume(), fail(res))))
    out.on("error", () => fail(res))
    out.end(wire)
  })
})
server.keepAliveTimeout = 120_000
server.headersTimeout = 121_000
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => console.log(`READY ${server.address().port}`))
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0))
