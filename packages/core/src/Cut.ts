/**
 * Text cut for a message: at most `max` UTF-16 units, never through a surrogate pair (half an emoji
 * is a lone surrogate, which a strict JSON decoder refuses), marked with the whole length when cut.
 */
export const cutText = (text: string, max: number): string =>
  text.length <= max ? text : `${sliceWhole(text, max)}… (${text.length} characters)`

/** The first `max` UTF-16 units of `text`, one fewer when the last would be the first half of a pair. */
export const sliceWhole = (text: string, max: number): string =>
  text.slice(0, max > 0 && max < text.length && isHighSurrogate(text.charCodeAt(max - 1)) ? max - 1 : max)

const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff
