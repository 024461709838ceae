/**
 * The stdio MCP host (hosts/mcp/src/main.ts) spawned as a desktop MCP host would, with the
 * official @modelcontextprotocol/sdk client: the shared tool suite, AIGW_API_KEY handling
 * (none, invalid, revoked while running) and a protocol-only stdout with logs on stderr.
 *
 * Avatars are created beforehand through the real node host on the same SQLite file, which keeps
 * running (SQLite in WAL mode serves both processes) so a key can be revoked mid-session.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { callTool, expectConversationStoppedByRevocation, mcpToolSuite } from "../../../packages/core/test/Mcp/support/suite.ts"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { adminEnv, adminToken, revokeSignUpKey, signUp, type TestAvatar } from "../../node-http/test/support/accounts.ts"
import { call, type RunningServer, startServer } from "../../node-http/test/support/server.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")
const main = path.join(root, "hosts/mcp/src/main.ts")
const tsx = path.join(root, "node_modules/.bin/tsx")

describe("MCP over stdio (hosts/mcp)", () => {
  let server: RunningServer
  let upstream: MockUpstream
  let gold: TestAvatar
  let free: TestAvatar
  let revokable: TestAvatar
  const clients: Array<Client> = []
  const children: Array<ChildProcess> = []
  let goldClient: Client
  let anonymous: Client
  let freeClient: Client

  const env = (apiKey?: string): Record<string, string> => ({
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    DATABASE_URL: `sqlite:${path.join(server.dataDir, "data", "aigw.sqlite")}`,
    AIGW_DATA_DIR: path.join(server.dataDir, "data"),
    OPENAI_API_KEY: "sk-openai-stdio",
    OPENAI_BASE_URL: upstream.url,
    AIGW_PLAN_LIMITS: '{"Free":2}',
    ...(apiKey === undefined ? {} : { AIGW_API_KEY: apiKey })
  })

  const connect = async (apiKey?: string) => {
    const transport = new StdioClientTransport({ command: tsx, args: [main], cwd: server.dataDir, env: env(apiKey), stderr: "pipe" })
    let stderr = ""
    transport.stderr?.on("data", (d) => (stderr += d))
    const client = new Client({ name: "aigw-test", version: "1.0.0" })
    await client.connect(transport).catch((e) => {
      throw new Error(`stdio server did not start: ${e}\n${stderr}`)
    })
    clients.push(client)
    return { client, stderr: () => stderr }
  }

  beforeAll(async () => {
    upstream = await startOpenAiMock({ apiKey: "sk-openai-stdio", chunkDelayMs: 1 })
    server = await startServer({ ...adminEnv, AIGW_PLAN_LIMITS: '{"Free":2}' })
    ;[gold, free, revokable] = await Promise.all([signUp(server, "stdgold"), signUp(server, "stdfree"), signUp(server, "stdrev")])
    const admin = await adminToken(server)
    const plan = await call(server.url, "PUT", `/v1/admin/avatars/${gold.id}/plan`, { token: admin, body: { plan: "Gold" } })
    expect(plan.body.isError).toBe(false)
    ;[goldClient, anonymous, freeClient] = (await Promise.all([connect(gold.apiKey), connect(), connect(free.apiKey)])).map((c) => c.client)
  })
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
    for (const child of children) child.kill("SIGKILL")
    await server?.stop()
    await upstream?.close()
  })

  it("negotiates protocol 2025-06-18 and names the server", () => {
    expect(goldClient.getServerVersion()).toMatchObject({ name: "aigw", version: "1.0.0" })
    expect(goldClient.getServerCapabilities()).toMatchObject({ tools: { listChanged: false } })
  })

  mcpToolSuite({
    client: () => goldClient,
    username: () => gold.username,
    anonymous: () => anonymous,
    freeClient: () => freeClient,
    upstream: () => upstream
  })

  it("writes only JSON-RPC to stdout and its logs to stderr", async () => {
    const child = spawn(tsx, [main], { cwd: server.dataDir, env: env(gold.apiKey), stdio: ["pipe", "pipe", "pipe"] })
    children.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    const lines = () => stdout.split("\n").filter((l) => l.trim() !== "")
    const send = (m: unknown) => child.stdin!.write(`${JSON.stringify(m)}\n`)
    const answer = async (id: number) => {
      const deadline = Date.now() + 30_000
      for (;;) {
        const found = lines().map((l) => JSON.parse(l)).find((m) => m.id === id)
        if (found) return found
        if (Date.now() > deadline) throw new Error(`no answer to ${id}:\n${stdout}\n${stderr}`)
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } })
    expect(await answer(1)).toMatchObject({ result: { protocolVersion: "2025-06-18", serverInfo: { name: "aigw" } } })
    send({ jsonrpc: "2.0", method: "notifications/initialized" })
    // An upstream failure is logged (a warning) by the completion service.
    upstream.queue({ kind: "error", status: 503, message: "overloaded for the log test" })
    send({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "gateway_complete", arguments: { messages: [{ role: "user", content: "hi" }], provider: "openai", model: "gpt-4o-mini", routing: { fallback: false } } }
    })
    expect(await answer(2)).toMatchObject({ result: { isError: true } })
    send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "gateway_health", arguments: {} } })
    expect(await answer(3)).toMatchObject({ result: { isError: false } })
    // "__proto__" as a field name (plain, and spelled with escapes) is refused by id, as /mcp refuses it; the server goes on.
    child.stdin!.write(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"gateway_complete","arguments":{"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t","parameters":{"__proto__":{"type":"object"}}}]}}}\n`)
    expect(await answer(4)).toEqual({
      jsonrpc: "2.0",
      id: 4,
      error: { code: -32600, message: "Invalid Request: the field name __proto__ is not accepted (at params.arguments.tools.0.parameters)." }
    })
    child.stdin!.write(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gateway_health","arguments":{"\\u005f_proto__":{}}}}\n`)
    expect(await answer(5)).toMatchObject({ id: 5, error: { code: -32600 } })
    // The name as a value is fine.
    send({ jsonrpc: "2.0", id: 6, method: "tools/call", params: { name: "gateway_health", arguments: {}, _meta: { note: "__proto__" } } })
    expect(await answer(6)).toMatchObject({ result: { isError: false } })
    // The other checks of every HTTP body hold per line too: nesting (here 100,000 levels, with an escape
    // that makes the prototype check look inside) and NUL characters; the server goes on.
    const deep = 100_000
    child.stdin!.write(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gateway_health","arguments":{"a":"\\u0041","b":${"[".repeat(deep)}${"]".repeat(deep)}}}}\n`)
    expect(await answer(7)).toEqual({ jsonrpc: "2.0", id: 7, error: { code: -32600, message: "Invalid Request: JSON nested deeper than 64 levels." } })
    child.stdin!.write(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"gateway_health","arguments":{"note":"a\\u0000b"}}}\n`)
    expect(await answer(8)).toEqual({ jsonrpc: "2.0", id: 8, error: { code: -32600, message: "Invalid Request: NUL characters (\\u0000) are not accepted." } })
    send({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "gateway_health", arguments: {} } })
    expect(await answer(9)).toMatchObject({ result: { isError: false } })
    for (const line of lines()) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" })
    expect(stderr).toContain(`acting as avatar ${gold.username}`)
    expect(stderr).toContain("overloaded for the log test")
    child.kill("SIGTERM")
  })

  it("answers every line as /mcp answers a body: parse errors, ids, methods, params, batches, limits; ends when stdin ends", async () => {
    const child = spawn(tsx, [main], { cwd: server.dataDir, env: { ...env(gold.apiKey), AIGW_MAX_BODY_BYTES: "100000" }, stdio: ["pipe", "pipe", "pipe"] })
    children.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve))
    const answers = () => stdout.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l))
    /** Writes `line` and waits for the answer `match` picks (the n-th answer when a number). */
    const exchange = async (line: string | Uint8Array, count: number) => {
      child.stdin!.write(line)
      child.stdin!.write("\n")
      const deadline = Date.now() + 30_000
      while (answers().length < count) {
        if (Date.now() > deadline) throw new Error(`no answer ${count}:\n${stdout}\n${stderr}`)
        await new Promise((r) => setTimeout(r, 20))
      }
      return answers()[count - 1]
    }
    let n = 0
    const ping = (id: unknown) => JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })
    expect(await exchange("not json", ++n)).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } })
    // The session goes on, and ids keep their type.
    expect(await exchange(ping("abc"), ++n)).toEqual({ jsonrpc: "2.0", id: "abc", result: {} })
    expect(await exchange(ping("7"), ++n)).toEqual({ jsonrpc: "2.0", id: "7", result: {} })
    // MCP's ids are strings or integers: a fractional one is an invalid request, as on /mcp.
    expect(await exchange(ping(1.5), ++n)).toMatchObject({ id: null, error: { code: -32600, message: expect.stringMatching(/id must be a string or an integer/) } })
    expect(await exchange(ping(null), ++n)).toMatchObject({ id: null, error: { code: -32600 } })
    expect(await exchange(JSON.stringify({ id: 6, method: "ping" }), ++n)).toMatchObject({ id: 6, error: { code: -32600 } })
    expect(await exchange(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "nope/x" }), ++n)).toEqual({ jsonrpc: "2.0", id: 3, error: { code: -32601, message: "Method not found: nope/x" } })
    const badParams = await exchange(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tools/call", params: "str" }), ++n)
    expect(badParams).toMatchObject({ id: 4, error: { code: -32602 } })
    expect(Object.keys(badParams.error).sort()).toEqual(["code", "message"])
    // `arguments` may be left out, as on /mcp.
    expect(await exchange(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "gateway_health" } }), ++n)).toMatchObject({ id: 5, result: { isError: false } })
    // A batch is answered as one array; over AIGW_MCP_MAX_BATCH or empty, refused whole.
    expect(await exchange(JSON.stringify([JSON.parse(ping(10)), JSON.parse(ping(11))]), ++n)).toEqual([
      { jsonrpc: "2.0", id: 10, result: {} },
      { jsonrpc: "2.0", id: 11, result: {} }
    ])
    expect(await exchange(JSON.stringify(Array.from({ length: 40 }, (_, i) => JSON.parse(ping(100 + i)))), ++n)).toMatchObject({ id: null, error: { code: -32600 } })
    expect(await exchange("[]", ++n)).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: empty batch." } })
    // A line over AIGW_MAX_BODY_BYTES is refused without being kept; bytes that are not UTF-8 are an invalid request (as on /mcp).
    expect(await exchange(ping("x".repeat(200_000)), ++n)).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Invalid Request: Request body exceeds the limit of 100000 bytes (AIGW_MAX_BODY_BYTES)." }
    })
    expect(await exchange(Buffer.from([0x7b, 0xff, 0x7d]), ++n)).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Invalid Request: The request body is not valid UTF-8." }
    })
    expect(await exchange(ping(12), ++n)).toEqual({ jsonrpc: "2.0", id: 12, result: {} })
    // A notification is not answered; stdin's end ends the process once the last answer is out.
    child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`)
    child.stdin!.end(ping(13))
    expect(await exited).toBe(0)
    expect(answers().at(-1)).toEqual({ jsonrpc: "2.0", id: 13, result: {} })
    expect(answers()).toHaveLength(n + 1)
    expect(stderr).not.toMatch(/SyntaxError|BigInt/)
  })

  it("refuses to start with an invalid AIGW_API_KEY, saying why on stderr", async () => {
    const child = spawn(tsx, [main], { cwd: server.dataDir, env: env("aigw_not_a_real_key"), stdio: ["pipe", "pipe", "pipe"] })
    children.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (d) => (stdout += d))
    child.stderr!.on("data", (d) => (stderr += d))
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
    expect(code).not.toBe(0)
    expect(stderr).toContain("AIGW_API_KEY is refused (Invalid or expired credentials.)")
    expect(stdout).toBe("")
  })

  it("resolves the key on every call: a key revoked while running stops working at once", async () => {
    const { client } = await connect(revokable.apiKey)
    expect((await callTool(client, "gateway_get_avatar_context", {})).structuredContent).toMatchObject({ id: revokable.id })
    const keys = await call(server.url, "GET", "/v1/keys", { token: revokable.token })
    const key = keys.body.result.find((k: any) => revokable.apiKey.startsWith(k.prefix ?? "")) ?? keys.body.result[0]
    const revoked = await call(server.url, "DELETE", `/v1/keys/${key.id}`, { token: revokable.token })
    expect(revoked.body.isError).toBe(false)
    const after = await callTool(client, "gateway_get_avatar_context", {})
    expect(after).toMatchObject({ isError: true, structuredContent: { error: { kind: "Unauthorized", message: "Invalid or expired credentials." } } })
    expect((await callTool(client, "gateway_health", {})).isError).toBe(false)
  })

  it("stops a tool that makes many model calls once its key is revoked: the conversation ends before its next call", async () => {
    const talker = await signUp(server, "stdconv")
    const { client } = await connect(talker.apiKey)
    await expectConversationStoppedByRevocation(client, upstream, () => revokeSignUpKey(server.url, talker))
  })
})
