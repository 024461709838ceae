"use strict"
/**
 * The addon built at install (binding.gyp, by node-gyp). `trim()` runs glibc's malloc_trim(0) and
 * says whether memory was released; it is undefined where there is nothing to call, and `problem`
 * then says why (no glibc, or the addon was not built or does not load).
 */
const path = require("node:path")

let trim
let problem
try {
  trim = require(path.join(__dirname, "build", "Release", "malloc_trim.node")).trim
  if (trim === undefined) problem = "this C library is not glibc; there is no malloc_trim to call"
} catch (e) {
  problem = `the native module could not be loaded (${e instanceof Error ? e.message.split("\n")[0] : String(e)}); ` +
    "it is built at install, which needs python3, make and a C compiler: npm rebuild @aigw/malloc-trim"
}

module.exports = { trim, problem }
