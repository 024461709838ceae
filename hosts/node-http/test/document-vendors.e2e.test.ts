/**
 * POST /v1/documents/parse through a document parsing vendor end to end: LlamaParse (asynchronous:
 * upload, job polls, Markdown result) configured against a mock of its API; a failed job; the
 * refusals (plan, unknown or unconfigured vendor); `auto` and `local` staying in-process.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type DocumentVendorMock, startDocumentVendorMock } from "../../../packages/core/test/support/mockDocumentVendors.ts"
import { adminEnv, adminToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const TEXT = "Minutes\n\nThe board met.\fAppendix\n\nNo objections."
/** What the mock's LlamaParse makes of TEXT: pages joined by its page separator. */
const MARKDOWN = "Minutes\n\nThe board met.\n---\nAppendix\n\nNo objections."

describe("document parsing vendors", () => {
  let llamaparse: DocumentVendorMock
  let server: RunningServer
  let free: TestAvatar
  let silver: TestAvatar

  const parse = async (user: TestAvatar, provider?: string, text = TEXT) => {
    const form = new FormData()
    form.append("file", new File([text], "minutes.txt", { type: "text/plain" }))
    if (provider !== undefined) form.append("provider", provider)
    const res = await fetch(`${server.url}/v1/documents/parse`, { method: "POST", headers: { "x-api-key": user.apiKey }, body: form })
    return { status: res.status, body: await res.json() as any }
  }

  beforeAll(async () => {
    llamaparse = await startDocumentVendorMock("llamaparse", "llx-e2e")
    server = await startServer({ ...adminEnv, LLAMAPARSE_API_KEY: "llx-e2e", LLAMAPARSE_BASE_URL: llamaparse.url, AIGW_JOB_POLL_MS: "20" })
    free = await signUp(server, "docfree")
    silver = await signUp(server, "docsilver")
    await call(server.url, "PUT", `/v1/admin/avatars/${silver.id}/plan`, { token: await adminToken(server), body: { plan: "Silver" } })
  })
  afterAll(async () => {
    await server?.stop()
    await llamaparse?.close()
  })

  it("parses through LlamaParse when named: upload, polls, Markdown result in the gateway's shape", async () => {
    llamaparse.setJob({ pendingPolls: 2 })
    const res = await parse(silver, "llamaparse")
    expect(res.status).toBe(200)
    expect(res.body.result).toEqual({
      filename: "minutes.txt",
      mimeType: "text/plain",
      format: "text",
      text: MARKDOWN,
      characters: MARKDOWN.length,
      words: 8,
      pages: 2,
      provider: "llamaparse"
    })
    const paths = llamaparse.requests.map((r) => `${r.method} ${r.path.replace(/job\/[^/]+/, "job/ID")}`)
    expect(paths).toEqual([
      "POST /api/v1/parsing/upload",
      "GET /api/v1/parsing/job/ID",
      "GET /api/v1/parsing/job/ID",
      "GET /api/v1/parsing/job/ID",
      "GET /api/v1/parsing/job/ID/result/markdown"
    ])
    expect(llamaparse.requests.every((r) => r.headers.authorization === "Bearer llx-e2e")).toBe(true)
    expect(llamaparse.requests[0]!.files).toEqual([{ field: "file", name: "minutes.txt", type: "text/plain", text: TEXT }])
    const metrics = await fetch(`${server.url}/metrics`).then((r) => r.text())
    expect(metrics).toMatch(/provider="llamaparse"/)
    const listed = await call(server.url, "GET", "/v1/providers", { apiKey: silver.apiKey })
    for (const id of ["unstructured", "llamaparse", "reducto", "landingai"]) {
      expect(listed.body.result.providers.find((p: any) => p.id === id).endpointTypes, id).toContain("documents")
    }
  })

  it("answers a failed job as a 502 with the vendor's message", async () => {
    llamaparse.setJob({ failWith: "The file is password protected" })
    const res = await parse(silver, "llamaparse")
    expect(res.status).toBe(502)
    expect(res.body.message).toBe("llamaparse could not parse the document: The file is password protected")
    llamaparse.setJob({})
  })

  it("refuses a vendor above the plan, an unknown one and an unconfigured one, before calling anything", async () => {
    const before = llamaparse.requests.length
    const plan = await parse(free, "llamaparse")
    expect(plan.status).toBe(403)
    expect(plan.body.message).toMatch(/plan Bronze/)
    const unknown = await parse(silver, "nosuchparser")
    expect(unknown.status).toBe(404)
    const unconfigured = await parse(silver, "reducto")
    expect(unconfigured.status).toBe(422)
    expect(unconfigured.body.message).toMatch(/REDUCTO_API_KEY/)
    const chat = await parse(silver, "openai")
    expect(chat.status).toBe(422)
    expect(chat.body.message).toMatch(/cannot serve documents/)
    expect(llamaparse.requests.length).toBe(before)
  })

  it("keeps auto and local in-process", async () => {
    const before = llamaparse.requests.length
    for (const provider of [undefined, "auto", "local"]) {
      const res = await parse(free, provider)
      expect(res.status).toBe(200)
      expect(res.body.result).toMatchObject({ format: "text", text: TEXT, provider: "local" })
    }
    expect(llamaparse.requests.length).toBe(before)
  })
})
