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
 * Object spread is lowered to helper calls when the bundle is built by a V8 older than 12 (Node 20).
 * That V8 builds a literal that spreads and then adds properties (`{ ...a, b }`) on a slow runtime
 * path that puts the new object in the old generation, so every young object it refers to survives
 * scavenges until the next full collection; the promoted objects drove the collector's marking
 * cycles, which set the tail latency. V8 12 (Node 22) builds them natively, far faster than any
 * helper. The bundle runs on the node that built it (`npm start` builds on the machine, the image in
 * its own node), and scripts/build.mjs rebuilds it when that node's V8 changes.
 * docs/performance.md, "Issue 18, ninth session" and "tenth session".
 */
export const v8Major = Number(process.versions.v8.split(".")[0])
export const lowersObjectSpread = v8Major < 12

/**
 * The helpers the lowered calls use, in place of esbuild's. esbuild's copy property by property
 * with a check and a define each, and add the properties after a spread through
 * getOwnPropertyDescriptors, which on V8 11 costs more CPU than the slow path they replace.
 * Object.assign copies the same properties (own enumerable strings, then symbols, in the same
 * order, getters read once) on V8's fast path, into a young object. It assigns where spread
 * defines; the two differ only where the target has a setter or accessor for the key:
 *  - an own "__proto__" key (JSON.parse makes them from untrusted bodies) would set the copy's
 *    prototype: an object with one takes the defining copy;
 *  - accessors or a prototype other than null in a literal of the call: those calls keep esbuild's
 *    defining helpers (definingCallSites).
 * Rest (`{ a, ...rest }`) defines every key, as the language does.
 * hosts/node-http/test/bundle.test.ts compares them with native spread and rest, including hostile
 * "__proto__" keys, and checks every call in the bundle.
 */
export const objectSpreadHelpers = [
  "var __aigwOwn=Object.prototype.hasOwnProperty,__aigwIsEnum=Object.prototype.propertyIsEnumerable,__aigwSymbols=Object.getOwnPropertySymbols,__aigwAssign=Object.assign;",
  "var __aigwDefine=(a,k,v)=>{k in a?Object.defineProperty(a,k,{enumerable:!0,configurable:!0,writable:!0,value:v}):a[k]=v};",
  "var __aigwCopy=(a,b,skip)=>{for(var k in b)__aigwOwn.call(b,k)&&!(skip&&skip.includes(k))&&__aigwDefine(a,k,b[k]);if(b!=null)for(var s of __aigwSymbols(b))!(skip&&skip.includes(s))&&__aigwIsEnum.call(b,s)&&__aigwDefine(a,s,b[s]);return a};",
  "var __spreadValues=(a,b)=>b!=null&&__aigwOwn.call(b,'__proto__')?__aigwCopy(a,b):__aigwAssign(a,b);",
  "var __spreadProps=(a,b)=>__aigwOwn.call(b,'__proto__')?__aigwCopy(a,b):__aigwAssign(a,b);",
  "var __objRest=(b,skip)=>__aigwCopy({},b,skip);"
].join("")

/**
 * esbuild's own definitions of those helpers, renamed out of the way: same length, so the source
 * map's columns on their line stay right. Each must be found exactly once.
 */
const esbuildHelperRenames = [
  ["__spreadValues", "__esbuildValue"],
  ["__spreadProps", "__esbuildProp"],
  ["__objRest", "__esbRest"]
]

/** Whether a literal in a lowered spread needs spread's define semantics: accessors, or a prototype other than null. */
const needsDefine = (ts, literal) =>
  literal.properties.some((p) =>
    ts.isGetAccessorDeclaration(p) || ts.isSetAccessorDeclaration(p) ||
    (ts.isPropertyAssignment(p) && !ts.isComputedPropertyName(p.name) && p.name.text === "__proto__" && p.initializer.kind !== ts.SyntaxKind.NullKeyword) ||
    (ts.isShorthandPropertyAssignment(p) && p.name.text === "__proto__"))

const isHelperCall = (ts, node) => ts.isCallExpression(node) && ts.isIdentifier(node.expression) && (node.expression.text === "__spreadValues" || node.expression.text === "__spreadProps")

/**
 * The lowered spreads of `text` (one literal's nested helper calls at a time) that need define
 * semantics, as the positions of their callees; these are renamed to esbuild's helpers (same length).
 */
export const definingCallSites = (ts, text) => {
  const file = ts.createSourceFile("bundle.mjs", text, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS)
  const sites = []
  // A chain's inner calls are reached through its first arguments only, never visited on their own.
  const visit = (node) => {
    if (isHelperCall(ts, node)) {
      const chain = []
      for (let call = node; isHelperCall(ts, call); call = call.arguments[0]) chain.push(call)
      const target = chain[chain.length - 1].arguments[0]
      const literals = chain.flatMap((call) => (call.expression.text === "__spreadProps" ? [call.arguments[1]] : [])).concat([target])
      const defining = chain.some((c) => c.arguments.length !== 2) || !ts.isObjectLiteralExpression(target) ||
        literals.some((l) => !ts.isObjectLiteralExpression(l) || needsDefine(ts, l))
      if (defining) for (const call of chain) sites.push(call.expression.getStart(file))
      for (const call of chain) for (const arg of call.arguments.slice(call === chain[chain.length - 1] ? 0 : 1)) visit(arg)
      return
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return sites
}

const useOurSpreadHelpers = async (text) => {
  const require = createRequire(path.join(root, "package.json"))
  const ts = (await import(pathToFileURL(require.resolve("typescript")).href)).default
  // after the banner, which defines ours
  const from = esmRequireBanner.length + objectSpreadHelpers.length
  const positions = [...esbuildHelperRenames.map(([name]) => {
    const definition = text.indexOf(`${name}=(`, from)
    if (definition === -1 || text.indexOf(`${name}=(`, definition + 1) !== -1) {
      throw new Error(`esbuild's helper ${name} not found once in the bundle: the esbuild version changed how object spread is lowered (scripts/bundle.mjs, objectSpreadHelpers)`)
    }
    return definition
  }), ...definingCallSites(ts, text)]
  // Each rename keeps the text's length, so the positions found above stay right.
  let out = text
  for (const at of positions) {
    const [name, renamed] = esbuildHelperRenames.find(([n]) => out.startsWith(n, at))
    out = out.slice(0, at) + renamed + out.slice(at + name.length)
  }
  return out
}

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
    // Core's sources (its package's "@aigw/source" export), as the host's tsconfig paths give them:
    // without it an entry outside hosts/ (the stage benchmark) bundled core's tsc output, which an
    // overlay does not replace and which is only as new as the last tsc build.
    conditions: ["@aigw/source"],
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
    // On one line with the banner's last: the source map's lines stay those of the code.
    banner: { js: lowersObjectSpread ? esmRequireBanner + objectSpreadHelpers : esmRequireBanner }
  })
  const built = fs.readFileSync(outfile, "utf8")
  let text = lowersObjectSpread ? await useOurSpreadHelpers(built) : built
  // esbuild keeps a few non-ASCII characters (escaped ones inside wink-nlp's regular expressions);
  // one of them makes V8 hold the whole bundle text as a two-byte string (twice the memory). As
  // \uXXXX escapes they mean the same in regular expressions and string literals.
  if (/[^\x00-\x7f]/.test(text)) {
    const escape = (c) => [...c].map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")
    // `\–` (an identity escape) becomes `\u2013`, not `\\u2013`
    text = text.replace(/(\\*)([^\x00-\x7f])/g, (_, slashes, c) => slashes.slice(slashes.length % 2) + escape(c))
  }
  if (text !== built) fs.writeFileSync(outfile, text)
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
