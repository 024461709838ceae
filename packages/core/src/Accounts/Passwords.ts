/**
 * Password hashing with argon2id (m=19456 KiB, t=2, p=1; OWASP's baseline), PHC strings.
 * Hashing is CPU- and memory-heavy, so concurrent hashes are bounded by a semaphore.
 * The native module is loaded when the layer is built, not when this module is: a host can check
 * its runtime first (the Lambda bundle's prebuilt binaries need Node-API 10; Lambda/Host.ts).
 */
import { Context, Effect, Layer } from "effect"

/** argon2id's parameters; `type` 2 is argon2's `argon2id`. */
export const parameters = { type: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

export interface PasswordsService {
  readonly hash: (password: string) => Effect.Effect<string>
  readonly verify: (hash: string, password: string) => Effect.Effect<boolean>
  /** True when the stored hash was made with other parameters and should be replaced. */
  readonly needsRehash: (hash: string) => boolean
}

export class Passwords extends Context.Tag("aigw/Passwords")<Passwords, PasswordsService>() {}

export const make = (options: { concurrency?: number } = {}) =>
  Effect.gen(function*() {
    const argon2 = yield* Effect.promise(() => import("argon2"))
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
