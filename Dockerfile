# aigw node host. The build stage installs everything and compiles TypeScript (and the native modules:
# argon2, better-sqlite3, @aigw/malloc-trim); the runtime stage keeps the compiled JavaScript and production dependencies
# only, and runs as the unprivileged `node` user. docs/deployment-node.md ("Containers").
FROM node:22-bookworm-slim AS build
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# The manifests first, so that the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
COPY packages/core/package.json packages/core/
COPY hosts/node-http/package.json hosts/node-http/
COPY hosts/mcp/package.json hosts/mcp/
COPY hosts/lambda/package.json hosts/lambda/
# The malloc_trim addon (its sources too: npm ci compiles it).
COPY packages/malloc-trim packages/malloc-trim
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.base.json tsconfig.build.json ./
COPY scripts scripts
COPY packages packages
COPY hosts hosts
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund \
  && rm -rf hosts/lambda packages/core/src packages/core/test hosts/*/test

FROM node:22-bookworm-slim
# bubblewrap isolates the code sandboxes where the container may create user namespaces; elsewhere
# AIGW_SANDBOX=auto falls back to the process sandbox (docs/security.md).
RUN apt-get update \
  && apt-get install -y --no-install-recommends bubblewrap \
  && rm -rf /var/lib/apt/lists/* \
  && mkdir -p /data && chown node:node /data
ENV NODE_ENV=production \
  MALLOC_ARENA_MAX=2 \
  MALLOC_MMAP_THRESHOLD_=131072 \
  HOST=0.0.0.0 \
  PORT=8787 \
  AIGW_DATA_DIR=/data \
  DATABASE_URL=sqlite:/data/aigw.sqlite
WORKDIR /app
COPY --from=build --chown=node:node /app /app
USER node
VOLUME /data
EXPOSE 8787
# Liveness: /v1/health answers 503 when the database does not (docs/observability.md).
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8787) + '/v1/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# What `npm start` runs (package.json): the host's bundle, with a young generation of 2 x 8 MB, an old
# generation that grows by 40 % over what a full collection leaves instead of V8's defaults, no
# allocation-site pretenuring (a request's objects stay young under load), and (ENV above) two malloc
# arenas instead of one per thread (docs/performance.md, "Memory"; docs/deployment-node.md).
CMD ["sh", "scripts/node.sh", "--max-semi-space-size=8", "--heap-growing-percent=40", "--no-allocation-site-pretenuring", "hosts/node-http/dist/aigw.mjs"]
