// Roles and the audit trail through app.inject(), in both modes: every route of
// the facade (API and console) with a credential of every role, the API
// password included. A role that may not make a request gets 403 in the
// route's error shape and nothing changes; an allowed one gets the route's own
// answer. Every answered request to a state-changing route, refused ones too,
// writes exactly one audit entry naming the user, the action, the object, the
// client's address and the status; no other request writes one.
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeAccess } from '../../api-server/src/http/access.ts';
import { buildApp } from '../../api-server/src/http/app.ts';
import type { AuthConfig } from '../../api-server/src/http/auth.ts';
import { hashSecret } from '../../api-server/src/http/credential-hash.ts';
import { type Role, roleAllows } from '../../api-server/src/http/roles.ts';
import type { AuditEntry } from '../../engine/src/index.ts';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { checkedJsonExample, jsonShape } from '../support/doc-examples.ts';
import { apiPassword, basicAuth, createFacade, type Facade } from '../support/facade.ts';

interface Principal {
  /** Part of the names of what this principal creates. */
  readonly label: string;
  /** The user its audit entries name. */
  readonly user: string;
  readonly role: Role;
  readonly authorization: string;
  /** Where its requests come from, as the audit entries must say. */
  readonly address: string;
}

const tokens = {
  reader: 'reader-token-0123456789',
  oncall: 'oncall-token-0123456789',
  boss: 'boss-token-0123456789',
};

const principals: readonly Principal[] = [
  {
    label: 'reader',
    user: 'reader',
    role: 'read',
    authorization: basicAuth('reader', tokens.reader),
    address: '10.0.0.1',
  },
  {
    label: 'oncall',
    user: 'oncall',
    role: 'operate',
    authorization: basicAuth('oncall', tokens.oncall),
    address: '10.0.0.2',
  },
  {
    label: 'boss',
    user: 'boss',
    role: 'admin',
    authorization: basicAuth('boss', tokens.boss),
    address: '10.0.0.3',
  },
  // The interface's own credential: the API password, an empty user.
  {
    label: 'apipw',
    user: 'api-password',
    role: 'admin',
    authorization: basicAuth('', apiPassword),
    address: '10.0.0.4',
  },
];

async function credentials(): Promise<NonNullable<Extract<AuthConfig, { mode: 'basic' }>['credentials']>> {
  return Promise.all(
    [
      { user: 'reader', role: 'read' as const, token: tokens.reader },
      { user: 'oncall', role: 'operate' as const, token: tokens.oncall },
      { user: 'boss', role: 'admin' as const, token: tokens.boss },
    ].map(async ({ user, role, token }) => ({ user, role, hash: await hashSecret(token) })),
  );
}

type Shape = 'grpc' | 'peer' | 'validate' | 'html';

/** What an audited request records. */
interface ExpectedAudit {
  readonly route: string;
  /** When allowed, and when refused by its handler after reading the body. */
  readonly action: string;
  readonly object: string;
  readonly detail?: string;
  /** Refused before the body is read: the route's action, no object. */
  readonly refusedAction?: string;
  /** Refused by the handler (a role it checks itself): the action and object are known. */
  readonly refusedInHandler?: boolean;
}

interface Case {
  readonly name: string;
  readonly route: keyof typeof routeAccess;
  /** The least role that may do it, as the interface decides (a console form: the API call it makes). */
  readonly needs: Role;
  readonly shape: Shape;
  /** The request for a principal (names of what it creates are its own). */
  readonly request: (principal: Principal) => InjectOptions;
  /** The statuses an allowed request is answered with. */
  readonly allowed: readonly number[];
  readonly audit?: (principal: Principal) => ExpectedAudit;
}

const suffix = randomSuffix();
const sourcePeer = `src-${suffix}`;
const destinationPeer = `dst-${suffix}`;
const mirror = `m-${suffix}`;
const dropTarget = (principal: Principal) => `drop-${principal.label}-${suffix}`;
const formDropTarget = (principal: Principal) => `fdrop-${principal.label}-${suffix}`;
let seedScriptId = 0;

const json = (url: string, payload: unknown): Omit<InjectOptions, 'headers'> => ({
  method: 'POST',
  url,
  payload: payload as NonNullable<InjectOptions['payload']>,
});
const get = (url: string): Omit<InjectOptions, 'headers'> => ({ method: 'GET', url });
const form = (url: string, fields: Record<string, string>): InjectOptions => ({
  method: 'POST',
  url,
  payload: new URLSearchParams(fields).toString(),
  headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
});
const stateChange = 'POST /api/v1/mirrors/state_change';

let sourceConfig: Record<string, unknown> = {};
const connectionConfigs = (name: string) => ({
  flow_job_name: name,
  source_name: sourcePeer,
  destination_name: destinationPeer,
  table_mappings: [
    { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders_copy' },
  ],
  do_initial_snapshot: true,
});

const cases: readonly Case[] = [
  {
    name: 'metrics',
    route: 'GET /metrics',
    needs: 'read',
    shape: 'grpc',
    request: () => get('/metrics'),
    allowed: [200],
  },
  {
    name: 'openapi',
    route: 'GET /api/v1/openapi.json',
    needs: 'read',
    shape: 'grpc',
    request: () => get('/api/v1/openapi.json'),
    allowed: [200],
  },
  {
    name: 'create a peer',
    route: 'POST /api/v1/peers/create',
    needs: 'admin',
    shape: 'peer',
    request: (principal) =>
      json('/api/v1/peers/create', {
        peer: { name: `peer-${principal.label}-${suffix}`, type: 3, relational_config: sourceConfig },
      }),
    allowed: [200],
    audit: (principal) => ({
      route: 'POST /api/v1/peers/create',
      action: 'peer.create',
      object: `peer-${principal.label}-${suffix}`,
    }),
  },
  {
    name: 'list peers',
    route: 'GET /api/v1/peers/list',
    needs: 'read',
    shape: 'grpc',
    request: () => get('/api/v1/peers/list'),
    allowed: [200],
  },
  {
    name: 'read a peer',
    route: 'GET /api/v1/peers/info/:peer_name',
    needs: 'read',
    shape: 'grpc',
    request: () => get(`/api/v1/peers/info/${sourcePeer}`),
    allowed: [200],
  },
  {
    name: 'validate a peer',
    route: 'POST /api/v1/peers/validate',
    needs: 'admin',
    shape: 'validate',
    request: (principal) =>
      json('/api/v1/peers/validate', {
        peer: { name: `check-${principal.label}-${suffix}`, type: 3, relational_config: sourceConfig },
      }),
    allowed: [200],
  },
  {
    name: 'browse schemas',
    route: 'GET /api/v1/peers/schemas',
    needs: 'read',
    shape: 'grpc',
    request: () => get(`/api/v1/peers/schemas?peer_name=${sourcePeer}`),
    allowed: [200],
  },
  {
    name: 'browse tables',
    route: 'GET /api/v1/peers/tables',
    needs: 'read',
    shape: 'grpc',
    request: () => get(`/api/v1/peers/tables?peer_name=${sourcePeer}&schema_name=public`),
    allowed: [200],
  },
  {
    name: 'browse columns',
    route: 'GET /api/v1/peers/columns',
    needs: 'read',
    shape: 'grpc',
    request: () => get(`/api/v1/peers/columns?peer_name=${sourcePeer}&schema_name=public&table_name=orders`),
    allowed: [200],
  },
  {
    name: 'create a mirror',
    route: 'POST /api/v1/flows/cdc/create',
    needs: 'admin',
    shape: 'grpc',
    request: (principal) =>
      json('/api/v1/flows/cdc/create', {
        connection_configs: connectionConfigs(`made-${principal.label}-${suffix}`),
      }),
    allowed: [200],
    audit: (principal) => ({
      route: 'POST /api/v1/flows/cdc/create',
      action: 'mirror.create',
      object: `made-${principal.label}-${suffix}`,
    }),
  },
  {
    name: 'pause a mirror',
    route: stateChange,
    needs: 'operate',
    shape: 'grpc',
    request: () =>
      json('/api/v1/mirrors/state_change', { flowJobName: mirror, requestedFlowState: 'STATUS_PAUSED' }),
    allowed: [200],
    audit: () => ({
      route: stateChange,
      action: 'mirror.pause',
      object: mirror,
      refusedAction: 'mirror.state_change',
    }),
  },
  {
    name: 'resume a mirror',
    route: stateChange,
    needs: 'operate',
    shape: 'grpc',
    // By number, as the interface allows: the role is decided on the parsed request.
    request: () => json('/api/v1/mirrors/state_change', { flow_job_name: mirror, requested_flow_state: 1 }),
    allowed: [200],
    audit: () => ({
      route: stateChange,
      action: 'mirror.resume',
      object: mirror,
      refusedAction: 'mirror.state_change',
    }),
  },
  {
    name: 'edit a mirror',
    route: stateChange,
    needs: 'admin',
    shape: 'grpc',
    request: () =>
      json('/api/v1/mirrors/state_change', {
        flowJobName: mirror,
        requestedFlowState: 'STATUS_RUNNING',
        flowConfigUpdate: { cdcFlowConfigUpdate: { batchSize: 500 } },
      }),
    // Allowed, and refused for the mirror's state: it is not paused.
    allowed: [409],
    audit: (principal) => ({
      route: stateChange,
      action: 'mirror.edit',
      object: mirror,
      refusedAction: 'mirror.state_change',
      refusedInHandler: principal.role === 'operate',
    }),
  },
  {
    name: 'drop a mirror',
    route: stateChange,
    needs: 'admin',
    shape: 'grpc',
    request: (principal) =>
      json('/api/v1/mirrors/state_change', { flowJobName: dropTarget(principal), requestedFlowState: 6 }),
    allowed: [200],
    audit: (principal) => ({
      route: stateChange,
      action: 'mirror.drop',
      object: dropTarget(principal),
      refusedAction: 'mirror.state_change',
      refusedInHandler: principal.role === 'operate',
    }),
  },
  {
    name: 'resync a table',
    route: 'POST /api/v1/mirrors/tables/resync',
    needs: 'operate',
    shape: 'grpc',
    request: () =>
      json('/api/v1/mirrors/tables/resync', { flowJobName: mirror, sourceTableIdentifier: 'public.orders' }),
    // Allowed, and refused for the table's state: no engine ran.
    allowed: [409],
    audit: () => ({
      route: 'POST /api/v1/mirrors/tables/resync',
      action: 'mirror.resync_table',
      object: mirror,
      detail: 'public.orders',
      refusedAction: 'mirror.resync_table',
    }),
  },
  {
    name: 'list mirrors',
    route: 'GET /api/v1/mirrors/list',
    needs: 'read',
    shape: 'grpc',
    request: () => get('/api/v1/mirrors/list'),
    allowed: [200],
  },
  {
    name: 'mirror status',
    route: 'POST /api/v1/mirrors/status',
    needs: 'read',
    shape: 'grpc',
    request: () => json('/api/v1/mirrors/status', { flowJobName: mirror, includeFlowInfo: true }),
    allowed: [200],
  },
  {
    name: 'batches',
    route: 'POST /api/v1/mirrors/cdc/batches',
    needs: 'read',
    shape: 'grpc',
    request: () => json('/api/v1/mirrors/cdc/batches', { flowJobName: mirror }),
    allowed: [200],
  },
  {
    name: 'logs',
    route: 'POST /api/v1/mirrors/logs',
    needs: 'read',
    shape: 'grpc',
    request: () => json('/api/v1/mirrors/logs', { flowJobName: mirror, numPerPage: 5 }),
    allowed: [200],
  },
  {
    name: 'save a script',
    route: 'POST /api/v1/scripts',
    needs: 'admin',
    shape: 'grpc',
    request: (principal) =>
      json('/api/v1/scripts', {
        script: { id: -1, name: `s-${principal.label}-${suffix}`, lang: 'lua', source: 'return 1' },
      }),
    allowed: [200],
    audit: (principal) => ({
      route: 'POST /api/v1/scripts',
      action: 'script.create',
      object: `s-${principal.label}-${suffix}`,
      refusedAction: 'script.save',
    }),
  },
  {
    name: 'read scripts',
    route: 'GET /api/v1/scripts/:id',
    needs: 'read',
    shape: 'grpc',
    request: () => get('/api/v1/scripts/-1'),
    allowed: [200],
  },
  {
    name: 'read the audit trail',
    route: 'GET /api/v1/audit',
    needs: 'admin',
    shape: 'grpc',
    request: () => get('/api/v1/audit?num_per_page=5'),
    allowed: [200],
  },
  // The console: pages need read; forms act through the API call they make.
  {
    name: 'console mirror list',
    route: 'GET /',
    needs: 'read',
    shape: 'html',
    request: () => get('/'),
    allowed: [200],
  },
  {
    name: 'console asset',
    route: 'GET /console/assets/:asset',
    needs: 'read',
    shape: 'html',
    request: () => get('/console/assets/console.css'),
    allowed: [200],
  },
  {
    name: 'console mirror page',
    route: 'GET /mirrors/:name',
    needs: 'read',
    shape: 'html',
    request: () => get(`/mirrors/${mirror}`),
    allowed: [200],
  },
  {
    name: 'console chart history',
    route: 'GET /mirrors/:name/history.json',
    needs: 'read',
    shape: 'html',
    request: () => get(`/mirrors/${mirror}/history.json`),
    allowed: [200],
  },
  {
    name: 'console confirmation',
    route: 'GET /mirrors/:name/confirm',
    needs: 'read',
    shape: 'html',
    request: () => get(`/mirrors/${mirror}/confirm?action=drop`),
    allowed: [200],
  },
  {
    name: 'console pause',
    route: 'POST /mirrors/:name/action',
    needs: 'operate',
    shape: 'html',
    request: () => form(`/mirrors/${mirror}/action`, { action: 'pause' }),
    allowed: [303],
    audit: () => ({
      route: stateChange,
      action: 'mirror.pause',
      object: mirror,
      refusedAction: 'mirror.state_change',
    }),
  },
  {
    name: 'console resume',
    route: 'POST /mirrors/:name/action',
    needs: 'operate',
    shape: 'html',
    request: () => form(`/mirrors/${mirror}/action`, { action: 'resume' }),
    allowed: [303],
    audit: () => ({
      route: stateChange,
      action: 'mirror.resume',
      object: mirror,
      refusedAction: 'mirror.state_change',
    }),
  },
  {
    name: 'console drop',
    route: 'POST /mirrors/:name/action',
    needs: 'admin',
    shape: 'html',
    request: (principal) => form(`/mirrors/${formDropTarget(principal)}/action`, { action: 'drop' }),
    allowed: [303],
    audit: (principal) => ({
      route: stateChange,
      action: 'mirror.drop',
      object: formDropTarget(principal),
      refusedAction: 'mirror.state_change',
      refusedInHandler: principal.role === 'operate',
    }),
  },
  {
    name: 'console resync',
    route: 'POST /mirrors/:name/tables/resync',
    needs: 'operate',
    shape: 'html',
    request: () => form(`/mirrors/${mirror}/tables/resync`, { table: 'public.orders' }),
    allowed: [409],
    audit: () => ({
      route: 'POST /api/v1/mirrors/tables/resync',
      action: 'mirror.resync_table',
      object: mirror,
      detail: 'public.orders',
      refusedAction: 'mirror.resync_table',
    }),
  },
  {
    name: 'console peers',
    route: 'GET /peers',
    needs: 'read',
    shape: 'html',
    request: () => get('/peers'),
    allowed: [200],
  },
  {
    name: 'try a script',
    route: 'POST /api/v1/scripts/test',
    needs: 'admin',
    shape: 'grpc',
    request: () =>
      json('/api/v1/scripts/test', { source: 'function onRecord(r) return r.row end', record: { row: {} } }),
    allowed: [200],
  },
  {
    name: 'console peer',
    route: 'GET /peers/:name',
    needs: 'read',
    shape: 'html',
    request: () => get(`/peers/${sourcePeer}`),
    allowed: [200],
  },
  {
    name: 'console new peer form',
    route: 'GET /new/peer',
    needs: 'read',
    shape: 'html',
    request: () => get('/new/peer?kind=relational'),
    allowed: [200],
  },
  {
    name: 'console new peer',
    route: 'POST /new/peer',
    needs: 'admin',
    shape: 'html',
    request: (principal) =>
      form('/new/peer', {
        kind: 'relational',
        name: `fpeer-${principal.label}-${suffix}`,
        'config.host': String(sourceConfig.host),
        'config.port': String(sourceConfig.port),
        'config.user': String(sourceConfig.user),
        'config.password': String(sourceConfig.password),
        'config.database': String(sourceConfig.database),
        intent: 'save',
      }),
    allowed: [303],
    audit: (principal) => ({
      route: 'POST /api/v1/peers/create',
      action: 'peer.create',
      object: `fpeer-${principal.label}-${suffix}`,
    }),
  },
  {
    name: 'console new mirror form',
    route: 'GET /new/mirror',
    needs: 'read',
    shape: 'html',
    request: () => get(`/new/mirror?source=${sourcePeer}&destination=${destinationPeer}`),
    allowed: [200],
  },
  {
    name: 'console new mirror',
    route: 'POST /new/mirror',
    needs: 'admin',
    shape: 'html',
    request: (principal) =>
      form('/new/mirror', {
        name: `fmade-${principal.label}-${suffix}`,
        source: sourcePeer,
        destination: destinationPeer,
        schema: 'public',
        'table.0.source': 'public.orders',
        'table.0.pick': 'on',
        'table.0.destination': `public.fmade_${principal.label}`,
      }),
    allowed: [303],
    audit: (principal) => ({
      route: 'POST /api/v1/flows/cdc/create',
      action: 'mirror.create',
      object: `fmade-${principal.label}-${suffix}`,
    }),
  },
  {
    name: 'console edit form',
    route: 'GET /mirrors/:name/edit',
    needs: 'read',
    shape: 'html',
    request: () => get(`/mirrors/${mirror}/edit`),
    // Offered to a paused mirror only.
    allowed: [200, 409],
  },
  {
    name: 'console edit',
    route: 'POST /mirrors/:name/edit',
    needs: 'admin',
    shape: 'html',
    request: () => form(`/mirrors/${mirror}/edit`, { batch_size: '600' }),
    // Allowed, and refused for the mirror's state when it is not paused.
    allowed: [303, 409],
    audit: (principal) => ({
      route: stateChange,
      action: 'mirror.edit',
      object: mirror,
      refusedAction: 'mirror.state_change',
      refusedInHandler: principal.role === 'operate',
    }),
  },
  {
    name: 'console scripts',
    route: 'GET /scripts',
    needs: 'read',
    shape: 'html',
    request: () => get('/scripts'),
    allowed: [200],
  },
  {
    name: 'console new script',
    route: 'GET /scripts/new',
    needs: 'read',
    shape: 'html',
    request: () => get('/scripts/new'),
    allowed: [200],
  },
  {
    name: 'console script',
    route: 'GET /scripts/:id',
    needs: 'read',
    shape: 'html',
    request: () => get(`/scripts/${seedScriptId}`),
    allowed: [200],
  },
  {
    name: 'console script save',
    route: 'POST /scripts/:id',
    needs: 'admin',
    shape: 'html',
    request: (principal) =>
      form('/scripts/new', { name: `fs-${principal.label}-${suffix}`, source: 'return 2' }),
    allowed: [303],
    audit: (principal) => ({
      route: 'POST /api/v1/scripts',
      action: 'script.create',
      object: `fs-${principal.label}-${suffix}`,
      refusedAction: 'script.save',
    }),
  },
  {
    name: 'console audit trail',
    route: 'GET /audit',
    needs: 'admin',
    shape: 'html',
    request: () => get('/audit'),
    allowed: [200],
  },
];

async function stateOf(facade: Facade): Promise<string> {
  const { store } = facade.controlPlane;
  return JSON.stringify({
    peers: await store.listPeers(),
    mirrors: await store.listMirrors(),
    scripts: await store.listScripts(),
  });
}

async function newestAudit(facade: Facade): Promise<AuditEntry | undefined> {
  return (await facade.controlPlane.catalog.listAudit({ offset: 0, limit: 1 })).entries[0];
}

/**
 * The 403 body of each shape: the route's own error shape, naming the user, its
 * role and a role it lacks (the first check that refused: the route's, else the
 * handler's).
 */
function expectRefusal(response: LightMyRequestResponse, shape: Shape, principal: Principal): void {
  expect(response.statusCode, response.body).toBe(403);
  let message: string;
  if (shape === 'html') {
    expect(response.headers['content-type']).toMatch(/^text\/html/);
    message = response.body;
  } else {
    const body = response.json();
    expect(body).toEqual(
      shape === 'peer'
        ? { status: 'FAILED', message: expect.any(String) }
        : shape === 'validate'
          ? { status: 'INVALID', message: expect.any(String) }
          : { code: 7, message: expect.any(String), details: [] },
    );
    message = String(body.message);
  }
  expect(message).toContain(`user ${principal.user} has the ${principal.role} role;`);
  const needed = /needs the (read|operate|admin) role/.exec(message)?.[1] as Role | undefined;
  expect(needed, message).toBeDefined();
  expect(roleAllows(principal.role, needed ?? 'read')).toBe(false);
}

describe('roles and the audit trail', () => {
  let facade: Facade;
  let source: TestDatabase;
  let destination: TestDatabase;

  const send = (principal: Principal, request: InjectOptions) =>
    facade.app.inject({
      ...request,
      remoteAddress: principal.address,
      headers: { ...request.headers, authorization: principal.authorization },
    });
  const admin = principals.find((principal) => principal.label === 'apipw') as Principal;

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('api_roles_src'),
      createTestDatabase('api_roles_dst'),
    ]);
    await source.client.query('CREATE TABLE orders (id bigint PRIMARY KEY, note text)');
    sourceConfig = { ...source.config };
    facade = await createFacade({
      auth: { mode: 'basic', password: apiPassword, credentials: await credentials() },
      // /metrics asks for credentials too, so its rule is tried; many requests from few addresses.
      listener: { metricsAuth: true, authFailures: { max: 100_000, windowMs: 60_000 } },
    });
    const setup = async (request: Omit<InjectOptions, 'headers'>) => {
      const response = await send(admin, request);
      expect(response.statusCode, response.body).toBe(200);
      return response.json();
    };
    await setup(
      json('/api/v1/peers/create', { peer: { name: sourcePeer, type: 3, relational_config: sourceConfig } }),
    );
    await setup(
      json('/api/v1/peers/create', {
        peer: { name: destinationPeer, type: 3, relational_config: { ...destination.config } },
      }),
    );
    for (const name of [
      mirror,
      ...principals.flatMap((principal) => [dropTarget(principal), formDropTarget(principal)]),
    ]) {
      await setup(json('/api/v1/flows/cdc/create', { connection_configs: connectionConfigs(name) }));
    }
    seedScriptId = (
      await setup(
        json('/api/v1/scripts', {
          script: { id: -1, name: `seed-${suffix}`, lang: 'lua', source: 'return 0' },
        }),
      )
    ).id;
  });

  afterAll(async () => {
    await facade?.close();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('names every route of the facade in the access table, and tries each of them here', () => {
    for (const route of Object.keys(routeAccess)) {
      const [method, url] = route.split(' ') as ['GET' | 'POST', string];
      expect(facade.app.hasRoute({ method, url }), route).toBe(true);
    }
    expect(new Set(cases.map((entry) => entry.route))).toEqual(new Set(Object.keys(routeAccess)));
  });

  it('refuses to build a facade with a route the access table does not name', async () => {
    const app = buildApp({
      store: facade.controlPlane.store,
      catalog: facade.controlPlane.catalog,
      checkPeer: async () => ({}),
      findMissingTables: async () => [],
      checkMirrorSource: async () => [],
      scriptsEnabled: true,
      auth: { mode: 'disabled' },
      logger: facade.app.log as never,
    });
    expect(() => app.get('/api/v1/unlisted', async () => ({}))).toThrow(
      'route GET /api/v1/unlisted has no access rule in access.ts',
    );
    await app.close();
  });

  it('lists the mirrors on the console while /metrics asks for credentials (metricsAuth)', async () => {
    // The console reads the metrics text in process: a visitor's page and the chart's sampler need no second login.
    const [reader] = principals;
    const list = await send(reader as Principal, get('/'));
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain(`/mirrors/${mirror}`);
    expect((await facade.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
  });

  it('offers each role on the console only what it may do', async () => {
    const offered = async (principal: Principal) => {
      const mirrorPage = (await send(principal, get(`/mirrors/${mirror}`))).body;
      const scripts = (await send(principal, get('/scripts'))).body;
      return {
        pause: mirrorPage.includes('confirm?action=pause'),
        drop: mirrorPage.includes('confirm?action=drop'),
        newScript: scripts.includes('href="/scripts/new"'),
      };
    };
    const [reader, oncall, boss] = principals;
    expect(await offered(reader as Principal)).toEqual({ pause: false, drop: false, newScript: false });
    expect(await offered(oncall as Principal)).toEqual({ pause: true, drop: false, newScript: false });
    expect(await offered(boss as Principal)).toEqual({ pause: true, drop: true, newScript: true });
  });

  for (const principal of principals) {
    describe(`${principal.label} (${principal.role})`, () => {
      it.each(cases)(`$name: allowed or 403, and one audit entry when it changes state`, async (entry) => {
        const request = entry.request(principal);
        const before = await stateOf(facade);
        const newestBefore = (await newestAudit(facade))?.id ?? 0n;
        const response = await send(principal, request);
        const allowed = roleAllows(principal.role, entry.needs);
        if (allowed) {
          expect(
            entry.allowed,
            `${response.statusCode} ${/role="alert">([^<]*)/.exec(response.body)?.[1] ?? response.body.slice(0, 300)}`,
          ).toContain(response.statusCode);
        } else {
          expectRefusal(response, entry.shape, principal);
          expect(await stateOf(facade)).toBe(before);
        }

        const { entries } = await facade.controlPlane.catalog.listAudit({ offset: 0, limit: 10 });
        const written = entries.filter((candidate) => candidate.id > newestBefore);
        if (!entry.audit) {
          expect(written).toEqual([]);
          return;
        }
        const expected = entry.audit(principal);
        // The refusal of a console form is the API call's: its status is the form's.
        const knowsObject = allowed || expected.refusedInHandler === true;
        expect(written).toEqual([
          {
            id: expect.any(BigInt),
            at: expect.any(Date),
            user: principal.user,
            role: principal.role,
            action: knowsObject ? expected.action : (expected.refusedAction ?? expected.action),
            route: expected.route,
            object: knowsObject ? expected.object : null,
            detail: knowsObject ? (expected.detail ?? null) : null,
            clientAddress: principal.address,
            status: response.statusCode === 303 ? 200 : response.statusCode,
          },
        ]);
      });
    });
  }

  it('keeps secrets out of the trail and reads it back a page at a time, by user', async () => {
    const everything = await send(admin, get('/api/v1/audit?num_per_page=1000'));
    expect(everything.statusCode).toBe(200);
    expect(everything.body).not.toContain(String(source.config.password));
    const page = await send(admin, get('/api/v1/audit?user=oncall&num_per_page=2&page=2'));
    expect(page.statusCode).toBe(200);
    const body = page.json();
    expect(body.page).toBe(2);
    expect(body.entries).toHaveLength(2);
    expect(body.total).toBeGreaterThan(4);
    for (const item of body.entries) {
      expect(item).toEqual({
        id: expect.stringMatching(/^\d+$/),
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        user: 'oncall',
        role: 'operate',
        action: expect.any(String),
        route: expect.stringMatching(/^POST \/api\/v1\//),
        object: expect.any(String),
        detail: expect.any(String),
        clientAddress: '10.0.0.2',
        status: expect.any(Number),
      });
    }
    // The answer docs/api.md shows has the same fields, of the same types.
    const documented = checkedJsonExample('docs/api.md', 'test/api/roles.test.ts') as typeof body;
    expect(jsonShape(body)).toEqual(jsonShape(documented));
    expect(jsonShape(body.entries[0])).toEqual(jsonShape(documented.entries[0]));
    const refused = await send(admin, get('/api/v1/audit?page=0'));
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toEqual({ code: 3, message: expect.stringContaining('page'), details: [] });
    const consolePage = await send(admin, get('/audit'));
    expect(consolePage.body).toContain('<td>oncall</td><td>operate</td><td>mirror.pause</td>');
  });

  it('records the forwarded address behind a trusted proxy, and the peer address otherwise', async () => {
    const pause = json('/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_PAUSED',
    });
    const behindProxy = await createFacade({ listener: { trustProxy: true } });
    try {
      for (const [target, expected] of [
        [behindProxy, '198.51.100.9'],
        [facade, '10.0.0.9'],
      ] as const) {
        const response = await target.app.inject({
          ...pause,
          remoteAddress: '10.0.0.9',
          headers: { authorization: basicAuth('', apiPassword), 'x-forwarded-for': '198.51.100.9' },
        });
        // The mirror exists only in the facade of this suite.
        expect(response.statusCode).toBe(target === facade ? 200 : 404);
        expect((await newestAudit(target))?.clientAddress).toBe(expected);
      }
    } finally {
      await behindProxy.close();
    }
  });

  it('takes the address one hop back with trust_proxy 1: a client cannot choose it by sending its own header', async () => {
    const oneHop = await createFacade({ listener: { trustProxy: 1 } });
    try {
      // The client sent "203.0.113.66" itself; the ingress appended the address it saw.
      await oneHop.app.inject({
        ...json('/api/v1/mirrors/state_change', {
          flowJobName: 'nowhere',
          requestedFlowState: 'STATUS_PAUSED',
        }),
        remoteAddress: '10.0.0.9',
        headers: {
          authorization: basicAuth('', apiPassword),
          'x-forwarded-for': '203.0.113.66, 198.51.100.23',
        },
      });
      expect((await newestAudit(oneHop))?.clientAddress).toBe('198.51.100.23');
    } finally {
      await oneHop.close();
    }
  });

  it('counts failed logins of every credential against the limit of the address', async () => {
    const limited = await createFacade({
      auth: { mode: 'basic', password: apiPassword, credentials: await credentials() },
    });
    try {
      const from = (authorization: string) =>
        limited.app.inject({
          method: 'GET',
          url: '/api/v1/mirrors/list',
          remoteAddress: '10.9.9.9',
          headers: { authorization },
        });
      expect((await from(basicAuth('oncall', tokens.oncall))).statusCode).toBe(200);
      for (let attempt = 0; attempt < 10; attempt++) {
        expect((await from(basicAuth('oncall', `${tokens.oncall}x`))).statusCode).toBe(401);
      }
      expect((await from(basicAuth('oncall', `${tokens.oncall}x`))).statusCode).toBe(429);
      // Past the limit even the right token waits, for this credential as for the API password.
      expect((await from(basicAuth('oncall', tokens.oncall))).statusCode).toBe(429);
      expect((await from(basicAuth('', apiPassword))).statusCode).toBe(429);
      // Nobody could be named: no audit entry for the failures.
      expect((await limited.controlPlane.catalog.listAudit({ offset: 0, limit: 0 })).total).toBe(0);
    } finally {
      await limited.close();
    }
  });
});
