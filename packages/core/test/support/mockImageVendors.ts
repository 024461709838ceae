/**
 * Local mocks of the image generation vendors, each speaking its documented wire format on
 * 127.0.0.1:0 (references in the adapters: src/Providers/Images/*.ts). The "image" is a
 * transform a test can check: the base64 of `prompt|aspect` (Stability), or URLs naming the
 * request and image index (fal, Recraft, Leonardo). A wrong key is a 401 in the vendor's error shape.
 *  - stability: POST /v2beta/stable-image/generate/{core|ultra|sd3}, multipart, `accept:
 *    application/json` → {image, finish_reason SUCCESS | CONTENT_FILTERED (a prompt containing
 *    "forbidden"), seed}; errors {id, name, errors: [...]}. Bearer.
 *  - fal: POST /{owner}/{app}[/path] → {request_id, status IN_QUEUE, status_url, response_url};
 *    GET /{owner}/{app}/requests/{id}/status → {status IN_QUEUE | IN_PROGRESS | COMPLETED, error?};
 *    GET /{owner}/{app}/requests/{id} → {images: [{url, width, height, content_type}], seed};
 *    errors {detail}. `Authorization: Key <key>`.
 *  - recraft: POST /v1/images/generations {prompt, model, n (≤ 6), size (its list), response_format}
 *    → {created, data: [{url} | {b64_json}]}; errors {code, message}. Bearer.
 *  - leonardo: POST /api/rest/v1/generations {prompt, modelId, num_images, width, height} →
 *    {sdGenerationJob: {generationId, apiCreditCost}}; GET /api/rest/v1/generations/{id} →
 *    {generations_by_pk: {id, status PENDING | COMPLETE | FAILED, generated_images: [{id, url, nsfw}]}};
 *    errors {error, path, code}. Bearer.
 */
import { randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { buffer } from "node:stream/consumers"

export type ImageVendor = "stability" | "fal" | "recraft" | "leonardo"

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  /** The JSON body, when there is one. */
  readonly json?: any
  /** The multipart body's fields, when it is multipart. */
  readonly fields?: Readonly<Record<string, string>>
}

export interface JobBehaviour {
  /** How many polls answer a running state before the job ends. */
  readonly pendingPolls?: number
  /** The job fails with this message. */
  readonly failWith?: string
  /** The job never ends. */
  readonly never?: boolean
}

export interface ImageVendorMock {
  /** The base URL, as `<ID>_BASE_URL` takes it. */
  readonly url: string
  readonly requests: Array<RecordedRequest>
  /** The next answer is this HTTP error, in the vendor's error shape. */
  failNext(status: number, message: string): void
  /** The next answer is this raw body with status 200 (hostile replies). */
  rawNext(body: string): void
  /** How the next asynchronous jobs (fal, Leonardo) run. */
  setJob(behaviour: JobBehaviour): void
  close(): Promise<void>
}

const prefixes: Record<ImageVendor, string> = { stability: "/v2beta", fal: "", recraft: "/v1", leonardo: "/api/rest/v1" }

/** Recraft's sizes. */
const RECRAFT_SIZES = new Set(["1024x1024", "1365x1024", "1024x1365", "1536x1024", "1024x1536", "1820x1024", "1024x1820", "1024x2048", "2048x1024", "1434x1024", "1024x1434", "1024x1280", "1280x1024", "1024x1707", "1707x1024"])

/** Each vendor's error body. */
const errorBody = (vendor: ImageVendor, status: number, message: string): unknown => {
  switch (vendor) {
    case "stability":
      return { id: randomUUID(), name: status === 401 ? "unauthorized" : "bad_request", errors: [message] }
    case "fal":
      return { detail: message }
    case "recraft":
      return { code: status === 401 ? "not_authenticated" : "invalid_request", message }
    case "leonardo":
      return { error: message, path: "$", code: status === 401 ? "invalid-jwt" : "validation-failed" }
  }
}

const readFields = async (req: IncomingMessage, body: Buffer): Promise<Record<string, string>> => {
  const form = await new Request("http://mock/", { method: "POST", headers: { "content-type": req.headers["content-type"]! }, body: new Uint8Array(body) }).formData()
  const fields: Record<string, string> = {}
  for (const [name, value] of form.entries()) if (typeof value === "string") fields[name] = value
  return fields
}

interface Job {
  readonly images: ReadonlyArray<string>
  readonly behaviour: JobBehaviour
  polls: number
}

export const startImageVendorMock = async (vendor: ImageVendor, apiKey: string): Promise<ImageVendorMock> => {
  const requests: Array<RecordedRequest> = []
  const jobs = new Map<string, Job>()
  let nextFailure: { status: number; message: string } | undefined
  let nextRaw: string | undefined
  let behaviour: JobBehaviour = {}

  const credential = vendor === "fal" ? `Key ${apiKey}` : `Bearer ${apiKey}`

  /** A job's state: running until its pending polls are spent, then done or failed. */
  const poll = (job: Job): "running" | "done" | "failed" => {
    job.polls++
    if (job.behaviour.never || job.polls <= (job.behaviour.pendingPolls ?? 0)) return "running"
    return job.behaviour.failWith !== undefined ? "failed" : "done"
  }

  const newJob = (count: number, url: (id: string, i: number) => string) => {
    const id = randomUUID()
    jobs.set(id, { images: Array.from({ length: count }, (_, i) => url(id, i)), behaviour, polls: 0 })
    return id
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await buffer(req)
    const path = (req.url ?? "/").split("?")[0]!
    const multipart = (req.headers["content-type"] ?? "").startsWith("multipart/form-data")
    const json = !multipart && body.length > 0 ? (() => {
      try {
        return JSON.parse(body.toString("utf8"))
      } catch {
        return undefined
      }
    })() : undefined
    const fields = multipart ? await readFields(req, body) : undefined
    requests.push({ method: req.method ?? "", path, headers: req.headers, ...(json !== undefined ? { json } : {}), ...(fields ? { fields } : {}) })
    const send = (status: number, answer: unknown) => {
      res.writeHead(status, { "content-type": "application/json" })
      res.end(JSON.stringify(answer))
    }
    const fail = (status: number, message: string) => send(status, errorBody(vendor, status, message))

    if (req.headers.authorization !== credential) return fail(401, "invalid API key")
    if (nextFailure) {
      const { message, status } = nextFailure
      nextFailure = undefined
      return fail(status, message)
    }
    if (nextRaw !== undefined) {
      const raw = nextRaw
      nextRaw = undefined
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(raw)
    }
    const prefix = prefixes[vendor]
    if (!path.startsWith(prefix)) return fail(404, `no route ${path}`)
    const route = path.slice(prefix.length)

    switch (vendor) {
      case "stability": {
        const m = /^\/stable-image\/generate\/(core|ultra|sd3)$/.exec(route)
        if (req.method !== "POST" || !m) return fail(404, `no route ${path}`)
        if (!fields) return fail(400, "content-type: must be multipart/form-data")
        if (!String(req.headers.accept ?? "").includes("application/json")) return fail(400, "accept: this mock answers JSON only")
        if (!fields.prompt) return fail(400, "prompt: cannot be empty")
        if (m[1] === "sd3" && !fields.model) return fail(400, "model: required for sd3")
        if (fields.prompt.includes("forbidden")) return send(200, { image: "", finish_reason: "CONTENT_FILTERED", seed: 7 })
        return send(200, { image: Buffer.from(`${fields.prompt}|${fields.aspect_ratio ?? "1:1"}`).toString("base64"), finish_reason: "SUCCESS", seed: 7 })
      }
      case "recraft": {
        if (req.method !== "POST" || route !== "/images/generations") return fail(404, `no route ${path}`)
        if (typeof json?.prompt !== "string" || json.prompt.length === 0) return fail(400, "prompt is required")
        const n = json.n ?? 1
        if (n > 6) return fail(400, "n must be at most 6")
        if (json.size !== undefined && !RECRAFT_SIZES.has(json.size)) return fail(400, `invalid size ${json.size}`)
        return send(200, {
          created: 1,
          data: Array.from({ length: n }, (_, i) => (json.response_format === "b64_json" ? { b64_json: Buffer.from(`${json.prompt}|${i}`).toString("base64") } : { url: `https://img.recraft.ai/${json.model}/${i}.png` }))
        })
      }
      case "fal": {
        const status = /^\/([^/]+\/[^/]+)\/requests\/([^/]+)\/status$/.exec(route)
        const result = /^\/([^/]+\/[^/]+)\/requests\/([^/]+)$/.exec(route)
        if (req.method === "GET" && (status || result)) {
          const job = jobs.get((status ?? result)![2]!)
          if (!job) return fail(404, "request not found")
          if (status) {
            const state = poll(job)
            if (state === "running") return send(200, { status: job.polls === 1 ? "IN_QUEUE" : "IN_PROGRESS", queue_position: 0 })
            return send(200, { status: "COMPLETED", ...(state === "failed" ? { error: job.behaviour.failWith } : {}) })
          }
          if (job.behaviour.failWith !== undefined) return fail(422, job.behaviour.failWith)
          return send(200, { images: job.images.map((url) => ({ url, width: 1024, height: 1024, content_type: "image/jpeg" })), seed: 7 })
        }
        if (req.method !== "POST" || !/^\/[^/]+\/[^/]+(\/[^/]+)*$/.test(route)) return fail(404, `no route ${path}`)
        if (typeof json?.prompt !== "string" || json.prompt.length === 0) return fail(422, "prompt: field required")
        const id = newJob(json.num_images ?? 1, (id, i) => `https://v3.fal.media/files/${id}/${i}.jpg`)
        const app = route.split("/").slice(1, 3).join("/")
        return send(200, { request_id: id, status: "IN_QUEUE", status_url: `https://queue.fal.run/${app}/requests/${id}/status`, response_url: `https://queue.fal.run/${app}/requests/${id}` })
      }
      case "leonardo": {
        const get = /^\/generations\/([^/]+)$/.exec(route)
        if (req.method === "GET" && get) {
          const job = jobs.get(get[1]!)
          if (!job) return send(200, { generations_by_pk: null })
          const state = poll(job)
          const status = state === "running" ? "PENDING" : state === "done" ? "COMPLETE" : "FAILED"
          return send(200, {
            generations_by_pk: { id: get[1], status, generated_images: state === "done" ? job.images.map((url, i) => ({ id: `img-${i}`, url, nsfw: false })) : [] }
          })
        }
        if (req.method !== "POST" || route !== "/generations") return fail(404, `no route ${path}`)
        if (typeof json?.prompt !== "string" || json.prompt.length === 0) return fail(400, "prompt is required")
        const id = newJob(json.num_images ?? 4, (id, i) => `https://cdn.leonardo.ai/users/u/generations/${id}/${i}.jpg`)
        return send(200, { sdGenerationJob: { generationId: id, apiCreditCost: 8 } })
      }
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e) => {
      res.writeHead(500)
      res.end(String(e))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}${prefixes[vendor]}`,
    requests,
    failNext: (status, message) => {
      nextFailure = { status, message }
    },
    rawNext: (body) => {
      nextRaw = body
    },
    setJob: (b) => {
      behaviour = b
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
