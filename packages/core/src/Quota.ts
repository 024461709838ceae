/**
 * Daily quota: limit = plan base limit x karma multiplier, counted per avatar per UTC day.
 * Admission is one atomic conditional increment through the Metering port (Storage/Metering.ts).
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "./Config.ts"
import { QuotaExceeded } from "./Errors.ts"
import { dailyLimit, karmaMultiplier, type Plan } from "./Plans.ts"
import type { AvatarRecord } from "./Storage/AvatarStore.ts"
import { Metering } from "./Storage/Metering.ts"

// The current day's string, kept until its end: every metered call asks for it.
let cachedDay = { from: 0, until: 0, day: "" }

export const utcDay = (ms: number): string => {
  if (ms >= cachedDay.from && ms < cachedDay.until) return cachedDay.day
  const day = new Date(ms).toISOString().slice(0, 10)
  const from = Date.parse(`${day}T00:00:00.000Z`)
  cachedDay = { from, until: from + 86_400_000, day }
  return day
}
export const nextUtcMidnight = (ms: number): number => {
  const d = new Date(ms)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)
}
/** Whole seconds until the next UTC midnight (at least 1). */
export const secondsToReset = (ms: number): number => Math.max(1, Math.ceil((nextUtcMidnight(ms) - ms) / 1000))

export interface QuotaState {
  readonly plan: Plan
  readonly multiplier: number
  readonly limit: number
  readonly used: number
  readonly remaining: number
  /** Unix seconds of the next reset (UTC midnight). */
  readonly reset: number
}

/** The response headers every authenticated answer carries. */
/** The rate-limit headers every answer to an authenticated caller carries (`headersOf` gives each). */
export const RATE_LIMIT_HEADERS = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-plan", "x-karma-multiplier"] as const

export const headersOf = (q: QuotaState): Record<(typeof RATE_LIMIT_HEADERS)[number], string> => ({
  "x-ratelimit-limit": String(q.limit),
  "x-ratelimit-remaining": String(q.remaining),
  "x-ratelimit-reset": String(q.reset),
  "x-ratelimit-plan": q.plan,
  "x-karma-multiplier": q.multiplier.toFixed(2)
})

/** The state of an avatar whose daily limit is `limit` after `used` calls today. */
export const quotaState = (avatar: AvatarRecord, limit: number, used: number, now: number): QuotaState => ({
  plan: avatar.plan,
  multiplier: karmaMultiplier(avatar.karmaTotal),
  limit,
  used,
  remaining: Math.max(0, limit - used),
  reset: Math.floor(nextUtcMidnight(now) / 1000)
})

/** The refusal of `calls` calls that do not fit in the day's `limit`. */
export const quotaExceeded = (limit: number, plan: Plan, calls: number, now: number) =>
  new QuotaExceeded({
    message: `${calls > 1 ? `These ${calls} calls do not fit in the` : "Daily"} quota of ${limit} calls for plan ${plan}${calls > 1 ? "" : " is used up"}; it resets at the next UTC midnight (${
      new Date(nextUtcMidnight(now)).toISOString()
    }).`,
    retryAfterSeconds: secondsToReset(now)
  })

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const metering = yield* Metering

  const limitOf = (plan: Plan, karma: number) => dailyLimit(config.planLimits[plan], karma)

  const stateOf = (avatar: AvatarRecord, used: number, now: number): QuotaState =>
    quotaState(avatar, limitOf(avatar.plan, avatar.karmaTotal), used, now)

  return {
    limitOf,
    /** Today's state without counting a call. */
    peek: (avatar: AvatarRecord): Promise<QuotaState> => {
      const now = Date.now()
      return metering.callsOn(avatar.id, utcDay(now)).then((used) => stateOf(avatar, used, now))
    },
    /**
     * Counts `calls` metered calls (all or none): the new state, or the refusal. An admission that
     * finds its caller `gone` when it is made is not (it rejects with CallerGone, Storage/Metering.ts).
     */
    admit: (avatar: AvatarRecord, calls = 1, gone?: () => boolean): Promise<QuotaState | QuotaExceeded> => {
      const now = Date.now()
      const limit = limitOf(avatar.plan, avatar.karmaTotal)
      return metering.admit(avatar.id, utcDay(now), limit, calls, gone).then((used) =>
        used === undefined ? quotaExceeded(limit, avatar.plan, calls, now) : stateOf(avatar, used, now)
      )
    }
  }
})

/**
 * An admission as an Effect (the Effect routes, /mcp): fails with the refusal. `admission` gets
 * whether the fiber was interrupted (its request is gone) as its `gone`.
 */
export const admitted = (admission: (gone: () => boolean) => Promise<QuotaState | QuotaExceeded>): Effect.Effect<QuotaState, QuotaExceeded> =>
  Effect.flatMap(
    Effect.promise((signal) => admission(() => signal.aborted)),
    (outcome) => outcome instanceof QuotaExceeded ? Effect.fail(outcome) : Effect.succeed(outcome)
  )

export class Quota extends Context.Tag("aigw/Quota")<Quota, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.effect(Quota, makeService)
