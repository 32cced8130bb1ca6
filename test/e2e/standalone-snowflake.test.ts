// A mirror from PostgreSQL to a Snowflake peer (the emulator) through /api/v1
// of the standalone process: the peer is created (and checked) with an
// encrypted key, the mirror loads and streams, its status names the
// destination type, and a drop forgets its checkpoint.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { emulatorConfig, SnowflakeAdmin, testPrivateKey, uniqueName } from '../support/snowflake-peer.ts';
import {
  createRelationalPeers,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';

describe('standalone mode: a mirror into Snowflake through /api/v1', () => {
  let source: TestDatabase;
  let service: StandaloneProcess;
  let admin: SnowflakeAdmin;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-standalone-sf-')), 'data');
  const suffix = randomSuffix();
  const mirror = `sf_${suffix}`;
  const config = emulatorConfig(uniqueName('SA'));
  const passphrase = 'standalone passphrase';

  async function sameRows(): Promise<void> {
    const read = async () => {
      const expected = (
        await source.client.query<{ id: number; item: string }>(`SELECT id, item FROM orders ORDER BY id`)
      ).rows.map((row) => [String(row.id), row.item]);
      let actual: unknown[] = [];
      try {
        actual = (
          await admin.rows(
            `SELECT TO_VARCHAR("ID") AS "K", "ITEM" FROM "${config.database}"."PUBLIC"."ORDERS" ORDER BY "ID"`,
          )
        ).map((row) => [row.K, row.ITEM]);
      } catch {
        // not created yet
      }
      return { expected, actual };
    };
    await waitFor(
      async () => {
        const { expected, actual } = await read();
        return JSON.stringify(expected) === JSON.stringify(actual);
      },
      60_000,
      'orders to match',
    ).catch(() => {});
    const { expected, actual } = await read();
    expect(actual).toEqual(expected);
  }

  beforeAll(async () => {
    source = await createTestDatabase('sasf_src');
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 2000) g`);
    admin = new SnowflakeAdmin(config);
    service = await startStandalone(dataDir, 'standalone-snowflake-password');
  });

  afterAll(async () => {
    await service?.stop();
    await admin?.close();
    await source?.drop();
  });

  it('creates the peer, runs the mirror, reports it and drops it', async () => {
    await createRelationalPeers(service, [[`src_${suffix}`, source]]);
    const created = await service.call('POST', '/api/v1/peers/create', {
      peer: {
        name: `wh_${suffix}`,
        type: 1,
        datawarehouse_config: {
          account_id: config.accountId,
          username: config.username,
          private_key: testPrivateKey(passphrase),
          password: passphrase,
          database: config.database,
          warehouse: config.warehouse,
          role: config.role,
          query_timeout: 30,
          access_url: config.accessUrl,
        },
      },
    });
    expect(created.body).toMatchObject({ status: 'CREATED' });
    const wrong = await service.call('POST', '/api/v1/peers/create', {
      peer: {
        name: `wh_wrong_${suffix}`,
        type: 1,
        datawarehouse_config: {
          account_id: config.accountId,
          username: config.username,
          private_key: testPrivateKey(passphrase),
          password: 'not it',
          database: config.database,
          warehouse: config.warehouse,
          role: config.role,
          access_url: config.accessUrl,
        },
      },
    });
    expect(JSON.stringify(wrong.body)).toContain("passphrase (the peer's password) is wrong");

    const mirrorCreated = await service.call('POST', '/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: mirror,
        source_name: `src_${suffix}`,
        destination_name: `wh_${suffix}`,
        table_mappings: [
          { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders' },
        ],
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
        snapshot_num_rows_per_partition: 500,
      },
    });
    expect(mirrorCreated.status).toBe(200);
    await sameRows();
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 30_000, 'running');
    await source.client.query(`UPDATE orders SET item = item || ' changed' WHERE id <= 50`);
    await source.client.query(`DELETE FROM orders WHERE id > 1990`);
    await source.client.query(`INSERT INTO orders VALUES (3000, 'late')`);
    await sameRows();

    const status = await service.call('POST', '/api/v1/mirrors/status', {
      flowJobName: mirror,
      includeFlowInfo: true,
    });
    expect(status.body).toMatchObject({
      currentFlowState: 'STATUS_RUNNING',
      cdcStatus: {
        snapshotStatus: { clones: [{ sourceTable: 'public.orders', numRowsSynced: '2000' }] },
        destinationType: 'DATAWAREHOUSE',
      },
    });
    const dropped = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 6,
    });
    expect(dropped.body).toEqual({ ok: true, errorMessage: '' });
    await waitFor(
      async () =>
        (
          await admin.rows(
            `SELECT 1 AS "X" FROM "${config.database}"."_TRIBUTARY_INTERNAL"."CHECKPOINTS" WHERE "MIRROR" = '${mirror}'`,
          )
        ).length === 0,
      30_000,
      'checkpoint removed',
    );
  });
});
