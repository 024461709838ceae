/**
 * Local mocks of the guardrail, moderation and translation vendors (Lakera Guard, Patronus, Hive,
 * DeepL), each speaking its documented wire format on 127.0.0.1:0 (see the adapters in
 * packages/core/src/Providers/{Guardrails,Moderation,Translation}/ for the documents each detail
 * comes from). Verdicts are computed from the text sent, so a test can tell a right mapping from a
 * wrong one: e-mail addresses are personal data, "ignore previous instructions" is a prompt
 * attack, "idiot" is an insult (toxic; Hive bullying level 2), "kill" is violence (Hive level 3).
 * Unknown request fields are a 400, a wrong key a 401, each in the vendor's error shape.
 *  - Lakera: `POST /v2/guard`, bearer; `{flagged, breakdown, payload, metadata}`; errors `{error}`.
 *  - Patronus: `POST /v1/evaluate`, `X-API-KEY`; `{results: [{evaluator_id, criteria, status,
 *    evaluation_result: {pass, score_raw, additional_info: {positions}}}]}`; errors `{detail}`.
 *  - Hive: `POST /api/v2/task/sync`, `authorization: Token`; `{status: [{status: {code, message},
 *    response: {output: [{classes}]}}]}`; errors `{message}`.
 *  - DeepL: `POST /v2/translate`, `Authorization: DeepL-Auth-Key`; `{translations: [{detected_source_language,
 *    text}]}`; errors `{message}`.
 */
import { randomUUID } from "node:crypto"
import type { IncomingMessage } from "node:http"
import { type RecordingMock, startRecordingMock } from "./localServer.ts"

export type TaskVendor = "lakera" | "patronus" | "hive" | "deepl"

/** A vendor mock that records what it was sent: `failNext` answers a status and body, `rawNext` a raw 200 body. */
export type TaskVendorMock = RecordingMock

const basePaths: Record<TaskVendor, string> = { lakera: "/v2", patronus: "/v1", hive: "/api/v2", deepl: "/v2" }
const routes: Record<TaskVendor, string> = { lakera: "POST /v2/guard", patronus: "POST /v1/evaluate", hive: "POST /api/v2/task/sync", deepl: "POST /v2/translate" }

const allowed: Record<TaskVendor, ReadonlySet<string>> = {
  lakera: new Set(["messages", "project_id", "payload", "breakdown", "metadata", "dev_info"]),
  patronus: new Set(["evaluators", "task_input", "task_output", "task_context", "gold_answer", "system_prompt", "capture", "app", "tags"]),
  hive: new Set(["text_data", "url", "media", "callback_url", "metadata"]),
  deepl: new Set(["text", "target_lang", "source_lang", "context", "formality", "model_type", "glossary_id", "tag_handling", "split_sentences"])
}

const keyOk: Record<TaskVendor, (headers: IncomingMessage["headers"], key: string) => boolean> = {
  lakera: (h, k) => h.authorization === `Bearer ${k}`,
  patronus: (h, k) => h["x-api-key"] === k,
  hive: (h, k) => h.authorization === `Token ${k}`,
  deepl: (h, k) => h.authorization === `DeepL-Auth-Key ${k}`
}

const errorOf: Record<TaskVendor, (message: string) => unknown> = {
  lakera: (message) => ({ error: message }),
  patronus: (message) => ({ detail: message }),
  hive: (message) => ({ message }),
  deepl: (message) => ({ message })
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g
const emails = (text: string) => [...text.matchAll(EMAIL)].map((m) => ({ start: m.index!, end: m.index! + m[0].length, text: m[0] }))
const attack = (text: string) => /ignore (all )?previous instructions/i.test(text)
const insult = (text: string) => /\bidiot\b/i.test(text)

type Answer = readonly [status: number, body: unknown]

const lakera = (body: any): Answer => {
  if (!Array.isArray(body.messages) || body.messages.length === 0) return [400, errorOf.lakera("messages must be a non-empty list")]
  const texts: Array<string> = body.messages.map((m: any) => String(m?.content ?? ""))
  const found = texts.flatMap((t, i) => emails(t).map((e) => ({ ...e, message_id: i })))
  const detectors = [
    { detector_type: "prompt_attack", detected: texts.some(attack) },
    { detector_type: "pii/email", detected: found.length > 0 },
    { detector_type: "moderated_content/hate", detected: texts.some(insult) }
  ]
  return [200, {
    flagged: detectors.some((d) => d.detected),
    metadata: { request_uuid: randomUUID() },
    ...(body.breakdown === true ? { breakdown: detectors.map((d) => ({ project_id: body.project_id ?? "project-default", policy_id: "policy-default", detector_id: `detector-${d.detector_type}`, ...d })) } : {}),
    ...(body.payload === true ? { payload: found.map((e) => ({ start: e.start, end: e.end, text: e.text, detector_type: "pii/email", labels: ["pii"], message_id: e.message_id })) } : {})
  }]
}

const patronus = (body: any): Answer => {
  if (!Array.isArray(body.evaluators) || body.evaluators.length === 0) return [422, errorOf.patronus("evaluators: Field required")]
  const text = typeof body.task_output === "string" ? body.task_output : typeof body.task_input === "string" ? body.task_input : undefined
  if (text === undefined) return [422, errorOf.patronus("Either input or output must be specified")]
  const results = []
  for (const e of body.evaluators) {
    const base = { evaluator_id: e?.evaluator, criteria: e?.criteria ?? null, error_message: null }
    if (e?.evaluator === "pii") {
      const found = emails(text)
      results.push({ ...base, status: "success", evaluation_result: { pass: found.length === 0, score_raw: found.length === 0 ? 1 : 0, additional_info: { positions: found.map((f) => [f.start, f.end]), extra: null, confidence_interval: null } } })
    } else if (e?.evaluator === "toxicity") {
      results.push({ ...base, status: "success", evaluation_result: { pass: !insult(text), score_raw: insult(text) ? 0.93 : 0.02, additional_info: { positions: [], extra: null, confidence_interval: null } } })
    } else {
      return [404, errorOf.patronus(`Evaluator ${String(e?.evaluator)} not found`)]
    }
  }
  return [200, { results }]
}

const hive = (body: any): Answer => {
  if (typeof body.text_data !== "string") return [400, errorOf.hive("text_data or url is required")]
  const t = body.text_data
  const classes = [
    { class: "sexual", score: 0 },
    { class: "hate", score: 0 },
    { class: "violence", score: /\bkill\b/i.test(t) ? 3 : 0 },
    { class: "bullying", score: insult(t) ? 2 : 0 },
    { class: "drugs", score: -1 },
    { class: "spam", score: 0 }
  ]
  return [200, {
    id: randomUUID(),
    code: 200,
    project_id: 41392,
    status: [{
      status: { code: "0", message: "SUCCESS" },
      response: { input: { text: t, model_type: "TEXT_CLASSIFICATION" }, language: "EN", moderated_classes: ["sexual", "hate", "violence", "bullying", "spam"], output: [{ time: 0, start_char_index: 0, end_char_index: t.length, classes }], text_filters: [] }
    }]
  }]
}

const GERMAN: Record<string, string> = { hello: "hallo", world: "welt", good: "gut", morning: "morgen" }
const FRENCH: Record<string, string> = { hello: "bonjour", world: "monde", good: "bon", morning: "matin" }

const deepl = (body: any): Answer => {
  if (!Array.isArray(body.text) || body.text.length === 0) return [400, errorOf.deepl("Parameter 'text' not specified.")]
  const dictionary = body.target_lang === "DE" ? GERMAN : body.target_lang === "FR" ? FRENCH : undefined
  if (dictionary === undefined) return [400, errorOf.deepl("Value for 'target_lang' not supported.")]
  if (body.source_lang !== undefined && body.source_lang !== "EN") return [400, errorOf.deepl("Value for 'source_lang' not supported.")]
  return [200, {
    translations: body.text.map((t: string) => ({
      detected_source_language: "EN",
      text: t.replace(/[A-Za-z]+/g, (w) => dictionary[w.toLowerCase()] ?? w)
    }))
  }]
}

const handlers: Record<TaskVendor, (body: any) => Answer> = { lakera, patronus, hive, deepl }

export const startTaskVendorMock = (vendor: TaskVendor, apiKey: string): Promise<TaskVendorMock> =>
  startRecordingMock(basePaths[vendor], ({ body, headers, method, path }) => {
    if (!keyOk[vendor](headers, apiKey)) return [vendor === "deepl" ? 403 : 401, errorOf[vendor]("invalid api key")]
    if (`${method} ${path}` !== routes[vendor]) return [404, errorOf[vendor](`no route ${method} ${path}`)]
    if (typeof body !== "object" || body === null) return [400, errorOf[vendor]("body is not JSON")]
    const unknown = Object.keys(body).find((f) => !allowed[vendor].has(f))
    return unknown !== undefined ? [400, errorOf[vendor](`unknown field ${unknown}`)] : handlers[vendor](body)
  })
