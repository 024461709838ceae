/**
 * Bundles the node host (hosts/node-http/src/main.ts) into bench/.build/aigw.mjs with esbuild, so the
 * measured process runs plain JavaScript (no tsx loader, no TypeScript transpilation at run time),
 * as a production deployment would. Native modules (better-sqlite3, argon2), pg-native and the
 * packages core loads lazily with `await import()` stay external and resolve from the repository's
 * node_modules at run time.
 *
 *   node bench/lib/build.mjs            -> prints the bundle path
 *
 * Exported `build()` is used by bench/run.mjs.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { createRequire } from "node:module"
import { fileURLToPath, pathToFileURL } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
export const root = path.resolve(here, "../..")
export const buildDir = path.join(root, "bench/.build")
export const bundlePath = path.join(buildDir, "aigw.mjs")
export const stagesPath = path.join(buildDir, "stages.mjs")

/**
 * Bundles `entry` (default: the node host) to `outfile`. `overlay`: a directory whose files replace
 * the repository's files of the same relative path (used to build a "before" variant for A/B runs).
 */
export const build = async ({ entry = path.join(root, "hosts/node-http/src/main.ts"), outfile = bundlePath, overlay } = {}) => {
  const require = createRequire(path.join(root, "package.json"))
  const esbuild = await import(pathToFileURL(require.resolve("esbuild")).href)
  fs.mkdirSync(buildDir, { recursive: true })
  const started = Date.now()
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Whitespace and syntax minified, identifiers kept (readable stack traces and --cpu-prof names):
    // the bundle text V8 keeps in memory shrinks from about 16 MB (two-byte: non-ASCII in comments) to 4.
    minifyWhitespace: true,
    minifySyntax: true,
    minifyIdentifiers: false,
    sourcemap: "linked",
    legalComments: "none",
    logLevel: "warning",
    // native addons load their binaries relative to their own package directory
    external: ["better-sqlite3", "argon2", "pg-native"],
    // packages core imports lazily (`await import("pkg")`) stay lazy: loaded at run time, when used
    plugins: [{
      name: "lazy-packages",
      setup(b) {
        b.onResolve({ filter: /^[^./]/ }, (args) => (args.kind === "dynamic-import" ? { path: args.path, external: true } : undefined))
        if (overlay) {
          b.onLoad({ filter: /\.ts$/ }, (args) => {
            const replaced = path.join(overlay, path.relative(root, args.path))
            return fs.existsSync(replaced) ? { contents: fs.readFileSync(replaced, "utf8"), loader: "ts", resolveDir: path.dirname(args.path) } : undefined
          })
        }
      }
    }],
    // the bundle lives in bench/.build: resolve the externals from the repository root
    nodePaths: [path.join(root, "node_modules")],
    banner: {
      js: [
        "import { createRequire as __aigwCreateRequire } from 'node:module';",
        "import { fileURLToPath as __aigwFileURLToPath } from 'node:url';",
        "import { dirname as __aigwDirname } from 'node:path';",
        `const require = __aigwCreateRequire(${JSON.stringify(path.join(root, "package.json"))});`,
        "const __filename = __aigwFileURLToPath(import.meta.url);",
        "const __dirname = __aigwDirname(__filename);"
      ].join("\n")
    }
  })
  // esbuild keeps a few non-ASCII characters (escaped ones inside wink-nlp's regular expressions);
  // one of them makes V8 hold the whole bundle text as a two-byte string (twice the memory). As
  // \uXXXX escapes they mean the same in regular expressions and string literals.
  const text = fs.readFileSync(outfile, "utf8")
  if (/[^\x00-\x7f]/.test(text)) {
    const escape = (c) => [...c].map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")
    // `\–` (an identity escape) becomes `\u2013`, not `\\u2013`
    fs.writeFileSync(outfile, text.replace(/(\\*)([^\x00-\x7f])/g, (_, slashes, c) => slashes.slice(slashes.length % 2) + escape(c)))
  }
  return { path: outfile, ms: Date.now() - started, bytes: fs.statSync(outfile).size }
}

/** The host bundle and the stage micro-benchmark bundle. */
export const buildAll = async (options = {}) => [
  await build(options),
  await build({ ...options, entry: path.join(root, "bench/lib/stages.ts"), outfile: options.outfile ? options.outfile.replace(/\.mjs$/, "-stages.mjs") : stagesPath })
]

// node bench/lib/build.mjs [--out FILE] [--overlay DIR]
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2)
  const opt = (name) => (argv.includes(name) ? path.resolve(argv[argv.indexOf(name) + 1]) : undefined)
  for (const r of await buildAll({ outfile: opt("--out"), overlay: opt("--overlay") })) {
    console.log(`${path.relative(process.cwd(), r.path)} ${(r.bytes / 1024).toFixed(0)} KiB in ${r.ms} ms`)
  }
}
