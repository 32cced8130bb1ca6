// The web console at `/`: a list of mirrors and a page per mirror, with pause,
// resume and drop behind a confirmation. Same authentication as the API (the
// facade's hook covers these routes); data and actions go through /api/v1 and
// /metrics in-process (ApiClient), never around them.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type LogLevelFilter, logLevelFilters } from '../../../engine/src/index.ts';
import { roleAllows } from '../http/roles.ts';
import type {
  ApiErrorBody,
  AuditPage,
  Batches,
  Logs,
  MirrorStatus,
  PeerInfo,
  PeerList,
  Scripts,
} from './api-client.ts';
import { MetricsHistory } from './history.ts';
import { mirrorFormRoutes } from './mirror-form-routes.ts';
import {
  actions,
  confirmPage,
  logsPerPage,
  type MirrorAction,
  type MirrorRow,
  messagePage,
  mirrorListPage,
  mirrorPage,
} from './pages.ts';
import { peerRoutes } from './peer-routes.ts';
import { mirrorGauges } from './prometheus-text.ts';
import { client, htmlType, isSameOrigin, roleOf } from './request.ts';
import {
  auditListPage,
  auditPerPage,
  peerListPage,
  type ScriptForm,
  type ScriptTrialView,
  sampleRecord,
  scriptListPage,
  scriptPage,
  scriptPath,
} from './resource-pages.ts';

const require = createRequire(import.meta.url);
/** What /console/assets/ serves: htmx and uPlot from their npm packages, our chart script and style sheet. */
const assets: Record<string, { readonly path: () => string; readonly type: string }> = {
  'htmx.min.js': { path: () => require.resolve('htmx.org/dist/htmx.min.js'), type: 'text/javascript' },
  'uPlot.iife.min.js': {
    path: () => require.resolve('uplot/dist/uPlot.iife.min.js'),
    type: 'text/javascript',
  },
  'uPlot.min.css': { path: () => require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css' },
  'chart.js': { path: () => join(import.meta.dirname, 'assets', 'chart.js'), type: 'text/javascript' },
  'console.css': { path: () => join(import.meta.dirname, 'assets', 'console.css'), type: 'text/css' },
};
const assetText = new Map<string, string>();

/** TRIBUTARY_CONSOLE_SAMPLE_SECONDS: how often the chart's history samples /metrics (default 10). */
function sampleSeconds(env: NodeJS.ProcessEnv): number {
  const text = env.TRIBUTARY_CONSOLE_SAMPLE_SECONDS ?? '10';
  const seconds = Number(text);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 3_600)
    throw new Error(
      `TRIBUTARY_CONSOLE_SAMPLE_SECONDS: expected whole seconds from 1 to 3600, got ${JSON.stringify(text)}`,
    );
  return seconds;
}

function isMirrorAction(value: unknown): value is MirrorAction {
  return typeof value === 'string' && Object.hasOwn(actions, value);
}

/**
 * A form body (application/x-www-form-urlencoded, as browsers send forms) as
 * its fields, the last of a repeated name kept. WHATWG URL parsing, which
 * never throws: a bad percent-escape stays as it is, an escaped byte that is
 * not UTF-8 becomes U+FFFD. The keys are own properties, `__proto__` included.
 */
export function parseFormBody(body: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(body));
}

/** A script id from a console path: digits only, within the safe integers; else undefined. */
function scriptIdOf(segment: string): number | undefined {
  return /^\d{1,15}$/.test(segment) ? Number(segment) : undefined;
}

/**
 * `metricsText`: the text /metrics serves, read in process: the sampler has no
 * visitor whose credentials it could send when /metrics asks for them
 * (metricsAuth), and every visitor's role may read it.
 */
/** The script page with the run of the typed source on the typed sample (POST /api/v1/scripts/test). */
async function tryOnSample(
  app: FastifyInstance,
  request: FastifyRequest<{ Body: Record<string, string> | undefined }>,
  form: ScriptForm,
): Promise<string> {
  const sample = request.body?.sample ?? sampleRecord;
  const sampleForm = request.body?.sample_form === 'messages' ? 'messages' : 'rows';
  const shown = { ...form, sample, sampleForm } as const;
  let record: unknown;
  try {
    record = JSON.parse(sample);
  } catch (error) {
    return scriptPage({
      ...shown,
      trial: { ok: false, error: `the sample is not JSON: ${(error as Error).message}`, printed: [] },
    });
  }
  const answer = await client(app, request).post<ScriptTrialView & ApiErrorBody>('/api/v1/scripts/test', {
    name: form.name || undefined,
    source: form.source,
    form: sampleForm,
    record,
  });
  if (answer.status !== 200) {
    return scriptPage({
      ...shown,
      trial: { ok: false, error: answer.body.message ?? `the API answered ${answer.status}`, printed: [] },
    });
  }
  return scriptPage({ ...shown, trial: answer.body });
}

export function consoleRoutes(app: FastifyInstance, metricsText: () => Promise<string>): void {
  const sampleMs = sampleSeconds(process.env) * 1000;
  const history = new MetricsHistory(metricsText, {
    intervalMs: sampleMs,
  });
  app.addHook('onClose', async () => history.stop());

  // Form posts are accepted here only; the API stays JSON-only.
  app.register(async (scope) => {
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 4096 },
      (_request, body, done) => done(null, parseFormBody(String(body))),
    );
    // Sampling starts with the first console request: a facade nobody looks at
    // through the console does not scrape itself.
    scope.addHook('onRequest', async () => history.start());

    scope.get<{ Params: { asset: string } }>('/console/assets/:asset', async (request, reply) => {
      const asset = Object.hasOwn(assets, request.params.asset) ? assets[request.params.asset] : undefined;
      if (!asset)
        return reply
          .code(404)
          .type(htmlType)
          .send(messagePage('Not found', 'no such file', '/'));
      let text = assetText.get(request.params.asset);
      if (text === undefined) {
        text = readFileSync(asset.path(), 'utf8');
        assetText.set(request.params.asset, text);
      }
      return reply
        .type(`${asset.type}; charset=utf-8`)
        .header('cache-control', 'private, max-age=3600')
        .send(text);
    });

    scope.get<{ Params: { name: string } }>('/mirrors/:name/history.json', async (request) =>
      history.history(request.params.name),
    );

    scope.get('/', async (request, reply) => {
      const api = client(app, request);
      const gauges = mirrorGauges(await metricsText());
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
        const level: LogLevelFilter = (logLevelFilters as readonly string[]).includes(
          request.query.level ?? '',
        )
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
            sampleMs,
            role: roleOf(request),
          }),
        );
      },
    );

    peerRoutes(scope, app);
    mirrorFormRoutes(scope, app);

    scope.get('/peers', async (request, reply) => {
      const api = client(app, request);
      const list = await api.get<PeerList>('/api/v1/peers/list');
      const peers = await Promise.all(
        (list.status === 200 ? list.body.items : []).map(async ({ name, type, problem }) => {
          // A broken peer's info cannot be read either: its problem says why.
          if (problem) return { name, type, info: undefined, problem };
          const info = await api.get<PeerInfo>(`/api/v1/peers/info/${encodeURIComponent(name)}`);
          return { name, type, info: info.status === 200 ? info.body : undefined };
        }),
      );
      return reply.type(htmlType).send(peerListPage(peers));
    });

    scope.get('/scripts', async (request, reply) => {
      const answer = await client(app, request).get<Scripts & ApiErrorBody>('/api/v1/scripts/-1');
      const canEdit = roleAllows(roleOf(request), 'admin');
      if (answer.status === 403)
        return reply
          .type(htmlType)
          .send(
            scriptListPage([], { canEdit, disabledMessage: answer.body.message ?? 'scripts are disabled' }),
          );
      return reply
        .type(htmlType)
        .send(scriptListPage(answer.status === 200 ? answer.body.scripts : [], { canEdit }));
    });

    scope.get('/scripts/new', async (request, reply) =>
      reply.type(htmlType).send(
        scriptPage({
          id: -1,
          name: '',
          source: 'function onRecord(record)\n  return record\nend\n',
          canEdit: roleAllows(roleOf(request), 'admin'),
        }),
      ),
    );

    scope.get<{ Params: { id: string }; Querystring: { saved?: string } }>(
      '/scripts/:id',
      async (request, reply) => {
        const id = scriptIdOf(request.params.id);
        const answer =
          id === undefined
            ? undefined
            : await client(app, request).get<Scripts & ApiErrorBody>(`/api/v1/scripts/${id}`);
        const script = answer?.status === 200 ? answer.body.scripts[0] : undefined;
        if (!script) {
          return reply
            .code(answer?.status === 403 ? 403 : 404)
            .type(htmlType)
            .send(messagePage('Script not found', answer?.body.message ?? 'no such script', '/scripts'));
        }
        return reply.type(htmlType).send(
          scriptPage({
            ...script,
            saved: request.query.saved !== undefined,
            canEdit: roleAllows(roleOf(request), 'admin'),
          }),
        );
      },
    );

    // A script's source may be long: this form's body limit is the API's own.
    scope.post<{ Params: { id: string }; Body: Record<string, string> | undefined }>(
      '/scripts/:id',
      { bodyLimit: 3 * 1024 * 1024 },
      async (request, reply) => {
        const id = request.params.id === 'new' ? -1 : scriptIdOf(request.params.id);
        const form: ScriptForm = {
          id: id ?? -1,
          name: request.body?.name ?? '',
          // Browsers send textarea line breaks as CRLF; Lua reads either, users wrote LF.
          source: (request.body?.source ?? '').replaceAll('\r\n', '\n'),
          canEdit: roleAllows(roleOf(request), 'admin'),
        };
        if (!isSameOrigin(request)) {
          return reply
            .code(403)
            .type(htmlType)
            .send(messagePage('Refused', 'this form was posted from another site', '/scripts'));
        }
        if (id === undefined) {
          return reply
            .code(404)
            .type(htmlType)
            .send(messagePage('Script not found', 'no such script', '/scripts'));
        }
        if (request.body?.intent === 'try')
          return reply.type(htmlType).send(await tryOnSample(app, request, form));
        const answer = await client(app, request).post<{ id?: number } & ApiErrorBody>('/api/v1/scripts', {
          script: { id: form.id, name: form.name, lang: 'lua', source: form.source },
        });
        if (answer.status !== 200 || answer.body.id === undefined) {
          const error = answer.body.message ?? `the API answered ${answer.status}`;
          return reply
            .code(answer.status)
            .type(htmlType)
            .send(scriptPage({ ...form, error }));
        }
        // Post/redirect/get, as for mirror actions.
        return reply.redirect(`${scriptPath(answer.body.id)}?saved=1`, 303);
      },
    );

    // Read through GET /api/v1/audit, which answers admin credentials only.
    scope.get<{ Querystring: { page?: string } }>('/audit', async (request, reply) => {
      const auditPage = Math.max(1, Math.min(1_000_000, Number.parseInt(request.query.page ?? '1', 10) || 1));
      const answer = await client(app, request).get<AuditPage & ApiErrorBody>(
        `/api/v1/audit?page=${auditPage}&num_per_page=${auditPerPage}`,
      );
      if (answer.status !== 200) {
        return reply
          .code(answer.status)
          .type(htmlType)
          .send(messagePage('Audit trail', answer.body.message ?? `the API answered ${answer.status}`, '/'));
      }
      return reply.type(htmlType).send(auditListPage(answer.body));
    });

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
        if (action !== 'drop') return reply.type(htmlType).send(confirmPage(request.params.name, action));
        const status = await client(app, request).post<MirrorStatus>('/api/v1/mirrors/status', {
          flowJobName: request.params.name,
          includeFlowInfo: true,
        });
        if (status.status !== 200) {
          return reply
            .code(status.status)
            .type(htmlType)
            .send(
              messagePage(
                'Mirror not found',
                status.body.errorMessage || `no mirror ${request.params.name}`,
                '/',
              ),
            );
        }
        return reply
          .type(htmlType)
          .send(confirmPage(request.params.name, action, status.body.cdcStatus?.config));
      },
    );

    /**
     * A form of the mirror page: refused from another site, then one API call,
     * its refusal shown on a page of its own, else post/redirect/get (a
     * reload does not repeat it) to `done` or back to the mirror.
     */
    const mirrorForm = (
      path: string,
      call: (
        name: string,
        body: Record<string, string> | undefined,
      ) => { request: readonly [string, object]; failed: string; done?: string } | { refused: string },
    ) =>
      scope.post<{ Params: { name: string }; Body: Record<string, string> | undefined }>(
        path,
        async (request, reply: FastifyReply) => {
          const { name } = request.params;
          const back = `/mirrors/${encodeURIComponent(name)}`;
          if (!isSameOrigin(request)) {
            return reply
              .code(403)
              .type(htmlType)
              .send(messagePage('Refused', 'this form was posted from another site', back));
          }
          const planned = call(name, request.body);
          if ('refused' in planned) {
            return reply
              .code(400)
              .type(htmlType)
              .send(messagePage('Unknown action', planned.refused, back));
          }
          const [apiPath, apiBody] = planned.request;
          const answer = await client(app, request).post<{ errorMessage?: string; message?: string }>(
            apiPath,
            apiBody,
          );
          if (answer.status !== 200) {
            const message =
              answer.body.message ?? answer.body.errorMessage ?? `the API answered ${answer.status}`;
            return reply
              .code(answer.status)
              .type(htmlType)
              .send(messagePage(planned.failed, message, back));
          }
          return reply.redirect(planned.done ?? back, 303);
        },
      );

    mirrorForm('/mirrors/:name/action', (name, body) => {
      const action = body?.action;
      if (!isMirrorAction(action)) return { refused: 'action must be pause, resume or drop' };
      return {
        request: [
          '/api/v1/mirrors/state_change',
          { flowJobName: name, requestedFlowState: actions[action].requestedFlowState },
        ],
        failed: `Could not ${action} ${name}`,
        ...(action === 'drop' ? { done: '/' } : {}),
      };
    });

    // A table's Resync button: the resync request, then back to the mirror.
    mirrorForm('/mirrors/:name/tables/resync', (name, body) => {
      const table = body?.table ?? '';
      return {
        request: ['/api/v1/mirrors/tables/resync', { flowJobName: name, sourceTableIdentifier: table }],
        failed: `Could not resync ${table}`,
      };
    });
  });
}
