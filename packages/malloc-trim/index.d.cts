/** glibc's malloc_trim(0): true when memory was released. Undefined where it cannot run (see `problem`). */
export declare const trim: (() => boolean) | undefined
/** Why `trim` is undefined: not glibc, or the addon was not built. */
export declare const problem: string | undefined
