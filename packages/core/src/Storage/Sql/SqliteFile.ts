/**
 * Whether a SQLite connection's file is still the one at its path. A file removed or replaced under a
 * running server leaves the connection writing to the unlinked file: every call still succeeds, and
 * everything written is gone at the next start. Readiness (Health.ts) fails then. A module of its
 * own, without the driver: hosts without SQLite (Lambda) read the tag and find none.
 */
import { Context } from "effect"
import * as fs from "node:fs"

export interface SqliteFileService {
  /** Why the file at the connection's path is no longer the one it opened ("removed", "replaced"), or undefined. */
  readonly moved: () => string | undefined
}

export class SqliteFile extends Context.Tag("aigw/SqliteFile")<SqliteFile, SqliteFileService>() {}

/** The check for `path`, as the file there is now (at open). A path that cannot be read (":memory:") is never moved. */
export const watching = (path: string): SqliteFileService => {
  let opened: fs.Stats
  try {
    opened = fs.statSync(path)
  } catch {
    return { moved: () => undefined }
  }
  return {
    moved: () => {
      try {
        const now = fs.statSync(path)
        return now.dev === opened.dev && now.ino === opened.ino ? undefined : "replaced"
      } catch {
        return "removed"
      }
    }
  }
}
