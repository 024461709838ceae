/**
 * One round of claimed background work (jobs, webhook deliveries, mails): up to `atOnce` due items
 * claimed and each worked on at once; answers how many. It claims only as many as it works on at once:
 * each starts when claimed and ends inside the lease its claim took (a second wave could outlive the
 * lease, and another process would claim and work on the item again).
 */
import { Effect } from "effect"

export const claimedRound = <A, E, R, E2, R2>(
  claim: (n: number) => Effect.Effect<ReadonlyArray<A>, E, R>,
  work: (item: A) => Effect.Effect<unknown, E2, R2>,
  atOnce: number
): Effect.Effect<number, E | E2, R | R2> =>
  // Suspended: a claim reads the clock when it is made, at each round, not once when the round is built.
  Effect.suspend(() => Effect.flatMap(claim(atOnce), (due) => Effect.as(Effect.forEach(due, work, { concurrency: atOnce, discard: true }), due.length)))
