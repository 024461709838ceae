/**
 * A host's graceful stop is begun by the first SIGTERM or SIGINT (the Effect runtime interrupts the
 * main fiber on it). The same signal often comes twice at once: Ctrl-C signals the terminal's whole
 * process group, npm (or another wrapper) relays it again, and a process manager may signal the
 * group. Node's default action for a signal nobody listens to is to end the process, which would cut
 * the graceful stop short: once one has begun, repeats are ignored. The stop ends within its grace
 * period anyway (AIGW_SHUTDOWN_GRACE_SECONDS), and SIGKILL still ends the process at once.
 */
export const keepGracefulStops = (): void => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      for (const other of ["SIGTERM", "SIGINT"] as const) process.on(other, ignore)
    })
  }
}

const ignore = () => {}
