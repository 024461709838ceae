/**
 * Self-test script for mockUpstreams.ts (not a vitest test). Run:
 *   cd /work/main && npx tsx packages/core/test/support/mockUpstreams.selftest.ts
 * Starts each mock, sends plain and streaming requests with fetch, prints what comes back,
 * checks a few invariants, and exits non-zero when one fails.
 */
import { startAnthropicMock, startGeminiMock, startOpenAiMock, type MockUpstream } from "./mockUpstreams.js"

let failures = 0
const check = (cond: boolean, what: string) => {
  if (!cond) failures++
  console.log(`  ${cond ? "ok  " : "FAIL"} ${what}`)
}

const post = (url: string, headers: Record<string, string>, body: unknown, signal?: AbortSignal) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body), signal: signal ?? null })

const show = async (label: string, res: Response) => {
  const text = await res.text()
  console.log(`--- ${label}: HTTP ${res.status} ${res.headers.get("content-type")}\n${text}`)
  return text
}

/** reads a body until the server drops it; returns what arrived and whether it errored */
const readUntilDrop = async (res: Response) => {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let got = ""
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return { got, errored: false }
      got += decoder.decode(value, { stream: true })
    }
  } catch {
    return { got, errored: true }
  }
}

/** starts a request the mock will hang on, aborts it, and checks closedSockets went up */
const hangAndAbort = async (mock: MockUpstream, send: (signal: AbortSignal) => Promise<Response>) => {
  mock.queue({ kind: "hang" })
  const before = mock.closedSockets
  const ctl = new AbortController()
  const pending = send(ctl.signal).catch((e: unknown) => e)
  await new Promise((r) => setTimeout(r, 50))
  ctl.abort()
  await pending
  await new Promise((r) => setTimeout(r, 50))
  check(mock.closedSockets === before + 1, `hang + client abort counted in closedSockets (${mock.closedSockets})`)
}

const openAi = async () => {
  console.log("\n===== OpenAI =====")
  const mock = await startOpenAiMock({ apiKey: "sk-test-123456" })
  const h = { authorization: "Bearer sk-test-123456" }
  const chat = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }
  try {
    const plain = JSON.parse(await show("plain", await post(`${mock.url}/chat/completions`, h, chat)))
    check(plain.object === "chat.completion" && plain.model === "gpt-4o-mini", "chat.completion echoes model")
    check(plain.choices[0].message.content === "Hello from mock" && plain.usage.total_tokens === 16, "text + usage")

    const streamed = await show(
      "stream (include_usage)",
      await post(`${mock.url}/chat/completions`, h, { ...chat, stream: true, stream_options: { include_usage: true } })
    )
    const events = streamed.split("\n\n").filter(Boolean)
    check(events.at(-1) === "data: [DONE]", "ends with data: [DONE]")
    const usageChunk = JSON.parse(events.at(-2)!.slice(6))
    check(usageChunk.choices.length === 0 && usageChunk.usage.completion_tokens === 5, "usage chunk has choices: []")

    mock.queue({ kind: "tool", name: "get_weather", arguments: { city: "Paris" }, id: "call_abc" })
    const toolStream = await show("tool stream", await post(`${mock.url}/chat/completions`, h, { ...chat, stream: true }))
    const args = toolStream
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)).choices[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? "")
      .join("")
    check(JSON.parse(args).city === "Paris", "streamed tool arguments reassemble")

    mock.queue({ kind: "error", status: 429 })
    await show("error 429", await post(`${mock.url}/chat/completions`, h, chat))
    await show("bad key", await post(`${mock.url}/chat/completions`, { authorization: "Bearer sk-wrong-999999" }, chat))
    await show("models", await fetch(`${mock.url}/models`, { headers: h }))
    const emb = JSON.parse(
      await show("embeddings", await post(`${mock.url}/embeddings`, h, { model: "text-embedding-3-small", input: ["a", "b"] }))
    )
    check(emb.data.length === 2 && emb.data[0].embedding.length === 8, "2 embeddings of dimension 8")

    mock.queue({ kind: "stream-then-drop", text: "one two three four five six" })
    const dropped = await readUntilDrop(await post(`${mock.url}/chat/completions`, h, { ...chat, stream: true }))
    console.log(`--- stream-then-drop got:\n${dropped.got}`)
    check(dropped.errored && !dropped.got.includes("[DONE]"), "stream-then-drop errors the client before [DONE]")

    await hangAndAbort(mock, (signal) => post(`${mock.url}/chat/completions`, h, chat, signal))
    check(mock.requests.length === 9 && mock.requests[0]!.path === "/v1/chat/completions", "requests recorded")
  } finally {
    await mock.close()
  }
}

const anthropic = async () => {
  console.log("\n===== Anthropic =====")
  const mock = await startAnthropicMock({ apiKey: "sk-ant-test" })
  const h = { "x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01" }
  const msg = { model: "claude-sonnet-4-5", max_tokens: 256, system: "be brief", messages: [{ role: "user", content: "hi" }] }
  try {
    const plain = JSON.parse(await show("plain", await post(`${mock.url}/messages`, h, msg)))
    check(plain.type === "message" && plain.content[0].text === "Hello from mock" && plain.stop_reason === "end_turn", "message")

    const streamed = await show("stream", await post(`${mock.url}/messages`, h, { ...msg, stream: true }))
    const names = [...streamed.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])
    check(
      names.join(",") ===
        "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop",
      "event order"
    )

    mock.queue({ kind: "tool", name: "get_weather", arguments: { city: "Paris" } })
    const tool = JSON.parse(await show("tool", await post(`${mock.url}/messages`, h, msg)))
    check(tool.stop_reason === "tool_use" && tool.content[0].input.city === "Paris", "tool_use block")

    mock.queue({ kind: "tool", name: "get_weather", arguments: { city: "Paris" } })
    const toolStream = await show("tool stream", await post(`${mock.url}/messages`, h, { ...msg, stream: true }))
    const partial = [...toolStream.matchAll(/"partial_json":("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]!) as string).join("")
    check(JSON.parse(partial).city === "Paris", "input_json_delta reassembles")

    mock.queue({ kind: "error", status: 529 })
    await show("error 529", await post(`${mock.url}/messages`, h, msg))
    mock.queue({ kind: "error", status: 529, midStream: true })
    const mid = await show("mid-stream error", await post(`${mock.url}/messages`, h, { ...msg, stream: true }))
    check(mid.includes("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\""), "event: error")
    const noVersion = await post(`${mock.url}/messages`, { "x-api-key": "sk-ant-test" }, msg)
    check(noVersion.status === 400, "missing anthropic-version -> 400")
    await show("missing anthropic-version", noVersion)
    const { max_tokens: _, ...noMax } = msg
    await show("missing max_tokens", await post(`${mock.url}/messages`, h, noMax))
    await show("bad key", await post(`${mock.url}/messages`, { ...h, "x-api-key": "nope" }, msg))

    mock.queue({ kind: "stream-then-drop", text: "one two three four five six" })
    const dropped = await readUntilDrop(await post(`${mock.url}/messages`, h, { ...msg, stream: true }))
    check(dropped.errored && !dropped.got.includes("message_stop"), "stream-then-drop errors the client before message_stop")

    await hangAndAbort(mock, (signal) => post(`${mock.url}/messages`, h, msg, signal))
  } finally {
    await mock.close()
  }
}

const gemini = async () => {
  console.log("\n===== Gemini =====")
  const mock = await startGeminiMock({ apiKey: "AIza-test" })
  const h = { "x-goog-api-key": "AIza-test" }
  const req = {
    systemInstruction: { parts: [{ text: "be brief" }] },
    contents: [{ role: "user", parts: [{ text: "hi" }] }],
    generationConfig: { temperature: 0.2, maxOutputTokens: 100 }
  }
  const base = `${mock.url}/models/gemini-2.0-flash`
  try {
    const plain = JSON.parse(await show("plain", await post(`${base}:generateContent`, h, req)))
    check(plain.candidates[0].content.parts[0].text === "Hello from mock" && plain.usageMetadata.totalTokenCount === 16, "text + usage")

    const streamed = await show("stream alt=sse", await post(`${base}:streamGenerateContent?alt=sse`, h, req))
    const events = streamed.split("\r\n\r\n").filter(Boolean)
    check(events.length === 3 && events.every((e) => e.startsWith("data: {")), "3 SSE events framed with \\r\\n\\r\\n")
    check(JSON.parse(events.at(-1)!.slice(6)).candidates[0].finishReason === "STOP", "last chunk has finishReason")

    const arr = JSON.parse(await (await post(`${base}:streamGenerateContent?key=AIza-test`, {}, req)).text())
    check(Array.isArray(arr) && arr.length === 3, "without alt=sse the stream is a JSON array (key via ?key=)")

    mock.queue({ kind: "tool", name: "get_weather", arguments: { city: "Paris" } })
    const tool = JSON.parse(await show("tool", await post(`${base}:generateContent`, h, req)))
    check(tool.candidates[0].content.parts[0].functionCall.args.city === "Paris", "functionCall part")

    mock.queue({ kind: "error", status: 503 })
    await show("error 503", await post(`${base}:generateContent`, h, req))
    await show("bad key", await post(`${base}:generateContent`, { "x-goog-api-key": "wrong" }, req))
    await show("no key", await post(`${base}:generateContent`, {}, req))
    const emb = JSON.parse(
      await show(
        "batchEmbedContents",
        await post(`${mock.url}/models/text-embedding-004:batchEmbedContents`, h, {
          requests: ["a", "b"].map((text) => ({ model: "models/text-embedding-004", content: { parts: [{ text }] } }))
        })
      )
    )
    check(emb.embeddings.length === 2 && emb.embeddings[0].values.length === 8, "2 embeddings of dimension 8")

    mock.queue({ kind: "stream-then-drop", text: "one two three four five six" })
    const dropped = await readUntilDrop(await post(`${base}:streamGenerateContent?alt=sse`, h, req))
    check(dropped.errored && !dropped.got.includes("finishReason"), "stream-then-drop errors the client before finishReason")

    await hangAndAbort(mock, (signal) => post(`${base}:generateContent`, h, req, signal))
  } finally {
    await mock.close()
  }
}

await openAi()
await anthropic()
await gemini()
console.log(failures === 0 ? "\nALL CHECKS PASSED" : `\n${failures} CHECK(S) FAILED`)
process.exit(failures === 0 ? 0 : 1)
