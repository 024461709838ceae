/** Waiting for a long-running job through its status endpoint. */
import { call, type RunningServer } from "./server.ts"

/** Polls `GET path` until the job is completed, failed or cancelled; answers the job view. */
export const waitJobDone = async (server: RunningServer, path: string, apiKey: string, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const res = await call(server.url, "GET", path, { apiKey })
    if (["completed", "failed", "cancelled"].includes(res.body.result?.status)) return res.body.result
    if (Date.now() > deadline) throw new Error(`${path} did not finish: ${JSON.stringify(res.body)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
