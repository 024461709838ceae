/**
 * Vitest global setup of the projects whose tests start hosts in child processes (tsx) or bundle
 * them (esbuild): those children resolve `@aigw/core` without the "@aigw/source" condition, i.e. to
 * packages/core/dist, so dist is brought up to date with the sources first (incremental, skipped
 * when nothing changed). In-process tests resolve core to src/*.ts (resolve.conditions).
 */
import { ensureBuilt } from "./build.mjs"

export default function setup() {
  ensureBuilt()
}
