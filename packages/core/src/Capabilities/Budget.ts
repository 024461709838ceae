/**
 * The budget of one reasoning-network dispatch: at most so many upstream calls, tokens and seconds,
 * covering every call it makes (planner, steps, synthesiser, judge). A call is admitted before it
 * starts (refused when the call count is reached, or the tokens or the time are spent) and settled
 * with its tokens after it ends; the remaining time bounds each call in flight.
 * Plain counters: the dispatch's fibers share one JavaScript thread, and admission is synchronous.
 */
import { Schema } from "effect"

export const BudgetLimitsSchema = Schema.Struct({
  maxCalls: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 50, { message: () => "budget.maxCalls must be an integer from 1 to 50" })),
    { default: () => 12 }
  ),
  maxTokens: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 10_000_000, { message: () => "budget.maxTokens must be a positive integer (at most 10000000)" })),
    { default: () => 60_000 }
  ),
  maxSeconds: Schema.optionalWith(
    Schema.Number.pipe(Schema.between(1, 900, { message: () => "budget.maxSeconds must be from 1 to 900" })),
    { default: () => 120 }
  )
}).annotations({ parseOptions: { onExcessProperty: "error" } })

export type BudgetLimits = Schema.Schema.Type<typeof BudgetLimitsSchema>

export const defaultLimits: BudgetLimits = { maxCalls: 12, maxTokens: 60_000, maxSeconds: 120 }

export type Exhausted = "calls" | "tokens" | "time"

export interface BudgetReport {
  readonly limits: BudgetLimits
  readonly used: { readonly calls: number; readonly tokens: number; readonly ms: number }
  /** The limit that stopped a call (refused, or interrupted by the time limit); null when none did. */
  readonly exhausted: Exhausted | null
}

export class Budget {
  private calls = 0
  private tokens = 0
  private stoppedBy: Exhausted | null = null
  private readonly startedAt: number

  constructor(readonly limits: BudgetLimits, private readonly now: () => number = Date.now) {
    this.startedAt = now()
  }

  /** Reserves one call, or answers why it may not start (and remembers the limit). */
  admit(): { readonly admitted: true } | { readonly admitted: false; readonly reason: string } {
    const refused = this.calls >= this.limits.maxCalls
      ? { limit: "calls" as const, reason: `budget calls: the ${this.limits.maxCalls} calls allowed were made` }
      : this.tokens >= this.limits.maxTokens
      ? { limit: "tokens" as const, reason: `budget tokens: ${this.tokens} of ${this.limits.maxTokens} tokens spent` }
      : this.remainingMs() <= 0
      ? { limit: "time" as const, reason: `budget time: ${this.limits.maxSeconds} s elapsed` }
      : undefined
    if (refused) {
      this.stoppedBy ??= refused.limit
      return { admitted: false, reason: refused.reason }
    }
    this.calls++
    return { admitted: true }
  }

  /** Adds a finished call's tokens. */
  spend(tokens: number) {
    this.tokens += tokens
  }

  /** A call in flight was interrupted by the time limit. */
  timedOut() {
    this.stoppedBy ??= "time"
  }

  remainingMs() {
    return this.startedAt + this.limits.maxSeconds * 1000 - this.now()
  }

  report(): BudgetReport {
    return {
      limits: this.limits,
      used: { calls: this.calls, tokens: this.tokens, ms: Math.max(0, this.now() - this.startedAt) },
      exhausted: this.stoppedBy
    }
  }
}
