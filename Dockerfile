# One image for every role: `engine`, `operator`, `api-server` and `standalone`
# (the first argument picks it). Node 24 runs the TypeScript sources directly
# (type stripping), so there is no compile stage: the first stage only installs
# production dependencies, the second copies them next to the sources.
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:24-slim AS runtime
ENV NODE_ENV=production
# `tributary --version` names the commit: docker build --build-arg TRIBUTARY_COMMIT=$(git rev-parse --short=12 HEAD)
ARG TRIBUTARY_COMMIT=""
ENV TRIBUTARY_COMMIT=$TRIBUTARY_COMMIT
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY engine/src ./engine/src
COPY operator/src ./operator/src
COPY api-server/src ./api-server/src
# The image's `node` user (uid 1000): pods run non-root with a read-only root fs.
USER 1000:1000
ENTRYPOINT ["node", "bin/tributary.ts"]
CMD ["standalone"]
