// Every endpoint with a body, sent the ways existing clients of a grpc-gateway
// service write it (test/support/request-variants.ts): proto names, lowerCamel
// names or both mixed, integers as numbers or strings, enums by name or number,
// optional fields absent or null or zero, with or without unknown fields. Each
// variant must store the same resource and answer the same as the canonical
// request. Runs in both modes (the integration and api-cluster projects).
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type MirrorResource,
  type MirrorResourceSpec,
  mirrorResourceSpecSchema,
} from '../../engine/src/index.ts';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { createFacade, type Facade } from '../support/facade.ts';
import {
  describeVariant,
  type JsonObject,
  type RequestShape,
  requestVariants,
  variantBody,
} from '../support/request-variants.ts';

const peerTypes = { DATAWAREHOUSE: 1, RELATIONAL: 3, ANALYTICS: 8, STREAM: 9 };
const flowStates = { STATUS_RUNNING: 1, STATUS_PAUSED: 2, STATUS_TERMINATING: 6 };

const variants = requestVariants.map((variant, index) => ({
  variant,
  index,
  label: describeVariant(variant),
}));

function okJson(response: LightMyRequestResponse): unknown {
  expect(response.statusCode, response.body).toBe(200);
  return response.json();
}

/** A spec without its name, to compare mirrors of different names. */
function unnamed(mirror: MirrorResource | undefined): Omit<MirrorResourceSpec, 'name'> {
  expect(mirror).toBeDefined();
  const { name: _name, ...spec } = (mirror as MirrorResource).spec;
  return spec;
}

describe('request variants', () => {
  let facade: Facade;
  let source: TestDatabase;
  let destination: TestDatabase;
  const suffix = randomSuffix();
  const sourcePeer = `src_${suffix}`;
  const destinationPeer = `dst_${suffix}`;
  const source_ = 'function onRecord(r) return r end';

  const post = (url: string, body: JsonObject) => facade.post(url, body);

  beforeAll(async () => {
    [source, destination] = await Promise.all([
      createTestDatabase('api_variants_src'),
      createTestDatabase('api_variants_dst'),
    ]);
    await source.client.query(`
      CREATE TABLE orders (id bigint PRIMARY KEY, note text);
      CREATE TABLE customers (id bigint PRIMARY KEY, name text);
      CREATE TABLE items (id bigint PRIMARY KEY, label text)`);
    facade = await createFacade();
    for (const [name, database] of [
      [sourcePeer, source],
      [destinationPeer, destination],
    ] as const) {
      const response = await post('/api/v1/peers/create', {
        peer: { name, type: 3, relational_config: JSON.parse(JSON.stringify(database.config)) },
      });
      expect(response.json()).toMatchObject({ status: 'CREATED' });
    }
  });

  afterAll(async () => {
    await facade?.close();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  /** Sends the canonical request, then every variant; `check` compares each with the canonical outcome. */
  async function eachVariant(
    canonical: (index: number | 'canonical') => JsonObject,
    shape: RequestShape,
    send: (body: JsonObject, index: number | 'canonical') => Promise<unknown>,
  ): Promise<unknown> {
    const expected = await send(canonical('canonical'), 'canonical');
    for (const { variant, index, label } of variants) {
      const body = variantBody(canonical(index), shape, variant);
      try {
        await send(body, index);
      } catch (error) {
        throw new Error(`variant ${index} (${label}) ${JSON.stringify(body)}: ${(error as Error).message}`);
      }
    }
    return expected;
  }

  it('peers/create', async () => {
    const name = (index: number | 'canonical') => `peer_${suffix}_${index}`;
    const config = source.config;
    let canonicalPeer: unknown;
    let canonicalResponse: unknown;
    await eachVariant(
      (index) => ({
        peer: {
          name: name(index),
          type: 'RELATIONAL',
          relational_config: {
            host: config.host,
            port: config.port,
            user: config.user,
            password: config.password,
            database: config.database,
          },
        },
      }),
      {
        enums: { type: peerTypes },
        unset: {
          allow_update: false,
          disable_validation: false,
          'peer.relational_config.ssh_config': null,
        },
      },
      async (body, index) => {
        const response = okJson(await post('/api/v1/peers/create', body));
        const stored = (await facade.controlPlane.store.getPeer(name(index)))?.peer;
        const peer = { ...stored, name: 'x' };
        const answer = JSON.parse(JSON.stringify(response).replaceAll(name(index), 'x'));
        if (index === 'canonical') {
          canonicalPeer = peer;
          canonicalResponse = answer;
          expect(answer).toEqual({ status: 'CREATED', message: 'peer x created' });
        } else {
          expect(peer).toEqual(canonicalPeer);
          expect(answer).toEqual(canonicalResponse);
        }
      },
    );
  });

  it('peers/create with allow_update', async () => {
    const name = `peer_update_${suffix}`;
    const { store } = facade.controlPlane;
    const config = source.config;
    let expected: unknown;
    await eachVariant(
      () => ({
        peer: {
          name,
          type: 'RELATIONAL',
          relational_config: {
            host: config.host,
            port: config.port,
            user: config.user,
            password: config.password,
            database: config.database,
          },
        },
        allow_update: true,
      }),
      { enums: { type: peerTypes } },
      async (body, index) => {
        // Stored with another database first, so that every request is an update.
        await store.putPeer({ name, kind: 'relational', config: { ...config, database: 'postgres' } }, null);
        const response = okJson(await post('/api/v1/peers/create', body));
        expect((await store.getPeer(name))?.peer.config).toMatchObject({ database: config.database });
        if (index === 'canonical') {
          expected = response;
          expect(response).toEqual({ status: 'CREATED', message: `peer ${name} updated` });
        } else expect(response).toEqual(expected);
      },
    );
  });

  it('flows/cdc/create and mirrors/status', async () => {
    const name = (index: number | 'canonical') => `mirror_${suffix}_${index}`;
    let canonicalSpec: unknown;
    let canonicalStatus: unknown;
    await eachVariant(
      (index) => ({
        connection_configs: {
          flow_job_name: name(index),
          source_name: sourcePeer,
          destination_name: destinationPeer,
          table_mappings: [
            {
              source_table_identifier: 'public.orders',
              destination_table_identifier: 'public.orders_copy',
              exclude: ['note'],
            },
          ],
          do_initial_snapshot: true,
          max_batch_size: 5_000,
          idle_timeout_seconds: 30,
          snapshot_max_parallel_workers: 2,
          system: 'PG',
        },
      }),
      {
        enums: { system: { Q: 0, PG: 1 } },
        unset: {
          'connection_configs.publication_name': '',
          'connection_configs.replication_slot_name': null,
          'connection_configs.snapshot_num_rows_per_partition': 0,
          'connection_configs.snapshot_num_tables_in_parallel': 0,
          'connection_configs.soft_delete_col_name': '',
          'connection_configs.synced_at_col_name': null,
          'connection_configs.script': '',
          'connection_configs.resync': false,
          'connection_configs.initial_snapshot_only': false,
        },
      },
      async (body, index) => {
        const response = okJson(await post('/api/v1/flows/cdc/create', body));
        expect(response).toEqual({ workflowId: expect.stringMatching(new RegExp(`^${name(index)}-.+`)) });
        const spec = unnamed(await facade.controlPlane.store.getMirror(name(index)));
        const status = okJson(
          await post('/api/v1/mirrors/status', { flowJobName: name(index), includeFlowInfo: true }),
        );
        const statusWithoutName = JSON.parse(JSON.stringify(status).replaceAll(name(index), 'x'));
        if (index === 'canonical') {
          canonicalSpec = spec;
          canonicalStatus = statusWithoutName;
          expect(spec).toMatchObject({ maxBatchSize: 5_000, idleTimeoutSeconds: 30, system: 'PG' });
        } else {
          expect(spec).toEqual(canonicalSpec);
          expect(statusWithoutName).toEqual(canonicalStatus);
        }
      },
    );
  });

  describe('with a mirror', () => {
    const mirror = `states_${suffix}`;
    const baseSpec = mirrorResourceSpecSchema.parse({
      name: mirror,
      sourcePeer,
      destinationPeer,
      tableMappings: [
        { source: { schema: 'public', table: 'orders' }, destination: { schema: 'public', table: 'orders' } },
        {
          source: { schema: 'public', table: 'customers' },
          destination: { schema: 'public', table: 'customers_copy' },
        },
      ],
      doInitialSnapshot: false,
      state: 'Paused',
    });

    beforeAll(async () => {
      const { store, catalog } = facade.controlPlane;
      await store.createMirror(baseSpec);
      for (const phase of ['setup', 'running', 'pausing', 'paused'] as const)
        await catalog.transition(mirror, phase);
      const start = new Date('2025-01-02T03:04:05.000Z');
      for (const batchId of [1n, 2n, 3n, 4n]) {
        await catalog.startBatch(mirror, {
          batchId,
          startTime: new Date(start.getTime() + Number(batchId) * 1_000),
          startLsn: batchId * 100n,
        });
      }
      for (const [level, message] of [
        ['INFO', 'one'],
        ['WARN', 'two'],
        ['INFO', 'three'],
        ['ERROR', 'four'],
        ['INFO', 'five'],
      ] as const) {
        await catalog.appendLog(mirror, level, message);
      }
    });

    it('mirrors/status', async () => {
      let expected: unknown;
      await eachVariant(
        () => ({ flow_job_name: mirror, include_flow_info: true }),
        { unset: { exclude_batches: false } },
        async (body, index) => {
          const response = okJson(await post('/api/v1/mirrors/status', body));
          if (index === 'canonical') {
            expected = response;
            expect(response).toMatchObject({
              flowJobName: mirror,
              cdcStatus: { config: { flowJobName: mirror } },
            });
          } else expect(response).toEqual(expected);
        },
      );
    });

    it('mirrors/state_change: pause and resume', async () => {
      const { store } = facade.controlPlane;
      for (const [requested, state] of [
        ['STATUS_PAUSED', 'Paused'],
        ['STATUS_RUNNING', 'Running'],
      ] as const) {
        await eachVariant(
          () => ({ flow_job_name: mirror, requested_flow_state: requested }),
          {
            enums: { requested_flow_state: flowStates },
            unset: { flow_config_update: null, drop_mirror_stats: false, skip_destination_drop: false },
          },
          async (body) => {
            await store.updateMirrorSpec(mirror, {
              ...baseSpec,
              state: state === 'Paused' ? 'Running' : 'Paused',
            });
            expect(okJson(await post('/api/v1/mirrors/state_change', body))).toEqual({
              ok: true,
              errorMessage: '',
            });
            expect((await store.getMirror(mirror))?.spec.state).toBe(state);
          },
        );
      }
    });

    it('mirrors/state_change: an edit as the original UI sends it', async () => {
      const { store } = facade.controlPlane;
      let expected: unknown;
      await eachVariant(
        () => ({
          flow_job_name: mirror,
          requested_flow_state: 'STATUS_RUNNING',
          flow_config_update: {
            cdc_flow_config_update: {
              additional_tables: [
                {
                  source_table_identifier: 'public.items',
                  destination_table_identifier: 'public.items_copy',
                  exclude: ['label'],
                },
              ],
              removed_tables: [
                {
                  source_table_identifier: 'public.customers',
                  destination_table_identifier: 'public.customers_copy',
                },
              ],
              batch_size: 2_000,
              idle_timeout: 45,
              number_of_syncs: 3,
            },
          },
        }),
        {
          enums: { requested_flow_state: flowStates },
          unset: {
            'flow_config_update.cdc_flow_config_update.snapshot_num_rows_per_partition': 0,
            'flow_config_update.cdc_flow_config_update.snapshot_max_parallel_workers': 0,
            'flow_config_update.cdc_flow_config_update.snapshot_num_tables_in_parallel': null,
            drop_mirror_stats: false,
          },
        },
        async (body, index) => {
          await store.updateMirrorSpec(mirror, baseSpec);
          expect(okJson(await post('/api/v1/mirrors/state_change', body))).toEqual({});
          const spec = unnamed(await store.getMirror(mirror));
          if (index === 'canonical') {
            expected = spec;
            expect(spec).toMatchObject({ state: 'Running', maxBatchSize: 2_000, idleTimeoutSeconds: 45 });
            expect(spec.tableMappings.map((mapping) => mapping.source.table)).toEqual(['orders', 'items']);
          } else expect(spec).toEqual(expected);
        },
      );
      await store.updateMirrorSpec(mirror, baseSpec);
    });

    it('mirrors/cdc/batches', async () => {
      let expected: unknown;
      await eachVariant(
        () => ({ flow_job_name: mirror, limit: 2, ascending: true, after_id: 1 }),
        { unset: { before_id: 0, page: 0 } },
        async (body, index) => {
          const response = okJson(await post('/api/v1/mirrors/cdc/batches', body));
          if (index === 'canonical') {
            expected = response;
            expect(response).toMatchObject({ cdcBatches: [{ batchId: '2' }, { batchId: '3' }] });
          } else expect(response).toEqual(expected);
        },
      );
    });

    it('mirrors/logs', async () => {
      let expected: unknown;
      await eachVariant(
        () => ({ flow_job_name: mirror, level: 'info', page: 1, num_per_page: 2 }),
        { unset: { before_id: 0, after_id: null } },
        async (body, index) => {
          const response = okJson(await post('/api/v1/mirrors/logs', body));
          if (index === 'canonical') {
            expected = response;
            expect(response).toMatchObject({ errors: [{ errorMessage: 'five' }, { errorMessage: 'three' }] });
          } else expect(response).toEqual(expected);
        },
      );
    });

    it('mirrors/state_change: drop', async () => {
      const { store } = facade.controlPlane;
      const name = (index: number | 'canonical') => `drop_${suffix}_${index}`;
      await eachVariant(
        (index) => ({ flow_job_name: name(index), requested_flow_state: 'STATUS_TERMINATING' }),
        {
          enums: { requested_flow_state: flowStates },
          unset: { drop_mirror_stats: false, skip_destination_drop: false, flow_config_update: null },
        },
        async (body, index) => {
          await store.createMirror({ ...baseSpec, name: name(index), state: 'Running' });
          expect(okJson(await post('/api/v1/mirrors/state_change', body))).toEqual({
            ok: true,
            errorMessage: '',
          });
          expect((await store.getMirror(name(index)))?.deleting).toBe(true);
        },
      );
    });
  });

  it('a peer as the original UI builds it, with fields this service does not use', async () => {
    const name = `ui_peer_${suffix}`;
    const config = source.config;
    const response = await post('/api/v1/peers/create', {
      peer: {
        name,
        type: 3,
        relationalConfig: {
          host: config.host,
          port: config.port,
          user: config.user,
          password: config.password,
          database: config.database,
          requireTls: false,
          authType: 0,
          awsAuth: { region: '', authType: 0 },
          tlsHost: '',
          transactionSnapshot: '',
          metadataSchema: '',
        },
      },
      allowUpdate: true,
      disableValidation: false,
    });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({ status: 'CREATED', message: `peer ${name} created` });
    expect((await facade.controlPlane.store.getPeer(name))?.peer.config).toEqual({
      host: config.host,
      port: config.port,
      user: config.user,
      password: config.password,
      database: config.database,
    });
  });

  it('bodies as the original UI builds them: every field present, ids as strings', async () => {
    const { store, catalog } = facade.controlPlane;
    const name = `ui_${suffix}`;
    const tableMapping = (table: string) => ({
      sourceTableIdentifier: `public.${table}`,
      destinationTableIdentifier: `public.${table}_copy`,
      partitionKey: '',
      exclude: [],
      columns: [
        {
          sourceName: 'id',
          destinationName: '',
          destinationType: '',
          ordering: 0,
          partitioning: 0,
          nullableEnabled: false,
        },
      ],
      engine: 0,
      shardingKey: '',
      policyName: '',
      partitionByExpr: '',
    });
    const created = await post('/api/v1/flows/cdc/create', {
      connectionConfigs: {
        flowJobName: name,
        tableMappings: [tableMapping('orders')],
        maxBatchSize: 1_000_000,
        idleTimeoutSeconds: '60',
        cdcStagingPath: '',
        publicationName: '',
        replicationSlotName: '',
        doInitialSnapshot: true,
        snapshotNumRowsPerPartition: 1_000_000,
        snapshotNumPartitionsOverride: 0,
        snapshotStagingPath: '',
        snapshotMaxParallelWorkers: 4,
        snapshotNumTablesInParallel: 1,
        resync: false,
        initialSnapshotOnly: false,
        softDeleteColName: '',
        syncedAtColName: '',
        script: '',
        system: 'Q',
        sourceName: sourcePeer,
        destinationName: destinationPeer,
        env: {},
        version: 0,
        srcTableIdNameMapping: {},
      },
      attachToExisting: false,
      tableMappings: [],
    });
    expect(created.statusCode, created.body).toBe(200);
    const spec = unnamed(await store.getMirror(name));
    expect(spec).toMatchObject({
      maxBatchSize: 1_000_000,
      idleTimeoutSeconds: 60,
      tableMappings: [{ exclude: [], columns: [{ sourceName: 'id' }] }],
    });
    expect(spec).not.toHaveProperty('publicationName');
    expect(spec).not.toHaveProperty('softDeleteColName');

    for (const phase of ['setup', 'running', 'pausing', 'paused'] as const)
      await catalog.transition(name, phase);
    const stored = await store.getMirror(name);
    if (!stored) throw new Error(`mirror ${name} is gone`);
    await store.updateMirrorSpec(name, { ...stored.spec, state: 'Paused' });
    const status = okJson(
      await post('/api/v1/mirrors/status', { flowJobName: name, includeFlowInfo: true }),
    ) as {
      cdcStatus: { config: { idleTimeoutSeconds: string; maxBatchSize: number } };
    };
    // The UI copies the current values back, the 64-bit one as the string it read.
    const edited = await post('/api/v1/mirrors/state_change', {
      flowJobName: name,
      requestedFlowState: 'STATUS_RUNNING',
      flowConfigUpdate: {
        cdcFlowConfigUpdate: {
          additionalTables: [tableMapping('items')],
          batchSize: status.cdcStatus.config.maxBatchSize,
          idleTimeout: status.cdcStatus.config.idleTimeoutSeconds,
          numberOfSyncs: 0,
          removedTables: [],
          updatedEnv: {},
          snapshotNumRowsPerPartition: 0,
          snapshotNumPartitionsOverride: 0,
          snapshotMaxParallelWorkers: 0,
          snapshotNumTablesInParallel: 0,
        },
      },
      dropMirrorStats: false,
      skipDestinationDrop: false,
    });
    expect(edited.statusCode, edited.body).toBe(200);
    expect(edited.json()).toEqual({});
    const after = unnamed(await store.getMirror(name));
    expect(after.tableMappings.map((mapping) => mapping.source.table)).toEqual(['orders', 'items']);
    expect(after).toMatchObject({ state: 'Running', maxBatchSize: 1_000_000, idleTimeoutSeconds: 60 });
  });

  it('scripts: create and update', async () => {
    const { store } = facade.controlPlane;
    const name = (index: number | 'canonical') => `script_${suffix}_${index}`;
    await eachVariant(
      (index) => ({ script: { id: -1, name: name(index), lang: 'lua', source: source_ } }),
      {},
      async (body, index) => {
        const response = okJson(await post('/api/v1/scripts', body)) as { id: number };
        expect(response).toEqual({ id: expect.any(Number) });
        expect(await store.getScript(response.id)).toEqual({
          id: response.id,
          name: name(index),
          lang: 'lua',
          source: source_,
        });
      },
    );
    const target = await store.getScriptByName(name('canonical'));
    const id = target?.id as number;
    await eachVariant(
      (index) => ({
        script: { id, name: name('canonical'), lang: 'LUA', source: `-- ${index}\n${source_}` },
      }),
      {},
      async (body, index) => {
        expect(okJson(await post('/api/v1/scripts', body))).toEqual({ id });
        expect((await store.getScript(id))?.source).toBe(`-- ${index}\n${source_}`);
      },
    );
  });
});
