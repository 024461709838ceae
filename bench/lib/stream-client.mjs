/**
 * Sequential streamed chat completions over one keep-alive connection; prints `STREAMJSON {...}`.
 *   node stream-client.mjs URL HEADERS_FILE BODY_FILE N WARMUP
 * Per request: time to the response headers, TTFB (until the first "data:" line arrived), TTFT (until
 * the first "data:" line with a non-empty delta.content arrived: a gateway that re-frames the stream
 * may send its first line with the first content rather than the upstream's empty role chunk) and
 * the total time. One request at a time, so these are latencies without queueing.
 */
import fs from "node:fs"
import http from "node:http"

const [url, headersFile, bodyFile, n = "200", warmup = "20"] = process.argv.slice(2)
const headers = { "content-type": "application/json", accept: "text/event-stream" }
for (const line of fs.readFileSync(headersFile, "utf8").split("\n")) {
  const i = line.indexOf(":")
  if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
}
const body = fs.readFileSync(bodyFile)
headers["content-length"] = body.length
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
const now = () => Number(process.hrtime.bigint()) / 1e6

const once = () =>
  new Promise((resolve) => {
    const t0 = now()
    let tHeaders, tFirst, tToken, text = ""
    const req = http.request(url, { method: "POST", agent, headers }, (res) => {
      tHeaders = now()
      res.setEncoding("utf8")
      res.on("data", (chunk) => {
        text += chunk
        if (tFirst === undefined && text.includes("data:")) tFirst = now()
        if (tToken === undefined && /^data: .*"content":"[^"]/m.test(text)) tToken = now()
      })
      res.on("end", () => {
        const t = now()
        const events = (text.match(/^data: /gm) ?? []).length
        const ok = res.statusCode === 200 && text.includes("data: [DONE]") && events >= 21
        resolve({ ok, headers: tHeaders - t0, ttfb: (tFirst ?? t) - t0, ttft: (tToken ?? t) - t0, total: t - t0, events, error: ok ? null : `HTTP ${res.statusCode} ${text.slice(0, 200)}` })
      })
    })
    req.on("error", (e) => resolve({ ok: false, error: String(e) }))
    req.end(body)
  })

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? Math.round(s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] * 1000) / 1000 : null
}
for (let i = 0; i < Number(warmup); i++) await once()
const results = []
for (let i = 0; i < Number(n); i++) results.push(await once())
const ok = results.filter((r) => r.ok)
const col = (k) => ok.map((r) => r[k])
console.log("STREAMJSON " + JSON.stringify({
  n: results.length, failed: results.length - ok.length, events: pct(col("events"), 50),
  headers_p50_ms: pct(col("headers"), 50), ttfb_p50_ms: pct(col("ttfb"), 50), ttfb_p90_ms: pct(col("ttfb"), 90),
  ttfb_p99_ms: pct(col("ttfb"), 99), ttft_p50_ms: pct(col("ttft"), 50), total_p50_ms: pct(col("total"), 50),
  first_error: results.find((r) => !r.ok)?.error ?? null
}))
agent.destroy()
