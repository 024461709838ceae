/**
 * Subscription plans, their daily base limits and the karma multiplier.
 *
 * Multiplier: 1 + log10(1 + karma / 100) * 3, clamped to [1, 10] and rounded to two decimals.
 * It is 1.0 at zero (or negative) karma, grows monotonically and reaches the 10.0 cap at
 * about 99 900 karma. Documented with a table in docs/quota.md.
 */
import { Either, Schema } from "effect"

export const PlanNames = ["Free", "Bronze", "Silver", "Gold", "Enterprise"] as const
export const Plan = Schema.Literal(...PlanNames)
export type Plan = typeof Plan.Type

/** Plans a model may require (the spec lists four; Enterprise sees everything). */
export const ModelPlan = Schema.Literal("Free", "Bronze", "Silver", "Gold")

export const defaultPlanLimits: Readonly<Record<Plan, number>> = {
  Free: 100,
  Bronze: 1_000,
  Silver: 5_000,
  Gold: 20_000,
  Enterprise: 100_000
}

export const planRank = (plan: Plan): number => PlanNames.indexOf(plan)

/** True when `plan` is at least `required`. */
export const planAllows = (plan: Plan, required: Plan): boolean => planRank(plan) >= planRank(required)

export const karmaMultiplier = (karma: number): number => {
  if (!Number.isFinite(karma) || karma <= 0) return 1
  const raw = 1 + Math.log10(1 + karma / 100) * 3
  return Math.min(10, Math.round(raw * 100) / 100)
}

/**
 * Effective daily limit: base x multiplier, rounded down to whole calls. In hundredths, the
 * multiplier's own unit: 100 x 2.01 is 200.99999999999997 in binary floating point, one call short.
 */
export const dailyLimit = (base: number, karma: number): number => Math.floor((base * Math.round(karmaMultiplier(karma) * 100)) / 100)

/** Parses the `AIGW_PLAN_LIMITS` JSON object; plans not named keep their defaults. */
export const PlanLimitsOverride = Schema.parseJson(
  Schema.partial(Schema.Record({ key: Plan, value: Schema.Int.pipe(Schema.nonNegative()) }))
)

/**
 * `AIGW_PLAN_LIMITS` -> the limits of every plan (defaults for plans not named), or what is wrong:
 * invalid JSON, a name that is not a plan (named, with the plan names), a value that is not a
 * non-negative integer.
 */
export const parsePlanLimits = (json: string): Either.Either<Readonly<Record<Plan, number>>, string> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    return Either.left('expected a JSON object of plan -> non-negative integer, e.g. {"Free":100}')
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return Either.left('expected a JSON object of plan -> non-negative integer, e.g. {"Free":100}')
  }
  const unknown = Object.keys(parsed).filter((k) => !(PlanNames as ReadonlyArray<string>).includes(k))
  if (unknown.length > 0) {
    return Either.left(`unknown plan ${unknown.map((k) => JSON.stringify(k)).join(", ")}; the plans are ${PlanNames.join(", ")}`)
  }
  const bad = Object.entries(parsed).filter(([, v]) => !(Number.isSafeInteger(v) && (v as number) >= 0))
  if (bad.length > 0) {
    return Either.left(`the limit of ${bad.map(([k]) => k).join(", ")} must be a non-negative integer`)
  }
  return Either.right({ ...defaultPlanLimits, ...(parsed as Partial<Record<Plan, number>>) })
}
