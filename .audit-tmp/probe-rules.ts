import { time } from "./t.ts"
const rules: Record<string, RegExp> = {
  email: /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g,
  card: /\b(?:\d[ -]?){12,18}\d\b/g,
  iban: /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b/g,
  ssn: /\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b/g,
  phone: /(?<![\w-])\+?\d{1,3}?[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4}(?![\w-])/g,
  api: /\b(?:sk-(?:proj-)?[A-Za-z0-9_-]{20,}|sk-ant-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|aigw_[A-Za-z0-9_-]{40,})\b/g,
}
const inputs: Record<string, (n: number) => string> = {
  a: (n) => "a".repeat(n),
  atdomain: (n) => "a@" + "a".repeat(n),
  digits: (n) => "1".repeat(n),
  ibanish: (n) => "DE89" + "A".repeat(n),
  dashes: (n) => "-".repeat(n),
  skdash: (n) => "sk-" .repeat(n/3),
  xox: (n) => "xoxa-".repeat(n/5),
}
for (const [iname, gen] of Object.entries(inputs)) for (const [rname, re] of Object.entries(rules)) {
  const s = gen(20_000)
  const t = performance.now(); [...s.matchAll(re)]; const ms = performance.now() - t
  if (ms > 20) console.log(iname, rname, ms.toFixed(1), "ms at 20k")
}
