// An online resync of a streaming table into PostgreSQL (issue 39, point 3):
// through a real standalone process, a table that drifted at the destination
// is loaded again beside the live one under writes, and put in its place in
// one transaction. A reader polling count(*) never sees fewer rows than before
// the resync began; the table ends equal to the source row by row, with its
// key index's name and the privileges granted on it; the other table streams
// on. Through an engine process, the same with kill -9s during the resync.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestDatabase,
  randomSuffix,
  type TestDatabase,
  tableCells,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';
import { startResyncWriter } from '../support/resync-writer.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';

const password = 'table-resync-password';
const rows = 20_000;

async function expectSameTable(source: pg.Client, destination: pg.Client, table: string): Promise<void> {
  await waitForSameRows(source, destination, table, 120_000).catch(() => {});
  expect(await tableCells(destination, table, 'id')).toEqual(await tableCells(source, table, 'id'));
}

describe('an online resync of a streaming table', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-table-resync-')), 'data');
  const suffix = randomSuffix();
  const mirror = `resync-${suffix}`;
  const reader = `resync_reader_${suffix}`.toLowerCase().replaceAll('-', '_');

  const tableOf = async (table: string) => {
    const answer = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    return (
      (answer.body as { tables?: { sourceTableIdentifier: string; state: string }[] }).tables ?? []
    ).find((entry) => entry.sourceTableIdentifier === table);
  };

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('rs_src'), createTestDatabase('rs_dst')]);
    await source.client.query(`CREATE TABLE live (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO live SELECT g, 'v' || g FROM generate_series(1, ${rows}) g`);
    await source.client.query(`CREATE TABLE other (id int PRIMARY KEY, v text)`);
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: ['public.live', 'public.other'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 90_000, 'running');
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
    await destination?.client.query(`DROP ROLE IF EXISTS ${reader}`).catch(() => {});
  });

  it('loads the table beside the live one under writes and swaps it in: readers never see fewer rows', async () => {
    await expectSameTable(source.client, destination.client, 'live');
    await destination.client.query(`CREATE ROLE ${reader}`);
    await destination.client.query(`GRANT SELECT ON live TO ${reader}`);
    // The destination drifted: rows gone, values changed (a resync's reason to be).
    await destination.client.query(`DELETE FROM live WHERE id % 97 = 0`);
    await destination.client.query(`UPDATE live SET v = 'drifted' WHERE id % 89 = 0`);
    const before = Number((await destination.client.query(`SELECT count(*) AS n FROM live`)).rows[0]?.n);

    const readerClient = new pg.Client(destination.config);
    await readerClient.connect();
    let polling = true;
    let fewest = Number.POSITIVE_INFINITY;
    const polls = (async () => {
      while (polling) {
        const n = Number((await readerClient.query(`SELECT count(*) AS n FROM live`)).rows[0]?.n);
        fewest = Math.min(fewest, n);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const stopWriter = startResyncWriter(source.client, 'live', 'other', rows);
    const states = new Set<string>();
    try {
      const requested = await service.call('POST', '/api/v1/mirrors/tables/resync', {
        flowJobName: mirror,
        sourceTableIdentifier: 'public.live',
      });
      expect(requested.status, JSON.stringify(requested.body)).toBe(200);
      await waitFor(
        async () => {
          const state = (await tableOf('public.live'))?.state ?? '';
          states.add(state);
          return state === 'TABLE_STATE_STREAMING' && states.has('TABLE_STATE_RESYNCING');
        },
        180_000,
        'resynced',
      );
    } finally {
      await stopWriter();
      polling = false;
      await polls;
      await readerClient.end();
    }
    expect(fewest).toBeGreaterThanOrEqual(before);
    await expectSameTable(source.client, destination.client, 'live');
    await expectSameTable(source.client, destination.client, 'other');
    // The same table to its users: its key index's name, and what was granted on it.
    const index = await destination.client.query<{ name: string }>(
      `SELECT indexrelid::regclass::text AS name FROM pg_index WHERE indrelid = 'public.live'::regclass AND indisprimary`,
    );
    expect(index.rows).toEqual([{ name: 'live_pkey' }]);
    const granted = await destination.client.query<{ ok: boolean }>(
      `SELECT has_table_privilege('${reader}', 'public.live', 'SELECT') AS ok`,
    );
    expect(granted.rows[0]?.ok).toBe(true);
    // Nothing left beside it.
    const leftovers = await destination.client.query(
      `SELECT 1 FROM pg_tables WHERE schemaname LIKE '\\_tributary\\_resync%'`,
    );
    expect(leftovers.rowCount).toBe(0);
  });
});

describe('an online resync that cannot replace the live table', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-table-resync-view-')), 'data');
  const suffix = randomSuffix();
  const mirror = `resync-view-${suffix}`;

  const tableOf = async (table: string) => {
    const answer = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    return (
      (
        answer.body as {
          tables?: { sourceTableIdentifier: string; state: string; error?: { message: string } }[];
        }
      ).tables ?? []
    ).find((entry) => entry.sourceTableIdentifier === table);
  };
  const resync = () =>
    service.call('POST', '/api/v1/mirrors/tables/resync', {
      flowJobName: mirror,
      sourceTableIdentifier: 'public.viewed',
    });

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('rsv_src'), createTestDatabase('rsv_dst')]);
    await source.client.query(`CREATE TABLE viewed (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO viewed SELECT g, 'v' || g FROM generate_series(1, 500) g`);
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.viewed',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 90_000, 'running');
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('stops the table with the reason when a view depends on it, and loads it in place once asked again', async () => {
    await expectSameTable(source.client, destination.client, 'viewed');
    await destination.client.query(`CREATE VIEW viewed_names AS SELECT v FROM viewed`);
    expect((await resync()).status).toBe(200);
    await waitFor(
      async () => (await tableOf('public.viewed'))?.state === 'TABLE_STATE_ERRORED',
      120_000,
      'errored by the view',
    );
    expect((await tableOf('public.viewed'))?.error?.message).toContain('by its resync');
    // Loaded in place (emptied and filled), which the view does not prevent.
    await source.client.query(`INSERT INTO viewed VALUES (1000, 'while stopped')`);
    expect((await resync()).status).toBe(200);
    await waitFor(
      async () => (await tableOf('public.viewed'))?.state === 'TABLE_STATE_STREAMING',
      120_000,
      'streaming again',
    );
    await expectSameTable(source.client, destination.client, 'viewed');
    expect((await destination.client.query(`SELECT count(*)::int AS n FROM viewed_names`)).rows[0]?.n).toBe(
      501,
    );
  });
});

describe('an online resync under kill -9s of the engine', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('rs_kill');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('resumes the resync after each kill and ends equal row by row', { timeout: 600_000 }, async () => {
    const { source, destination } = harness;
    for (const table of ['kept', 'resynced']) {
      await source.client.query(`DROP TABLE IF EXISTS ${table}`);
      await destination.client.query(`DROP TABLE IF EXISTS ${table}`);
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
    }
    await source.client.query(`INSERT INTO resynced SELECT g, 'v' || g FROM generate_series(1, 60000) g`);
    const mirror = `rs-kill-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: ['kept', 'resynced'].map((table) => ({
        source: { schema: 'public', table },
        destination: { schema: 'public', table },
      })),
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const stateOf = async () =>
      (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === 'public.resynced')
        ?.state;
    let running = startEngine(mirror, writeEngineConfig(harness, spec));
    await expectSameTable(source.client, destination.client, 'resynced');
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
      30_000,
      'running',
    );
    running.kill('SIGTERM');
    expect(await exited(running)).toBe(0);
    await destination.client.query(`DELETE FROM resynced WHERE id % 50 = 0`);

    const writerClient = new pg.Client(source.config);
    await writerClient.connect();
    const stopWriter = startResyncWriter(writerClient, 'resynced', 'kept', 60_000);
    const withResync = writeEngineConfig(harness, { ...spec, resyncTables: { 'public.resynced': 'one' } });
    const statesAtKill: (string | undefined)[] = [];
    try {
      for (let round = 0; round < 2; round++) {
        running = startEngine(mirror, withResync);
        // The first start takes the request (streaming until then); a later one finds it under way or done.
        const expected = round === 0 ? ['resyncing'] : ['resyncing', 'streaming'];
        await waitFor(async () => expected.includes((await stateOf()) ?? ''), 60_000, 'resyncing');
        await new Promise((resolve) => setTimeout(resolve, 300 + round * 500));
        statesAtKill.push(await stateOf());
        running.kill('SIGKILL');
        await exited(running);
      }
      running = startEngine(mirror, withResync);
      await waitFor(async () => (await stateOf()) === 'streaming', 300_000, 'resynced');
    } finally {
      await stopWriter();
      await writerClient.end();
    }
    try {
      expect(statesAtKill).toContain('resyncing');
      await expectSameTable(source.client, destination.client, 'resynced');
      await expectSameTable(source.client, destination.client, 'kept');
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  });
});
