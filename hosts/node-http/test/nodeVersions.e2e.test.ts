/**
 * The node host's bundle on the Node versions it is deployed on besides Node 20, which runs the tests:
 * Node 22, the runtime of the container image (Dockerfile) and of the Lambda template, and Node 24, the
 * current LTS line the README recommends.
 *
 * - Node 22's HTTP server differs from Node 20's: a corked response keeps a chunked body's writes in a
 *   buffer of its own, and `end` sends the body's terminating chunk before that buffer. A stream that
 *   corked its response lost what came last (its finish chunk and [DONE]) past the end of its body, and
 *   under load, when a stream's writes are held for its end, everything after its first event. The
 *   streams are checked on the wire: every byte inside the chunked body, nothing after it.
 * - Node 24's runtime maps about half a gigabyte more address space before it runs anything (V8's
 *   tables), and a sandbox's address-space limit sized for Node 20 left no room to load Pyodide: every
 *   Python run crashed. The sandbox runs code there, and a program past its memory limit gets its own
 *   memory error.
 *
 * On PostgreSQL: the SQLite driver in node_modules is built for the node that runs the tests.
 * `.ci/run` installs both versions (AIGW_TEST_NODE22, AIGW_TEST_NODE24) and PostgreSQL; without them the
 * suites are skipped locally, and CI fails without them.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshPgDatabase, hasPg } from "../../../packages/core/test/support/databases.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const versions = [
  { major: 22, node: process.env.AIGW_TEST_NODE22 },
  { major: 24, node: process.env.AIGW_TEST_NODE24 }
]
for (const { major, node } of versions) {
  if (!node && process.env.CI) throw new Error(`AIGW_TEST_NODE${major} is not set: CI must run the node host's bundle on Node ${major}`)
}

/** One request on its own connection (closed after the answer): the answer's head and its body's raw bytes. */
const exchange = (port: number, path: string, headers: Record<string, string>, body: string) =>
  new Promise<{ head: string; body: Buffer }>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    const parts: Array<Buffer> = []
    socket.on("data", (d) => parts.push(d))
    socket.on("error", reject)
    socket.on("end", () => {
      const all = Buffer.concat(parts)
      const split = all.indexOf("\r\n\r\n")
      resolve({ head: all.subarray(0, split).toString("latin1"), body: all.subarray(split + 4) })
    })
    const lines = Object.entries({ ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), connection: "close" })
    // Not ended: a half-closed connection is a client that left. `connection: close` ends it after the answer.
    socket.write(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n${lines.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n${body}`)
  })

/** A chunked body read strictly: its data, and whatever the connection carried after its terminating chunk. */
const dechunk = (raw: Buffer): { data: string; after: string } => {
  const data: Array<Buffer> = []
  let at = 0
  for (;;) {
    const lineEnd = raw.indexOf("\r\n", at)
    if (lineEnd === -1) throw new Error(`a chunk's size line is cut: ${JSON.stringify(raw.subarray(at).toString("latin1").slice(0, 80))}`)
    const size = Number.parseInt(raw.subarray(at, lineEnd).toString("latin1"), 16)
    if (!Number.isInteger(size)) throw new Error(`not a chunk size: ${JSON.stringify(raw.subarray(at, lineEnd).toString("latin1").slice(0, 80))}`)
    at = lineEnd + 2
    if (size === 0) {
      if (raw.subarray(at, at + 2).toString("latin1") !== "\r\n") throw new Error("the terminating chunk is not followed by its blank line")
      return { data: Buffer.concat(data).toString("utf8"), after: raw.subarray(at + 2).toString("utf8") }
    }
    data.push(raw.subarray(at, at + size))
    at += size
    if (raw.subarray(at, at + 2).toString("latin1") !== "\r\n") throw new Error("a chunk's data is not followed by CRLF")
    at += 2
  }
}

/** The `data:` values of an SSE text, in order. */
const dataOf = (sse: string) => sse.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6))

const TEXT = "one two three four five six seven eight"
const streamed = (model = "gpt-4o-mini") => JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "Hi" }] })

/** An OpenAI chat stream, complete: the opening, the text, the finish chunk, then [DONE]. */
const expectCompleteChat = (sse: string) => {
  const data = dataOf(sse)
  expect(data.at(-1)).toBe("[DONE]")
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d))
  expect(chunks.at(-1).choices[0].finish_reason).toBe("stop")
  expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(TEXT)
}

describe.each(versions)("the node host on Node $major", ({ major, node }) => {
  if (!node || !hasPg) {
    it.skip(`needs AIGW_TEST_NODE${major} and PostgreSQL`, () => {})
    return
  }
  let server: RunningServer
  /** The same gateway (database and data directory) with AIGW_FAST_LANE=false: the Effect route's streams. */
  let routeServer: RunningServer
  let openai: MockUpstream
  let user: TestAvatar

  beforeAll(async () => {
    // Without a pause between frames: a stream's answer tends to come in one upstream read, as under load.
    openai = await startOpenAiMock({ apiKey: "sk-openai", chunkDelayMs: 0 })
    openai.setScenario({ kind: "text", text: TEXT, pieces: 8, usage: { prompt: 5, completion: 8 } })
    const env = { OPENAI_API_KEY: "sk-openai", OPENAI_BASE_URL: openai.url, DATABASE_URL: await freshPgDatabase() }
    server = await startServer(env, { node })
    routeServer = await startServer({ ...env, AIGW_FAST_LANE: "false" }, { node, dataDir: server.dataDir })
    user = await signUp(server, `node${major}`)
  })
  afterAll(async () => {
    await routeServer?.stop()
    await server?.stop()
    await openai?.close()
  })

  it("answers a chat call on the fast lane, its body as long as its Content-Length says", async () => {
    const { body, head } = await exchange(
      server.port,
      "/openai/v1/chat/completions",
      { "x-api-key": user.apiKey },
      JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] })
    )
    expect(head).toMatch(/^HTTP\/1\.1 200 /)
    expect(Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1])).toBe(body.length)
    expect(JSON.parse(body.toString("utf8")).choices[0].message.content).toBe(TEXT)
  })

  it("a stream on the fast lane ends inside its chunked body, with its finish chunk and [DONE]", async () => {
    const { body, head } = await exchange(server.port, "/openai/v1/chat/completions", { "x-api-key": user.apiKey }, streamed())
    expect(head).toMatch(/^HTTP\/1\.1 200 /)
    expect(head.toLowerCase()).toContain("transfer-encoding: chunked")
    const { after, data } = dechunk(body)
    expect(after).toBe("")
    expectCompleteChat(data)
  })

  it("sixteen streams at once (each held for its end, one socket write) are each complete", async () => {
    const answers = await Promise.all(
      Array.from({ length: 16 }, () => exchange(server.port, "/openai/v1/chat/completions", { "x-api-key": user.apiKey }, streamed()))
    )
    for (const { body } of answers) {
      const { after, data } = dechunk(body)
      expect(after).toBe("")
      expectCompleteChat(data)
    }
  })

  it("an Anthropic Messages stream on the fast lane ends with message_stop inside its body", async () => {
    const { body } = await exchange(
      server.port,
      "/anthropic/v1/messages",
      { "x-api-key": user.apiKey },
      JSON.stringify({ model: "gpt-4o-mini", max_tokens: 50, stream: true, messages: [{ role: "user", content: "Hi" }] })
    )
    const { after, data } = dechunk(body)
    expect(after).toBe("")
    const events = dataOf(data).map((d) => JSON.parse(d))
    expect(events.at(-1).type).toBe("message_stop")
    expect(events.filter((e) => e.type === "content_block_delta").map((e) => e.delta.text).join("")).toBe(TEXT)
  })

  it("a stream on the Effect route ends inside its chunked body too", async () => {
    const { body } = await exchange(routeServer.port, "/openai/v1/chat/completions", { authorization: `Bearer ${user.token}` }, streamed())
    const { after, data } = dechunk(body)
    expect(after).toBe("")
    expectCompleteChat(data)
  })

  it("runs code in the sandbox, and a program past its memory limit gets its own memory error", { timeout: 90_000 }, async () => {
    // The server is that node, whose sandboxes run on it (process.execPath).
    expect(fs.realpathSync(`/proc/${server.child.pid}/exe`)).toBe(fs.realpathSync(node))
    const run = async (language: string, code: string) => {
      const answer = await call(server.url, "POST", "/v1/code/execute", { body: { language, code, timeoutMs: 30_000 }, token: user.token })
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      return answer.body.result
    }
    expect(await run("python", "print(6 * 7)")).toMatchObject({ exitCode: 0, stdout: "42", error: null })
    expect(await run("javascript", "6 * 7")).toMatchObject({ exitCode: 0, result: "42", error: null })
    // Room to work (the default limit is 256 MB), and a bomb refused by Python itself, not a crash.
    expect(await run("python", "b = bytearray(64 * 1024 * 1024); print(len(b))")).toMatchObject({ exitCode: 0, stdout: "67108864" })
    const bomb = await run("python", "b = bytearray(512 * 1024 * 1024); print(len(b))")
    expect(bomb).toMatchObject({ exitCode: 1, stdout: "" })
    expect(bomb.error).toMatch(/MemoryError/)
  })
})
