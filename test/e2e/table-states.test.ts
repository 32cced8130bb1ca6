// Each table's state and what CDC applied to it, through a real standalone
// process: /api/v1/mirrors/status `tables` after the initial load and after
// changes, the per-table metrics, the console's mirror page, and a table
// removed by an edit.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import {
  createRelationalPeers,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';

const password = 'table-states-password';

interface TableView {
  sourceTableIdentifier: string;
  destinationTableIdentifier: string;
  state: string;
  stateSince: string;
  rowsApplied: { inserts: string; updates: string; deletes: string };
  lastAppliedLsn: string;
  lastCommitTime?: string;
}

interface StatusBody {
  currentFlowState: string;
  tables?: TableView[];
  cdcStatus?: { snapshotStatus: { clones: { sourceTable: string; consolidateCompleted: boolean }[] } };
}

/** pg_lsn text (X/Y) as the decimal the catalog and the API use. */
const lsnDecimal = (lsn: string) => {
  const [high = '0', low = '0'] = lsn.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
};

describe('table states through a standalone process', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-table-states-')), 'data');
  const suffix = randomSuffix();
  const mirror = `tables-${suffix}`;

  const status = async (includeFlowInfo = false) => {
    const answer = await service.call('POST', '/api/v1/mirrors/status', {
      flowJobName: mirror,
      includeFlowInfo,
    });
    expect(answer.status).toBe(200);
    return answer.body as StatusBody;
  };
  const tableOf = async (table: string) =>
    (await status()).tables?.find((entry) => entry.sourceTableIdentifier === table);
  const scrape = async () => (await fetch(`${service.baseUrl}/metrics`)).text();
  const series = (metrics: string, name: string) =>
    metrics.split('\n').filter((line) => line.startsWith(`${name}{`) && line.includes(`mirror="${mirror}"`));

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('ts_src'), createTestDatabase('ts_dst')]);
    await source.client.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 300) g`);
    await source.client.query(`CREATE TABLE items (id int PRIMARY KEY, item text)`);
    await source.client.query(`INSERT INTO items VALUES (1, 'tea'), (2, 'milk')`);
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
    const created = await service.call('POST', '/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: mirror,
        source_name: `src-${suffix}`,
        destination_name: `dst-${suffix}`,
        table_mappings: [
          { source_table_identifier: 'public.orders', destination_table_identifier: 'public.orders_copy' },
          { source_table_identifier: 'public.items', destination_table_identifier: 'public.items' },
        ],
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('shows every table streaming after the initial load, with nothing applied by CDC yet', async () => {
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 90_000, 'running');
    const answer = await status(true);
    const fresh = {
      state: 'TABLE_STATE_STREAMING',
      stateSince: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      rowsApplied: { inserts: '0', updates: '0', deletes: '0' },
      lastAppliedLsn: '0',
    };
    expect(answer.tables).toEqual([
      { sourceTableIdentifier: 'public.items', destinationTableIdentifier: 'public.items', ...fresh },
      { sourceTableIdentifier: 'public.orders', destinationTableIdentifier: 'public.orders_copy', ...fresh },
    ]);
    // The interface's clones stay as they were, one per table loaded.
    expect(
      answer.cdcStatus?.snapshotStatus.clones.map((clone) => [clone.sourceTable, clone.consolidateCompleted]),
    ).toEqual([
      ['public.items', true],
      ['public.orders', true],
    ]);
  });

  it('counts what CDC applied to each table by operation, with its last commit', async () => {
    const before = new Date();
    await source.client.query('BEGIN');
    await source.client.query(`INSERT INTO orders VALUES (301, 'bread'), (302, 'jam')`);
    await source.client.query(`UPDATE orders SET item = 'rye' WHERE id = 1`);
    await source.client.query(`DELETE FROM orders WHERE id = 2`);
    await source.client.query('COMMIT');
    const afterOrders = (
      await source.client.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`)
    ).rows[0]?.lsn;
    await source.client.query(`INSERT INTO items VALUES (3, 'coffee')`);
    await waitFor(
      async () => (await tableOf('public.items'))?.rowsApplied.inserts === '1',
      60_000,
      'the items insert applied',
    );
    const orders = await tableOf('public.orders');
    const items = await tableOf('public.items');
    expect(orders).toMatchObject({
      state: 'TABLE_STATE_STREAMING',
      rowsApplied: { inserts: '2', updates: '1', deletes: '1' },
    });
    expect(items).toMatchObject({ rowsApplied: { inserts: '1', updates: '0', deletes: '0' } });
    // The commit LSN of each table's last transaction: the orders one before the WAL
    // position read after it, the items one after it.
    const ordersLsn = BigInt(orders?.lastAppliedLsn ?? '0');
    const itemsLsn = BigInt(items?.lastAppliedLsn ?? '0');
    expect(ordersLsn).toBeGreaterThan(0n);
    expect(ordersLsn).toBeLessThanOrEqual(lsnDecimal(afterOrders ?? '0/0'));
    expect(itemsLsn).toBeGreaterThan(lsnDecimal(afterOrders ?? '0/0'));
    const committed = new Date(orders?.lastCommitTime ?? 0).getTime();
    expect(committed).toBeGreaterThanOrEqual(before.getTime() - 1_000);
    expect(committed).toBeLessThanOrEqual(Date.now());
  });

  it('serves the state and the rows applied of each table as metrics', async () => {
    await waitFor(
      async () =>
        series(await scrape(), 'tributary_mirror_table_rows_applied_total').some(
          (line) =>
            line.includes('table="public.items"') &&
            line.includes('operation="insert"') &&
            line.endsWith(' 1'),
        ),
      30_000,
      'per-table metrics',
    );
    const metrics = await scrape();
    expect(series(metrics, 'tributary_mirror_table_state').sort()).toEqual([
      `tributary_mirror_table_state{mirror="${mirror}",table="public.items",state="TABLE_STATE_STREAMING"} 1`,
      `tributary_mirror_table_state{mirror="${mirror}",table="public.orders",state="TABLE_STATE_STREAMING"} 1`,
    ]);
    expect(
      series(metrics, 'tributary_mirror_table_rows_applied_total')
        .filter((line) => line.includes('table="public.orders"'))
        .sort(),
    ).toEqual([
      `tributary_mirror_table_rows_applied_total{mirror="${mirror}",table="public.orders",operation="delete"} 1`,
      `tributary_mirror_table_rows_applied_total{mirror="${mirror}",table="public.orders",operation="insert"} 2`,
      `tributary_mirror_table_rows_applied_total{mirror="${mirror}",table="public.orders",operation="update"} 1`,
    ]);
    expect(metrics).toContain('# TYPE tributary_mirror_table_rows_applied_total counter');
  });

  it("shows each table's state and rows applied on the console's mirror page", async () => {
    const response = await fetch(`${service.baseUrl}/mirrors/${mirror}`, {
      headers: { authorization: `Basic ${Buffer.from(`:${password}`).toString('base64')}` },
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const tables = text.slice(text.indexOf('<h2 id="tables">Tables</h2>'), text.indexOf('<h2>Peers</h2>'));
    expect(tables).toContain(
      `<td>public.orders</td><td>public.orders_copy</td>\n<td class="state">streaming<form method="post" action="/mirrors/${mirror}/tables/resync">`,
    );
    expect(tables).toContain('<td>2 / 1 / 1</td>');
    expect(tables).toContain('<td>1 / 0 / 0</td>');
  });

  it('marks a table removed by an edit, keeps its counts, and drops it from the metrics', async () => {
    const paused = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_PAUSED',
    });
    expect(paused.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_PAUSED', 60_000, 'paused');
    const edited = await service.call('POST', '/api/v1/mirrors/state_change', {
      flowJobName: mirror,
      requestedFlowState: 'STATUS_RUNNING',
      flowConfigUpdate: {
        cdcFlowConfigUpdate: {
          removed_tables: [
            { sourceTableIdentifier: 'public.items', destinationTableIdentifier: 'public.items' },
          ],
        },
      },
    });
    expect(edited).toEqual({ status: 200, body: {} });
    await waitFor(
      async () => (await tableOf('public.items'))?.state === 'TABLE_STATE_REMOVED',
      60_000,
      'items removed',
    );
    await waitFor(
      async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING',
      60_000,
      'running again',
    );
    expect(await tableOf('public.items')).toMatchObject({
      rowsApplied: { inserts: '1', updates: '0', deletes: '0' },
    });
    // The other table streams on.
    await source.client.query(`INSERT INTO orders VALUES (303, 'honey')`);
    await waitFor(
      async () => (await tableOf('public.orders'))?.rowsApplied.inserts === '3',
      60_000,
      'orders insert after the edit',
    );
    expect((await tableOf('public.orders'))?.state).toBe('TABLE_STATE_STREAMING');
    await waitFor(
      async () =>
        !series(await scrape(), 'tributary_mirror_table_state').some((line) =>
          line.includes('table="public.items"'),
        ),
      30_000,
      'the removed table to leave the metrics',
    );
  });
});
