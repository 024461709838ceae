/**
 * The benchmark's builds, all through scripts/bundle.mjs (the bundler of `npm start`'s program):
 *  - the stage micro-benchmark (lib/stages.ts) into bench/.build/stages.mjs;
 *  - A/B variants: the node host and its stages with an overlay of changed files, into any --out.
 * The current gateway itself is `npm start`'s bundle, hosts/node-http/dist/aigw.mjs (scripts/build.mjs).
 *
 *   node bench/lib/build.mjs --out FILE [--overlay DIR]   -> FILE and FILE's -stages.mjs
 */
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { bundle } from "../../scripts/bundle.mjs"

const here = path.dirname(fileURLToPath(import.meta.url))
export const root = path.resolve(here, "../..")
export const buildDir = path.join(root, "bench/.build")
export const stagesPath = path.join(buildDir, "stages.mjs")
const stagesEntry = path.join(root, "bench/lib/stages.ts")

/** The stage micro-benchmark bundle (of the repository as it is, or with `overlay`). */
export const buildStages = (options = {}) => bundle({ entry: stagesEntry, outfile: stagesPath, ...options })

/** A variant of the host bundle and its stage bundle (FILE and FILE-stages.mjs), for A/B runs. */
export const buildVariant = async ({ outfile, overlay }) => [
  await bundle({ outfile, overlay }),
  await buildStages({ outfile: outfile.replace(/\.mjs$/, "-stages.mjs"), overlay })
]

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2)
  const opt = (name) => (argv.includes(name) ? path.resolve(argv[argv.indexOf(name) + 1]) : undefined)
  const outfile = opt("--out")
  if (!outfile) {
    console.error("usage: node bench/lib/build.mjs --out FILE [--overlay DIR]")
    process.exit(2)
  }
  for (const r of await buildVariant({ outfile, overlay: opt("--overlay") })) {
    console.log(`${path.relative(process.cwd(), r.path)} ${(r.bytes / 1024).toFixed(0)} KiB in ${r.ms} ms`)
  }
}
