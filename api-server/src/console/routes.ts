// The web console at `/`: a list of mirrors and a page per mirror, with pause,
// resume and drop behind a confirmation. Same authentication as the API (the
// facade's hook covers these routes); data and actions go through /api/v1 and
// /metrics in-process (ApiClient), never around them.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiClient, type Batches, type Logs, type MirrorStatus, type PeerInfo } from './api-client.ts';
import {
  actions,
  confirmPage,
  htmxPath,
  type LogLevelFilter,
  logLevels,
  logsPerPage,
  type MirrorAction,
  type MirrorRow,
  messagePage,
  mirrorListPage,
  mirrorPage,
} from './pages.ts';
import { mirrorGauges } from './prometheus-text.ts';

const htmlType = 'text/html; charset=utf-8';

let htmxScript: string | undefined;
/** htmx from its npm package, read on first request. */
function htmx(): string {
  htmxScript ??= readFileSync(createRequire(import.meta.url).resolve('htmx.org/dist/htmx.min.js'), 'utf8');
  return htmxScript;
}

function client(app: FastifyInstance, request: FastifyRequest): ApiClient {
  return new ApiClient(app, request.headers.authorization);
}

function isMirrorAction(value: unknown): value is MirrorAction {
  return typeof value === 'string' && Object.hasOwn(actions, value);
}

/**
 * A browser sends stored Basic credentials with any form post, also one a
 * foreign page makes it send: only posts from the console's own pages act.
 */
function isSameOrigin(request: FastifyRequest): boolean {
  const fetchSite = request.headers['sec-fetch-site'];
  if (fetchSite !== undefined) return fetchSite === 'same-origin' || fetchSite === 'none';
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

export function consoleRoutes(app: FastifyInstance): void {
  // Form posts are accepted here only; the API stays JSON-only.
  app.register(async (scope) => {
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 4096 },
      (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
    );

    scope.get(htmxPath, async (_request, reply) =>
      reply
        .type('text/javascript; charset=utf-8')
        .header('cache-control', 'private, max-age=86400')
        .send(htmx()),
    );

    scope.get('/', async (request, reply) => {
      const api = client(app, request);
      const gauges = mirrorGauges(await api.metricsText());
      const rows: MirrorRow[] = await Promise.all(
        gauges.map(async (gauge) => {
          const { body } = await api.post<MirrorStatus>('/api/v1/mirrors/status', {
            flowJobName: gauge.mirror,
            includeFlowInfo: true,
          });
          const config = body.cdcStatus?.config;
          return config
            ? { ...gauge, source: config.sourceName, destination: config.destinationName }
            : gauge;
        }),
      );
      return reply.type(htmlType).send(mirrorListPage(rows));
    });

    scope.get<{ Params: { name: string }; Querystring: { level?: string; page?: string } }>(
      '/mirrors/:name',
      async (request, reply) => {
        const { name } = request.params;
        const level: LogLevelFilter = (logLevels as readonly string[]).includes(request.query.level ?? '')
          ? (request.query.level as LogLevelFilter)
          : 'ALL';
        const logPage = Math.max(1, Math.min(1_000_000, Number.parseInt(request.query.page ?? '1', 10) || 1));
        const api = client(app, request);
        const status = await api.post<MirrorStatus>('/api/v1/mirrors/status', {
          flowJobName: name,
          includeFlowInfo: true,
        });
        if (status.status !== 200) {
          return reply
            .code(status.status)
            .type(htmlType)
            .send(messagePage('Mirror not found', status.body.errorMessage || `no mirror ${name}`, '/'));
        }
        const config = status.body.cdcStatus?.config;
        const [batches, logs, peers] = await Promise.all([
          api.post<Batches>('/api/v1/mirrors/cdc/batches', { flowJobName: name, limit: 20 }),
          api.post<Logs>('/api/v1/mirrors/logs', {
            flowJobName: name,
            level,
            page: logPage,
            numPerPage: logsPerPage,
          }),
          Promise.all(
            (config
              ? [
                  ['source', config.sourceName],
                  ['destination', config.destinationName],
                ]
              : []
            ).map(async ([role, peer]) => {
              const info = await api.get<PeerInfo>(`/api/v1/peers/info/${encodeURIComponent(peer ?? '')}`);
              return { role: role ?? '', info: info.status === 200 ? info.body : undefined };
            }),
          ),
        ]);
        return reply.type(htmlType).send(
          mirrorPage({
            status: status.body,
            batches: batches.status === 200 ? batches.body : { cdcBatches: [], total: 0 },
            logs: logs.status === 200 ? logs.body : { errors: [], total: 0, page: 1 },
            level,
            peers,
          }),
        );
      },
    );

    scope.get<{ Params: { name: string }; Querystring: { action?: string } }>(
      '/mirrors/:name/confirm',
      async (request, reply) => {
        const { action } = request.query;
        if (!isMirrorAction(action)) {
          return reply
            .code(400)
            .type(htmlType)
            .send(messagePage('Unknown action', 'action must be pause, resume or drop', '/'));
        }
        return reply.type(htmlType).send(confirmPage(request.params.name, action));
      },
    );

    scope.post<{ Params: { name: string }; Body: Record<string, string> | undefined }>(
      '/mirrors/:name/action',
      async (request, reply: FastifyReply) => {
        const { name } = request.params;
        const back = `/mirrors/${encodeURIComponent(name)}`;
        if (!isSameOrigin(request)) {
          return reply
            .code(403)
            .type(htmlType)
            .send(messagePage('Refused', 'this form was posted from another site', back));
        }
        const action = request.body?.action;
        if (!isMirrorAction(action)) {
          return reply
            .code(400)
            .type(htmlType)
            .send(messagePage('Unknown action', 'action must be pause, resume or drop', back));
        }
        const answer = await client(app, request).post<{ errorMessage?: string; message?: string }>(
          '/api/v1/mirrors/state_change',
          { flowJobName: name, requestedFlowState: actions[action].requestedFlowState },
        );
        if (answer.status !== 200) {
          const message =
            answer.body.message ?? answer.body.errorMessage ?? `the API answered ${answer.status}`;
          return reply
            .code(answer.status)
            .type(htmlType)
            .send(messagePage(`Could not ${action} ${name}`, message, back));
        }
        // Post/redirect/get: a reload of the page does not repeat the action.
        return reply.redirect(action === 'drop' ? '/' : back, 303);
      },
    );
  });
}
