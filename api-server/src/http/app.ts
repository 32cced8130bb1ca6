// The /api/v1 facade: Fastify routes over the resource store and the catalog.
import type { IncomingMessage } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import rateLimit from '@fastify/rate-limit';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { Registry } from 'prom-client';
import {
  PeerSecretsUnavailableError,
  ResourceExistsError,
  ResourceInvalidError,
} from '../../../engine/src/index.ts';
import { consoleRoutes } from '../console/routes.ts';
import { accessOf, forbiddenFor, openRoutes, routeKey } from './access.ts';
import { addAuditTrail } from './audit.ts';
import { Authenticator, unauthenticatedPrincipal } from './auth.ts';
import type { FacadeContext } from './context.ts';
import { ApiError, grpcStyleBody } from './errors.ts';
import { type ListenerOptions, listenerDefaults, readTlsPair, watchTlsFiles } from './listener.ts';
import { mirrorMetricsRegistry } from './metrics.ts';
import { openApiDocument } from './openapi.ts';
import { roleAllows } from './roles.ts';
import { auditRoutes } from './routes/audit.ts';
import { mirrorRoutes } from './routes/mirrors.ts';
import { peerRoutes } from './routes/peers.ts';
import { scriptRoutes } from './routes/scripts.ts';
import { sourceBrowsingRoutes } from './routes/source-browsing.ts';
import { addSecurityHeaders } from './security-headers.ts';

/** Which of the interface's error shapes a route answers with. */
/** The body an error answers with: the gRPC-style one, or the endpoint's own answer shape. */
type ErrorShape = 'grpc' | 'peer' | 'validate' | 'status';

declare module 'fastify' {
  interface FastifyContextConfig {
    errorShape?: ErrorShape;
  }
}

const defaultBodyLimitBytes = 1024 * 1024;

/**
 * How much of a too-large body is read and discarded before the 413 is sent.
 * Answering while the client still uploads and then closing (what Fastify does
 * alone) makes common clients (Node's fetch, undici) fail with EPIPE or "fetch
 * failed" before they read the answer; reading the rest first lets them see the
 * 413. Beyond these bounds the connection is closed anyway.
 */
const tooLargeDrainBytes = 64 * 1024 * 1024;
const tooLargeDrainMs = 30_000;

/** Reads and discards the rest of a request body, up to the bounds above. */
function drainRequestBody(raw: IncomingMessage): Promise<void> {
  if (raw.complete || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let received = 0;
    const finish = () => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', finish);
      raw.off('error', finish);
      raw.off('close', finish);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > tooLargeDrainBytes) finish();
    };
    const timer = setTimeout(finish, tooLargeDrainMs);
    raw.on('data', onData);
    raw.once('end', finish);
    raw.once('error', finish);
    raw.once('close', finish);
    raw.resume();
  });
}

/**
 * Fastify's trustProxy from ours: a number of hops trusts that many proxies
 * from the socket's end (the address the last of them appended, which a client
 * cannot choose), as proxy-addr counts them.
 */
function trustedProxies(
  trustProxy: ListenerOptions['trustProxy'],
): boolean | string | ((address: string, hop: number) => boolean) {
  if (typeof trustProxy === 'number') return (_address, hop) => hop < trustProxy;
  return trustProxy ?? false;
}

function errorBody(request: FastifyRequest, error: ApiError): unknown {
  const shape = request.routeOptions.config?.errorShape ?? 'grpc';
  if (shape === 'peer') return { status: 'FAILED', message: error.message };
  if (shape === 'validate') return { status: 'INVALID', message: error.message };
  if (shape === 'status') {
    const body = request.body as { flowJobName?: unknown; flow_job_name?: unknown } | undefined;
    const name = body?.flowJobName ?? body?.flow_job_name;
    return {
      flowJobName: typeof name === 'string' ? name : '',
      errorMessage: error.message,
      currentFlowState: 'STATUS_UNKNOWN',
      ok: false,
    };
  }
  return grpcStyleBody(error);
}

/** Fastify's own errors (bad JSON, too large, wrong content type) as API errors. */
function fromFastifyError(error: FastifyError): ApiError {
  if (error.statusCode === 413) return new ApiError('payloadTooLarge', 'request body is too large');
  if (error.statusCode === 415)
    return new ApiError('invalidArgument', 'Content-Type must be application/json');
  if (error.statusCode && error.statusCode < 500) {
    return new ApiError(
      'invalidArgument',
      error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
        ? 'request body is empty'
        : 'request body is not valid JSON',
    );
  }
  return new ApiError('internal', 'internal error');
}

/**
 * The facade. `listener` says how it faces the network (listener.ts): TLS,
 * time limits, proxies, failed logins; without it, plain HTTP with the defaults.
 */
export function buildApp(context: FacadeContext, listener: ListenerOptions = {}): FastifyInstance {
  const tls = listener.tls;
  const app = Fastify({
    loggerInstance: context.logger as FastifyBaseLogger,
    bodyLimit: context.bodyLimitBytes ?? defaultBodyLimitBytes,
    // A client that sends its request slowly, or opens connections and sends
    // nothing, cannot hold sockets for ever.
    requestTimeout: listener.requestTimeoutMs ?? listenerDefaults.requestTimeoutMs,
    connectionTimeout: listener.connectionTimeoutMs ?? listenerDefaults.connectionTimeoutMs,
    // Longer than the 60 s idle timeout of common load balancers, so they close first.
    keepAliveTimeout: listener.keepAliveTimeoutMs ?? listenerDefaults.keepAliveTimeoutMs,
    trustProxy: trustedProxies(listener.trustProxy),
    ...(tls ? { https: readTlsPair(tls) } : {}),
  }) as unknown as FastifyInstance;

  if (tls) {
    const stop = watchTlsFiles(
      tls,
      listener.tlsCheckIntervalMs ?? listenerDefaults.tlsCheckIntervalMs,
      (pair) => {
        // New connections get the new certificate; open ones keep theirs.
        (app.server as unknown as HttpsServer).setSecureContext({ cert: pair.cert, key: pair.key });
        context.logger.info({ certFile: tls.certFile }, 'tls certificate reloaded');
      },
      (error) =>
        context.logger.warn(
          { err: error, certFile: tls.certFile },
          'tls certificate files changed but do not load; keeping the previous pair',
        ),
    );
    app.addHook('onClose', async () => stop());
  }

  // Failed logins are counted per client address by @fastify/rate-limit; only
  // failures count, so a dashboard polling with the right password is never held back.
  const authFailures = listener.authFailures ?? listenerDefaults.authFailures;
  app.register(rateLimit, { global: false, max: authFailures.max, timeWindow: authFailures.windowMs });
  let countAuthFailure: ReturnType<FastifyInstance['createRateLimit']> | undefined;

  addSecurityHeaders(app);

  // Every route has its rule in access.ts: one without fails here, at start.
  app.decorateRequest('principal', null);
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      const key = routeKey(method, route.url);
      if (key === undefined || (!openRoutes.has(key) && !accessOf(key)))
        throw new Error(`route ${method} ${route.url} has no access rule in access.ts`);
    }
  });
  addAuditTrail(app, context.catalog);
  const authenticator = new Authenticator(context.auth);

  // Bodies are JSON only (the interface's rule); Fastify would otherwise hand text/plain bodies through as strings.
  app.removeContentTypeParser('text/plain');

  app.setErrorHandler(
    async (
      error:
        | FastifyError
        | ApiError
        | ResourceInvalidError
        | ResourceExistsError
        | PeerSecretsUnavailableError,
      request: FastifyRequest,
      reply: FastifyReply,
    ) => {
      const apiError =
        error instanceof ApiError
          ? error
          : error instanceof ResourceInvalidError
            ? new ApiError('invalidArgument', error.message)
            : // A peer applied with kubectl whose Secret is not there (yet): the message names it.
              error instanceof PeerSecretsUnavailableError
              ? new ApiError('failedPrecondition', error.message)
              : // In cluster mode: another name's object holds this name's object name.
                error instanceof ResourceExistsError
                ? new ApiError('conflict', error.message)
                : fromFastifyError(error as FastifyError);
      if (apiError.kind === 'internal') request.log.error({ err: error, url: request.url }, 'request failed');
      if (apiError.kind === 'payloadTooLarge') await drainRequestBody(request.raw);
      return reply.code(apiError.status).send(errorBody(request, apiError));
    },
  );

  app.setNotFoundHandler((request, reply) => {
    const error = new ApiError('notFound', `no route ${request.method} ${request.url.split('?')[0]}`);
    return reply.code(404).send(grpcStyleBody(error));
  });

  const tooManyFailures = (request: FastifyRequest, reply: FastifyReply, retryAfterSeconds: number) => {
    const error = new ApiError(
      'tooManyRequests',
      `too many failed logins from this address; retry in ${retryAfterSeconds}s`,
    );
    reply.header('Retry-After', String(retryAfterSeconds));
    return reply.code(error.status).send(errorBody(request, error));
  };

  app.addHook('onRequest', async (request, reply) => {
    // The route, not the raw URL: probes may add a query string.
    // Probes and Prometheus scrape without credentials; neither reveals a secret
    // (the metrics name mirrors and tables: `metricsAuth` asks for credentials there too).
    const route = request.routeOptions.url;
    const key = routeKey(request.method, route);
    if ((key !== undefined && openRoutes.has(key)) || (route === '/metrics' && !listener.metricsAuth)) return;
    if (context.auth.mode === 'disabled') {
      request.principal = unauthenticatedPrincipal;
      return;
    }
    countAuthFailure ??= app.createRateLimit();
    // An address over the limit is refused even with the right password until
    // its window ends: otherwise the limit would not slow down guessing.
    const current = await countAuthFailure(request, { increment: false });
    if (!current.isAllowed && current.isExceeded)
      return tooManyFailures(request, reply, current.ttlInSeconds);
    const principal = await authenticator.authenticate(request.headers.authorization);
    if (principal) {
      request.principal = principal;
      // Refused before the body is read. An unknown route needs only a valid credential (its answer is a 404).
      const access = accessOf(key);
      if (access && !roleAllows(principal.role, access.role)) {
        const error = forbiddenFor(principal, access.role, key ?? 'this request');
        return reply.code(error.status).send(errorBody(request, error));
      }
      return;
    }
    const counted = await countAuthFailure(request);
    if (!counted.isAllowed && counted.isExceeded)
      return tooManyFailures(request, reply, counted.ttlInSeconds);
    const error = new ApiError('unauthenticated', 'authentication required');
    reply.header('WWW-Authenticate', 'Basic realm="tributary", charset="UTF-8"');
    return reply.code(401).send(errorBody(request, error));
  });

  app.get('/healthz', async () => ({ ok: true }));
  const mirrorMetrics = mirrorMetricsRegistry(context);
  const metrics = context.engineMetrics
    ? Registry.merge([mirrorMetrics, context.engineMetrics])
    : mirrorMetrics;
  app.get('/metrics', async (_request, reply) => {
    reply.header('Content-Type', metrics.contentType);
    return metrics.metrics();
  });
  const document = openApiDocument();
  app.get('/api/v1/openapi.json', async () => document);
  peerRoutes(app, context);
  sourceBrowsingRoutes(app, context);
  mirrorRoutes(app, context);
  scriptRoutes(app, context);
  auditRoutes(app, context);
  consoleRoutes(app, () => metrics.metrics());
  return app;
}
