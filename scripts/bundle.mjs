#!/usr/bin/env node
/**
 * Bundles the node host (hosts/node-http/src/main.ts) into one ES module with esbuild:
 * hosts/node-http/dist/aigw.mjs, the program `npm start` and the container run (scripts/build.mjs
 * calls this after tsc). The benchmark bundles its A/B variants and its stage micro-benchmark here too.
 *
 * Why a bundle and not tsc's dist/main.js: it keeps only the modules the host reaches (Effect's
 * barrel imports load every module of the package otherwise), which halves the live heap
 * (docs/performance.md, "Memory").
 *
 *  - Native addons (better-sqlite3, argon2, pg-native) and the packages core imports lazily
 *    (`await import("pkg")`: nodemailer, the NLP model, ajv, …) stay external and resolve from the
 *    node_modules above the bundle at run time; lazy stays lazy.
 *  - Core's modules that find files or packages next to themselves (`import.meta.url`: the sandbox
 *    runner and its interpreters, the sentence-model worker) keep the URL of their compiled copy
 *    under packages/core/dist, so they find them where tsc's build has them, with core's own
 *    node_modules (npm does not hoist every package of a workspace).
 *
 *   node scripts/bundle.mjs [--entry FILE] [--out FILE] [--overlay DIR]
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
export const hostBundle = path.join(root, "hosts/node-http/dist/aigw.mjs")

/** CommonJS dependencies inside an ES module bundle need require / __filename / __dirname (also the Lambda bundle's). */
export const esmRequireBanner = [
  "import { createRequire as __aigwCreateRequire } from 'node:module';",
  "import { fileURLToPath as __aigwFileURLToPath } from 'node:url';",
  "import { dirname as __aigwDirname } from 'node:path';",
  "const require = __aigwCreateRequire(import.meta.url);",
  "const __filename = __aigwFileURLToPath(import.meta.url);",
  "const __dirname = __aigwDirname(__filename);"
].join("\n")

/**
 * Object spread is lowered to esbuild's helper calls when the bundle is built by a V8 older than 12
 * (Node 20). That V8 builds a literal that spreads and then adds properties (`{ ...a, b }`) on a slow
 * runtime path that puts the new object in the old generation, so every young object it refers to
 * survives scavenges until the next full collection; the promoted objects drove the collector's
 * marking cycles, which set the tail latency. V8 12 (Node 22) builds them natively, far faster than
 * the helpers. The bundle runs on the node that built it (`npm start` builds on the machine, the
 * image in its own node), and scripts/build.mjs rebuilds it when that node's V8 changes.
 * docs/performance.md, "Issue 18, ninth session".
 */
export const v8Major = Number(process.versions.v8.split(".")[0])
export const lowersObjectSpread = v8Major < 12

const coreSrc = path.join(root, "packages/core/src")
const coreDist = path.join(root, "packages/core/dist")

/**
 * Bundles `entry` to `outfile`. `overlay`: a directory whose files replace the repository's files
 * of the same relative path (the benchmark's "before" variants).
 */
export const bundle = async ({ entry = path.join(root, "hosts/node-http/src/main.ts"), outfile = hostBundle, overlay } = {}) => {
  const require = createRequire(path.join(root, "package.json"))
  const esbuild = await import(pathToFileURL(require.resolve("esbuild")).href)
  fs.mkdirSync(path.dirname(outfile), { recursive: true })
  const started = Date.now()
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    ...(lowersObjectSpread ? { supported: { "object-rest-spread": false } } : {}),
    // Whitespace and syntax minified, identifiers kept (readable stack traces and --cpu-prof names).
    minifyWhitespace: true,
    minifySyntax: true,
    minifyIdentifiers: false,
    sourcemap: "linked",
    legalComments: "none",
    logLevel: "warning",
    // native addons load their binaries relative to their own package directory
    external: ["better-sqlite3", "argon2", "pg-native"],
    plugins: [{
      name: "aigw-host",
      setup(b) {
        b.onResolve({ filter: /^[^./]/ }, (args) => (args.kind === "dynamic-import" ? { path: args.path, external: true } : undefined))
        b.onLoad({ filter: /\.ts$/ }, (args) => {
          const replaced = overlay && path.join(overlay, path.relative(root, args.path))
          const fromOverlay = replaced && fs.existsSync(replaced)
          const source = fs.readFileSync(fromOverlay ? replaced : args.path, "utf8")
          const inCore = !path.relative(coreSrc, args.path).startsWith("..")
          if (!fromOverlay && !(inCore && source.includes("import.meta.url"))) return undefined
          // The compiled copy of this module, relative to the bundle (the bundle may be moved with the repository).
          const compiled = path.join(coreDist, path.relative(coreSrc, args.path)).replace(/\.ts$/, ".js")
          const url = `new URL(${JSON.stringify(path.relative(path.dirname(outfile), compiled).split(path.sep).join("/"))}, import.meta.url).href`
          return { contents: inCore ? source.replaceAll("import.meta.url", url) : source, loader: "ts", resolveDir: path.dirname(args.path) }
        })
      }
    }],
    banner: { js: esmRequireBanner }
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

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2)
  const opt = (name) => (argv.includes(name) ? path.resolve(argv[argv.indexOf(name) + 1]) : undefined)
  try {
    const r = await bundle({ entry: opt("--entry"), outfile: opt("--out"), overlay: opt("--overlay") })
    process.stderr.write(`aigw bundle: ${path.relative(process.cwd(), r.path)} ${(r.bytes / 1024).toFixed(0)} KiB in ${r.ms} ms\n`)
  } catch (e) {
    process.stderr.write(`aigw bundle: ${e instanceof Error ? e.message : e}\n`)
    process.exitCode = 1
  }
}
