/** A real SMTP server (smtp-server) that parses what it receives (mailparser). */
import { simpleParser } from "mailparser"
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"

export interface ReceivedMail {
  readonly to: string
  readonly subject: string
  readonly text: string
  readonly html: string
}

export interface MailCatcher {
  readonly url: string
  readonly mails: Array<ReceivedMail>
  /** Waits for the n-th (1-based) mail to `to` whose subject matches. */
  readonly waitFor: (to: string, subject: RegExp, n?: number, timeoutMs?: number) => Promise<ReceivedMail>
  readonly linkIn: (mail: ReceivedMail) => string
  /** While true the server answers each mail with a temporary failure (451) and keeps none of it. */
  refusing: boolean
  /** Mails refused so far. */
  readonly refused: () => number
  readonly close: () => Promise<void>
}

/** `delayMs`: how long the server waits before it accepts each mail (a slow or distant mail server). */
export const startSmtp = async (options: { readonly delayMs?: number } = {}): Promise<MailCatcher> => {
  const mails: Array<ReceivedMail> = []
  let refused = 0
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    onData(stream, _session, callback) {
      if (catcher.refusing) {
        refused++
        stream.on("end", () => callback(Object.assign(new Error("4.3.0 mail server busy, try again later"), { responseCode: 451 })))
        stream.resume()
        return
      }
      simpleParser(stream)
        .then((parsed) => {
          const to = Array.isArray(parsed.to) ? parsed.to[0] : parsed.to
          mails.push({
            to: (to?.value[0]?.address ?? "").toLowerCase(),
            subject: parsed.subject ?? "",
            text: parsed.text ?? "",
            html: typeof parsed.html === "string" ? parsed.html : ""
          })
          setTimeout(callback, options.delayMs ?? 0)
        })
        .catch(callback)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.server.address() as AddressInfo
  const matching = (to: string, subject: RegExp) => mails.filter((m) => m.to === to.toLowerCase() && subject.test(m.subject))
  const catcher: MailCatcher = {
    refusing: false,
    refused: () => refused,
    url: `smtp://127.0.0.1:${port}`,
    mails,
    waitFor: async (to, subject, n = 1, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs
      while (Date.now() < deadline) {
        const found = matching(to, subject)
        if (found.length >= n) return found[n - 1]!
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`no mail #${n} to ${to} matching ${subject}; got: ${JSON.stringify(mails.map((m) => [m.to, m.subject]))}`)
    },
    linkIn: (mail) => {
      const match = /(https?:\/\/\S+token=[A-Za-z0-9_%-]+)/.exec(mail.text)
      if (!match) throw new Error(`no link in mail: ${mail.text}`)
      return match[1]!
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return catcher
}
