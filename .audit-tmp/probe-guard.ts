import { scan } from "/work/main/packages/core/src/Capabilities/Guardrails.ts"
import { time } from "./t.ts"
const mode = process.argv[2]!
for (const n of [10_000, 30_000, 100_000]) {
  let s = ""
  if (mode === "email") s = "a".repeat(n)
  if (mode === "emaildot") s = "a@" + "a".repeat(n - 2)
  if (mode === "emailmany") s = "a@b.cc ".repeat(n / 7)
  if (mode === "digits") s = "1".repeat(n)
  if (mode === "ssn") s = "123-45-6789 ".repeat(n / 12)
  if (mode === "mixed") s = ("a@b.cc 123-45-6789 ").repeat(n / 19)
  if (mode === "ws") s = "ignore " + " ".repeat(n)
  if (mode === "phone") s = "12 345 678 ".repeat(n/11)
  if (mode === "iban") s = "DE89 3704 0044 0532 0130 00 ".repeat(n/28)
  s = s.slice(0, n)
  const r = time(`${mode} n=${s.length}`, () => scan(s)) as unknown[]
  console.log("  findings", r.length)
}
