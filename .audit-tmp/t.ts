export const time = (label: string, f: () => unknown) => { const t = performance.now(); const r = f(); const ms = performance.now() - t; console.log(`${label}: ${ms.toFixed(1)} ms`); return r }
