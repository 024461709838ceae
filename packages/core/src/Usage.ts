/**
 * Usage: per-call records (tokens, cost, provider, model, latency) and the spec's usage
 * summary. The summary's `plan`/`karma` inputs are a what-if preview and never change what
 * Quota enforces.
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "./Config.ts"
import { dailyLimit, karmaMultiplier, type Plan } from "./Plans.ts"
import { utcDay } from "./Quota.ts"
import { ProviderCalls, type UsageRecord } from "./Engine/ProviderCalls.ts"
import * as RequestId from "./RequestId.ts"
import type { AvatarRecord } from "./Storage/AvatarStore.ts"
import { UsageStore } from "./Storage/UsageStore.ts"

export interface UsageSummary {
  readonly dailyCallsUsed: number
  readonly dailyCallLimit: number
  readonly remainingCallsToday: number
  readonly karmaMultiplier: number
  readonly monthlySpendUSD: number
  readonly dailyTokensUsed: number
  readonly periodMonth: string
  readonly periodDay: string
  /** The plan the limit above was computed for. */
  readonly plan: Plan
  /** True when plan/karma came from the query (a preview); the enforced values are in `enforced`. */
  readonly whatIf: boolean
  readonly enforced: { readonly plan: Plan; readonly karmaMultiplier: number; readonly dailyCallLimit: number }
}

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const store = yield* UsageStore
  const calls = yield* ProviderCalls
  return {
    /**
     * Records a call the engine did not make (media, vendor calls, batch items): the engine's one usage
     * path, with the request it served (the exporters' `requestId`, as the engine's own calls give it).
     */
    record: (usage: UsageRecord) => Effect.flatMap(RequestId.current, (requestId) => Effect.promise(() => calls.recordUsage(usage, requestId))),
    summary: (avatar: AvatarRecord, whatIf: { readonly plan?: Plan | undefined; readonly karma?: number | undefined } = {}) =>
      Effect.gen(function*() {
        const day = utcDay(Date.now())
        const totals = yield* store.totals(avatar.id, day)
        const plan = whatIf.plan ?? avatar.plan
        const karma = whatIf.karma ?? avatar.karmaTotal
        const limit = dailyLimit(config.planLimits[plan], karma)
        const summary: UsageSummary = {
          dailyCallsUsed: totals.callsToday,
          dailyCallLimit: limit,
          remainingCallsToday: Math.max(0, limit - totals.callsToday),
          karmaMultiplier: karmaMultiplier(karma),
          monthlySpendUSD: Math.round(totals.spendMonthUSD * 1e8) / 1e8,
          dailyTokensUsed: totals.tokensToday,
          periodMonth: day.slice(0, 7),
          periodDay: day,
          plan,
          whatIf: whatIf.plan !== undefined || whatIf.karma !== undefined,
          enforced: {
            plan: avatar.plan,
            karmaMultiplier: karmaMultiplier(avatar.karmaTotal),
            dailyCallLimit: dailyLimit(config.planLimits[avatar.plan], avatar.karmaTotal)
          }
        }
        return summary
      })
  }
})

export class Usage extends Context.Tag("aigw/Usage")<Usage, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Usage, makeService)
