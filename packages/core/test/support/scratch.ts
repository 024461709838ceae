/** Temporary directories for tests, removed when the test process exits (a test may reuse one across a restart). */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const created = new Set<string>()
process.once("exit", () => {
  for (const dir of created) fs.rmSync(dir, { recursive: true, force: true })
})

/** A new directory under the OS temp dir named `<prefix>XXXXXX`. */
export const scratchDir = (prefix: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  created.add(dir)
  return dir
}
