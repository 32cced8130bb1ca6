// POST /api/v1/flows/cdc/create, /api/v1/mirrors/state_change and
// /api/v1/mirrors/status through app.inject(). No engines run: state changes are
// asserted on the resource store, runtime phases are set through the catalog.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MirrorPhase, peerSchema, ResourceConflictError } from '../../engine/src/index.ts';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';

async function stateOf(facade: Facade): Promise<string> {
  const { store, catalog } = facade.controlPlane;
  const mirrors = await store.listMirrors();
  const runtimes = await Promise.all(mirrors.map((mirror) => catalog.getRuntime(mirror.name)));
  return JSON.stringify({
    peers: await store.listPeers(),
    mirrors,
    runtimes,
    scripts: await store.listScripts(),
  });
}

function expectError(
  response: LightMyRequestResponse,
  status: number,
  code: number,
  message: RegExp | string,
): void {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.json()).toEqual({
    code,
    message: typeof message === 'string' ? expect.stringContaining(message) : expect.stringMatching(message),
    details: [],
  });
}

const ok = { ok: true, errorMessage: '' };

describe('mirrors', () => {
  let facade: Facade;
  let source: TestDatabase;
  let destination: TestDatabase;
  const suffix = randomSuffix();
  const sourcePeer = `src-${suffix}`;
  const destinationPeer = `dst-${suffix}`;
  const analyticsPeer = `ch-${suffix}`;
  const streamPeer = `kafka-${suffix}`;
  const datawarehousePeer = `sf-${suffix}`;
  const unreachablePeer = `gone-${suffix}`;
  let mirrorCount = 0;
  const mirrorName = (label: string) => `${label}-${suffix}-${++mirrorCount}`;

  const relationalPeer = (name: string, database: TestDatabase) => ({
    peer: { name, type: 3, relational_config: { ...database.config } },
  });

  const connectionConfigs = (name: string, overrides: Record<string, unknown> = {}) => ({
    flow_job_name: name,
    source_name: sourcePeer,
    destination_name: destinationPeer,
    table_mappings: [
      { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders_copy' },
    ],
    do_initial_snapshot: true,
    ...overrides,
  });

  async function createMirror(name: string, overrides: Record<string, unknown> = {}): Promise<void> {
    const response = await facade.post('/api/v1/flows/cdc/create', {
      connection_configs: connectionConfigs(name, overrides),
    });
    expect(response.statusCode, response.body).toBe(200);
  }

  const stateChange = (body: unknown) => facade.post('/api/v1/mirrors/state_change', body);
  const status = (flowJobName: string, includeFlowInfo?: boolean) =>
    facade.post('/api/v1/mirrors/status', {
      flowJobName,
      ...(includeFlowInfo === undefined ? {} : { includeFlowInfo }),
    });

  async function walk(name: string, phases: readonly MirrorPhase[]): Promise<void> {
    for (const phase of phases) await facade.controlPlane.catalog.transition(name, phase);
  }
  const toPaused: readonly MirrorPhase[] = ['setup', 'running', 'pausing', 'paused'];

  async function putPeer(peer: unknown): Promise<void> {
    await facade.controlPlane.store.putPeer(peerSchema.parse(peer), null);
  }

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('api_mirrors_src'),
      createTestDatabase('api_mirrors_dst'),
    ]);
    await source.client.query(`
      CREATE TABLE orders (id bigint PRIMARY KEY, customer text, note text, amount numeric);
      CREATE TABLE customers (id bigint PRIMARY KEY, name text, note text);
      CREATE TABLE items (id bigint PRIMARY KEY, label text);
      CREATE SCHEMA sales;
      CREATE TABLE sales.invoices (id bigint PRIMARY KEY, total numeric);
      CREATE TABLE "Mixed Case" (id bigint PRIMARY KEY);
      -- Named by the full-interface create: the source check refuses a publication that does not exist.
      CREATE PUBLICATION my_publication FOR ALL TABLES`);
    facade = await createFacade();
    for (const [name, database] of [
      [sourcePeer, source],
      [destinationPeer, destination],
    ] as const) {
      const response = await facade.post('/api/v1/peers/create', relationalPeer(name, database));
      expect(response.json()).toMatchObject({ status: 'CREATED' });
    }
    // Peers that are never contacted here go straight into the store.
    await putPeer({
      name: analyticsPeer,
      kind: 'analytics',
      config: { host: '127.0.0.1', port: 9000, user: 'u', password: 'p', database: 'default' },
    });
    await putPeer({
      name: streamPeer,
      kind: 'stream',
      config: { servers: ['127.0.0.1:9'], username: 'u', password: 'p', sasl: 'PLAIN' },
    });
    await putPeer({
      name: datawarehousePeer,
      kind: 'datawarehouse',
      config: { accountId: 'a', username: 'u', privateKey: 'k', database: 'd', warehouse: 'w', role: 'r' },
    });
    // Nothing listens on port 1: the source-table lookup cannot connect.
    await putPeer({
      name: unreachablePeer,
      kind: 'relational',
      config: { host: '127.0.0.1', port: 1, user: 'u', password: 'unreachable-secret', database: 'd' },
    });
    const script = await facade.post('/api/v1/scripts', {
      script: {
        id: -1,
        name: `transform-${suffix}`,
        lang: 'lua',
        source: 'function onRecord(r) return r end',
      },
    });
    expect(script.statusCode).toBe(200);
  });

  afterAll(async () => {
    await facade?.close();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  describe('flows/cdc/create', () => {
    it('creates a mirror with the interface defaults and reports them in the status', async () => {
      const name = mirrorName('defaults');
      const response = await facade.post('/api/v1/flows/cdc/create', {
        connection_configs: connectionConfigs(name),
      });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ workflowId: expect.stringMatching(new RegExp(`^${name}-.+`)) });

      const mirror = await facade.controlPlane.store.getMirror(name);
      expect(mirror?.spec.state).toBe('Running');
      expect(mirror?.deleting).toBe(false);

      const list = await facade.request({ method: 'GET', url: '/api/v1/mirrors/list' });
      expect(list.statusCode).toBe(200);
      expect(list.json().mirrors).toContainEqual({
        name,
        workflowId: response.json().workflowId,
        sourceName: sourcePeer,
        destinationName: expect.any(String),
        createdAt: mirror?.createdAt.toISOString(),
        isCdc: true,
      });

      const info = await status(name, true);
      expect(info.statusCode).toBe(200);
      expect(info.json()).toEqual({
        flowJobName: name,
        errorMessage: '',
        currentFlowState: 'STATUS_SETUP',
        ok: true,
        cdcStatus: {
          config: {
            flowJobName: name,
            sourceName: sourcePeer,
            destinationName: destinationPeer,
            tableMappings: [
              {
                sourceTableIdentifier: 'public.orders',
                destinationTableIdentifier: 'public.orders_copy',
                exclude: [],
                columns: [],
                rowFilter: '',
                partitionKey: '',
              },
            ],
            maxBatchSize: 1_000_000,
            idleTimeoutSeconds: '60',
            heartbeatIntervalSeconds: 30,
            publicationName: '',
            replicationSlotName: '',
            doInitialSnapshot: true,
            snapshotNumRowsPerPartition: 1_000_000,
            snapshotMaxParallelWorkers: 4,
            snapshotNumTablesInParallel: 1,
            resync: false,
            initialSnapshotOnly: false,
            softDelete: false,
            softDeleteColName: '',
            syncedAtColName: '',
            script: '',
            system: 'Q',
            schemaChanges: 'SCHEMA_CHANGES_APPLY',
            cdcStagingPath: '',
            snapshotStagingPath: '',
          },
          snapshotStatus: { clones: [] },
          cdcSyncs: [],
          sourceType: 'RELATIONAL',
          destinationType: 'RELATIONAL',
        },
      });
      // Without includeFlowInfo: the status alone.
      expect((await status(name)).json()).toEqual({
        flowJobName: name,
        errorMessage: '',
        currentFlowState: 'STATUS_SETUP',
        ok: true,
      });
      expect((await status(name, false)).json()).not.toHaveProperty('cdcStatus');
    });

    it('takes every field of the interface', async () => {
      const name = mirrorName('full');
      await createMirror(name, {
        table_mappings: [
          {
            source_table_identifier: 'public.orders',
            destination_table_identifier: 'public.orders_copy',
            exclude: 'note, amount',
            columns: [{ sourceName: 'id', ordering: 1 }, { sourceName: 'customer' }],
          },
          {
            source_table_identifier: 'sales.invoices',
            destination_table_identifier: 'archive.invoices',
            exclude: ['total'],
            // An addition to the interface.
            row_filter: 'id > 0',
          },
          // A bare table name means the public schema; quotes keep case and spaces.
          { source_table_identifier: 'items', destination_table_identifier: 'items' },
          { source_table_identifier: 'public."Mixed Case"', destination_table_identifier: 'public.mixed' },
        ],
        do_initial_snapshot: true,
        max_batch_size: 5_000,
        idle_timeout_seconds: 15,
        publication_name: 'my_publication',
        replication_slot_name: 'my_slot',
        snapshot_num_rows_per_partition: 250,
        snapshot_max_parallel_workers: 2,
        snapshot_num_tables_in_parallel: 3,
        resync: false,
        initial_snapshot_only: true,
        soft_delete_col_name: '_deleted',
        synced_at_col_name: '_synced_at',
        script: `transform-${suffix}`,
        system: 'PG',
        schema_changes: 'SCHEMA_CHANGES_HOLD',
        heartbeat_interval_seconds: 5,
      });
      const info = await status(name, true);
      expect(info.json().cdcStatus.config).toEqual({
        flowJobName: name,
        sourceName: sourcePeer,
        destinationName: destinationPeer,
        tableMappings: [
          {
            sourceTableIdentifier: 'public.orders',
            destinationTableIdentifier: 'public.orders_copy',
            exclude: ['note', 'amount'],
            columns: [{ sourceName: 'id', ordering: 1 }, { sourceName: 'customer' }],
            rowFilter: '',
            partitionKey: '',
          },
          {
            sourceTableIdentifier: 'sales.invoices',
            destinationTableIdentifier: 'archive.invoices',
            exclude: ['total'],
            rowFilter: 'id > 0',
            columns: [],
            partitionKey: '',
          },
          {
            sourceTableIdentifier: 'public.items',
            destinationTableIdentifier: 'public.items',
            exclude: [],
            columns: [],
            rowFilter: '',
            partitionKey: '',
          },
          {
            sourceTableIdentifier: 'public.Mixed Case',
            destinationTableIdentifier: 'public.mixed',
            exclude: [],
            columns: [],
            rowFilter: '',
            partitionKey: '',
          },
        ],
        maxBatchSize: 5_000,
        idleTimeoutSeconds: '15',
        heartbeatIntervalSeconds: 5,
        publicationName: 'my_publication',
        replicationSlotName: 'my_slot',
        doInitialSnapshot: true,
        snapshotNumRowsPerPartition: 250,
        snapshotMaxParallelWorkers: 2,
        snapshotNumTablesInParallel: 3,
        resync: false,
        initialSnapshotOnly: true,
        softDelete: true,
        softDeleteColName: '_deleted',
        syncedAtColName: '_synced_at',
        script: `transform-${suffix}`,
        system: 'PG',
        schemaChanges: 'SCHEMA_CHANGES_HOLD',
        cdcStagingPath: '',
        snapshotStagingPath: '',
      });
    });

    it('takes streaming, beyond the interface, beside camelCase fields; off by default', async () => {
      const snake = mirrorName('streaming');
      const camel = mirrorName('streamcamel');
      const plain = mirrorName('nostream');
      await createMirror(snake, { streaming: true });
      await createMirror(camel, { streaming: true, idleTimeoutSeconds: 5 });
      await createMirror(plain);
      expect((await facade.controlPlane.store.getMirror(snake))?.spec.streaming).toBe(true);
      expect((await facade.controlPlane.store.getMirror(camel))?.spec).toMatchObject({
        streaming: true,
        idleTimeoutSeconds: 5,
      });
      expect((await facade.controlPlane.store.getMirror(plain))?.spec.streaming).toBe(false);
      const refused = await facade.post('/api/v1/flows/cdc/create', {
        connection_configs: connectionConfigs(mirrorName('badstream'), { streaming: 'yes' }),
      });
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('streaming');
    });

    it('takes the schema change policy, beyond the interface, by name or number; apply by default', async () => {
      const byNumber = mirrorName('schemanum');
      const camel = mirrorName('schemacamel');
      await createMirror(byNumber, { schema_changes: 2 });
      await createMirror(camel, { schemaChanges: 'SCHEMA_CHANGES_HOLD' });
      expect((await facade.controlPlane.store.getMirror(byNumber))?.spec.schemaChanges).toBe('ignore');
      expect((await facade.controlPlane.store.getMirror(camel))?.spec.schemaChanges).toBe('hold');
      const before = await stateOf(facade);
      const refused = await facade.post('/api/v1/flows/cdc/create', {
        connection_configs: connectionConfigs(mirrorName('badschema'), {
          schema_changes: 'SCHEMA_CHANGES_SOMETIMES',
        }),
      });
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('SCHEMA_CHANGES_APPLY (0)');
      expect(await stateOf(facade)).toBe(before);
    });

    it('refuses a duplicate name with 409 code 2 and changes nothing', async () => {
      const name = mirrorName('dup');
      await createMirror(name);
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/flows/cdc/create', {
        connection_configs: connectionConfigs(name, {
          table_mappings: [{ source_table_identifier: 'items', destination_table_identifier: 'items' }],
        }),
      });
      expectError(response, 409, 2, /^invalid mirror: .*already exists/);
      expect(response.json().message).toContain(name);
      expect(await stateOf(facade)).toBe(before);
    });

    it('creates only one of two concurrent requests for the same name', async () => {
      const name = mirrorName('race');
      const responses = await Promise.all(
        [0, 1].map(() =>
          facade.post('/api/v1/flows/cdc/create', { connection_configs: connectionConfigs(name) }),
        ),
      );
      expect(
        responses.map((response) => response.statusCode).sort(),
        responses.map((response) => response.body).join('\n'),
      ).toEqual([200, 409]);
      const refused = responses.find((response) => response.statusCode === 409);
      expect(refused?.json()).toEqual({
        code: 2,
        message: expect.stringMatching(/^invalid mirror: /),
        details: [],
      });
      expect(
        (await facade.controlPlane.store.listMirrors()).filter((mirror) => mirror.name === name),
      ).toHaveLength(1);
    });

    it('refuses a duplicate of a mirror that is being dropped', async () => {
      const name = mirrorName('dup-drop');
      await createMirror(name);
      expect(
        (await stateChange({ flowJobName: name, requestedFlowState: 'STATUS_TERMINATING' })).json(),
      ).toEqual(ok);
      const before = await stateOf(facade);
      expectError(
        await facade.post('/api/v1/flows/cdc/create', { connection_configs: connectionConfigs(name) }),
        409,
        2,
        /^invalid mirror: /,
      );
      expect(await stateOf(facade)).toBe(before);
    });

    const refusals: {
      name: string;
      configs: (name: string) => Record<string, unknown>;
      status: number;
      code: number;
      message: RegExp | string;
    }[] = [
      {
        name: 'an unknown source peer',
        configs: (name) => connectionConfigs(name, { source_name: 'no-such-peer' }),
        status: 400,
        code: 3,
        message: 'invalid mirror: source peer no-such-peer does not exist',
      },
      {
        name: 'an unknown destination peer',
        configs: (name) => connectionConfigs(name, { destination_name: 'no-such-peer' }),
        status: 400,
        code: 3,
        message: 'invalid mirror: destination peer no-such-peer does not exist',
      },
      {
        name: 'a source peer named like SQL',
        configs: (name) => connectionConfigs(name, { source_name: `x'; DROP TABLE y; --` }),
        status: 400,
        code: 3,
        message: `invalid mirror: source peer x'; DROP TABLE y; -- does not exist`,
      },
      {
        name: 'a quoted destination peer name',
        configs: (name) => connectionConfigs(name, { destination_name: '"quoted"' }),
        status: 400,
        code: 3,
        message: 'invalid mirror: destination peer "quoted" does not exist',
      },
      {
        name: 'a source that is not relational',
        configs: (name) => connectionConfigs(name, { source_name: analyticsPeer }),
        status: 400,
        code: 3,
        message: `invalid mirror: source peer ${analyticsPeer} is not a relational peer`,
      },
      {
        name: 'source tables that do not exist',
        configs: (name) =>
          connectionConfigs(name, {
            table_mappings: [
              { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders' },
              { source_table_identifier: 'public.nope', destination_table_identifier: 'public.nope' },
              { source_table_identifier: 'sales.orders', destination_table_identifier: 'sales.orders' },
            ],
          }),
        status: 400,
        code: 3,
        message: 'invalid mirror: source table(s) public.nope, sales.orders do not exist',
      },
      {
        name: 'a source table named like SQL',
        configs: (name) =>
          connectionConfigs(name, {
            table_mappings: [
              {
                source_table_identifier: `x'; DROP TABLE orders; --`,
                destination_table_identifier: 'public.x',
              },
            ],
          }),
        status: 400,
        code: 3,
        message: 'invalid mirror: source table(s) ',
      },
      {
        name: 'an adopted slot with an initial load, which would drop it',
        configs: (name) => connectionConfigs(name, { adopt_existing_slot: true, do_initial_snapshot: true }),
        status: 400,
        code: 3,
        message:
          'connection_configs.adopt_existing_slot: an adopted slot is used as it is and never dropped, but connection_configs.do_initial_snapshot needs a new slot for its snapshot; set connection_configs.do_initial_snapshot to false',
      },
      {
        name: 'an unknown script',
        configs: (name) => connectionConfigs(name, { script: 'no-such-script' }),
        status: 400,
        code: 3,
        message: 'invalid mirror: script no-such-script does not exist',
      },
      {
        name: 'a source that cannot be reached',
        configs: (name) => connectionConfigs(name, { source_name: unreachablePeer }),
        status: 422,
        code: 9,
        message: 'invalid mirror: cannot connect to the source peer',
      },
    ];

    it.each(refusals)('refuses $name and changes nothing', async (refusal) => {
      const name = mirrorName('refused');
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/flows/cdc/create', {
        connection_configs: refusal.configs(name),
      });
      expectError(response, refusal.status, refusal.code, refusal.message);
      expect(response.body).not.toContain('unreachable-secret');
      expect(await stateOf(facade)).toBe(before);
      expect(await facade.controlPlane.store.getMirror(name)).toBeUndefined();
    });

    it('refuses a mirror with a script with 403 when scripts are disabled', async () => {
      const disabled = await createFacade({ scriptsEnabled: false });
      try {
        const { store } = disabled.controlPlane;
        for (const peer of [sourcePeer, destinationPeer]) {
          const found = await facade.controlPlane.store.getPeer(peer);
          if (found) await store.putPeer(found.peer, found.version);
        }
        const before = JSON.stringify(await store.listMirrors());
        const response = await disabled.post('/api/v1/flows/cdc/create', {
          connection_configs: connectionConfigs(mirrorName('scripted'), { script: 'anything' }),
        });
        expectError(response, 403, 7, 'scripts are disabled on this service');
        expect(JSON.stringify(await store.listMirrors())).toBe(before);
        // Without a script the same service creates mirrors.
        const plain = await disabled.post('/api/v1/flows/cdc/create', {
          connection_configs: connectionConfigs(mirrorName('unscripted')),
        });
        expect(plain.statusCode, plain.body).toBe(200);
      } finally {
        await disabled.close();
      }
    });
  });

  describe('flows/cdc/create bad input', () => {
    const mapping = {
      source_table_identifier: 'public.orders',
      destination_table_identifier: 'public.orders_copy',
    };
    const cases: { name: string; body: (name: string) => unknown; message: RegExp | string }[] = [
      { name: 'an empty body', body: () => ({}), message: 'connection_configs: ' },
      {
        // Unknown fields are ignored, so nothing is left of the request.
        name: 'configs at the top level',
        body: (name) => connectionConfigs(name),
        message: 'connection_configs: ',
      },
      {
        name: 'a replication slot name PostgreSQL refuses',
        body: (name) => ({
          connection_configs: connectionConfigs(name, { replication_slot_name: 'My-Slot' }),
        }),
        message: 'a replication slot name is 1-63 lower-case letters, digits and _',
      },
      {
        name: 'a field in both spellings',
        body: (name) => ({
          connection_configs: connectionConfigs(name, { max_batch_size: 10, maxBatchSize: 10 }),
        }),
        message:
          'connection_configs.maxBatchSize: the same field is given twice, as max_batch_size and maxBatchSize',
      },
      {
        name: 'a bad camelCase field, named as sent',
        body: (name) => ({ connectionConfigs: connectionConfigs(name, { idleTimeoutSeconds: -5 }) }),
        message: 'connectionConfigs.idleTimeoutSeconds: ',
      },
      {
        name: 'a missing flow_job_name',
        body: (name) => {
          const { flow_job_name: _, ...rest } = connectionConfigs(name);
          return { connection_configs: rest };
        },
        message: 'connection_configs.flow_job_name: ',
      },
      {
        name: 'a missing source_name',
        body: (name) => {
          const { source_name: _, ...rest } = connectionConfigs(name);
          return { connection_configs: rest };
        },
        message: 'connection_configs.source_name: ',
      },
      {
        name: 'a missing do_initial_snapshot',
        body: (name) => {
          const { do_initial_snapshot: _, ...rest } = connectionConfigs(name);
          return { connection_configs: rest };
        },
        message: 'connection_configs.do_initial_snapshot: ',
      },
      {
        name: 'do_initial_snapshot as a string',
        body: (name) => ({ connection_configs: connectionConfigs(name, { do_initial_snapshot: 'true' }) }),
        message: 'connection_configs.do_initial_snapshot: ',
      },
      {
        name: 'no table mappings',
        body: (name) => ({ connection_configs: connectionConfigs(name, { table_mappings: [] }) }),
        message: 'connection_configs.table_mappings: ',
      },
      {
        name: 'table mappings as an object',
        body: (name) => ({ connection_configs: connectionConfigs(name, { table_mappings: mapping }) }),
        message: 'connection_configs.table_mappings: ',
      },
      {
        name: 'a mapping without a destination',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [{ source_table_identifier: 'public.orders' }],
          }),
        }),
        message: 'connection_configs.table_mappings[0].destination_table_identifier: ',
      },
      {
        name: 'a mapping field in both spellings',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [{ ...mapping, sourceTableIdentifier: 'x' }],
          }),
        }),
        message: 'connection_configs.table_mappings[0].sourceTableIdentifier: the same field is given twice',
      },
      {
        name: 'a three-part source identifier',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [mapping, { ...mapping, source_table_identifier: 'db.public.orders' }],
          }),
        }),
        message: 'connection_configs.table_mappings[1].source_table_identifier: expected schema.table',
      },
      {
        name: 'an unterminated quote in a destination identifier',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [{ ...mapping, destination_table_identifier: 'public."orders' }],
          }),
        }),
        message: 'connection_configs.table_mappings[0].destination_table_identifier: expected schema.table',
      },
      {
        name: 'one source table in two mappings',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [mapping, { ...mapping, destination_table_identifier: 'public.orders_second' }],
          }),
        }),
        message:
          'connection_configs.table_mappings[1].source_table_identifier: public.orders is in more than one mapping',
      },
      {
        name: 'one destination table in two mappings',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [mapping, { ...mapping, source_table_identifier: 'public.items' }],
          }),
        }),
        message:
          'connection_configs.table_mappings[1].destination_table_identifier: public.orders_copy is in more than one mapping',
      },
      {
        name: 'a source table name over 63 characters',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [{ ...mapping, source_table_identifier: `public.${'t'.repeat(64)}` }],
          }),
        }),
        message: 'connection_configs.table_mappings[0].source_table_identifier: ',
      },
      {
        name: 'a destination schema name over 63 characters',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [{ ...mapping, destination_table_identifier: `${'s'.repeat(64)}.orders` }],
          }),
        }),
        message: 'connection_configs.table_mappings[0].destination_table_identifier: ',
      },
      {
        name: 'exclude as a number',
        body: (name) => ({
          connection_configs: connectionConfigs(name, { table_mappings: [{ ...mapping, exclude: 3 }] }),
        }),
        message: 'connection_configs.table_mappings[0].exclude: ',
      },
      {
        name: 'columns without sourceName',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            table_mappings: [{ ...mapping, columns: [{ ordering: 1 }] }],
          }),
        }),
        message: 'connection_configs.table_mappings[0].columns[0].source_name: ',
      },
      {
        name: 'max_batch_size as a string that is not a decimal integer',
        body: (name) => ({ connection_configs: connectionConfigs(name, { max_batch_size: '1e3' }) }),
        message: 'connection_configs.max_batch_size: ',
      },
      {
        name: 'a negative max_batch_size',
        body: (name) => ({ connection_configs: connectionConfigs(name, { max_batch_size: -1 }) }),
        message: 'connection_configs.max_batch_size: ',
      },
      {
        name: 'an unknown type system number',
        body: (name) => ({ connection_configs: connectionConfigs(name, { system: 7 }) }),
        message: 'connection_configs.system: ',
      },
      {
        name: 'a negative idle_timeout_seconds',
        body: (name) => ({ connection_configs: connectionConfigs(name, { idle_timeout_seconds: -1 }) }),
        message: 'connection_configs.idle_timeout_seconds: ',
      },
      {
        name: 'a negative heartbeat_interval_seconds',
        body: (name) => ({ connection_configs: connectionConfigs(name, { heartbeat_interval_seconds: -1 }) }),
        message: 'connection_configs.heartbeat_interval_seconds: ',
      },
      {
        name: 'a fractional idle_timeout_seconds',
        body: (name) => ({ connection_configs: connectionConfigs(name, { idle_timeout_seconds: 1.5 }) }),
        message: 'connection_configs.idle_timeout_seconds: ',
      },
      {
        name: 'an unknown type system',
        body: (name) => ({ connection_configs: connectionConfigs(name, { system: 'X' }) }),
        message: 'connection_configs.system: ',
      },
      {
        name: 'initial_snapshot_only without do_initial_snapshot',
        body: (name) => ({
          connection_configs: connectionConfigs(name, {
            initial_snapshot_only: true,
            do_initial_snapshot: false,
          }),
        }),
        message: 'connection_configs.initial_snapshot_only: initial_snapshot_only needs do_initial_snapshot',
      },
      {
        name: 'a name with SQL in it',
        body: () => ({ connection_configs: connectionConfigs(`x'; DROP TABLE y; --`) }),
        message: 'connection_configs.flow_job_name: ',
      },
      {
        name: 'a quoted name',
        body: () => ({ connection_configs: connectionConfigs('"quoted"') }),
        message: 'connection_configs.flow_job_name: ',
      },
      {
        name: 'an upper-case name',
        body: () => ({ connection_configs: connectionConfigs('Orders') }),
        message: 'connection_configs.flow_job_name: ',
      },
      {
        name: 'a name over 63 characters',
        body: () => ({ connection_configs: connectionConfigs('m'.repeat(64)) }),
        message: 'connection_configs.flow_job_name: ',
      },
      { name: 'an array body', body: () => [], message: /expected object/ },
    ];

    it.each(cases)('refuses $name with 400 code 3 and changes nothing', async ({ body, message }) => {
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/flows/cdc/create', body(mirrorName('bad')));
      expectError(response, 400, 3, message);
      expect(await stateOf(facade)).toBe(before);
    });
  });

  describe('mirrors/status', () => {
    it('answers 404 with the status error shape for an unknown mirror', async () => {
      for (const name of ['no-such-mirror', `x'; DROP TABLE y; --`, '"quoted"']) {
        const response = await status(name, true);
        expect(response.statusCode).toBe(404);
        expect(response.json()).toEqual({
          flowJobName: name,
          errorMessage: expect.stringContaining('not found'),
          currentFlowState: 'STATUS_UNKNOWN',
          ok: false,
        });
      }
    });

    it('follows the catalog phase', async () => {
      const name = mirrorName('phases');
      await createMirror(name);
      expect((await status(name)).json().currentFlowState).toBe('STATUS_SETUP');
      const walkAndExpect: [MirrorPhase, string][] = [
        ['setup', 'STATUS_SETUP'],
        ['snapshot', 'STATUS_SNAPSHOT'],
        ['running', 'STATUS_RUNNING'],
        ['pausing', 'STATUS_PAUSING'],
        ['paused', 'STATUS_PAUSED'],
        ['running', 'STATUS_RUNNING'],
        ['terminating', 'STATUS_TERMINATING'],
        ['terminated', 'STATUS_TERMINATED'],
      ];
      for (const [phase, expected] of walkAndExpect) {
        await facade.controlPlane.catalog.transition(name, phase);
        const response = await status(name, true);
        expect(response.statusCode).toBe(200);
        expect(response.json()).toMatchObject({
          flowJobName: name,
          errorMessage: '',
          currentFlowState: expected,
          ok: true,
        });
        expect(response.json().cdcStatus).toMatchObject({
          sourceType: 'RELATIONAL',
          destinationType: 'RELATIONAL',
        });
      }
      // Teardown done and the resource removed: the catalog still knows it ended.
      await facade.controlPlane.store.removeMirror(name);
      expect((await status(name, true)).json()).toEqual({
        flowJobName: name,
        errorMessage: '',
        currentFlowState: 'STATUS_TERMINATED',
        ok: true,
      });
    });

    it('reports a failure with its message, and a completed initial load', async () => {
      const failed = mirrorName('failed');
      await createMirror(failed);
      await facade.controlPlane.catalog.transition(failed, 'setup');
      await facade.controlPlane.catalog.transition(failed, 'failed', 'replication slot was invalidated');
      expect((await status(failed)).json()).toEqual({
        flowJobName: failed,
        errorMessage: 'replication slot was invalidated',
        currentFlowState: 'STATUS_FAILED',
        ok: true,
      });

      const completed = mirrorName('completed');
      await createMirror(completed, { initial_snapshot_only: true });
      await walk(completed, ['setup', 'snapshot', 'completed']);
      expect((await status(completed)).json().currentFlowState).toBe('STATUS_COMPLETED');
    });

    it('lists snapshot clones', async () => {
      const name = mirrorName('clones');
      await createMirror(name);
      const { catalog } = facade.controlPlane;
      await walk(name, ['setup', 'snapshot']);
      await catalog.startSnapshotTable(name, {
        sourceTable: 'public.orders',
        destinationTable: 'public.orders_copy',
        partitionsTotal: 4,
        cdcStartLsn: 100n,
      });
      await catalog.recordSnapshotPartition(name, 'public.orders', 9_007_199_254_740_993n, 30);
      await catalog.recordSnapshotPartition(name, 'public.orders', 7n, 10);
      const response = await status(name, true);
      expect(response.json().currentFlowState).toBe('STATUS_SNAPSHOT');
      expect(response.json().cdcStatus.snapshotStatus).toEqual({
        clones: [
          {
            tableName: 'public.orders_copy',
            startTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
            numPartitionsCompleted: 2,
            numPartitionsTotal: 4,
            numRowsSynced: '9007199254741000',
            avgTimePerPartitionMs: '20',
            flowJobName: `${name}-clone-public.orders`,
            sourceTable: 'public.orders',
            fetchCompleted: false,
            consolidateCompleted: false,
            mirrorName: name,
          },
        ],
      });
    });

    it("lists each table's state, rows applied and last commit, with or without flow info", async () => {
      const name = mirrorName('tables');
      await createMirror(name);
      const { catalog } = facade.controlPlane;
      await walk(name, ['setup', 'snapshot', 'running']);
      // Without tables tracked yet the field is left out, as protojson leaves out an empty list.
      expect((await status(name)).json()).not.toHaveProperty('tables');
      await catalog.transitionTable(name, {
        sourceTable: 'public.orders',
        destinationTable: 'public.orders_copy',
        to: 'streaming',
      });
      await catalog.transitionTable(name, {
        sourceTable: 'public.items',
        destinationTable: 'public.items',
        to: 'loading',
      });
      await catalog.transitionTable(name, {
        sourceTable: 'public.items',
        destinationTable: 'public.items',
        to: 'errored',
        problem: { kind: 'destination_write', message: 'a value was refused', remedy: 'fix the column' },
        behindLsn: 12_345n,
      });
      await catalog.startBatch(name, { batchId: 1n, startTime: new Date(), startLsn: 100n });
      await catalog.finishBatch(name, {
        batchId: 1n,
        endTime: new Date(),
        rowCount: 6n,
        endLsn: 2_000n,
        tables: [
          {
            sourceTable: 'public.orders',
            // Beyond 2^53: sent as text, exactly.
            inserts: 9_007_199_254_740_993n,
            updates: 2n,
            deletes: 1n,
            lastLsn: 1_999n,
            lastCommitTimeMicros: 1_767_225_600_000_000n,
          },
        ],
      });
      const orders = {
        sourceTableIdentifier: 'public.orders',
        destinationTableIdentifier: 'public.orders_copy',
        state: 'TABLE_STATE_STREAMING',
        stateSince: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
        rowsApplied: { inserts: '9007199254740993', updates: '2', deletes: '1' },
        lastAppliedLsn: '1999',
        lastCommitTime: '2026-01-01T00:00:00.000Z',
      };
      const items = {
        sourceTableIdentifier: 'public.items',
        destinationTableIdentifier: 'public.items',
        state: 'TABLE_STATE_ERRORED',
        stateSince: expect.any(String),
        rowsApplied: { inserts: '0', updates: '0', deletes: '0' },
        lastAppliedLsn: '0',
        error: { kind: 'destination_write', message: 'a value was refused', remedy: 'fix the column' },
        behindLsn: '12345',
      };
      for (const includeFlowInfo of [false, true]) {
        const response = await status(name, includeFlowInfo);
        expect(response.statusCode).toBe(200);
        // Ordered by source table; the mirror's own state is untouched by a table's.
        expect(response.json()).toMatchObject({
          currentFlowState: 'STATUS_RUNNING',
          errorMessage: '',
          ok: true,
        });
        expect(response.json().tables).toEqual([items, orders]);
      }
      // The interface's snapshotStatus stays as it was.
      expect((await status(name, true)).json().cdcStatus.snapshotStatus).toEqual({ clones: [] });
    });

    const bad: { name: string; body: unknown; flowJobName: string; message: string }[] = [
      { name: 'an empty body', body: {}, flowJobName: '', message: 'flowJobName: ' },
      { name: 'an empty name', body: { flowJobName: '' }, flowJobName: '', message: 'flowJobName: ' },
      { name: 'a numeric name', body: { flowJobName: 7 }, flowJobName: '', message: 'flowJobName: ' },
      {
        name: 'a name in both spellings',
        body: { flow_job_name: 'm', flowJobName: 'm' },
        flowJobName: 'm',
        message: 'flowJobName: the same field is given twice',
      },
      {
        name: 'includeFlowInfo as a string',
        body: { flowJobName: 'm', includeFlowInfo: 'yes' },
        flowJobName: 'm',
        message: 'includeFlowInfo: ',
      },
    ];

    it.each(bad)(
      'refuses $name with 400 in the status error shape',
      async ({ body, flowJobName, message }) => {
        const before = await stateOf(facade);
        const response = await facade.post('/api/v1/mirrors/status', body);
        expect(response.statusCode).toBe(400);
        expect(response.json()).toEqual({
          flowJobName,
          errorMessage: expect.stringContaining(message),
          currentFlowState: 'STATUS_UNKNOWN',
          ok: false,
        });
        expect(await stateOf(facade)).toBe(before);
      },
    );
  });

  describe('mirrors/state_change', () => {
    it('pauses and resumes by name and by code', async () => {
      const name = mirrorName('pause');
      await createMirror(name);
      const { store } = facade.controlPlane;
      const created = await store.getMirror(name);

      expect((await stateChange({ flowJobName: name, requestedFlowState: 'STATUS_PAUSED' })).json()).toEqual(
        ok,
      );
      const paused = await store.getMirror(name);
      expect(paused?.spec.state).toBe('Paused');
      expect(paused?.generation).toBe((created?.generation ?? 0) + 1);
      expect(paused?.spec.tableMappings).toEqual(created?.spec.tableMappings);

      // Pausing a paused mirror is a no-op.
      const again = await stateChange({ flowJobName: name, requestedFlowState: 2 });
      expect(again.statusCode).toBe(200);
      expect(again.json()).toEqual(ok);
      expect((await store.getMirror(name))?.generation).toBe(paused?.generation);

      const resumed = await stateChange({ flowJobName: name, requestedFlowState: 1 });
      expect(resumed.statusCode).toBe(200);
      expect(resumed.json()).toEqual(ok);
      expect((await store.getMirror(name))?.spec.state).toBe('Running');

      expect((await stateChange({ flowJobName: name, requestedFlowState: 2 })).json()).toEqual(ok);
      expect((await store.getMirror(name))?.spec.state).toBe('Paused');
      expect((await stateChange({ flowJobName: name, requestedFlowState: 'STATUS_RUNNING' })).json()).toEqual(
        ok,
      );
      expect((await store.getMirror(name))?.spec.state).toBe('Running');
    });

    it('asks for a retry when a failed mirror is resumed', async () => {
      const name = mirrorName('retry');
      await createMirror(name);
      await walk(name, ['setup', 'failed']);
      const { store } = facade.controlPlane;
      // As the reconciler does when an engine fails: that generation is not started again.
      await store.recordMirrorFailure(name, (await store.getMirror(name))?.generation ?? null);
      const before = await store.getMirror(name);
      expect(before?.failedGeneration).toBe(before?.generation);
      expect((await stateChange({ flowJobName: name, requestedFlowState: 'STATUS_RUNNING' })).json()).toEqual(
        ok,
      );
      // Standalone bumps the generation, cluster mode clears the mark (a
      // Kubernetes generation only moves with the spec): either way the
      // current generation is no longer held as failed, and the spec is unchanged.
      const after = await store.getMirror(name);
      expect(after?.failedGeneration).not.toBe(after?.generation);
      expect(after?.spec).toEqual(before?.spec);
    });

    it('drops a mirror by name and by code, after which it is unknown to state_change', async () => {
      for (const requestedFlowState of ['STATUS_TERMINATING', 6]) {
        const name = mirrorName('drop');
        await createMirror(name);
        await walk(name, ['setup', 'running']);
        const response = await stateChange({ flowJobName: name, requestedFlowState });
        expect(response.statusCode).toBe(200);
        expect(response.json()).toEqual(ok);
        expect((await facade.controlPlane.store.getMirror(name))?.deleting).toBe(true);
        expect((await status(name)).json().currentFlowState).toBe('STATUS_TERMINATING');
        const list = await facade.request({ method: 'GET', url: '/api/v1/mirrors/list' });
        expect(list.json().mirrors.map((entry: { name: string }) => entry.name)).not.toContain(name);

        const before = await stateOf(facade);
        expectError(await stateChange({ flowJobName: name, requestedFlowState: 2 }), 404, 2, name);
        expect(await stateOf(facade)).toBe(before);
      }
    });

    it('answers 404 code 2 naming the workflow id for an unknown mirror', async () => {
      const before = await stateOf(facade);
      for (const requestedFlowState of ['STATUS_PAUSED', 'STATUS_RUNNING', 'STATUS_TERMINATING', 1, 2, 6]) {
        const response = await stateChange({ flowJobName: 'no-such-mirror', requestedFlowState });
        expectError(response, 404, 2, /workflow id.*no-such-mirror.*not found/);
      }
      expectError(
        await stateChange({
          flowJobName: 'no-such-mirror',
          requestedFlowState: 'STATUS_RUNNING',
          flowConfigUpdate: { cdcFlowConfigUpdate: { batch_size: 10 } },
        }),
        404,
        2,
        'no-such-mirror',
      );
      expect(await stateOf(facade)).toBe(before);
    });

    it('refuses to pause or resume a mirror that completed its initial load', async () => {
      const name = mirrorName('done');
      await createMirror(name, { initial_snapshot_only: true });
      await walk(name, ['setup', 'snapshot', 'completed']);
      const before = await stateOf(facade);
      expectError(
        await stateChange({ flowJobName: name, requestedFlowState: 2 }),
        409,
        9,
        'cannot be paused',
      );
      expectError(
        await stateChange({ flowJobName: name, requestedFlowState: 1 }),
        409,
        9,
        'cannot be resumed',
      );
      expect(await stateOf(facade)).toBe(before);
      // Dropping it is allowed.
      expect((await stateChange({ flowJobName: name, requestedFlowState: 6 })).json()).toEqual(ok);
    });

    it('edits a paused mirror and resumes it', async () => {
      const name = mirrorName('edit');
      await createMirror(name, {
        table_mappings: [
          { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders_copy' },
          { source_table_identifier: 'public.items', destination_table_identifier: 'public.items_copy' },
        ],
      });
      expect((await stateChange({ flowJobName: name, requestedFlowState: 'STATUS_PAUSED' })).json()).toEqual(
        ok,
      );
      await walk(name, toPaused);

      const response = await stateChange({
        flowJobName: name,
        requestedFlowState: 'STATUS_RUNNING',
        flowConfigUpdate: {
          cdcFlowConfigUpdate: {
            additional_tables: [
              {
                sourceTableIdentifier: 'public.customers',
                destinationTableIdentifier: 'public.customers_copy',
                exclude: ['note'],
              },
            ],
            removed_tables: [
              { sourceTableIdentifier: 'public.orders', destinationTableIdentifier: 'public.orders_copy' },
            ],
            batch_size: 250,
            idle_timeout: 7,
          },
        },
      });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({});

      const mirror = await facade.controlPlane.store.getMirror(name);
      expect(mirror?.spec).toMatchObject({ state: 'Running', maxBatchSize: 250, idleTimeoutSeconds: 7 });
      const config = (await status(name, true)).json().cdcStatus.config;
      expect(config).toMatchObject({ maxBatchSize: 250, idleTimeoutSeconds: '7' });
      expect(config.tableMappings).toEqual([
        {
          sourceTableIdentifier: 'public.items',
          destinationTableIdentifier: 'public.items_copy',
          exclude: [],
          columns: [],
          rowFilter: '',
          partitionKey: '',
        },
        {
          sourceTableIdentifier: 'public.customers',
          destinationTableIdentifier: 'public.customers_copy',
          exclude: ['note'],
          columns: [],
          rowFilter: '',
          partitionKey: '',
        },
      ]);
    });

    it('accepts the camelCase spellings of an edit, and a numeric requested state', async () => {
      const name = mirrorName('edit-camel');
      await createMirror(name);
      await stateChange({ flowJobName: name, requestedFlowState: 2 });
      await walk(name, toPaused);
      const response = await stateChange({
        flowJobName: name,
        requestedFlowState: 1,
        flowConfigUpdate: {
          cdcFlowConfigUpdate: {
            additionalTables: [
              { sourceTableIdentifier: 'sales.invoices', destinationTableIdentifier: 'sales.invoices' },
            ],
            batchSize: 99,
            idleTimeout: 3,
          },
        },
      });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({});
      const mirror = await facade.controlPlane.store.getMirror(name);
      expect(mirror?.spec).toMatchObject({ state: 'Running', maxBatchSize: 99, idleTimeoutSeconds: 3 });
      expect(
        mirror?.spec.tableMappings.map((mapping) => `${mapping.source.schema}.${mapping.source.table}`),
      ).toEqual(['public.orders', 'sales.invoices']);
    });

    it('applies one of two concurrent edits and refuses the other, never both', async () => {
      const name = mirrorName('edit-race');
      await createMirror(name);
      await stateChange({ flowJobName: name, requestedFlowState: 2 });
      await walk(name, toPaused);
      const edit = (table: string) =>
        stateChange({
          flowJobName: name,
          requestedFlowState: 'STATUS_RUNNING',
          flowConfigUpdate: {
            cdcFlowConfigUpdate: {
              additionalTables: [
                { sourceTableIdentifier: table, destinationTableIdentifier: `${table}_copy` },
              ],
            },
          },
        });
      const responses = await Promise.all([edit('public.customers'), edit('public.items')]);
      expect(
        responses.map((response) => response.statusCode).sort(),
        responses.map((response) => response.body).join('\n'),
      ).toEqual([200, 409]);
      const refused = responses.find((response) => response.statusCode === 409);
      expect(refused?.json()).toMatchObject({
        code: 9,
        message: `mirror ${name} must be paused before it is edited`,
      });
      const tables = (await facade.controlPlane.store.getMirror(name))?.spec.tableMappings.map(
        (mapping) => mapping.source.table,
      );
      expect(tables).toHaveLength(2);
      expect(tables?.[0]).toBe('orders');
    });

    it('writes a spec only at the generation it was read at, in the store of either mode', async () => {
      const name = mirrorName('generation');
      await createMirror(name);
      const { store } = facade.controlPlane;
      const read = await store.getMirror(name);
      if (!read) throw new Error(`mirror ${name} is missing`);
      const paused = await store.updateMirrorSpec(name, { ...read.spec, state: 'Paused' }, read.generation);
      expect(paused.generation).toBeGreaterThan(read.generation);
      // A writer still holding the first read is refused, not allowed to undo the pause.
      await expect(
        store.updateMirrorSpec(name, { ...read.spec, maxBatchSize: 5 }, read.generation),
      ).rejects.toThrow(ResourceConflictError);
      expect((await store.getMirror(name))?.spec).toMatchObject({ state: 'Paused', maxBatchSize: 1_000_000 });
    });

    it('refuses an edit of a mirror that is not paused with 409 code 9', async () => {
      const name = mirrorName('edit-running');
      await createMirror(name);
      await walk(name, ['setup', 'running']);
      const edit = {
        flowJobName: name,
        requestedFlowState: 'STATUS_RUNNING',
        flowConfigUpdate: { cdcFlowConfigUpdate: { batch_size: 10 } },
      };
      let before = await stateOf(facade);
      expectError(await stateChange(edit), 409, 9, `mirror ${name} must be paused`);
      expect(await stateOf(facade)).toBe(before);

      // Pause requested but the engine has not reached paused yet.
      await stateChange({ flowJobName: name, requestedFlowState: 2 });
      await facade.controlPlane.catalog.transition(name, 'pausing');
      before = await stateOf(facade);
      expectError(await stateChange(edit), 409, 9, 'must be paused');
      expect(await stateOf(facade)).toBe(before);
    });

    describe('edit refusals', () => {
      let name: string;
      beforeAll(async () => {
        name = mirrorName('edit-bad');
        await createMirror(name, {
          table_mappings: [
            { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders_copy' },
          ],
        });
        await stateChange({ flowJobName: name, requestedFlowState: 'STATUS_PAUSED' });
        await walk(name, toPaused);
      });

      const orders = {
        sourceTableIdentifier: 'public.orders',
        destinationTableIdentifier: 'public.orders_copy',
      };
      const customers = {
        sourceTableIdentifier: 'public.customers',
        destinationTableIdentifier: 'public.customers',
      };
      const edits: {
        name: string;
        requestedFlowState?: unknown;
        update: unknown;
        status?: number;
        message: RegExp | string;
      }[] = [
        {
          name: 'the same table added and removed',
          update: { cdcFlowConfigUpdate: { additional_tables: [customers], removed_tables: [customers] } },
          message: 'table public.customers is both added and removed',
        },
        {
          name: 'the same table added and removed in different spellings',
          update: { cdcFlowConfigUpdate: { additionalTables: [orders], removed_tables: [orders] } },
          message: 'table public.orders is both added and removed',
        },
        {
          name: 'an edit with STATUS_PAUSED',
          requestedFlowState: 'STATUS_PAUSED',
          update: { cdcFlowConfigUpdate: { batch_size: 10 } },
          message: 'flowConfigUpdate: only allowed with STATUS_RUNNING',
        },
        {
          name: 'an edit with code 2',
          requestedFlowState: 2,
          update: { cdcFlowConfigUpdate: { batch_size: 10 } },
          message: 'flowConfigUpdate: only allowed with STATUS_RUNNING',
        },
        {
          name: 'an edit with STATUS_TERMINATING',
          requestedFlowState: 'STATUS_TERMINATING',
          update: { cdcFlowConfigUpdate: { batch_size: 10 } },
          message: 'flowConfigUpdate: only allowed with STATUS_RUNNING',
        },
        {
          name: 'removing a table that is not mapped',
          update: { cdcFlowConfigUpdate: { removed_tables: [customers] } },
          message: 'table public.customers is not in the mirror',
        },
        {
          name: 'adding a table that is mapped',
          update: { cdcFlowConfigUpdate: { additional_tables: [orders] } },
          message: 'table public.orders is already in the mirror',
        },
        {
          name: 'removing every table',
          update: { cdcFlowConfigUpdate: { removed_tables: [orders] } },
          message: 'at least one table',
        },
        {
          name: 'adding a table that does not exist',
          update: {
            cdcFlowConfigUpdate: {
              additional_tables: [
                { sourceTableIdentifier: 'public.nope', destinationTableIdentifier: 'public.nope' },
              ],
            },
          },
          message: 'invalid mirror: source table(s) public.nope do not exist',
        },
        {
          name: 'the same table added twice',
          update: {
            cdcFlowConfigUpdate: {
              additional_tables: [
                customers,
                { ...customers, destinationTableIdentifier: 'public.customers_second' },
              ],
            },
          },
          message:
            'flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[1].sourceTableIdentifier: public.customers is in more than one mapping',
        },
        {
          name: 'an added table writing into a mapped destination',
          update: {
            cdcFlowConfigUpdate: {
              additional_tables: [{ ...customers, destinationTableIdentifier: 'public.orders_copy' }],
            },
          },
          message:
            'flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[0].destinationTableIdentifier: public.orders_copy is in more than one mapping',
        },
        {
          name: 'an added table with a bad identifier',
          update: {
            cdcFlowConfigUpdate: {
              additional_tables: [{ sourceTableIdentifier: 'a.b.c', destinationTableIdentifier: 'public.x' }],
            },
          },
          message:
            'flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[0].sourceTableIdentifier: expected schema.table',
        },
        {
          name: 'an added table name over 63 characters',
          update: {
            cdcFlowConfigUpdate: {
              additional_tables: [
                {
                  sourceTableIdentifier: 'public.customers',
                  destinationTableIdentifier: `public.${'d'.repeat(64)}`,
                },
              ],
            },
          },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[0].destinationTableIdentifier: ',
        },
        {
          name: 'a table field in both spellings',
          update: {
            cdcFlowConfigUpdate: {
              additional_tables: [
                {
                  source_table_identifier: 'public.customers',
                  sourceTableIdentifier: 'public.customers',
                  destination_table_identifier: 'x.y',
                },
              ],
            },
          },
          message:
            'flowConfigUpdate.cdcFlowConfigUpdate.additional_tables[0].sourceTableIdentifier: the same field is given twice',
        },
        {
          name: 'a removed table without a source',
          update: {
            cdcFlowConfigUpdate: { removed_tables: [{ destinationTableIdentifier: 'public.orders_copy' }] },
          },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.removed_tables[0].source_table_identifier: ',
        },
        {
          name: 'a negative batch size',
          update: { cdcFlowConfigUpdate: { batch_size: -1 } },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.batch_size: ',
        },
        {
          name: 'an idle timeout as a string that is not a number',
          update: { cdcFlowConfigUpdate: { idleTimeout: 'soon' } },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.idleTimeout: ',
        },
        {
          name: 'an idle timeout over a day',
          update: { cdcFlowConfigUpdate: { idle_timeout: 86_401 } },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.idle_timeout: ',
        },
        {
          name: 'snapshot workers over 64',
          update: { cdcFlowConfigUpdate: { snapshotMaxParallelWorkers: '65' } },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.snapshotMaxParallelWorkers: ',
        },
        {
          name: 'additional tables as an object',
          update: { cdcFlowConfigUpdate: { additional_tables: customers } },
          message: 'flowConfigUpdate.cdcFlowConfigUpdate.additional_tables: ',
        },
      ];

      it.each(edits)('refuses $name with 400 and changes nothing', async (edit) => {
        const before = await stateOf(facade);
        const response = await stateChange({
          flowJobName: name,
          requestedFlowState: edit.requestedFlowState ?? 'STATUS_RUNNING',
          flowConfigUpdate: edit.update,
        });
        expectError(response, edit.status ?? 400, 3, edit.message);
        expect(await stateOf(facade)).toBe(before);
        expect((await facade.controlPlane.store.getMirror(name))?.spec.state).toBe('Paused');
      });
    });

    describe('bad input', () => {
      let name: string;
      beforeAll(async () => {
        name = mirrorName('sc-bad');
        await createMirror(name);
      });

      const cases: { name: string; body: (name: string) => unknown; message: RegExp | string }[] = [
        { name: 'an empty body', body: () => ({}), message: /flowJobName: .*requestedFlowState: /s },
        { name: 'a missing state', body: (name) => ({ flowJobName: name }), message: 'requestedFlowState: ' },
        { name: 'a missing name', body: () => ({ requestedFlowState: 2 }), message: 'flowJobName: ' },
        {
          name: 'an empty name',
          body: () => ({ flowJobName: '', requestedFlowState: 2 }),
          message: 'flowJobName: ',
        },
        {
          name: 'the state STATUS_BOGUS',
          body: (name) => ({ flowJobName: name, requestedFlowState: 'STATUS_BOGUS' }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'the state code 5',
          body: (name) => ({ flowJobName: name, requestedFlowState: 5 }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'the state code 0',
          body: (name) => ({ flowJobName: name, requestedFlowState: 0 }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'the state code 5 as a string',
          body: (name) => ({ flowJobName: name, requestedFlowState: '5' }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'a lower-case state name',
          body: (name) => ({ flowJobName: name, requestedFlowState: 'status_paused' }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'a state that cannot be requested',
          body: (name) => ({ flowJobName: name, requestedFlowState: 'STATUS_TERMINATED' }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'a null state',
          body: (name) => ({ flowJobName: name, requestedFlowState: null }),
          message: 'requestedFlowState: ',
        },
        {
          name: 'the state in both spellings',
          body: (name) => ({ flowJobName: name, requestedFlowState: 2, requested_flow_state: 2 }),
          message: 'requested_flow_state: the same field is given twice',
        },
        {
          name: 'flowConfigUpdate as a string',
          body: (name) => ({ flowJobName: name, requestedFlowState: 1, flowConfigUpdate: 'batch_size=1' }),
          message: 'flowConfigUpdate: ',
        },
      ];

      it.each(cases)('refuses $name with 400 code 3 and changes nothing', async ({ body, message }) => {
        const before = await stateOf(facade);
        const response = await stateChange(body(name));
        expectError(response, 400, 3, message);
        expect(await stateOf(facade)).toBe(before);
      });

      it('treats names with SQL or quotes as unknown mirrors', async () => {
        const before = await stateOf(facade);
        for (const flowJobName of [`x'; DROP TABLE y; --`, '"quoted"']) {
          expectError(await stateChange({ flowJobName, requestedFlowState: 6 }), 404, 2, 'workflow id');
        }
        expect(await stateOf(facade)).toBe(before);
      });
    });
  });
});
