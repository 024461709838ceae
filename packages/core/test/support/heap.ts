/**
 * The live heap in bytes after two full collections, for tests that check something keeps nothing: V8's
 * `gc` is exposed in this process on first use (`--expose-gc` set at run time, read through a new context).
 */
import * as v8 from "node:v8"
import * as vm from "node:vm"

let gc: (() => void) | undefined

export const liveHeapBytes = (): number => {
  if (gc === undefined) {
    v8.setFlagsFromString("--expose-gc")
    gc = vm.runInNewContext("gc") as () => void
  }
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
