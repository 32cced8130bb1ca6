// The facade's answers to generated requests (docs/security.md, "Fuzzing"):
// any body, of any content type, posted to the API's routes and to the
// console's forms gets a typed answer, never a 500 (an error no route
// anticipated). Over a throw-away embedded control plane with one mirror and
// its two peers; peer and source checks are stubs, so nothing leaves the
// process. The cases share that control plane: a case may pause or drop the
// mirror, and later ones then meet it so.
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzParameters } from '../../../test/support/fuzz.ts';
import { type ControlPlane, startControlPlane } from '../standalone/control-plane.ts';
import { buildApp } from './app.ts';
import { apiErrors } from './errors.ts';

const password = 'fuzz-password';
const authorization = `Basic ${Buffer.from(`:${password}`).toString('base64')}`;
const documentedStatuses = new Set<number>([200, ...Object.values(apiErrors).map((error) => error.status)]);

let controlPlane: ControlPlane;
let app: FastifyInstance;
/** Peers pass their check while the fixtures are made, and fail it afterwards: no case stores a peer. */
let peersPass = true;

beforeAll(async () => {
  const logger = pino({ level: 'silent' });
  controlPlane = await startControlPlane({ dataDir: 'memory://', logger, runEngines: false });
  app = buildApp({
    store: controlPlane.store,
    catalog: controlPlane.catalog,
    checkPeer: async () => {
      if (peersPass) return { version: '17.0' };
      throw new Error('no peer is reachable from this test');
    },
    findMissingTables: async () => [],
    checkMirrorSource: async () => [],
    scriptsEnabled: true,
    auth: { mode: 'basic', password },
    logger,
  });
  await app.ready();
  const post = async (url: string, payload: object) => {
    const response = await app.inject({ method: 'POST', url, headers: { authorization }, payload });
    expect(response.statusCode, response.body).toBe(200);
  };
  for (const name of ['src', 'dst']) {
    await post('/api/v1/peers/create', {
      peer: {
        name,
        type: 'RELATIONAL',
        relational_config: { host: 'localhost', port: 5432, user: 'u', password: 'p', database: 'd' },
      },
    });
  }
  await post('/api/v1/flows/cdc/create', {
    connection_configs: {
      flow_job_name: 'orders',
      do_initial_snapshot: false,
      source_name: 'src',
      destination_name: 'dst',
      table_mappings: [
        { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders' },
      ],
    },
  });
  peersPass = false;
}, 60_000);

afterAll(async () => {
  await app?.close();
  await controlPlane?.close();
});

const apiRoutes = [
  '/api/v1/flows/cdc/create',
  '/api/v1/peers/create',
  '/api/v1/mirrors/state_change',
  '/api/v1/mirrors/tables/resync',
  '/api/v1/mirrors/status',
  '/api/v1/mirrors/cdc/batches',
  '/api/v1/mirrors/logs',
  '/api/v1/scripts',
];

/** Names that exist, and any. */
const name = fc.oneof(
  fc.constantFrom('orders', 'src', 'dst', 'public.orders', 'orders_slot'),
  fc.string({ maxLength: 8 }),
);
/** Bodies near the interface's (its field names, the fixtures' names), JSON of any shape, and text that is not JSON. */
const jsonBody = fc.oneof(
  fc
    .dictionary(
      fc.constantFrom(
        'flowJobName',
        'flow_job_name',
        'requestedFlowState',
        'sourceTableIdentifier',
        'connection_configs',
        'peer',
        'script',
        'limit',
        'beforeId',
        'level',
        'includeFlowInfo',
      ),
      fc.oneof(
        name,
        fc.jsonValue({ maxDepth: 2 }),
        fc.constantFrom('STATUS_PAUSED', 'STATUS_RUNNING', 2, 1, 'ERROR'),
      ),
      { maxKeys: 4 },
    )
    .map((body) => JSON.stringify(body)),
  fc.json({ maxDepth: 3 }),
);
const anyBody = fc.oneof(
  { weight: 4, arbitrary: jsonBody },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      '{',
      '{"a":',
      '[1,',
      'null',
      '{"__proto__":{"x":1}}',
      '{"constructor":{"prototype":{}}}',
      `{"a":${'['.repeat(5000)}`,
    ),
  },
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  undefined,
);

describe('the facade, generated requests', () => {
  it('answers any body posted to an API route with a documented status and a JSON body, never a 500 (400 cases)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...apiRoutes), anyBody, contentType, async (url, payload, type) => {
        const response = await app.inject({
          method: 'POST',
          url,
          headers: { authorization, ...(type === undefined ? {} : { 'content-type': type }) },
          payload,
        });
        expect(documentedStatuses.has(response.statusCode), `${response.statusCode} ${response.body}`).toBe(
          true,
        );
        expect(() => response.json()).not.toThrow();
      }),
      fuzzParameters(400),
    );
  });

  it("answers any form posted to the console's forms with a page, a redirect or a refusal, never a 500 (400 cases)", async () => {
    const formBody = fc.oneof(
      fc
        .array(
          fc.tuple(
            fc.constantFrom('action', 'table', 'name', 'source', '__proto__', 'x'),
            fc.oneof(
              name,
              fc.constantFrom(
                'pause',
                'resume',
                'drop',
                'toString',
                'public.orders',
                'function onRecord(r) return r end',
              ),
            ),
          ),
          { maxLength: 4 },
        )
        .map((entries) => new URLSearchParams(entries).toString()),
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.constantFrom('%', '%FF%FE', 'action=%E2%82', '&&&==', 'a'.repeat(5000)),
    );
    const path = fc.oneof(
      name.map((mirror) => `/mirrors/${encodeURIComponent(mirror)}/action`),
      name.map((mirror) => `/mirrors/${encodeURIComponent(mirror)}/tables/resync`),
      fc
        .oneof(fc.constantFrom('new', '-1', '0', '1', '99999999999999999'), fc.string({ maxLength: 6 }))
        .map((id) => `/scripts/${encodeURIComponent(id)}`),
    );
    const site = fc.constantFrom<Record<string, string>>(
      {},
      { 'sec-fetch-site': 'same-origin' },
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'http://elsewhere.example' },
      { origin: 'not a url' },
    );
    await fc.assert(
      fc.asyncProperty(path, formBody, site, fc.boolean(), async (url, payload, headers, asForm) => {
        const response = await app.inject({
          method: 'POST',
          url,
          headers: {
            authorization,
            ...headers,
            'content-type': asForm ? 'application/x-www-form-urlencoded' : 'application/json',
          },
          payload,
        });
        expect(response.statusCode, `${response.statusCode} ${response.body.slice(0, 300)}`).toBeLessThan(
          500,
        );
        if (response.statusCode >= 300 && response.statusCode < 400)
          expect(response.headers.location).toMatch(/^\//);
      }),
      fuzzParameters(400),
    );
  });
});
