/** Code execution (Python, JavaScript sandboxes), document parsing and graph retrieval end to end. */
import JSZip from "jszip"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type MockUpstream, startOpenAiMock } from "../../../packages/core/test/support/mockUpstreams.ts"
import { pdfWith } from "../../../packages/core/test/support/pdf.ts"
import { signUp, type TestAvatar } from "./support/accounts.ts"
import { LOOP_BLOCKED_MS, underAttack } from "./support/attack.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const docxWith = async (text: string) => {
  const zip = new JSZip()
  zip.file("[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`)
  zip.file("_rels/.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`)
  zip.file("word/document.xml", `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>${text}</w:t></w:r></w:p></w:body></w:document>`)
  return zip.generateAsync({ type: "uint8array" })
}

describe("tools", () => {
  let openai: MockUpstream
  let server: RunningServer
  let user: TestAvatar
  const post = (path: string, body: unknown) => call(server.url, "POST", path, { apiKey: user.apiKey, body })
  const upload = async (name: string, bytes: Uint8Array | string, type = "") => {
    const form = new FormData()
    form.append("file", new File([bytes as BlobPart], name, { type }))
    const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    return { status: res.status, body: await res.json() }
  }

  beforeAll(async () => {
    openai = await startOpenAiMock({ apiKey: "sk-t" })
    server = await startServer({ OPENAI_API_KEY: "sk-t", OPENAI_BASE_URL: openai.url })
    user = await signUp(server, "tools")
  })
  afterAll(async () => {
    await server?.stop()
    await openai?.close()
  })

  it("runs Python (the default) in the sandbox", async () => {
    const res = await post("/v1/code/execute", { code: "import math\nprint(math.factorial(10))\nprint('done')" })
    expect(res.body.result).toMatchObject({ language: "python", stdout: "3628800\ndone", exitCode: 0, error: null, provider: "local" })
    const failing = await post("/v1/code/execute", { code: "1/0" })
    expect(failing.body.result).toMatchObject({ exitCode: 1, error: "ZeroDivisionError: division by zero" })
    expect(failing.body.result.stderr).toContain("File \"<exec>\", line 1")
    expect(failing.body.result.stderr).not.toContain("<aigw>")
    // sys.exit is the program's exit status, with what it printed (it used to end the sandbox process and lose both).
    const exited = await post("/v1/code/execute", { code: "print('before exit')\nimport sys\nsys.exit(0)" })
    expect(exited.body.result).toMatchObject({ stdout: "before exit", exitCode: 0, error: null })
    const three = await post("/v1/code/execute", { code: "print('x')\nraise SystemExit(3)" })
    expect(three.body.result).toMatchObject({ stdout: "x", exitCode: 3, error: "SystemExit: 3" })
    const told = await post("/v1/code/execute", { code: "import sys\nsys.exit('bad input')" })
    expect(told.body.result).toMatchObject({ exitCode: 1, stderr: "bad input", error: "SystemExit: bad input" })
    const sandboxed = await post("/v1/code/execute", { code: "import os\nprint(os.listdir('/'))\nopen('/etc/passwd').read()" })
    expect(sandboxed.body.result.exitCode).toBe(1)
    expect(sandboxed.body.result.error).toMatch(/FileNotFoundError|No such file/)
    const loop = await post("/v1/code/execute", { code: "while True: pass", timeoutMs: 500 })
    expect(loop.body.result).toMatchObject({ timedOut: true, exitCode: 124 })
  }, 90_000)

  it("runs JavaScript in QuickJS with limits", async () => {
    const res = await post("/v1/code/execute", { language: "javascript", code: "console.log('sum', [1,2,3].reduce((a,b)=>a+b)); ({ ok: true })" })
    expect(res.body.result).toMatchObject({ language: "javascript", stdout: "sum 6", result: "{\"ok\":true}", exitCode: 0 })
    const noHost = await post("/v1/code/execute", { language: "javascript", code: "typeof process + ' ' + typeof require + ' ' + typeof fetch" })
    expect(noHost.body.result.result).toBe("\"undefined undefined undefined\"")
    const loop = await post("/v1/code/execute", { language: "javascript", code: "for(;;){}", timeoutMs: 200 })
    expect(loop.body.result).toMatchObject({ timedOut: true, exitCode: 124, error: "time limit of 200 ms exceeded" })
    const thrown = await post("/v1/code/execute", { language: "javascript", code: "throw new TypeError('nope')" })
    expect(thrown.body.result).toMatchObject({ exitCode: 1, error: "TypeError: nope" })
  })

  it("refuses bash and bad requests clearly", async () => {
    expect((await post("/v1/code/execute", { code: "ls", language: "bash" })).status).toBe(422)
    expect((await post("/v1/code/execute", { code: "" })).status).toBe(400)
    expect((await post("/v1/code/execute", { code: "1", language: "cobol" })).status).toBe(400)
    expect((await post("/v1/code/execute", { code: "1", timeoutMs: 999_999 })).status).toBe(400)
    // A sandbox vendor (docs/providers.md, "Remote sandboxes") needs plan Bronze; bash under auto needs one.
    expect((await post("/v1/code/execute", { code: "1", provider: "e2b" })).status).toBe(403)
    expect((await post("/v1/code/execute", { code: "1", language: "ruby" })).status).toBe(422)
  })

  it("parses text, markdown, CSV, JSON, HTML, PDF and DOCX", async () => {
    expect((await upload("notes.txt", "hello world\nsecond line")).body.result).toMatchObject({ format: "text", text: "hello world\nsecond line", words: 4 })
    expect((await upload("readme.md", "# Title\n\nBody")).body.result).toMatchObject({ format: "markdown", text: "# Title\n\nBody" })
    const csv = await upload("data.csv", "name,age\n\"Smith, Jo\",42\r\nAda,36\n")
    expect(csv.body.result).toMatchObject({ format: "csv", columns: ["name", "age"], rows: [["name", "age"], ["Smith, Jo", "42"], ["Ada", "36"]] })
    expect((await upload("data.json", "{\"a\":[1,2]}")).body.result).toMatchObject({ format: "json", data: { a: [1, 2] } })
    const html = await upload("page.html", "<html><head><style>p{}</style><script>alert(1)</script></head><body><h1>Hi &amp; bye</h1><p>Para</p></body></html>")
    expect(html.body.result.text).toBe("Hi & bye\nPara")
    const pdf = await upload("doc.pdf", pdfWith("Hello from a PDF"), "application/pdf")
    expect(pdf.status).toBe(200)
    expect(pdf.body.result).toMatchObject({ format: "pdf", pages: 1 })
    expect(pdf.body.result.text).toContain("Hello from a PDF")
    const docx = await upload("letter.docx", await docxWith("Dear reader"))
    expect(docx.body.result).toMatchObject({ format: "docx", text: "Dear reader" })
  })

  it("refuses unsupported, broken and missing files", async () => {
    expect((await upload("image.png", new Uint8Array([137, 80, 78, 71]), "image/png")).status).toBe(422)
    expect((await upload("broken.pdf", "not a pdf")).status).toBe(400)
    expect((await upload("bad.json", "{nope")).status).toBe(400)
    // An unclosed quote used to take in every later row as one field.
    const unclosed = await upload("data.csv", "name,note\nAda,\"first\nBob,second\n")
    expect(unclosed).toMatchObject({ status: 400, body: { isError: true, message: "file is not valid CSV: the quoted field opened on line 2 is never closed" } })
    expect((await upload("latin1.txt", new Uint8Array([0xff, 0xfe, 0x41]))).status).toBe(400)
    expect((await upload("empty.txt", "")).status).toBe(400)
    expect((await post("/v1/documents/parse", { file: "x" })).status).toBe(400)
  })

  it("answers over memories of thousands of entities each without holding the event loop", async () => {
    // 12 memories of 3,000 shared entities: the graph's edges compared every pair of entities (34.9 s for 10,000).
    const content = Array.from({ length: 3_000 }, (_, i) => `Q${i}`).join(" x ")
    for (let i = 0; i < 12; i++) await post("/v1/memory/store", { content: `${content} ${i}`, userId: "crowd", provider: "local" })
    openai.setScenario({ kind: "text", text: "Q1 [1]." })
    const { figures, value } = await underAttack(server, () => post("/v1/graphrag/query", { query: "What about Q1 and Q2?", userId: "crowd" }))
    expect(value.status).toBe(200)
    expect(value.body.result.sources.length).toBeGreaterThan(1)
    // Entities are read from each memory's first 4,000 characters (GraphRag.READ_CHARS).
    expect(value.body.result.sources[0].entities.length).toBeLessThan(1_000)
    expect(value.body.result.graph.edges.length).toBeGreaterThan(0)
    expect(figures.maxHealthMs).toBeLessThan(LOOP_BLOCKED_MS)
  })

  it("answers a multi-hop question over memories with cited sources", async () => {
    for (const content of ["Marie Curie was born in Warsaw.", "Warsaw is the capital of Poland.", "Bananas are rich in potassium."]) {
      await post("/v1/memory/store", { content, userId: "quiz", provider: "local" })
    }
    openai.setScenario({ kind: "text", text: "Marie Curie was born in Warsaw [1], the capital of Poland [2]." })
    const res = await post("/v1/graphrag/query", { query: "In which country's capital was Marie Curie born?", userId: "quiz" })
    expect(res.body.result.answer).toMatch(/Poland/)
    const sources = res.body.result.sources.map((s: any) => s.content)
    expect(sources).toContain("Marie Curie was born in Warsaw.")
    expect(sources).toContain("Warsaw is the capital of Poland.")
    expect(sources).not.toContain("Bananas are rich in potassium.")
    expect(res.body.result.graph.edges.some((e: any) => e.via === "Warsaw")).toBe(true)
    const prompt = (openai.requests.at(-1)!.body as any).messages.at(-1).content
    expect(prompt).toContain("[1]")
    const empty = await post("/v1/graphrag/query", { query: "anything", userId: "nobody" })
    expect(empty.body.result).toMatchObject({ answer: null, sources: [] })
  })
})
