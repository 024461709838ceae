/**
 * The bare reverse proxy: what a Node process minimally costs for one extra hop. node:http only,
 * a keep-alive agent to the upstream, headers copied without hop-by-hop ones, bodies piped both
 * ways (SSE streams through unbuffered). UPSTREAM=http://127.0.0.1:N PORT=M node proxy.mjs
 */
import http from "node:http"

const upstream = new URL(process.env.UPSTREAM ?? "http://127.0.0.1:9000")
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, scheduling: "lifo" })
const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host"])
const copy = (raw) => {
  const out = {}
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase()
    if (!hopByHop.has(name)) out[name] = raw[i + 1]
  }
  return out
}
const badGateway = Buffer.from('{"error":{"message":"upstream unreachable","type":"api_error"}}')

const server = http.createServer((req, res) => {
  const headers = copy(req.rawHeaders)
  headers.host = upstream.host
  const out = http.request(
    { agent, hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
    (up) => {
      res.writeHead(up.statusCode, copy(up.rawHeaders))
      up.pipe(res)
    }
  )
  out.on("error", () => {
    if (res.headersSent) return res.destroy()
    res.writeHead(502, { "content-type": "application/json", "content-length": badGateway.length })
    res.end(badGateway)
  })
  res.on("close", () => res.writableFinished || out.destroy())
  req.pipe(out)
})
server.keepAliveTimeout = 120_000
server.headersTimeout = 121_000
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => console.log(`READY ${server.address().port}`))
for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => process.exit(0))
