import { htmlText, parseCsv } from "/work/main/packages/core/src/Capabilities/Documents.ts"
import { time } from "./t.ts"
const mode = process.argv[2]!
const sizes = (process.argv[3] ?? "10000,30000,100000").split(",").map(Number)
for (const n of sizes) {
  let s = ""
  if (mode === "lt") s = "<".repeat(n)
  if (mode === "script") s = "<script>".repeat(n / 8)
  if (mode === "comment") s = "<!--".repeat(n / 4)
  if (mode === "br") s = "<br".repeat(n / 3)
  if (mode === "amp") s = "&".repeat(n)
  if (mode === "ampx") s = "&#x".repeat(n/3)
  if (mode === "nl") s = ("\n" + " ".repeat(50)).repeat(n / 51)
  if (mode === "csv") s = ",".repeat(n)
  if (mode === "csvq") s = "\"" + "a".repeat(n)
  if (mode === "csv") { time(`${mode} n=${s.length}`, () => parseCsv(s)); continue }
  if (mode === "csvq") { time(`${mode} n=${s.length}`, () => parseCsv(s)); continue }
  time(`${mode} n=${s.length}`, () => htmlText(s))
}
