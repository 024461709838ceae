/**
 * Password hashing with argon2id (m=19456 KiB, t=2, p=1; OWASP's baseline), PHC strings.
 * Hashing is CPU- and memory-heavy, so concurrent hashes are bounded by a semaphore.
 */
import * as argon2 from "argon2"
import { Context, Effect, Layer } from "effect"

export const parameters = { type: argon2.argon2id, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

export interface PasswordsService {
  readonly hash: (password: string) => Effect.Effect<string>
  readonly verify: (hash: string, password: string) => Effect.Effect<boolean>
  /** True when the stored hash was made with other parameters and should be replaced. */
  readonly needsRehash: (hash: string) => boolean
}

export class Passwords extends Context.Tag("aigw/Passwords")<Passwords, PasswordsService>() {}

export const make = (options: { concurrency?: number } = {}) =>
  Effect.gen(function*() {
    const permits = yield* Effect.makeSemaphore(options.concurrency ?? 4)
    return Passwords.of({
      hash: (password) => permits.withPermits(1)(Effect.promise(() => argon2.hash(password, parameters))),
      verify: (hash, password) =>
        permits.withPermits(1)(
          // A malformed stored hash is a failed verification, not a crash.
          Effect.promise(() => argon2.verify(hash, password).catch(() => false))
        ),
      needsRehash: (hash) => {
        try {
          return argon2.needsRehash(hash, parameters)
        } catch {
          return true
        }
      }
    })
  })

export const layer = Layer.effect(Passwords, make())
