/** Temporary directories for tests, removed after the test file (a test may reuse one across a restart). */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"

const created = new Set<string>()
const removeAll = () => {
  for (const dir of created) fs.rmSync(dir, { recursive: true, force: true })
  created.clear()
}
// After the file's tests; and at exit for anything created later (vitest may end a worker without it).
afterAll(removeAll)
process.once("exit", removeAll)

/** A new directory under the OS temp dir named `<prefix>XXXXXX`. */
export const scratchDir = (prefix: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  created.add(dir)
  return dir
}
