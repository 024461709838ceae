/** The core services on memory stores, in process, with the OpenAI provider pointed at a mock when given. */
import { Layer, ManagedRuntime, Option, Redacted } from "effect"
import * as GatewayConfig from "../../src/Config.ts"
import * as Layers from "../../src/Layers.ts"
import * as Mailer from "../../src/Mail/Mailer.ts"
import type { AvatarRecord } from "../../src/Storage/AvatarStore.ts"

export const testAvatar = (id: string, avatarType: "User" | "Admin" = "User"): AvatarRecord => ({
  id, username: id, email: `${id}@example.com`, passwordHash: "x", title: "", description: "", image: "", dob: null, karmaTotal: 0,
  avatarType, providerType: "Default", plan: "Free", emailVerified: true, pendingEmail: null, isActive: true, createdAt: 0, updatedAt: 0, deletedAt: null, tokensValidAfter: 0
})

export const coreRuntime = (openai?: { readonly url: string; readonly apiKey: string }) =>
  ManagedRuntime.make(
    Layers.layerMemory.pipe(
      Layer.provideMerge(Mailer.layerMemory),
      Layer.provideMerge(GatewayConfig.layer({
        providerEnv: (id) =>
          openai !== undefined && id === "openai"
            ? { apiKey: Option.some(Redacted.make(openai.apiKey)), baseUrl: Option.some(openai.url) }
            : { apiKey: Option.none(), baseUrl: Option.none() }
      }))
    )
  )
