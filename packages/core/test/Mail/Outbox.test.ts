/**
 * The mail outbox over a mail server that refuses: a refused mail is kept and retried until taken,
 * given up once its link would expire before the next attempt, and never lost or sent twice.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type Mail, MailFailed, Mailer } from "../../src/Mail/Mailer.ts"
import { MailOutbox, layer as outboxLayer } from "../../src/Mail/Outbox.ts"
import { MailOutboxStore, layerMemory as outboxStoreMemory } from "../../src/Storage/MailOutboxStore.ts"

/** A mail server that refuses while `refusing` is set, and records what it took. */
const flakyServer = () => {
  const state = { refusing: true, taken: [] as Array<Mail>, tries: 0 }
  const layer = Layer.succeed(Mailer, {
    send: (mail) =>
      Effect.suspend(() => {
        state.tries++
        if (state.refusing) return Effect.fail(new MailFailed({ message: "451 4.3.0 try again later" }))
        state.taken.push(mail)
        return Effect.void
      })
  })
  return { state, layer }
}

/** The outbox over `server` and a memory store. */
const outboxOver = (server: ReturnType<typeof flakyServer>) => outboxLayer.pipe(Layer.provideMerge(Layer.merge(server.layer, outboxStoreMemory)))

const mail = (n: number): Mail => ({ to: `u${n}@example.com`, subject: `Verify ${n}`, text: `https://gw.example.test/v?token=${n}`, html: "" })

describe("MailOutbox", () => {
  it.effect("keeps a refused mail and sends it once the server takes it; a taken one is not kept", () => {
    const server = flakyServer()
    return Effect.gen(function*() {
      const outbox = yield* MailOutbox
      const store = yield* MailOutboxStore
      yield* outbox.send(mail(1), 3_600_000)
      assert.deepStrictEqual([server.state.tries, server.state.taken.length, yield* store.size()], [1, 0, 1])
      // Not due before its wait: nothing claimed.
      assert.strictEqual(yield* outbox.drain, 0)
      const [kept] = yield* store.claim(Date.now() + 3_600_000, 10, 60_000)
      // Still refusing: put back for later with the error, the attempt counted.
      yield* outbox.retry(kept!)
      const [again] = yield* store.claim(Date.now() + 3_600_000, 10, 60_000)
      assert.deepStrictEqual([again?.attempts, again?.lastError], [3, "451 4.3.0 try again later"])
      server.state.refusing = false
      yield* outbox.retry(again!)
      assert.deepStrictEqual(server.state.taken, [mail(1)])
      assert.strictEqual(yield* store.size(), 0)
      // A mail the server takes at once is not kept.
      yield* outbox.send(mail(2), 3_600_000)
      assert.deepStrictEqual([server.state.taken.length, yield* store.size()], [2, 0])
    }).pipe(Effect.provide(outboxOver(server)))
  })

  it.effect("gives a mail up when its link would expire before the next attempt, not before", () => {
    const server = flakyServer()
    return Effect.gen(function*() {
      const outbox = yield* MailOutbox
      const store = yield* MailOutboxStore
      // Worth sending for half a minute: the first retries (about 5 and 15 s on) are within it.
      yield* outbox.send(mail(3), 30_000)
      const now = Date.now()
      const [first] = yield* store.claim(now + 10_000, 10, 60_000)
      assert.isDefined(first)
      yield* outbox.retry(first!)
      assert.strictEqual(yield* store.size(), 1, "the next attempt (about 15 s on) is still within the half minute")
      const [second] = yield* store.claim(now + 60_000, 10, 60_000)
      assert.strictEqual(second?.attempts, 3)
      // The next would wait about 45 s: past the link's half minute, so it is given up.
      yield* outbox.retry(second!)
      assert.strictEqual(yield* store.size(), 0)
      assert.strictEqual(server.state.taken.length, 0)
    }).pipe(Effect.provide(outboxOver(server)))
  })
})
