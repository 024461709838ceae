/** A TCP port free on 127.0.0.1 now (the OS picks it; a server started next binds it). */
import net from "node:net"

export const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
