/** Checks on JSON text before it is parsed: used by every edge (Http/Route.ts) and for uploaded JSON documents. */

export const NUL_PROBLEM = "NUL characters (\\u0000) are not accepted."

/**
 * Why a JSON text must not be parsed, or undefined: nesting deeper than `maxDepth` (a deep value
 * overflows the stack of every recursive step after JSON.parse), or a NUL character in a string
 * (PostgreSQL cannot store it). One linear pass outside and inside strings, before JSON.parse.
 */
export const jsonTextProblem = (text: string, maxDepth: number): string | undefined => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0) return NUL_PROBLEM
    if (inString) {
      if (c === 0x5c) {
        // An escape: `\u0000` is NUL; any other is skipped whole (`\"` does not end the string).
        if (text.charCodeAt(i + 1) === 0x75 && text.startsWith("0000", i + 2)) return NUL_PROBLEM
        i++
      } else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return `JSON nested deeper than ${maxDepth} levels.`
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return undefined
}
