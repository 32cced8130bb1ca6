// The console's mirror form (mirror-form.ts): the peers and scripts to choose
// from, the chosen source's schemas and tables (the source browsing additions),
// and the create through `POST /api/v1/flows/cdc/create`, as any client makes it.
import type { FastifyInstance } from 'fastify';
import type { ApiClient, ApiErrorBody, MirrorStatus, PeerList, Scripts } from './api-client.ts';
import { editPath, editRequestOf, mirrorEditPage } from './mirror-edit.ts';
import { type MirrorFormValues, mirrorFormPage, mirrorRequestOf, type TableChoice } from './mirror-form.ts';
import { messagePage } from './pages.ts';
import { client, htmlType, isSameOrigin } from './request.ts';

interface Choices {
  readonly peers: { name: string; type: string }[];
  readonly scripts: string[];
  readonly schemas: string[];
  readonly tables: TableChoice[];
  readonly browseError?: string;
}

/** Everything the form offers for `values` (its source, schema and filter). */
async function choices(api: ApiClient, values: MirrorFormValues): Promise<Choices & { schema?: string }> {
  const [peers, scripts] = await Promise.all([
    api.get<PeerList>('/api/v1/peers/list'),
    api.get<Scripts>('/api/v1/scripts/-1'),
  ]);
  const found: Choices = {
    peers: peers.status === 200 ? peers.body.items.filter((peer) => !peer.problem) : [],
    scripts: scripts.status === 200 ? scripts.body.scripts.map((script) => script.name) : [],
    schemas: [],
    tables: [],
  };
  if (!values.source) return found;
  const source = encodeURIComponent(values.source);
  const schemas = await api.get<{ schemas: string[] } & ApiErrorBody>(
    `/api/v1/peers/schemas?peer_name=${source}`,
  );
  if (schemas.status !== 200)
    return { ...found, browseError: schemas.body.message ?? 'cannot read the source' };
  const schema =
    values.schema && schemas.body.schemas.includes(values.schema)
      ? values.schema
      : schemas.body.schemas.includes('public')
        ? 'public'
        : schemas.body.schemas[0];
  if (schema === undefined) return { ...found, schemas: [] };
  const tables = await api.get<{ tables: TableChoice[] } & ApiErrorBody>(
    `/api/v1/peers/tables?peer_name=${source}&schema_name=${encodeURIComponent(schema)}`,
  );
  if (tables.status !== 200) {
    return {
      ...found,
      schemas: schemas.body.schemas,
      schema,
      browseError: tables.body.message ?? 'cannot read the source',
    };
  }
  const filter = (values.filter ?? '').trim().toLowerCase();
  return {
    ...found,
    schemas: schemas.body.schemas,
    schema,
    tables: tables.body.tables.filter((table) => table.tableName.toLowerCase().includes(filter)),
  };
}

/** The mirror's status with its configuration, or the page that says why there is none. */
async function editable(
  api: ApiClient,
  name: string,
): Promise<{ status: MirrorStatus } | { refusal: string; code: number }> {
  const answer = await api.post<MirrorStatus>('/api/v1/mirrors/status', {
    flowJobName: name,
    includeFlowInfo: true,
  });
  if (answer.status !== 200)
    return { refusal: answer.body.errorMessage || `no mirror ${name}`, code: answer.status };
  if (answer.body.currentFlowState !== 'STATUS_PAUSED') {
    return {
      refusal: `mirror ${name} is ${answer.body.currentFlowState.replace('STATUS_', '').toLowerCase()}: pause it first, then edit it`,
      code: 409,
    };
  }
  return { status: answer.body };
}

export function mirrorFormRoutes(scope: FastifyInstance, app: FastifyInstance): void {
  scope.get<{ Params: { name: string }; Querystring: Record<string, string> }>(
    '/mirrors/:name/edit',
    async (request, reply) => {
      const { name } = request.params;
      const api = client(app, request);
      const found = await editable(api, name);
      if ('refusal' in found) {
        return reply
          .code(found.code)
          .type(htmlType)
          .send(messagePage('Cannot edit', found.refusal, `/mirrors/${encodeURIComponent(name)}`));
      }
      const values = { ...request.query };
      const offered = await choices(api, {
        ...values,
        source: found.status.cdcStatus?.config.sourceName ?? '',
      });
      return reply.type(htmlType).send(
        mirrorEditPage({
          name,
          status: found.status,
          ...offered,
          values: offered.schema ? { ...values, schema: offered.schema } : values,
        }),
      );
    },
  );

  scope.post<{ Params: { name: string }; Body: Record<string, string> | undefined }>(
    '/mirrors/:name/edit',
    { bodyLimit: 1024 * 1024 },
    async (request, reply) => {
      const { name } = request.params;
      if (!isSameOrigin(request)) {
        return reply
          .code(403)
          .type(htmlType)
          .send(messagePage('Refused', 'this form was posted from another site', editPath(name)));
      }
      const values = request.body ?? {};
      const api = client(app, request);
      const answer = await api.post<{ ok?: boolean; errorMessage?: string } & ApiErrorBody>(
        '/api/v1/mirrors/state_change',
        editRequestOf(name, values),
      );
      if (answer.status === 200 && answer.body.ok !== false) {
        return reply.redirect(`/mirrors/${encodeURIComponent(name)}`, 303);
      }
      // The refusal is the API's: its status and its words (a role that may not edit, a mirror not paused).
      const refusal = answer.body.errorMessage || answer.body.message || `the API answered ${answer.status}`;
      const found = await editable(api, name);
      if ('refusal' in found || answer.status === 403) {
        return reply
          .code(answer.status === 200 ? 400 : answer.status)
          .type(htmlType)
          .send(messagePage('Cannot edit', refusal, `/mirrors/${encodeURIComponent(name)}`));
      }
      const offered = await choices(api, {
        ...values,
        source: found.status.cdcStatus?.config.sourceName ?? '',
      });
      return reply
        .code(answer.status === 200 ? 400 : answer.status)
        .type(htmlType)
        .send(
          mirrorEditPage({
            name,
            status: found.status,
            ...offered,
            values,
            error: refusal,
          }),
        );
    },
  );

  scope.get<{ Querystring: Record<string, string> }>('/new/mirror', async (request, reply) => {
    const values = { ...request.query };
    const found = await choices(client(app, request), values);
    return reply
      .type(htmlType)
      .send(
        mirrorFormPage({ ...found, values: found.schema ? { ...values, schema: found.schema } : values }),
      );
  });

  // A schema of many tables makes a long form.
  scope.post<{ Body: Record<string, string> | undefined }>(
    '/new/mirror',
    { bodyLimit: 1024 * 1024 },
    async (request, reply) => {
      if (!isSameOrigin(request)) {
        return reply
          .code(403)
          .type(htmlType)
          .send(messagePage('Refused', 'this form was posted from another site', '/'));
      }
      const values = request.body ?? {};
      const api = client(app, request);
      const answer = await api.post<ApiErrorBody>('/api/v1/flows/cdc/create', mirrorRequestOf(values));
      if (answer.status === 200)
        return reply.redirect(`/mirrors/${encodeURIComponent(values.name ?? '')}`, 303);
      const found = await choices(api, values);
      return reply
        .code(answer.status)
        .type(htmlType)
        .send(
          mirrorFormPage({
            ...found,
            values,
            error: answer.body.message ?? `the API answered ${answer.status}`,
          }),
        );
    },
  );
}
