/**
 * Video generation (Replicate, Luma), OpenAI Batch API batches and OpenAI fine-tuning end to
 * end: submit, worker polls the mock upstream, status endpoint, signed webhook.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { data } from "../../../packages/core/src/Catalog/Catalog.ts"
import { costOf } from "../../../packages/core/src/Cost.ts"
import { countMessages, countText } from "../../../packages/core/src/Tokens.ts"
import { verify } from "../../../packages/core/src/Webhooks/Signature.ts"
import { type JobMock, type OpenAiJobsMock, type ReplicateMock, startLumaMock, startOpenAiJobsMock, startReplicateMock } from "../../../packages/core/test/support/mockJobs.ts"
import { adminEnv, adminToken, mailedToken, signUp, type TestAvatar } from "./support/accounts.ts"
import { waitJobDone } from "./support/jobs.ts"
import { type Receiver, startReceiver } from "./support/receiver.ts"
import { call, type RunningServer, startServer } from "./support/server.ts"

const SECRET = "whsec_long"

describe("long-running jobs against vendor mocks", () => {
  let replicate: ReplicateMock
  let luma: JobMock
  let openai: OpenAiJobsMock
  let receiver: Receiver
  let server: RunningServer
  let user: TestAvatar
  let env: Record<string, string>

  beforeAll(async () => {
    ;[replicate, luma, openai] = await Promise.all([
      startReplicateMock({ apiKey: "r8_test", pollsUntilDone: 3 }),
      startLumaMock({ apiKey: "luma_test", pollsUntilDone: 2 }),
      startOpenAiJobsMock({ apiKey: "sk-jobs", pollsUntilDone: 3 })
    ])
    receiver = await startReceiver()
    env = {
      ...adminEnv,
      WEBHOOK_SECRET: SECRET,
      AIGW_ALLOW_PRIVATE_URLS: "true",
      AIGW_WORKER_INTERVAL_MS: "50",
      AIGW_JOB_POLL_MS: "50",
      AIGW_WEBHOOK_RETRY_BASE_MS: "100",
      REPLICATE_API_KEY: "r8_test",
      REPLICATE_BASE_URL: replicate.url,
      LUMA_API_KEY: "luma_test",
      LUMA_BASE_URL: luma.url,
      OPENAI_API_KEY: "sk-jobs",
      OPENAI_BASE_URL: openai.url,
      AIGW_MODELS: JSON.stringify([{ id: "house-batch", provider: "openai", inputPer1kUSD: 0.5, outputPer1kUSD: 2 }])
    }
    server = await startServer(env)
    user = await signUp(server, "long")
    await call(server.url, "PUT", `/v1/admin/avatars/${user.id}/plan`, { token: await adminToken(server), body: { plan: "Gold" } })
  })
  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
    await Promise.all([replicate, luma, openai].map((m) => m?.close()))
  })

  const waitDone = async (path: string, timeoutMs = 20_000, apiKey = user.apiKey) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const res = await call(server.url, "GET", path, { apiKey })
      if (["completed", "failed", "cancelled"].includes(res.body.result?.status)) return res.body.result
      if (Date.now() > deadline) throw new Error(`${path} did not finish: ${JSON.stringify(res.body)}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const hookFor = async (jobId: string) => {
    const deadline = Date.now() + 15_000
    for (;;) {
      const hook = receiver.received.find((r) => JSON.parse(r.body).jobId === jobId)
      if (hook) return hook
      if (Date.now() > deadline) throw new Error(`no webhook for ${jobId}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  for (const provider of ["replicate", "luma"] as const) {
    it(`generates a video on ${provider}: job id at once, polling, signed webhook`, async () => {
      const res = await call(server.url, "POST", "/v1/video/generate", {
        apiKey: user.apiKey,
        body: { prompt: "a fox in the snow", provider, duration: 5, aspectRatio: "16:9", callbackUrl: receiver.url }
      })
      expect(res.status).toBe(200)
      expect(res.body.result).toMatchObject({ jobType: "video", status: "queued", provider })
      const jobId = res.body.result.jobId
      const done = await waitDone(`/v1/video/${jobId}`)
      expect(done.status).toBe("completed")
      expect(done.result.videoUrl).toMatch(/^https?:\/\//)
      expect(done.upstreamId).toBeTruthy()
      const hook = await hookFor(jobId)
      expect(verify(SECRET, hook.body, hook.headers["x-gateway-signature"] as string)).toBe(true)
      expect(hook.headers["x-gateway-event"]).toBe("video")
      expect(JSON.parse(hook.body)).toMatchObject({ jobId, jobType: "video", status: "completed", error: null })
      const mock = provider === "replicate" ? replicate : luma
      const create = mock.requests.find((r) => r.method === "POST")!
      expect(JSON.stringify(create.body)).toContain("a fox in the snow")
    })
  }

  it("reports a failed upstream video job as failed with the vendor's reason", async () => {
    luma.configure({ fail: true, failMessage: "prompt rejected by moderation" })
    const res = await call(server.url, "POST", "/v1/video/generate", { apiKey: user.apiKey, body: { prompt: "x", provider: "luma", callbackUrl: receiver.url } })
    const done = await waitDone(`/v1/video/${res.body.result.jobId}`)
    expect(done.status).toBe("failed")
    expect(done.error).toMatch(/moderation/)
    const hook = await hookFor(res.body.result.jobId)
    expect(JSON.parse(hook.body)).toMatchObject({ status: "failed", error: expect.stringMatching(/moderation/) })
    luma.configure({ fail: false })
  })

  it("refuses bad video requests (400/404/422) and private imageUrls", async () => {
    const cases: Array<[unknown, number]> = [
      [{}, 400],
      [{ prompt: "" }, 400],
      [{ prompt: "x", duration: 0 }, 400],
      [{ prompt: "x", aspectRatio: "wide" }, 400],
      [{ prompt: "x", provider: "nope" }, 404],
      [{ prompt: "x", provider: "openai" }, 422],
      [{ prompt: "x", provider: "runway" }, 422]
    ]
    for (const [body, status] of cases) {
      const res = await call(server.url, "POST", "/v1/video/generate", { apiKey: user.apiKey, body })
      expect(res.status, JSON.stringify(body)).toBe(status)
    }
    const ssrf = await startServer({ REPLICATE_API_KEY: "r8_test", REPLICATE_BASE_URL: replicate.url })
    try {
      const u = await signUp(ssrf, "img")
      for (const imageUrl of ["http://169.254.169.254/latest/meta-data/iam", "file:///etc/passwd", "http://127.0.0.1/x.png"]) {
        const res = await call(ssrf.url, "POST", "/v1/video/generate", { apiKey: u.apiKey, body: { prompt: "x", imageUrl } })
        expect(res.status, imageUrl).toBe(422)
        expect(res.body.message).toMatch(/imageUrl refused/)
      }
    } finally {
      await ssrf.stop()
    }
  })

  it("runs a batch through OpenAI's Batch API (upload JSONL, create, poll, collect)", async () => {
    const res = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: user.apiKey,
      body: {
        provider: "openai",
        callbackUrl: receiver.url,
        requests: [
          { messages: [{ role: "user", content: "hello batch" }], model: "gpt-4o-mini" },
          { messages: [{ role: "user", content: "FAIL" }], model: "gpt-4o-mini" },
          { messages: [{ role: "user", content: "HOSTILE" }], model: "gpt-4o-mini" },
          { messages: [{ role: "user", content: "TOOL" }], model: "gpt-4o-mini", tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }] }
        ]
      }
    })
    expect(res.body.result).toMatchObject({ jobType: "batch", provider: "openai", total: 4 })
    const done = await waitDone(`/v1/batch/${res.body.result.batchId}/status`)
    expect(done.status).toBe("completed")
    expect(done.result).toMatchObject({ total: 4, completed: 2, failed: 2 })
    // A job id is a UUID, which names the same job in either case (as the avatar API's ids: a twins review).
    expect((await call(server.url, "GET", `/v1/batch/${res.body.result.batchId.toUpperCase()}/status`, { apiKey: user.apiKey })).body.result).toMatchObject({ status: "completed" })
    expect(done.result.items[0]).toMatchObject({ index: 0, ok: true, result: { content: "Echo: hello batch", finishReason: "stop" } })
    expect(done.result.items[1]).toMatchObject({ index: 1, ok: false })
    // An answer of the wrong shape is a failed item, read as a call's answer is (it completed as a billed success with the junk).
    expect(done.result.items[2]).toEqual({ index: 2, ok: false, error: "openai sent an unexpected answer: choices[0].message.content is neither text nor an array of parts" })
    // A tool call is carried, not dropped.
    expect(done.result.items[3]).toMatchObject({ index: 3, ok: true, result: { content: "", finishReason: "tool_calls", toolCalls: [{ id: "call_1", name: "lookup", arguments: "{\"q\":\"x\"}" }] } })
    const upload = openai.requests.find((r) => r.path.endsWith("/files"))!
    expect((upload.body as any).fields.purpose).toBe("batch")
    const create = openai.requests.find((r) => r.path.endsWith("/batches") && r.method === "POST")!
    expect(create.body).toMatchObject({ endpoint: "/v1/chat/completions", completion_window: "24h" })
    const hook = await hookFor(res.body.batchId ?? res.body.result.batchId)
    expect(JSON.parse(hook.body).result).toMatchObject({ total: 4, completed: 2, failed: 2 })
  })

  it("takes the batch and the fine-tuning job a creation made when its answer was lost, instead of making (and billing) a second one nobody tracks", async () => {
    const before = openai.requests.length
    openai.configure({ lostCreates: 2 })
    try {
      const batch = await call(server.url, "POST", "/v1/batch/submit", {
        apiKey: user.apiKey,
        body: { provider: "openai", requests: [{ messages: [{ role: "user", content: "once" }], model: "gpt-4o-mini" }] }
      })
      const trainingData = [{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }]
      const tune = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: user.apiKey, body: { baseModel: "gpt-4o-mini", trainingData } })
      const [batchDone, tuneDone] = await Promise.all([
        waitDone(`/v1/batch/${batch.body.result.batchId}/status`, 30_000),
        waitDone(`/v1/fine-tuning/jobs/${tune.body.result.jobId}`, 30_000)
      ])
      expect([batchDone.status, tuneDone.status]).toEqual(["completed", "completed"])
      const sent = openai.requests.slice(before)
      expect(sent.filter((r) => r.method === "POST" && /\/batches$/.test(r.path))).toHaveLength(1)
      expect(sent.filter((r) => r.method === "POST" && /\/fine_tuning\/jobs$/.test(r.path))).toHaveLength(1)
      // Each was looked for by the gateway's job id it carries, and the one the lost answer made was taken.
      expect(sent.filter((r) => r.method === "POST" && /\/(batches|fine_tuning\/jobs)$/.test(r.path)).map((r) => (r.body as any).metadata)).toEqual(
        expect.arrayContaining([{ aigw_job: batch.body.result.batchId }, { aigw_job: tune.body.result.jobId }])
      )
      expect(batchDone.upstreamId).toMatch(/^batch_/)
      expect(tuneDone.upstreamId).toMatch(/^ftjob-/)
    } finally {
      openai.configure({ lostCreates: 0 })
    }
  })

  it("keeps a Batch API batch's answers within the characters a batch keeps, as a gateway batch's (60 MB results were kept, polled and sent whole)", async () => {
    const u = await signUp(server, "batchbound")
    const res = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: u.apiKey,
      body: { provider: "openai", requests: ["LONGANSWER 1", "LONGANSWER 2", "LONGANSWER 3"].map((content) => ({ messages: [{ role: "user", content }], model: "gpt-4o-mini" })) }
    })
    const done = await waitDone(`/v1/batch/${res.body.result.batchId}/status`, 30_000, u.apiKey)
    expect(done.result).toMatchObject({ total: 3, completed: 2, failed: 1 })
    expect(done.result.items[2]).toEqual({ index: 2, ok: false, error: expect.stringMatching(/^the answer \(\d+ characters\) was not kept: a batch keeps at most 16777216 characters of answers; the call was made and counted$/) })
    // Every item was answered and is recorded, the one not kept too.
    expect(usageRows(u.id).map((r) => r.ok)).toEqual([1, 1, 1])
  })

  it("keeps a Batch API batch's readable answers when a line of its output cannot be read: that item fails naming the line, the job completes", async () => {
    const u = await signUp(server, "batchgarbled")
    const res = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: u.apiKey,
      body: { provider: "openai", requests: ["first", "GARBLED", "third"].map((content) => ({ messages: [{ role: "user", content }], model: "gpt-4o-mini" })) }
    })
    const done = await waitDone(`/v1/batch/${res.body.result.batchId}/status`, 30_000, u.apiKey)
    expect(done.status).toBe("completed")
    expect(done.result).toMatchObject({ total: 3, completed: 2, failed: 1, upstreamStatus: "completed" })
    expect(done.result.items[0]).toMatchObject({ index: 0, ok: true, result: { content: "Echo: first" } })
    expect(done.result.items[1]).toEqual({
      index: 1,
      ok: false,
      error: expect.stringMatching(/^no result for this item in the batch output \(the batch completed; 1 line\(s\) of its files could not be read: line 2 is not JSON of file file-\w+\)$/)
    })
    expect(done.result.items[2]).toMatchObject({ index: 2, ok: true, result: { content: "Echo: third" } })
    expect(usageRows(u.id).map((r) => r.ok).sort()).toEqual([0, 1, 1])
  })

  it("retries a failed batch creation without uploading its file again, and shows the job running meanwhile", async () => {
    openai.failNext(500, 1, "POST /batches")
    const before = openai.requests.length
    const res = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: user.apiKey,
      body: { provider: "openai", requests: [{ messages: [{ role: "user", content: "once" }], model: "gpt-4o-mini" }] }
    })
    const status = `/v1/batch/${res.body.result.batchId}/status`
    // The creation failed once and waits for its retry (2 s): a step ran, so the job is running, not queued.
    const deadline = Date.now() + 5_000
    while (!openai.requests.slice(before).some((r) => r.path.endsWith("/batches") && r.method === "POST") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    await new Promise((r) => setTimeout(r, 200))
    expect((await call(server.url, "GET", status, { apiKey: user.apiKey })).body.result.status).toBe("running")
    expect((await waitDone(status)).status).toBe("completed")
    const sent = openai.requests.slice(before)
    expect(sent.filter((r) => r.path.endsWith("/files")).length).toBe(1)
    expect(sent.filter((r) => r.path.endsWith("/batches") && r.method === "POST").length).toBe(2)
  })

  it("creates an OpenAI fine-tuning job, polls it to success and reports the model", async () => {
    const trainingData = Array.from({ length: 10 }, (_, i) => ({
      messages: [{ role: "system", content: "You are terse." }, { role: "user", content: `Q${i}` }, { role: "assistant", content: `A${i}` }]
    }))
    const before = openai.requests.length
    const res = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: user.apiKey, body: { baseModel: "gpt-4o-mini-2024-07-18", trainingData, callbackUrl: receiver.url } })
    expect(res.status).toBe(200)
    expect(res.body.result).toMatchObject({ jobType: "finetune", provider: "openai", examples: 10 })
    const done = await waitDone(`/v1/fine-tuning/jobs/${res.body.result.jobId}`)
    expect(done.status).toBe("completed")
    expect(done.result.fineTunedModel).toMatch(/^ft:/)
    const upload = openai.requests.slice(before).find((r) => r.path.endsWith("/files") && (r.body as any).fields.purpose === "fine-tune")!
    expect(upload).toBeTruthy()
    const create = openai.requests.slice(before).find((r) => r.path.endsWith("/fine_tuning/jobs") && r.method === "POST")!
    expect(create.body).toMatchObject({ model: "gpt-4o-mini-2024-07-18" })
    const hook = await hookFor(res.body.result.jobId)
    expect(hook.headers["x-gateway-event"]).toBe("finetune")
  })

  // An Admin deletes the avatar; or its password is reset (the owner taking back the credentials a thief used).
  const cuts = {
    deleted: {
      cut: async (gone: TestAvatar, admin: string) => expect((await call(server.url, "DELETE", `/api/avatar/${gone.id}`, { token: admin })).status).toBe(200),
      error: "the job's avatar was deleted: the job was stopped"
    },
    "password reset": {
      cut: async (gone: TestAvatar) => {
        await call(server.url, "POST", "/api/avatar/forgot-password", { body: { email: gone.email } })
        const token = mailedToken(server.dataDir, gone.email, "reset-password")
        const reset = await call(server.url, "POST", "/api/avatar/reset-password", { body: { token, password: "taken back 1", confirmPassword: "taken back 1" } })
        expect(reset.body.isError).toBe(false)
      },
      error: "the avatar's password was reset after the job was submitted, revoking the keys and sessions that could have submitted it: the job was stopped"
    },
    // The owner revokes the one key a thief holds with its jobs, keeping the account.
    "whose submitting key is revoked with its jobs": {
      cut: async (gone: TestAvatar) => {
        const res = await call(server.url, "DELETE", `/v1/keys/${gone.apiKeyId}?stopJobs=true`, { token: gone.token })
        expect([res.status, res.body.result]).toEqual([200, { id: expect.any(String), revoked: true, jobsStopped: true }])
      },
      error: "the API key that submitted the job was revoked with its jobs: the job was stopped"
    }
  }
  for (const [name, { cut, error }] of Object.entries(cuts)) it(`stops the jobs of an avatar ${name}: cancelled at the vendor where it has a way, ended cancelled, no webhook`, async () => {
    const gone = await signUp(server, "gone")
    const admin = await adminToken(server)
    await call(server.url, "PUT", `/v1/admin/avatars/${gone.id}/plan`, { token: admin, body: { plan: "Gold" } })
    // The vendor's jobs run until cancelled.
    openai.configure({ pollsUntilDone: 100_000 })
    replicate.configure({ pollsUntilDone: 100_000 })
    try {
      const before = openai.requests.length
      const beforeVideo = replicate.requests.length
      const batch = await call(server.url, "POST", "/v1/batch/submit", {
        apiKey: gone.apiKey,
        body: { provider: "openai", callbackUrl: receiver.url, requests: [{ messages: [{ role: "user", content: "spend" }], model: "gpt-4o-mini" }] }
      })
      const trainingData = [{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }]
      const tune = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: gone.apiKey, body: { baseModel: "gpt-4o-mini", trainingData, callbackUrl: receiver.url } })
      const video = await call(server.url, "POST", "/v1/video/generate", { apiKey: gone.apiKey, body: { prompt: "spend", provider: "replicate", callbackUrl: receiver.url } })
      const ids = [batch.body.result.batchId as string, tune.body.result.jobId as string, video.body.result.jobId as string]
      // All run at their vendors (created there, polled) when the avatar is deleted.
      const polled = (path: RegExp) => openai.requests.slice(before).some((r) => r.method === "GET" && path.test(r.path))
      const videoPolled = () => replicate.requests.slice(beforeVideo).some((r) => r.method === "GET" && /\/predictions\/\w+$/.test(r.path))
      for (const deadline = Date.now() + 10_000; !(polled(/\/batches\/batch_\w+$/) && polled(/\/fine_tuning\/jobs\/ftjob-\w+$/) && videoPolled()) && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 20))
      }
      await cut(gone, admin)
      const paths = [`/v1/batch/${ids[0]}/status`, `/v1/fine-tuning/jobs/${ids[1]}`, `/v1/video/${ids[2]}`]
      const ended = await Promise.all(paths.map(async (path) => {
        for (const deadline = Date.now() + 10_000; ;) {
          const res = (await call(server.url, "GET", path, { token: admin })).body.result
          if (res.status !== "queued" && res.status !== "running") return res
          if (Date.now() > deadline) throw new Error(`${path} still ${res.status}`)
          await new Promise((r) => setTimeout(r, 50))
        }
      }))
      for (const job of ended) expect([job.status, job.error]).toEqual(["cancelled", error])
      const sent = openai.requests.slice(before)
      expect(sent.filter((r) => r.method === "POST" && /\/batches\/batch_\w+\/cancel$/.test(r.path))).toHaveLength(1)
      expect(sent.filter((r) => r.method === "POST" && /\/fine_tuning\/jobs\/ftjob-\w+\/cancel$/.test(r.path))).toHaveLength(1)
      expect(replicate.requests.slice(beforeVideo).filter((r) => r.method === "POST" && /\/predictions\/\w+\/cancel$/.test(r.path))).toHaveLength(1)
      // Nothing more is asked of the vendors, and nothing is sent to the deleted avatar's callback.
      const asked = [openai.requests.length, replicate.requests.length]
      await new Promise((r) => setTimeout(r, 500))
      expect([openai.requests.length, replicate.requests.length]).toEqual(asked)
      expect(receiver.received.filter((r) => ids.includes(JSON.parse(r.body).jobId))).toEqual([])
    } finally {
      openai.configure({ pollsUntilDone: 3 })
      replicate.configure({ pollsUntilDone: 3 })
    }
  })

  it("revoking a key with stopJobs=true stops the jobs it submitted (on the fast lane and the Effect route); a key revoked alone (a rotation), another key's and a session's run to their end, with their webhooks", async () => {
    // The same gateway with the lane off: each request there takes the Effect route.
    const routeServer = await startServer({ ...env, AIGW_FAST_LANE: "false" }, { dataDir: server.dataDir })
    try {
      const owner = await signUp(server, "twokeys")
      const newKey = async (name: string) => (await call(server.url, "POST", "/v1/keys", { token: owner.token, body: { name } })).body.result as { id: string; key: string }
      const [rotated, other] = [await newKey("rotated"), await newKey("other")]
      const submit = (base: string, credentials: { apiKey: string } | { token: string }, text: string) =>
        call(base, "POST", "/v1/batch/submit", {
          ...credentials,
          body: { provider: "openai", callbackUrl: receiver.url, requests: [{ messages: [{ role: "user", content: text }], model: "gpt-4o-mini" }] }
        }).then((res) => res.body.result.batchId as string)
      // Long enough at the vendor for the revocations to come first; then each ends.
      openai.configure({ pollsUntilDone: 30 })
      let stopped: Array<string>
      let kept: Array<string>
      try {
        stopped = [await submit(server.url, { apiKey: owner.apiKey }, "lane"), await submit(routeServer.url, { apiKey: owner.apiKey }, "route")]
        kept = [await submit(server.url, { apiKey: rotated.key }, "rotated"), await submit(server.url, { apiKey: other.key }, "kept"), await submit(routeServer.url, { token: owner.token }, "session")]
        // A key cannot stop jobs (a leaked one would end its owner's work): 403, nothing revoked.
        const byKey = await call(server.url, "DELETE", `/v1/keys/${owner.apiKeyId}?stopJobs=true`, { apiKey: other.key })
        expect([byKey.status, byKey.body.message]).toEqual([403, expect.stringMatching(/^Stopping the jobs of an API key needs a signed-in session/)])
        expect((await call(server.url, "DELETE", `/v1/keys/${rotated.id}`, { token: owner.token })).status).toBe(200)
        expect((await call(server.url, "DELETE", `/v1/keys/${owner.apiKeyId}?stopJobs=true`, { token: owner.token })).status).toBe(200)
        for (const id of stopped) {
          const job = await waitDone(`/v1/batch/${id}/status`, 10_000, other.key)
          expect([job.status, job.error]).toEqual(["cancelled", "the API key that submitted the job was revoked with its jobs: the job was stopped"])
        }
      } finally {
        openai.configure({ pollsUntilDone: 3 })
      }
      for (const id of kept) expect((await waitDone(`/v1/batch/${id}/status`, 20_000, other.key)).status).toBe("completed")
      for (const id of kept) expect(JSON.parse((await hookFor(id)).body).status).toBe("completed")
      expect(receiver.received.filter((r) => stopped.includes(JSON.parse(r.body).jobId))).toEqual([])
    } finally {
      await routeServer.stop()
    }
  })

  it("validates training data and names the first bad example", async () => {
    const good = { messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }
    const cases: Array<[unknown, RegExp]> = [
      [[good, good, { messages: [{ role: "user", content: "only a question" }] }], /trainingData\[2\]/],
      [[good, { prompt: "old format", completion: "x" }], /trainingData\[1\]/],
      [[{ messages: [{ role: "user", content: "q" }, { role: "user", content: "q2" }] }], /trainingData\[0\].*assistant/],
      [[], /at least one example/],
      ["not an array", /trainingData/]
    ]
    for (const [trainingData, pattern] of cases) {
      const res = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: user.apiKey, body: { baseModel: "gpt-4o-mini", trainingData } })
      expect(res.status).toBe(400)
      expect(res.body.message).toMatch(pattern)
    }
    expect((await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: user.apiKey, body: { baseModel: "m", trainingData: [good], provider: "anthropic" } })).status).toBe(422)
    const stranger = await signUp(server, "peek")
    const res = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: user.apiKey, body: { baseModel: "gpt-4o-mini", trainingData: [good] } })
    expect((await call(server.url, "GET", `/v1/fine-tuning/jobs/${res.body.result.jobId}`, { apiKey: stranger.apiKey })).status).toBe(404)
    expect((await call(server.url, "GET", `/v1/fine-tuning/jobs/${res.body.result.jobId}`, { token: await adminToken(server) })).status).toBe(200)
    // Ended before the next test, which counts the vendor's requests: its polls would be among them.
    await waitDone(`/v1/fine-tuning/jobs/${res.body.result.jobId}`)
  })

  it("refuses a base model above the caller's plan as /v1/complete does (403), before the job is counted", async () => {
    const free = await signUp(server, "ftfree")
    const trainingData = [{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }]
    const before = openai.requests.length
    // A dated snapshot is held to its model's plan, named as asked; another case is the model itself.
    for (const [baseModel, named] of [["gpt-5.5", "gpt-5.5"], ["gpt-5.5-2026-01-15", "gpt-5.5-2026-01-15"], ["GPT-5.5", "gpt-5.5"]]) {
      const res = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: free.apiKey, body: { baseModel, trainingData } })
      expect([res.status, res.body.message], baseModel).toEqual([403, `Model ${named} needs plan Gold or higher (yours: Free).`])
    }
    const complete = await call(server.url, "POST", "/v1/complete", { apiKey: free.apiKey, body: { messages: [{ role: "user", content: "q" }], model: "gpt-5.5", provider: "openai" } })
    expect([complete.status, complete.body.message]).toEqual([403, "Model gpt-5.5 needs plan Gold or higher (yours: Free)."])
    expect((await call(server.url, "GET", "/v1/usage", { apiKey: free.apiKey })).body.result.dailyCallsUsed).toBe(0)
    expect(openai.requests.length).toBe(before)
    // A model of the plan is taken, named as the vendor names it (a dated snapshot).
    expect((await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: free.apiKey, body: { baseModel: "gpt-4o-mini-2024-07-18", trainingData } })).status).toBe(200)
  })

  it("fails a fine-tuning job whose avatar's plan was lowered below its base model before the vendor had it, as a batch's first step fails", async () => {
    const gold = await signUp(server, "ftgold")
    const admin = await adminToken(server)
    await call(server.url, "PUT", `/v1/admin/avatars/${gold.id}/plan`, { token: admin, body: { plan: "Gold" } })
    // The upload fails twice: the job waits for its retries (2 s, then 4 s more), and the plan is lowered
    // meanwhile (each step checks it first). One failure left the lowering 2 s, which a loaded machine once
    // took, and the job went on as Gold. The failure a quick lowering leaves unmet is dropped below. Only this
    // job's upload fails (its training data's marker): another test's job still uploading took both once.
    const marker = `lowered-${crypto.randomUUID()}`
    openai.failNext(500, 2, "/files", marker)
    const before = openai.requests.length
    const trainingData = [{ messages: [{ role: "user", content: marker }, { role: "assistant", content: "a" }] }]
    const res = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: gold.apiKey, body: { baseModel: "gpt-5.5", trainingData } })
    expect(res.status).toBe(200)
    for (const deadline = Date.now() + 5_000; !openai.requests.slice(before).some((r) => r.path.endsWith("/files")) && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20))
    await call(server.url, "PUT", `/v1/admin/avatars/${gold.id}/plan`, { token: admin, body: { plan: "Free" } })
    const done = await waitDone(`/v1/fine-tuning/jobs/${res.body.result.jobId}`, 20_000, gold.apiKey)
    openai.clearFailures()
    expect([done.status, done.error]).toEqual(["failed", "Model gpt-5.5 needs plan Gold or higher (yours: Free)."])
    expect(openai.requests.slice(before).filter((r) => r.method === "POST" && r.path.endsWith("/fine_tuning/jobs"))).toEqual([])
  })

  /** The avatar's usage records, answered ones first (a step records its items within a millisecond or so: no order among them). */
  const usageRows = (avatarId: string) => {
    const db = new Database(path.join(server.dataDir, "data", "aigw.sqlite"), { readonly: true })
    try {
      return db.prepare("SELECT capability, provider, model, prompt_tokens, completion_tokens, cost_usd, estimated, ok FROM usage_events WHERE avatar_id = ? ORDER BY ok DESC, prompt_tokens, completion_tokens").all(avatarId) as Array<any>
    } finally {
      db.close()
    }
  }

  it("counts a Batch API item without believable usage with the tokenizer, as a call, marked estimated (it was recorded as 0 tokens at $0)", async () => {
    const u = await signUp(server, "batchest")
    const texts = ["NOUSAGE tell me about the sea", "BADUSAGE and the mountains"]
    const res = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: u.apiKey,
      body: { provider: "openai", requests: texts.map((content) => ({ messages: [{ role: "user", content }], model: "gpt-4o-mini" })) }
    })
    expect(res.status).toBe(200)
    const done = await waitJobDone(server, `/v1/batch/${res.body.result.batchId}/status`, u.apiKey)
    expect(done.result).toMatchObject({ total: 2, completed: 2, failed: 0 })
    const model = data.models.find((m) => m.id === "gpt-4o-mini")!
    const expected = await Promise.all(texts.map(async (content) => {
      const prompt = await Effect.runPromise(countMessages([{ role: "user", content }]))
      const completion = await Effect.runPromise(countText(`Echo: ${content}`))
      return { prompt, completion, cost: costOf(model, prompt, completion) * 0.5 }
    }))
    expect(expected.every((e) => e.prompt > 0 && e.completion > 0)).toBe(true)
    for (const [i, e] of expected.entries()) {
      expect(done.result.items[i].result.usage).toEqual({ promptTokens: e.prompt, completionTokens: e.completion, totalTokens: e.prompt + e.completion, estimated: true })
      expect(done.result.items[i].result.costUSD).toBeCloseTo(e.cost, 12)
    }
    const byTokens = (a: { prompt: number; completion: number }, b: { prompt: number; completion: number }) => a.prompt - b.prompt || a.completion - b.completion
    const rows = usageRows(u.id)
    const inOrder = [...expected].sort(byTokens)
    expect(rows.map((r) => [r.capability, r.model, r.prompt_tokens, r.completion_tokens, r.estimated, r.ok])).toEqual(
      inOrder.map((e) => ["batch", "gpt-4o-mini", e.prompt, e.completion, 1, 1])
    )
    for (const [i, e] of inOrder.entries()) expect(rows[i].cost_usd).toBeCloseTo(e.cost, 12)
  })

  it("records a video or fine-tuning job, one counted call, when it ends: ok when it completed, failed otherwise (none was written)", async () => {
    const u = await signUp(server, "jobrec")
    await call(server.url, "PUT", `/v1/admin/avatars/${u.id}/plan`, { token: await adminToken(server), body: { plan: "Gold" } })
    const submit = async (path: string, body: Record<string, unknown>, status: string) => {
      const res = await call(server.url, "POST", path, { apiKey: u.apiKey, body })
      expect(res.status).toBe(200)
      expect((await waitJobDone(server, `${path === "/v1/video/generate" ? "/v1/video" : path}/${res.body.result.jobId}`, u.apiKey)).status).toBe(status)
    }
    await submit("/v1/video/generate", { prompt: "a fox", provider: "luma" }, "completed")
    luma.configure({ fail: true, failMessage: "prompt rejected" })
    try {
      await submit("/v1/video/generate", { prompt: "a fox", provider: "luma" }, "failed")
    } finally {
      luma.configure({ fail: false })
    }
    await submit("/v1/fine-tuning/jobs", { baseModel: "gpt-4o-mini", trainingData: [{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }] }, "completed")
    expect((await call(server.url, "GET", "/v1/usage", { apiKey: u.apiKey })).body.result.dailyCallsUsed).toBe(3)
    // Written by the worker right after it ended the job: looked for until it is there.
    const deadline = Date.now() + 5_000
    while (usageRows(u.id).length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    const rows = usageRows(u.id).map((r) => [r.capability, r.provider, r.prompt_tokens, r.cost_usd, r.ok])
    expect(rows).toHaveLength(3)
    expect(rows).toEqual(expect.arrayContaining([["video", "luma", 0, 0, 1], ["video", "luma", 0, 0, 0], ["finetune", "openai", 0, 0, 1]]))
    expect(usageRows(u.id).find((r) => r.capability === "finetune").model).toBe("gpt-4o-mini")
  })

  it("prices a Batch API item of an operator's model (AIGW_MODELS) at its configured prices, halved (it was recorded cost unknown)", async () => {
    const u = await signUp(server, "batchhouse")
    const res = await call(server.url, "POST", "/v1/batch/submit", {
      apiKey: u.apiKey,
      body: { provider: "openai", requests: [{ messages: [{ role: "user", content: "house prices" }], model: "house-batch" }] }
    })
    expect(res.status).toBe(200)
    const done = await waitJobDone(server, `/v1/batch/${res.body.result.batchId}/status`, u.apiKey)
    expect(done.result).toMatchObject({ total: 1, completed: 1, failed: 0 })
    const { promptTokens, completionTokens } = done.result.items[0].result.usage
    expect(promptTokens).toBeGreaterThan(0)
    const expected = (promptTokens / 1000 * 0.5 + completionTokens / 1000 * 2) * 0.5
    expect(done.result.items[0].result.costUSD).toBeCloseTo(expected, 12)
    const rows = usageRows(u.id)
    expect(rows.map((r) => [r.capability, r.model, r.ok])).toEqual([["batch", "house-batch", 1]])
    expect(rows[0].cost_usd).toBeCloseTo(expected, 12)
  })

  describe("every item of a Batch API batch the quota counted has a usage record, once (docs/quota.md)", () => {
    const row = (ok: boolean) => ok ? expect.objectContaining({ capability: "batch", provider: "openai", model: "gpt-4o-mini", ok: 1 }) : { capability: "batch", provider: "openai", model: "gpt-4o-mini", prompt_tokens: 0, completion_tokens: 0, cost_usd: 0, estimated: 0, ok: 0 }
    const submit = async (contents: ReadonlyArray<string>) => {
      const u = await signUp(server, "batchrec")
      const res = await call(server.url, "POST", "/v1/batch/submit", {
        apiKey: u.apiKey,
        body: { provider: "openai", requests: contents.map((content) => ({ messages: [{ role: "user", content }], model: "gpt-4o-mini" })) }
      })
      expect(res.status).toBe(200)
      const done = await waitJobDone(server, `/v1/batch/${res.body.result.batchId}/status`, u.apiKey)
      const usage = await call(server.url, "GET", "/v1/usage", { apiKey: u.apiKey })
      expect(usage.body.result.dailyCallsUsed).toBe(contents.length)
      return { done, rows: usageRows(u.id) }
    }

    it("a batch whose file upload is refused (404): each of its 3 items, failed", async () => {
      openai.failNext(404, 1, "/files")
      const { done, rows } = await submit(["a", "b", "c"])
      expect(done.status).toBe("failed")
      expect(rows).toEqual([row(false), row(false), row(false)])
    })

    it("a batch the vendor failed (validation): each item, failed; its items say why", async () => {
      openai.configure({ fail: true, failMessage: "the input file is bad" })
      try {
        const { done, rows } = await submit(["a", "b", "c"])
        expect([done.status, done.error]).toEqual(["failed", expect.stringMatching(/^OpenAI batch batch_\w+ ended failed: the input file is bad$/)])
        expect(done.result).toMatchObject({ total: 3, completed: 0, failed: 3, upstreamStatus: "failed" })
        expect(rows).toEqual([row(false), row(false), row(false)])
      } finally {
        openai.configure({ fail: false })
      }
    })

    for (const end of ["expired", "cancelled"] as const) {
      it(`a batch that ${end} after its first answer: that answer as answered, the others failed`, async () => {
        openai.configure({ end })
        try {
          const { done, rows } = await submit(["first", "second", "third"])
          expect(done.status).toBe(end === "expired" ? "failed" : "cancelled")
          expect(done.result).toMatchObject({ total: 3, completed: 1, failed: 2, upstreamStatus: end })
          expect(done.result.items[0]).toMatchObject({ index: 0, ok: true, result: { content: "Echo: first" } })
          expect(done.result.items[2]).toEqual({ index: 2, ok: false, error: `no result for this item in the batch output (the batch ${end})` })
          expect(rows).toEqual([row(true), row(false), row(false)])
          expect(rows[0].prompt_tokens).toBeGreaterThan(0)
        } finally {
          openai.configure({ end: "completed" })
        }
      })
    }

    it("an item the vendor answered with an error (its error file): failed", async () => {
      const { done, rows } = await submit(["hello", "FAIL"])
      expect(done.result).toMatchObject({ total: 2, completed: 1, failed: 1 })
      expect(rows).toEqual([row(true), row(false)])
    })
  })

  describe("a job its vendor cancelled ends cancelled, with its webhook (docs/webhooks.md), not failed", () => {
    const bodyOf = async (jobId: string) => {
      const hook = await hookFor(jobId)
      return { event: hook.headers["x-gateway-event"], body: JSON.parse(hook.body) }
    }

    it("an OpenAI batch", async () => {
      openai.configure({ end: "cancelled" })
      try {
        const res = await call(server.url, "POST", "/v1/batch/submit", {
          apiKey: user.apiKey,
          body: { provider: "openai", callbackUrl: receiver.url, requests: [{ messages: [{ role: "user", content: "hi" }], model: "gpt-4o-mini" }] }
        })
        expect(res.status).toBe(200)
        const jobId = res.body.result.batchId
        const done = await waitDone(`/v1/batch/${jobId}/status`)
        expect(done.status).toBe("cancelled")
        expect(done.error).toMatch(/^OpenAI batch batch_\w+ was cancelled upstream$/)
        expect(await bodyOf(jobId)).toMatchObject({ event: "batch", body: { jobId, jobType: "batch", status: "cancelled", error: done.error } })
      } finally {
        openai.configure({ end: "completed" })
      }
    })

    it("an OpenAI fine-tuning job", async () => {
      openai.configure({ end: "cancelled" })
      try {
        const trainingData = [{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }]
        const res = await call(server.url, "POST", "/v1/fine-tuning/jobs", { apiKey: user.apiKey, body: { baseModel: "gpt-4o-mini", trainingData, callbackUrl: receiver.url } })
        expect(res.status).toBe(200)
        const jobId = res.body.result.jobId
        const done = await waitDone(`/v1/fine-tuning/jobs/${jobId}`)
        expect(done.status).toBe("cancelled")
        expect(done.error).toMatch(/^fine-tuning job ftjob-\w+ was cancelled upstream$/)
        expect(done.result).toMatchObject({ upstreamStatus: "cancelled", baseModel: "gpt-4o-mini" })
        expect(await bodyOf(jobId)).toMatchObject({ event: "finetune", body: { jobId, jobType: "finetune", status: "cancelled", error: done.error } })
      } finally {
        openai.configure({ end: "completed" })
      }
    })

    it("a Replicate video (canceled)", async () => {
      replicate.configure({ cancel: true })
      try {
        const res = await call(server.url, "POST", "/v1/video/generate", { apiKey: user.apiKey, body: { prompt: "x", provider: "replicate", callbackUrl: receiver.url } })
        expect(res.status).toBe(200)
        const jobId = res.body.result.jobId
        const done = await waitDone(`/v1/video/${jobId}`)
        expect([done.status, done.error]).toEqual(["cancelled", "the prediction was canceled at Replicate"])
        expect(await bodyOf(jobId)).toMatchObject({ event: "video", body: { jobId, jobType: "video", status: "cancelled", error: done.error } })
      } finally {
        replicate.configure({ cancel: false })
      }
    })
  })
})
