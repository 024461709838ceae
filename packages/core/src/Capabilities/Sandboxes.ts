/**
 * The gateway's sandboxes as a service: set up on first use (Sandbox.ts: isolation, processes),
 * bounded per process (503 Busy when every slot is taken) and per avatar (429). Everything that
 * runs untrusted input in a child process goes through here: code (CodeExecution) and PDF
 * documents (Documents). The pool is measured here (Metrics.ts): runs in progress, refusals by reason.
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "../Config.ts"
import { Busy, NotAvailable, TooManyRequests } from "../Errors.ts"
import { sandboxRefusals, sandboxRunsActive } from "../Metrics.ts"
import { type Launcher, makeLauncher, makeSandbox, type Sandbox, type SandboxJob, type SandboxLanguage } from "./Sandbox.ts"

/** A sandbox slot taken for a request (`reserve`): given back by `release`, once, whoever calls it first. */
export interface Slot {
  readonly release: Effect.Effect<void>
}

/** Output beyond this is cut (and said so). */
export const MAX_OUTPUT = 100_000

const makeService = Effect.gen(function*() {
  const config = yield* GatewayConfig
  const { limits } = config
  /** The sandbox, set up on the first run (probing bubblewrap costs a process start). */
  let setUp: { readonly launcher: Launcher | { readonly unavailable: string }; readonly sandbox?: Sandbox } | undefined
  const sandboxNow = Effect.suspend(() => {
    if (setUp) return Effect.succeed(setUp)
    const launcher = makeLauncher(config.sandbox, limits.sandboxMemoryMb)
    setUp = "unavailable" in launcher ? { launcher } : { launcher, sandbox: makeSandbox(launcher, { memoryMb: limits.sandboxMemoryMb, maxOutput: MAX_OUTPUT }) }
    return setUp.sandbox?.isolation === "process" && config.sandbox === "auto"
      ? Effect.as(Effect.logWarning("Sandboxes run without bubblewrap (not installed or not usable here): no network namespace; see docs/security.md"), setUp)
      : Effect.succeed(setUp)
  })
  yield* Effect.addFinalizer(() => Effect.sync(() => setUp?.sandbox?.close()))

  /** The sandbox that runs `language`, or why there is none (answered before admission). */
  const available = (language: SandboxLanguage, packageName: string) =>
    Effect.flatMap(sandboxNow, ({ launcher, sandbox }): Effect.Effect<Sandbox, NotAvailable> => {
      if ("unavailable" in launcher || !sandbox) return Effect.fail(new NotAvailable({ message: "unavailable" in launcher ? launcher.unavailable : "The sandbox is not available." }))
      if (launcher.missing.includes(language)) {
        return Effect.fail(new NotAvailable({ message: `${language} needs the ${packageName} package, which is not installed in this deployment.` }))
      }
      return Effect.succeed(sandbox)
    })

  let running = 0
  const perAvatar = new Map<string, number>()
  /** Why `avatarId` cannot have a slot now, if it cannot. */
  const refusal = (avatarId: string): Busy | TooManyRequests | undefined => {
    if ((perAvatar.get(avatarId) ?? 0) >= limits.sandboxMaxPerAvatar) {
      sandboxRefusals.inc(["per_avatar"])
      return new TooManyRequests({ message: `At most ${limits.sandboxMaxPerAvatar} sandbox run(s) at once per avatar; wait for the running one.`, retryAfterSeconds: 1 })
    }
    if (running >= limits.sandboxMaxConcurrent) {
      sandboxRefusals.inc(["busy"])
      return new Busy({ message: `All ${limits.sandboxMaxConcurrent} sandboxes are busy; retry shortly.`, retryAfterSeconds: 1 })
    }
    return undefined
  }
  /**
   * Takes a slot for `avatarId` now, or says why not (429, 503). Taken before admission, so a full pool
   * costs no quota and a burst cannot pass the check together and be refused after it was counted; held
   * until `release` (idempotent), which the request's end calls whatever happened (Route.ts `Held`).
   */
  const reserve = (avatarId: string) =>
    Effect.suspend((): Effect.Effect<Slot, Busy | TooManyRequests> => {
      const refused = refusal(avatarId)
      if (refused) return Effect.fail(refused)
      running++
      sandboxRunsActive.inc()
      perAvatar.set(avatarId, (perAvatar.get(avatarId) ?? 0) + 1)
      let held = true
      const release = Effect.sync(() => {
        if (!held) return
        held = false
        running--
        sandboxRunsActive.dec()
        const mine = (perAvatar.get(avatarId) ?? 1) - 1
        if (mine > 0) perAvatar.set(avatarId, mine)
        else perAvatar.delete(avatarId)
      })
      return Effect.succeed({ release })
    })

  /** Runs one job in a reserved slot, which it gives back when the job ends; an interruption kills the sandbox process. */
  const run = (sandbox: Sandbox, language: SandboxLanguage, job: SandboxJob, slot: Slot) =>
    Effect.ensuring(
      Effect.tryPromise({
        try: (signal) => sandbox.run(language, job, signal),
        catch: (e) => new NotAvailable({ message: `The sandbox failed: ${String(e)}` })
      }),
      slot.release
    )

  return { available, reserve, run }
})

export class Sandboxes extends Context.Tag("aigw/Sandboxes")<Sandboxes, Effect.Effect.Success<typeof makeService>>() {}

export const layer = Layer.scoped(Sandboxes, makeService)
