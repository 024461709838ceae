/**
 * Group commit's queue (`perTurn`, Storage/Sql/Metering.ts): the calls of one event-loop turn go as
 * one batch; with a flush that returns a promise, at most `inFlight` batches are out at once and the
 * calls of the turns in between go together as the next batch.
 */
import { describe, expect, it } from "vitest"
import { type Pending, perTurn } from "../../src/Storage/Sql/Metering.ts"

const nextTurn = () => new Promise((r) => setImmediate(r))

describe("perTurn", () => {
  it("hands each turn's calls to a synchronous flush as one batch", async () => {
    const batches: Array<Array<number>> = []
    const enqueue = perTurn<number>((batch) => {
      batches.push(batch.map((p) => p.work))
      batch.forEach((p) => p.resolve(p.work * 10))
    })
    const first = [enqueue<number>(1), enqueue<number>(2)]
    await nextTurn()
    const second = [enqueue<number>(3)]
    expect(await Promise.all([...first, ...second])).toEqual([10, 20, 30])
    expect(batches).toEqual([[1, 2], [3]])
  })

  it("keeps at most inFlight batches out: the turns in between wait and go together", async () => {
    const batches: Array<Array<number>> = []
    const open: Array<() => void> = []
    const enqueue = perTurn<number>((batch) => {
      batches.push(batch.map((p) => p.work))
      return new Promise<void>((done) =>
        open.push(() => {
          batch.forEach((p: Pending<number>) => p.resolve(p.work))
          done()
        })
      )
    }, 1)
    const calls = [enqueue<number>(1)]
    await nextTurn()
    expect(batches).toEqual([[1]])
    for (let i = 2; i <= 4; i++) {
      calls.push(enqueue<number>(i))
      await nextTurn()
    }
    // Three turns later the first batch is still out: nothing else was sent.
    expect(batches).toEqual([[1]])
    open.shift()!()
    await nextTurn()
    await nextTurn()
    expect(batches).toEqual([[1], [2, 3, 4]])
    open.shift()!()
    expect(await Promise.all(calls)).toEqual([1, 2, 3, 4])
    // A rejected batch frees its place too.
    const failing = perTurn<number>((batch) => Promise.reject(new Error("down")).catch((e) => batch.forEach((p) => p.reject(e))).then(() => Promise.reject(new Error("after"))), 1)
    await expect(failing(1)).rejects.toThrow("down")
    await expect(failing(2)).rejects.toThrow("down")
  })
})
