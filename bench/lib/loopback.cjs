// node -r preload: a server that listens without a host (Portkey's start-server.js does) is put on
// 127.0.0.1 instead of every interface.
const net = require("node:net")
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  const [first] = args
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1")
  } else if (first && typeof first === "object" && first.path === undefined && first.host === undefined && first.fd === undefined) {
    args[0] = { ...first, host: "127.0.0.1" }
  }
  return listen.apply(this, args)
}
