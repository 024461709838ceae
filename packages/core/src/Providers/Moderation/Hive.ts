/**
 * Hive text moderation.
 *
 * Wire format (https://docs.thehive.ai/reference/text-moderation and the synchronous task
 * submission page):
 *  - `POST {base}/task/sync` (the catalogue's base is `https://api.thehive.ai/api/v2`) with
 *    `{text_data}`; header `authorization: Token <key>`.
 *  - answer `{status: [{status: {code, message}, response: {output: [{classes: [{class, score}]}]}}]}`.
 *    Text classes are severity levels from 0 (benign) to 3 (most severe); -1 means the head is
 *    not supported for the text's language.
 * Hive picks the model by the project the key belongs to, so a request cannot name one. A class
 * at level 2 or 3 is flagged (Hive's levels 2 and 3 are the ones its class descriptions treat as
 * harmful); `categoryScores` keeps every supported class's level, so callers can apply their own.
 */
import { Effect } from "effect"
import type { ConfiguredProvider } from "../../Catalog/Catalog.ts"
import { authHeaders, postJson } from "../internal/http.ts"
import { type ModerationResult, tooManyCategories } from "../OpenAiMedia.ts"
import type { Served } from "../Served.ts"
import { protocolError, UpstreamError } from "../UpstreamError.ts"

export const FLAG_LEVEL = 2

export const moderate = (provider: ConfiguredProvider, text: string): Effect.Effect<ModerationResult, UpstreamError> =>
  postJson(provider.id, `${provider.endpoint}/task/sync`, { ...authHeaders(provider), accept: "application/json" }, { text_data: text }).pipe(
    Effect.flatMap((answer) => {
      const task = Array.isArray(answer?.status) ? answer.status[0] : undefined
      if (typeof task !== "object" || task === null) return Effect.fail(protocolError(provider.id, "no task status in the moderation answer"))
      const code = task.status?.code
      if (code !== undefined && String(code) !== "0") {
        const why = typeof task.status?.message === "string" ? task.status.message : `code ${String(code)}`
        return Effect.fail(new UpstreamError({ provider: provider.id, kind: "protocol", message: `${provider.id} did not moderate the text: ${why}`, retryable: false }))
      }
      const classes = task.response?.output?.[0]?.classes
      if (!Array.isArray(classes)) return Effect.fail(protocolError(provider.id, "no classes in the moderation answer"))
      const tooMany = tooManyCategories(provider.id, classes.length)
      if (tooMany) return Effect.fail(tooMany)
      const scores: Record<string, number> = {}
      for (const c of classes) {
        if (typeof c?.class === "string" && typeof c?.score === "number" && Number.isFinite(c.score) && c.score >= 0) scores[c.class] = c.score
      }
      const categories = Object.entries(scores).filter(([, level]) => level >= FLAG_LEVEL).map(([name]) => name)
      return Effect.succeed({ flagged: categories.length > 0, categories, categoryScores: scores })
    })
  )

/** What aigw serves through Hive (a bespoke provider). */
export const served: Served = {
  moderation: { defaultModel: "hive-text-moderation", moderate },
  notServed: {
    classify: "Hive classifies into its own fixed classes, not into labels a request gives: its text classes are served as moderation (POST /v1/moderation with provider hive)"
  }
}
