/**
 * Creating a directory with its missing parents. Node's `mkdirSync(dir, { recursive: true })` never
 * returns on a file system that refuses a new entry with ENOENT while its parent exists (/proc): it
 * tries the parent and the entry again forever (a start with AIGW_DATA_DIR=/proc/aigw spun at full
 * CPU, deaf to SIGTERM). Here each missing directory is made once, and the first refusal is thrown.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** `mode`: of the directories made (an existing one keeps its own). */
export const makeDirectory = (dir: string, mode?: number): void => {
  const missing: Array<string> = []
  for (let d = path.resolve(dir); !fs.existsSync(d); d = path.dirname(d)) {
    missing.push(d)
    if (path.dirname(d) === d) break
  }
  for (const d of missing.reverse()) {
    try {
      fs.mkdirSync(d, mode)
    } catch (e) {
      // Made meanwhile by another process (two workers starting together).
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
  }
}
