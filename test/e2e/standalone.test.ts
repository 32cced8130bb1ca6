// Black box: the standalone process over real HTTP, against the real servers.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestDatabase,
  randomSuffix,
  type TestDatabase,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import { type StandaloneProcess, startStandalone } from '../support/standalone-process.ts';
import { clickhouse } from '../support/testenv.ts';

const password = 'standalone-e2e-password';

function relationalPeer(name: string, database: TestDatabase) {
  const { host, port, user, password: secret, database: db } = database.config;
  return { peer: { name, type: 3, relational_config: { host, port, user, password: secret, database: db } } };
}

describe('standalone mode over HTTP', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-standalone-')), 'data');
  const suffix = randomSuffix();
  const mirror = `orders_${suffix}`;

  const sameRows = (table: string) => waitForSameRows(source.client, destination.client, table);

  const state = async () =>
    (
      (await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror })).body as {
        currentFlowState: string;
      }
    ).currentFlowState;

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('sa_src'), createTestDatabase('sa_dst')]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text, qty int)`);
    await source.client.query(`CREATE TABLE customers (id int PRIMARY KEY, name text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g, g FROM generate_series(1, 5000) g`);
    await source.client.query(
      `INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 300) g`,
    );
    service = await startStandalone(dataDir, password);
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('creates peers of the source and destination kinds', async () => {
    for (const [name, database] of [
      [`src_${suffix}`, source],
      [`dst_${suffix}`, destination],
    ] as const) {
      const created = await service.call('POST', '/api/v1/peers/create', relationalPeer(name, database));
      expect(created).toEqual({ status: 200, body: { status: 'CREATED', message: `peer ${name} created` } });
    }
    const analytics = await service.call('POST', '/api/v1/peers/create', {
      peer: {
        name: `ch_${suffix}`,
        type: 8,
        analytics_config: {
          host: '127.0.0.1',
          port: clickhouse.server.nativePort,
          http_port: Number(new URL(clickhouse.server.url).port),
          user: clickhouse.server.user,
          password: clickhouse.server.password,
          database: 'default',
          disable_tls: true,
        },
      },
    });
    expect(analytics.body).toMatchObject({ status: 'CREATED' });
    const info = await service.call('GET', `/api/v1/peers/info/ch_${suffix}`);
    expect(info.body).toMatchObject({
      peer: { type: 'ANALYTICS', analyticsConfig: { password: '********' } },
    });
    expect((info.body as { version: string }).version).toMatch(/^18\./);
  });

  it('runs a mirror with an initial load, then CDC, and reports status, batches and logs', async () => {
    const created = await service.call('POST', '/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: mirror,
        source_name: `src_${suffix}`,
        destination_name: `dst_${suffix}`,
        table_mappings: [
          { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders' },
        ],
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
        snapshot_num_rows_per_partition: 1000,
      },
    });
    expect(created.status).toBe(200);
    expect((created.body as { workflowId: string }).workflowId).toMatch(new RegExp(`^${mirror}-`));
    await sameRows('orders');
    await waitFor(async () => (await state()) === 'STATUS_RUNNING', 30_000, 'running');
    await source.client.query(`UPDATE orders SET qty = qty * 10 WHERE id <= 50`);
    await source.client.query(`DELETE FROM orders WHERE id > 4990`);
    await sameRows('orders');

    const status = await service.call('POST', '/api/v1/mirrors/status', {
      flowJobName: mirror,
      includeFlowInfo: true,
    });
    expect(status.body).toMatchObject({
      flowJobName: mirror,
      currentFlowState: 'STATUS_RUNNING',
      ok: true,
      cdcStatus: {
        config: { flowJobName: mirror, idleTimeoutSeconds: '1', doInitialSnapshot: true },
        snapshotStatus: {
          clones: [{ sourceTable: 'public.orders', numRowsSynced: '5000', consolidateCompleted: true }],
        },
        sourceType: 'RELATIONAL',
        destinationType: 'RELATIONAL',
      },
    });
    const batches = await service.call('POST', '/api/v1/mirrors/cdc/batches', {
      flowJobName: mirror,
      limit: 0,
    });
    const { cdcBatches, total } = batches.body as { cdcBatches: { numRows: string }[]; total: number };
    expect(total).toBeGreaterThan(0);
    expect(cdcBatches.reduce((rows, batch) => rows + Number(batch.numRows), 0)).toBeGreaterThanOrEqual(60);
    const logs = await service.call('POST', '/api/v1/mirrors/logs', {
      flow_job_name: mirror,
      num_per_page: 50,
    });
    const messages = (logs.body as { errors: { errorMessage: string }[] }).errors.map(
      (entry) => entry.errorMessage,
    );
    expect(messages).toEqual(expect.arrayContaining([expect.stringContaining('initial load finished')]));

    // Prometheus: the per-mirror gauges and what the in-process engine itself counted.
    const metrics = await (await fetch(`${service.baseUrl}/metrics`)).text();
    const value = (pattern: string) => Number(new RegExp(`^${pattern} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(value(`tributary_engine_snapshot_rows_total\\{mirror="${mirror}",table="public.orders"\\}`)).toBe(
      5000,
    );
    expect(value(`tributary_engine_cdc_rows_total\\{mirror="${mirror}"\\}`)).toBeGreaterThanOrEqual(60);
    expect(value(`tributary_mirror_phase\\{mirror="${mirror}",phase="STATUS_RUNNING"\\}`)).toBe(1);
    expect(value('tributary_engine_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('pauses, is edited (a table added, batch size changed), resumes and loads the new table', async () => {
    const paused = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(paused.body).toEqual({ ok: true, errorMessage: '' });
    await waitFor(async () => (await state()) === 'STATUS_PAUSED', 30_000, 'paused');
    await source.client.query(`INSERT INTO orders VALUES (6001, 'while paused', 1)`);
    const edited = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_RUNNING',
      flowConfigUpdate: {
        cdcFlowConfigUpdate: {
          batch_size: 500,
          additional_tables: [
            { sourceTableIdentifier: 'public.customers', destinationTableIdentifier: 'public.customers' },
          ],
        },
      },
    });
    expect(edited).toEqual({ status: 200, body: {} });
    await sameRows('customers');
    await sameRows('orders');
    await waitFor(async () => (await state()) === 'STATUS_RUNNING', 30_000, 'running again');
    const status = await service.call('POST', '/api/v1/mirrors/status', {
      flowJobName: mirror,
      includeFlowInfo: true,
    });
    expect(status.body).toMatchObject({ cdcStatus: { config: { maxBatchSize: 500 } } });
  });

  it('resumes every mirror after the process restarts', async () => {
    expect(await service.stop()).toBe(0);
    await source.client.query(`INSERT INTO orders VALUES (7001, 'while stopped', 1)`);
    service = await startStandalone(dataDir, password);
    await source.client.query(`INSERT INTO customers VALUES (9001, 'after restart')`);
    await sameRows('orders');
    await sameRows('customers');
  });

  it('drops the mirror, removes its slot, keeps its logs', async () => {
    const dropped = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 6,
    });
    expect(dropped.body).toEqual({ ok: true, errorMessage: '' });
    await waitFor(async () => (await state()) === 'STATUS_TERMINATED', 30_000, 'terminated');
    const slots = await source.client.query(
      `SELECT slot_name FROM pg_replication_slots WHERE database = $1`,
      [source.name],
    );
    expect(slots.rows).toEqual([]);
    const logs = await service.call('POST', '/api/v1/mirrors/logs', { flowJobName: mirror, numPerPage: 100 });
    const messages = (logs.body as { errors: { errorMessage: string }[] }).errors.map(
      (entry) => entry.errorMessage,
    );
    expect(messages).toEqual(expect.arrayContaining([expect.stringContaining('mirror dropped')]));
    const again = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(again.status).toBe(404);
    expect(again.body).toMatchObject({ code: 2 });
  });
});
