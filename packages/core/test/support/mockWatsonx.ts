/**
 * A local IBM watsonx.ai that checks what IBM checks: the IAM token endpoint takes the API key
 * grant (form body) and issues an access token; /ml/v1/text/chat, /text/chat_stream and
 * /text/embeddings require `version`, a live bearer token and a project id, and answer errors as
 * `{errors:[{code,message}], trace, status_code}`.
 * References: https://cloud.ibm.com/docs/account?topic=account-iamtoken_from_apikey (grant type
 * urn:ibm:params:oauth:grant-type:apikey, access_token / expires_in / expiration; errors with
 * errorCode / errorMessage), https://cloud.ibm.com/apidocs/watsonx-ai (text chat, chat stream,
 * embeddings), https://dataplatform.cloud.ibm.com/docs/content/wsj/analyze-data/fm-api-chat-tools.html
 * (tools, tool_choice_option, the answer with choices[].message, usage and system warnings).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export const API_KEY = "ibm-cloud-key"
export const PROJECT = "4947c695-a374-428c-acca-332c1a1dc9e9"
const HOUR = 3_600_000

interface Recorded {
  path: string
  query: URLSearchParams
  headers: IncomingMessage["headers"]
  body: any
}

export const startWatsonxMock = async () => {
  const requests: Array<Recorded> = []
  const issued = new Map<string, number>()
  let tokenCount = 0
  let answer: (path: string, body: any) => unknown = () => ({})
  const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))
  const wxError = (res: ServerResponse, status: number, code: string, message: string) =>
    json(res, status, { errors: [{ code, message }], trace: "3bb0b5c6f7d0a5c3b4c3d3b1e0d9c0a1", status_code: status })

  const iam = (req: IncomingMessage, res: ServerResponse, form: URLSearchParams) => {
    if (!(req.headers["content-type"] ?? "").startsWith("application/x-www-form-urlencoded")) {
      return json(res, 400, { errorCode: "BXNIM0109E", errorMessage: "Property missing or empty. Property: grant_type" })
    }
    if (form.get("grant_type") !== "urn:ibm:params:oauth:grant-type:apikey") return json(res, 400, { errorCode: "BXNIM0103E", errorMessage: "Unsupported grant type." })
    if (form.get("apikey") !== API_KEY) return json(res, 400, { errorCode: "BXNIM0415E", errorMessage: "Provided API key could not be found." })
    const token = `iam-${++tokenCount}`
    issued.set(token, Date.now() + HOUR)
    json(res, 200, { access_token: token, refresh_token: "not_supported", token_type: "Bearer", expires_in: 3600, expiration: Math.floor(Date.now() / 1000) + 3600, scope: "ibm openid" })
  }

  const server: Server = createServer((req, res) => {
    let text = ""
    req.on("data", (c) => (text += c))
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://mock")
      if (url.pathname === "/identity/token") return iam(req, res, new URLSearchParams(text))
      const body = text ? JSON.parse(text) : undefined
      requests.push({ path: url.pathname, query: url.searchParams, headers: req.headers, body })
      if (!url.searchParams.get("version")) return wxError(res, 400, "missing_version", "Missing query parameter `version`")
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
      const expires = bearer === undefined ? undefined : issued.get(bearer)
      if (expires === undefined) return wxError(res, 401, "authorization_rejected", "Failed to authenticate the request due to invalid token")
      if (expires <= Date.now()) return wxError(res, 401, "authentication_token_expired", "Failed to authenticate the request due to an expired token")
      if (body?.project_id !== PROJECT && body?.space_id === undefined) return wxError(res, 400, "invalid_request_entity", "Missing either space_id or project_id or wml_instance_crn")
      if (typeof body?.model_id !== "string") return wxError(res, 400, "json_validation_error", "Json document validation error: 'model_id' is required")
      const reply = answer(url.pathname, body)
      if (url.pathname !== "/ml/v1/text/chat_stream") return json(res, 200, reply)
      res.writeHead(200, { "content-type": "text/event-stream" })
      ;(reply as Array<unknown>).forEach((chunk, i) => res.write(`id: ${i + 1}\nevent: ${(chunk as any).errors ? "error" : "message"}\ndata: ${JSON.stringify(chunk)}\n\n`))
      res.end()
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    tokenCount: () => tokenCount,
    answer: (a: typeof answer) => (answer = a),
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r())
        server.closeAllConnections()
      })
  }
}

/** A /text/chat answer with this message. */
export const chatAnswer = (message: Record<string, unknown>, finish: string) => ({
  id: "chatcmpl-2f47da4026950db321698cb733b25e89",
  model_id: "ibm/granite-3-8b-instruct",
  model: "ibm/granite-3-8b-instruct",
  choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
  created: 1739311926,
  model_version: "1.1.0",
  created_at: "2025-02-11T22:12:07.243Z",
  usage: { completion_tokens: 3, prompt_tokens: 12, total_tokens: 15 }
})

/** One /text/chat_stream chunk. */
export const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: Record<string, number>) => ({
  id: "chat-1",
  model_id: "ibm/granite-3-8b-instruct",
  choices: [{ index: 0, delta, finish_reason: finish }],
  created: 1739311926,
  ...(usage ? { usage } : {})
})
