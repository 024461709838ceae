/** The README's embedding example must run as written. */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { expect, it } from "vitest"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..")

it("runs the README embedding example", () => {
  const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
  const match = /<!-- embed-example -->\s*```ts\n([\s\S]*?)```/.exec(readme)
  expect(match, "README has an embed-example block").not.toBeNull()
  const code = match![1]!
  expect(code.trim().split("\n").length).toBeLessThanOrEqual(20)
  const file = path.join(root, "hosts/node-http/test/.readme-example.ts")
  fs.writeFileSync(file, code)
  try {
    const out = execFileSync(path.join(root, "node_modules/.bin/tsx"), [file], { cwd: path.dirname(file), encoding: "utf8", timeout: 60_000 })
    expect(out).toContain("200 ok")
    expect(out).toContain("Avatar registered.")
  } finally {
    fs.rmSync(file, { force: true })
  }
})
