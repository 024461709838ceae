/**
 * A local Google Vertex AI that checks what Google checks: the token endpoint verifies the service
 * account's JWT (RS256 signature with the key pair's public key, iss, aud, scope, one hour of
 * life) before issuing an access token; the model endpoints answer only a live bearer token (else
 * 401 `{error:{code,message,status:"UNAUTHENTICATED"}}`), at Vertex's paths; express mode (paths
 * without project and location) takes the API key `express-key` as x-goog-api-key.
 * References: https://developers.google.com/identity/protocols/oauth2/service-account (JWT claims,
 * jwt-bearer grant), https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference
 * (generateContent paths), https://cloud.google.com/vertex-ai/generative-ai/docs/embeddings/get-text-embeddings
 * (`:predict` with instances[].content -> predictions[].embeddings.values, statistics.token_count).
 */
import * as jose from "jose"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export const PROJECT = "proj-1"
export const EMAIL = "gateway@proj-1.iam.gserviceaccount.com"
/** The location whose paths the mock serves (VERTEX_LOCATION). */
export const LOCATION = "us-central1"
const HOUR = 3_600_000

interface Recorded {
  path: string
  headers: IncomingMessage["headers"]
  body: any
}

/** An RS256 key pair: the private key for the service-account key, the public one for the mock. */
export const vertexKeyPair = () => jose.generateKeyPair("RS256", { extractable: true })

/** A service-account key JSON (VERTEX_SERVICE_ACCOUNT) whose token_uri is the mock's. */
export const serviceAccountKey = async (privateKey: CryptoKey, mockUrl: string) =>
  JSON.stringify({
    type: "service_account",
    project_id: PROJECT,
    private_key_id: "key-1",
    private_key: await jose.exportPKCS8(privateKey),
    client_email: EMAIL,
    token_uri: `${mockUrl}/token`
  })

/** The mock: a token endpoint and Vertex's model endpoints. */
export const startVertexMock = async (publicKey: CryptoKey) => {
  const requests: Array<Recorded> = []
  const issued = new Map<string, number>()
  let tokenCount = 0
  let tokenFailure: { status: number; body: unknown } | undefined
  let answer: (path: string, body: any) => unknown = () => ({})
  let url = ""
  const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))
  const googleError = (res: ServerResponse, code: number, status: string, message: string) => json(res, code, { error: { code, message, status } })

  const issueToken = async (res: ServerResponse, form: URLSearchParams) => {
    if (tokenFailure) return json(res, tokenFailure.status, tokenFailure.body)
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return json(res, 400, { error: "unsupported_grant_type", error_description: "Invalid grant_type" })
    try {
      const { payload, protectedHeader } = await jose.jwtVerify(form.get("assertion") ?? "", publicKey, {
        algorithms: ["RS256"],
        issuer: EMAIL,
        audience: `${url}/token`
      })
      if (payload.scope !== "https://www.googleapis.com/auth/cloud-platform") throw new Error("bad scope")
      if (payload.exp! - payload.iat! > 3600) throw new Error("assertion lives longer than an hour")
      if (protectedHeader.kid !== "key-1") throw new Error("unknown key id")
    } catch (e) {
      return json(res, 400, { error: "invalid_grant", error_description: `Invalid JWT Signature. (${(e as Error).message})` })
    }
    const token = `ya29.token-${++tokenCount}`
    issued.set(token, Date.now() + HOUR)
    json(res, 200, { access_token: token, expires_in: 3600, token_type: "Bearer" })
  }

  const server: Server = createServer((req, res) => {
    let text = ""
    req.on("data", (c) => (text += c))
    req.on("end", () => {
      const path = req.url ?? ""
      if (path === "/token") return void issueToken(res, new URLSearchParams(text))
      const body = text ? JSON.parse(text) : undefined
      requests.push({ path, headers: req.headers, body })
      const express = path.startsWith("/v1/publishers/")
      if (express) {
        if (req.headers["x-goog-api-key"] !== "express-key") return googleError(res, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
      } else {
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
        const expires = bearer === undefined ? undefined : issued.get(bearer)
        if (expires === undefined || expires <= Date.now()) {
          return googleError(res, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
        }
        if (!path.startsWith(`/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/google/models/`)) return googleError(res, 404, "NOT_FOUND", `not found: ${path}`)
      }
      const reply = answer(path, body)
      if (!path.includes(":streamGenerateContent")) return json(res, 200, reply)
      res.writeHead(200, { "content-type": "text/event-stream" })
      for (const chunk of reply as Array<unknown>) res.write(`data: ${JSON.stringify(chunk)}\r\n\r\n`)
      res.end()
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    requests,
    tokenCount: () => tokenCount,
    failTokens: (f: typeof tokenFailure) => (tokenFailure = f),
    answer: (a: typeof answer) => (answer = a),
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r())
        server.closeAllConnections()
      })
  }
}

/** A generateContent answer with one text part. */
export const textAnswer = (text: string) => ({
  candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP" }],
  usageMetadata: { promptTokenCount: 7, candidatesTokenCount: 2, totalTokenCount: 9 }
})
