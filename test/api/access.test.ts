// What every /api/v1 endpoint shares, through app.inject(): authentication, the
// error shape per endpoint, unknown routes, unparseable and oversized bodies,
// /healthz and the OpenAPI document.
import { Socket } from 'node:net';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenerDefaults } from '../../api-server/src/http/listener.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { apiPassword, basicAuth, createFacade, type Facade } from '../support/facade.ts';
import { postgres } from '../support/testenv.ts';

type Shape = 'peer' | 'validate' | 'status' | 'grpc';

interface Endpoint {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  readonly shape: Shape;
  /** A valid body: refused requests must not act on it. */
  readonly body?: unknown;
}

const suffix = randomSuffix();

const endpoints: readonly Endpoint[] = [
  {
    method: 'POST',
    url: '/api/v1/peers/create',
    shape: 'peer',
    body: {
      peer: {
        name: `auth-${suffix}`,
        type: 3,
        relational_config: {
          host: postgres.host,
          port: postgres.port,
          user: postgres.superuser.user,
          password: postgres.superuser.password,
          database: postgres.database,
        },
      },
    },
  },
  { method: 'GET', url: '/api/v1/peers/info/some-peer', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/peers/list', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/mirrors/list', shape: 'grpc' },
  {
    method: 'POST',
    url: '/api/v1/flows/cdc/create',
    shape: 'grpc',
    body: {
      connection_configs: {
        flow_job_name: `auth-${suffix}`,
        source_name: 'src',
        destination_name: 'dst',
        table_mappings: [{ source_table_identifier: 'public.t', destination_table_identifier: 'public.t' }],
        do_initial_snapshot: true,
      },
    },
  },
  {
    method: 'POST',
    url: '/api/v1/mirrors/state_change',
    shape: 'grpc',
    body: { flowJobName: 'm', requestedFlowState: 'STATUS_TERMINATING' },
  },
  { method: 'POST', url: '/api/v1/mirrors/status', shape: 'status', body: { flowJobName: 'm' } },
  {
    method: 'POST',
    url: '/api/v1/mirrors/tables/resync',
    shape: 'grpc',
    body: { flowJobName: 'm', sourceTableIdentifier: 'public.t' },
  },
  { method: 'POST', url: '/api/v1/mirrors/cdc/batches', shape: 'grpc', body: { flowJobName: 'm' } },
  {
    method: 'POST',
    url: '/api/v1/mirrors/logs',
    shape: 'grpc',
    body: { flow_job_name: '', num_per_page: 10 },
  },
  {
    method: 'POST',
    url: '/api/v1/scripts',
    shape: 'grpc',
    body: { script: { id: -1, name: `auth-${suffix}`, lang: 'lua', source: 'return 1' } },
  },
  { method: 'GET', url: '/api/v1/scripts/-1', shape: 'grpc' },
  {
    method: 'POST',
    url: '/api/v1/scripts/test',
    shape: 'grpc',
    body: { source: 'function onRecord(r) return r.row end', record: { row: {} } },
  },
  {
    method: 'POST',
    url: '/api/v1/peers/validate',
    shape: 'validate',
    body: {
      peer: {
        name: `auth-check-${suffix}`,
        type: 3,
        relational_config: {
          host: postgres.host,
          port: postgres.port,
          user: postgres.superuser.user,
          password: postgres.superuser.password,
          database: postgres.database,
        },
      },
    },
  },
  { method: 'GET', url: '/api/v1/peers/schemas?peer_name=p', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/peers/tables?peer_name=p&schema_name=s', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/peers/columns?peer_name=p&schema_name=s&table_name=t', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/audit', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/openapi.json', shape: 'grpc' },
  { method: 'GET', url: '/api/v1/no-such-route', shape: 'grpc' },
];
const postEndpoints = endpoints.filter((endpoint) => endpoint.method === 'POST');

/** The endpoint's error body for `message`; `code` for the {code, message, details} shape. */
function errorBody(shape: Shape, code: number, message: unknown): unknown {
  if (shape === 'peer') return { status: 'FAILED', message };
  if (shape === 'validate') return { status: 'INVALID', message };
  if (shape === 'status')
    return { flowJobName: '', errorMessage: message, currentFlowState: 'STATUS_UNKNOWN', ok: false };
  return { code, message, details: [] };
}

async function stateOf(facade: Facade): Promise<string> {
  const { store, catalog } = facade.controlPlane;
  return JSON.stringify({
    peers: await store.listPeers(),
    mirrors: await store.listMirrors(),
    scripts: await store.listScripts(),
    logs: (await catalog.listLogs({ offset: 0, limit: 0 })).total,
  });
}

function inject(facade: Facade, endpoint: Endpoint, options: Partial<InjectOptions> = {}) {
  return facade.app.inject({
    method: endpoint.method,
    url: endpoint.url,
    ...(endpoint.body === undefined ? {} : { payload: endpoint.body as object }),
    ...options,
  });
}

function expectUnauthorized(response: LightMyRequestResponse, endpoint: Endpoint): void {
  expect(response.statusCode, `${endpoint.url}: ${response.body}`).toBe(401);
  expect(response.headers['www-authenticate']).toBe('Basic realm="tributary", charset="UTF-8"');
  expect(response.json()).toEqual(errorBody(endpoint.shape, 16, 'authentication required'));
}

describe('access', () => {
  let facade: Facade;

  beforeAll(async () => {
    // These tests send hundreds of wrong credentials from one address; the
    // bound on failed logins has tests of its own ("failed logins" below).
    facade = await createFacade({ listener: { authFailures: { max: 100_000, windowMs: 60_000 } } });
  });

  afterAll(async () => {
    await facade?.close();
  });

  describe('authentication', () => {
    const refused: { name: string; authorization?: string }[] = [
      { name: 'no header' },
      { name: 'a wrong password', authorization: basicAuth('', 'wrong-password') },
      { name: 'the password of another service', authorization: basicAuth('', `${apiPassword}x`) },
      { name: 'an unknown user', authorization: basicAuth('admin', apiPassword) },
      { name: 'an empty password', authorization: basicAuth('', '') },
      { name: 'no colon', authorization: `Basic ${Buffer.from(apiPassword).toString('base64')}` },
      { name: 'a bearer token', authorization: `Bearer ${apiPassword}` },
      { name: 'the password in clear', authorization: `Basic :${apiPassword}` },
      { name: 'an empty Basic', authorization: 'Basic ' },
      { name: 'not base64', authorization: 'Basic !!!!' },
    ];

    it.each(endpoints)(
      'refuses $method $url without valid credentials, changing nothing',
      async (endpoint) => {
        const before = await stateOf(facade);
        for (const { name, authorization } of refused) {
          const response = await inject(
            facade,
            endpoint,
            authorization === undefined ? {} : { headers: { authorization } },
          );
          expectUnauthorized(response, endpoint);
          expect(response.body, name).not.toContain(apiPassword);
        }
        expect(await stateOf(facade)).toBe(before);
      },
    );

    it('checks credentials before reading the body', async () => {
      const before = await stateOf(facade);
      for (const endpoint of postEndpoints) {
        expectUnauthorized(
          await inject(facade, endpoint, {
            payload: 'x'.repeat(2 * 1024 * 1024),
            headers: { 'content-type': 'application/json' },
          }),
          endpoint,
        );
        expectUnauthorized(
          await inject(facade, endpoint, {
            payload: '{"broken',
            headers: { 'content-type': 'application/json' },
          }),
          endpoint,
        );
      }
      expect(await stateOf(facade)).toBe(before);
    });

    it('accepts an empty user and any case of the scheme', async () => {
      const logs = endpoints.find((endpoint) => endpoint.url === '/api/v1/mirrors/logs') as Endpoint;
      for (const authorization of [
        basicAuth('', apiPassword),
        `basic ${Buffer.from(`:${apiPassword}`).toString('base64')}`,
        `BASIC ${Buffer.from(`:${apiPassword}`).toString('base64')}`,
      ]) {
        const response = await inject(facade, logs, { headers: { authorization } });
        expect(response.statusCode, authorization).toBe(200);
      }
    });

    it('accepts the configured user as well as the empty one', async () => {
      const withUser = await createFacade({
        auth: { mode: 'basic', password: 'pw-with-user', user: 'operator' },
      });
      try {
        const openapi = { method: 'GET', url: '/api/v1/openapi.json', shape: 'grpc' } as const;
        for (const authorization of [basicAuth('operator', 'pw-with-user'), basicAuth('', 'pw-with-user')]) {
          expect((await inject(withUser, openapi, { headers: { authorization } })).statusCode).toBe(200);
        }
        for (const authorization of [
          basicAuth('other', 'pw-with-user'),
          basicAuth('operator', 'wrong'),
          basicAuth('Operator', 'pw-with-user'),
          basicAuth('', apiPassword),
        ]) {
          expectUnauthorized(await inject(withUser, openapi, { headers: { authorization } }), openapi);
        }
      } finally {
        await withUser.close();
      }
    });

    it('answers 429 to an address past its failed logins, even with the password, and not to others', async () => {
      // The defaults, as a service runs with them.
      const limited = await createFacade();
      const { max } = listenerDefaults.authFailures;
      const openapi = { method: 'GET', url: '/api/v1/openapi.json', shape: 'grpc' } as const;
      const from = (remoteAddress: string, password: string) =>
        inject(limited, openapi, { remoteAddress, headers: { authorization: basicAuth('', password) } });
      try {
        // Successful logins are not counted: a dashboard polling all day is never held back.
        for (let i = 0; i < max * 2; i++) expect((await from('10.0.0.1', apiPassword)).statusCode).toBe(200);
        for (let i = 0; i < max; i++) expectUnauthorized(await from('10.0.0.1', 'wrong-password'), openapi);
        const refused = await from('10.0.0.1', 'wrong-password');
        expect(refused.statusCode).toBe(429);
        expect(refused.json()).toEqual({
          code: 8,
          message: expect.stringMatching(/^too many failed logins from this address; retry in \d+s$/),
          details: [],
        });
        expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
        // The right password from that address waits too: otherwise guessing would go on.
        expect((await from('10.0.0.1', apiPassword)).statusCode).toBe(429);
        // Another address is not affected, and the probes answer.
        expect((await from('10.0.0.2', apiPassword)).statusCode).toBe(200);
        expectUnauthorized(await from('10.0.0.2', 'wrong-password'), openapi);
        const health = await limited.app.inject({
          method: 'GET',
          url: '/healthz',
          remoteAddress: '10.0.0.1',
        });
        expect(health.statusCode).toBe(200);
      } finally {
        await limited.close();
      }
    });

    it('lets every request through when authentication is disabled', async () => {
      const open = await createFacade({ auth: { mode: 'disabled' } });
      try {
        const response = await open.app.inject({ method: 'GET', url: '/api/v1/scripts/-1' });
        expect(response.statusCode).toBe(200);
        expect(response.json()).toEqual({ scripts: [] });
      } finally {
        await open.close();
      }
    });

    it('serves /healthz without credentials', async () => {
      for (const url of ['/healthz', '/healthz?probe=liveness']) {
        const response = await facade.app.inject({ method: 'GET', url });
        expect(response.statusCode, url).toBe(200);
        expect(response.json()).toEqual({ ok: true });
      }
    });
  });

  describe('unknown routes', () => {
    it.each([
      ['GET', '/api/v1/no-such-route'],
      ['GET', '/api/v2/peers/info/x'],
      ['GET', '/api/v1/peers/create'],
      ['POST', '/api/v1/peers/info/x'],
      ['DELETE', '/api/v1/scripts/1'],
      ['PUT', '/api/v1/mirrors/status'],
      ['GET', '/no-such-page'],
    ] as const)('answers 404 code 5 for %s %s', async (method, url) => {
      const before = await stateOf(facade);
      const response = await facade.request({ method, url, ...(method === 'GET' ? {} : { payload: {} }) });
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({ code: 5, message: `no route ${method} ${url}`, details: [] });
      expect(await stateOf(facade)).toBe(before);
    });

    it('does not echo the query string of an unknown route', async () => {
      const response = await facade.request({ method: 'GET', url: '/api/v1/nope?token=abc123' });
      expect(response.statusCode).toBe(404);
      expect(response.body).not.toContain('abc123');
    });
  });

  describe('bodies that cannot be read', () => {
    const unreadable: {
      name: string;
      payload: string;
      contentType?: string;
      status: number;
      message: string;
    }[] = [
      {
        name: 'truncated JSON',
        payload: '{"peer": {',
        status: 400,
        message: 'request body is not valid JSON',
      },
      {
        name: 'single quotes',
        payload: "{'flowJobName': 'm'}",
        status: 400,
        message: 'request body is not valid JSON',
      },
      {
        name: 'a trailing comma',
        payload: '{"flowJobName": "m",}',
        status: 400,
        message: 'request body is not valid JSON',
      },
      {
        name: 'text that is not JSON',
        payload: 'flowJobName=m',
        status: 400,
        message: 'request body is not valid JSON',
      },
      {
        name: 'a __proto__ key',
        payload: '{"__proto__": {"polluted": true}}',
        status: 400,
        message: 'request body is not valid JSON',
      },
      { name: 'an empty body', payload: '', status: 400, message: 'request body is empty' },
      {
        name: 'a form body',
        payload: 'flowJobName=m',
        contentType: 'application/x-www-form-urlencoded',
        status: 400,
        message: 'Content-Type must be application/json',
      },
      {
        name: 'a text body',
        payload: '{"flowJobName": "m"}',
        contentType: 'text/plain',
        status: 400,
        message: 'Content-Type must be application/json',
      },
      {
        name: 'a body over 1 MiB',
        payload: JSON.stringify({ padding: 'x'.repeat(1024 * 1024) }),
        status: 413,
        message: 'request body is too large',
      },
    ];

    for (const endpoint of postEndpoints) {
      it.each(unreadable)(`refuses $name on ${endpoint.url} in its error shape`, async (body) => {
        const before = await stateOf(facade);
        const response = await facade.request({
          method: 'POST',
          url: endpoint.url,
          payload: body.payload,
          headers: { 'content-type': body.contentType ?? 'application/json' },
        });
        expect(response.statusCode, response.body).toBe(body.status);
        expect(response.json()).toEqual(errorBody(endpoint.shape, 3, body.message));
        expect(await stateOf(facade)).toBe(before);
      });
    }

    it('answers 413 to a 20 MiB body over real HTTP, so that fetch reads it (repeated)', async () => {
      // app.inject() cannot show this: a server that answers while the client
      // still uploads and then closes makes fetch fail with EPIPE or "fetch
      // failed" instead of returning the 413.
      const server = await createFacade();
      try {
        const address = await server.app.listen({ host: '127.0.0.1', port: 0 });
        const payload = Buffer.from(JSON.stringify({ padding: 'x'.repeat(20 * 1024 * 1024) }));
        // With a Content-Length (refused before reading) and streamed without one (refused at the limit).
        const streamed = () =>
          new ReadableStream<Uint8Array>({
            start(controller) {
              for (let offset = 0; offset < payload.length; offset += 64 * 1024) {
                controller.enqueue(payload.subarray(offset, offset + 64 * 1024));
              }
              controller.close();
            },
          });
        for (let attempt = 0; attempt < 10; attempt++) {
          const response = await fetch(`${address}/api/v1/flows/cdc/create`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: basicAuth('', apiPassword) },
            body: attempt % 2 === 0 ? payload : streamed(),
            duplex: 'half',
          } as RequestInit);
          expect(response.status, `attempt ${attempt}`).toBe(413);
          expect(await response.json()).toEqual({
            code: 3,
            message: 'request body is too large',
            details: [],
          });
        }
      } finally {
        await server.close();
      }
    });

    it('accepts a body just under the limit (and validates it)', async () => {
      const before = await stateOf(facade);
      const source = 'x'.repeat(1024 * 1024 - 200);
      const response = await facade.post('/api/v1/scripts', {
        script: { id: -1, name: `big-${suffix}`, lang: 'lua', source },
      });
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({
        code: 3,
        message: expect.stringContaining('script.source: '),
        details: [],
      });
      expect(await stateOf(facade)).toBe(before);
    });
  });

  describe('OpenAPI document', () => {
    it('is an OpenAPI 3.1 document listing every /api/v1 path', async () => {
      const response = await facade.request({ method: 'GET', url: '/api/v1/openapi.json' });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      const document = response.json();
      expect(document.openapi).toMatch(/^3\.1\./);
      expect(document.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
      expect(document.components.securitySchemes).toEqual({ basic: { type: 'http', scheme: 'basic' } });
      expect(Object.keys(document.paths).sort()).toEqual(
        [
          '/api/v1/audit',
          '/api/v1/flows/cdc/create',
          '/api/v1/mirrors/cdc/batches',
          '/api/v1/mirrors/list',
          '/api/v1/mirrors/logs',
          '/api/v1/mirrors/state_change',
          '/api/v1/mirrors/status',
          '/api/v1/mirrors/tables/resync',
          '/api/v1/peers/create',
          '/api/v1/peers/info/{peer_name}',
          '/api/v1/peers/list',
          '/api/v1/peers/validate',
          '/api/v1/peers/schemas',
          '/api/v1/peers/tables',
          '/api/v1/peers/columns',
          '/api/v1/scripts',
          '/api/v1/scripts/test',
          '/api/v1/scripts/{id}',
        ].sort(),
      );
      for (const endpoint of endpoints.filter((candidate) => candidate.url !== '/api/v1/no-such-route')) {
        if (endpoint.url === '/api/v1/openapi.json') continue;
        const path = endpoint.url
          .replace(/\?.*$/, '')
          .replace('/peers/info/some-peer', '/peers/info/{peer_name}')
          .replace('/scripts/-1', '/scripts/{id}');
        const operation = document.paths[path]?.[endpoint.method.toLowerCase()];
        expect(operation, `${endpoint.method} ${path}`).toBeDefined();
        expect(operation.responses).toHaveProperty('200');
        expect(operation.responses).toHaveProperty('401');
        if (endpoint.method === 'POST') {
          expect(operation.requestBody.content['application/json'].schema).toMatchObject({ type: 'object' });
        }
      }
      const createPeer =
        document.paths['/api/v1/peers/create'].post.requestBody.content['application/json'].schema;
      expect(createPeer.properties.peer.properties).toHaveProperty('relational_config');
      expect(createPeer.properties.peer.properties).toHaveProperty('datawarehouse_config');
    });
  });
});

describe('connections', () => {
  it('closes a connection that stops sending in the middle of its request', async () => {
    const server = await createFacade({ listener: { connectionTimeoutMs: 500 } });
    const socket = new Socket();
    try {
      const address = new URL(await server.app.listen({ host: '127.0.0.1', port: 0 }));
      let closed = false;
      socket.on('close', () => {
        closed = true;
      });
      socket.on('error', () => {});
      await new Promise<void>((resolve) => socket.connect(Number(address.port), '127.0.0.1', resolve));
      // Headers begun, never finished: a slow client holding a socket.
      socket.write('POST /api/v1/flows/cdc/create HTTP/1.1\r\nHost: x\r\n');
      await waitFor(async () => closed, 15_000, 'the idle connection to be closed');
    } finally {
      socket.destroy();
      await server.close();
    }
  });
});

describe('metrics', () => {
  it('serve mirror gauges to Prometheus without credentials', async () => {
    const facade = await createFacade();
    try {
      await facade.controlPlane.store.createMirror({
        name: 'metered',
        sourcePeer: 's',
        destinationPeer: 'd',
        tableMappings: [
          {
            source: { schema: 'public', table: 't' },
            destination: { schema: 'public', table: 't' },
            exclude: [],
            columns: [],
          },
        ],
        doInitialSnapshot: false,
        adoptExistingSlot: false,
        failoverSlot: false,
        retainedWalLimitAction: 'Alert',
        heartbeatIntervalSeconds: 30,
        streaming: false,
        maxBatchSize: 1000,
        idleTimeoutSeconds: 1,
        snapshotNumRowsPerPartition: 1000,
        snapshotMaxParallelWorkers: 1,
        snapshotNumTablesInParallel: 1,
        resync: false,
        initialSnapshotOnly: false,
        resyncTables: {},
        system: 'Q',
        schemaChanges: 'apply',
        state: 'Running',
      });
      await facade.controlPlane.catalog.transition('metered', 'setup');
      await facade.controlPlane.catalog.transition('metered', 'running');
      const response = await facade.app.inject({ method: 'GET', url: '/metrics' });
      // The body names the cause when it is not 200 (a 500 seen once in cluster mode under load).
      expect(response.statusCode, response.body).toBe(200);
      expect(response.body).toContain('tributary_mirror_phase{mirror="metered",phase="STATUS_RUNNING"} 1');
      expect(response.body).toContain('tributary_mirror_rows_synced{mirror="metered"} 0');
    } finally {
      await facade.close();
    }
  });

  it('ask for the API credentials with metricsAuth, and serve them with them', async () => {
    const facade = await createFacade({ listener: { metricsAuth: true } });
    try {
      const without = await facade.app.inject({ method: 'GET', url: '/metrics' });
      expect(without.statusCode).toBe(401);
      expect(without.headers['www-authenticate']).toContain('Basic');
      expect(without.body).not.toContain('tributary_');
      const wrong = await facade.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: { authorization: basicAuth('', 'not-the-password') },
      });
      expect(wrong.statusCode).toBe(401);
      const answered = await facade.request({ method: 'GET', url: '/metrics' });
      expect(answered.statusCode, answered.body).toBe(200);
      expect(answered.body).toContain('# TYPE tributary_mirror_phase gauge');
      // Probes still need none.
      expect((await facade.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await facade.close();
    }
  });
});
