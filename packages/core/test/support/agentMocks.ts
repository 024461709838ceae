/**
 * Mock upstreams that answer multi-agent runs by who is speaking: the system prompt of each call
 * (orchestrator tests, unit and end to end).
 */
import type { MockUpstream, RecordedRequest, Scenario } from "./mockUpstreams.ts"

export const messagesOf = (r: RecordedRequest) => (r.body as { messages: Array<{ role: string; content: string }> }).messages
export const systemOf = (r: RecordedRequest) => messagesOf(r).find((m) => m.role === "system")?.content ?? ""
export const modelOf = (r: RecordedRequest) => (r.body as { model: string }).model
export const text = (t: string, prompt = 10, completion = 5): Scenario => ({ kind: "text", text: t, usage: { prompt, completion } })

/** Every mock answers by the call's system prompt. */
export const answerBySystem = (mocks: ReadonlyArray<MockUpstream>, f: (system: string, r: RecordedRequest) => Scenario) => {
  for (const m of mocks) m.setResponder((r) => f(systemOf(r), r))
}

/** Forgets the recorded requests and the responder (between tests). */
export const resetMocks = (mocks: ReadonlyArray<MockUpstream>) => {
  for (const m of mocks) {
    m.requests.length = 0
    m.setResponder(undefined)
  }
}
