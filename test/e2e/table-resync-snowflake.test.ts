// An online resync of a streaming table into Snowflake (issue 39, point 3),
// and a Snowflake table's own faults (point 4), against the emulator. Through
// a real standalone process: a table that drifted at the destination is loaded
// again beside the live one under writes and swapped in; a reader polling
// count(*) never sees fewer rows than before the resync began, the table ends
// equal to the source row by row with its comment kept, and no shadow or due
// swap is left. A destination table dropped under the mirror, which owns it,
// is created again and loaded back by itself while the other streams on.
// Through an engine process: the resync under kill -9s of the engine, then equal.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Peer } from '../../engine/src/resources/peer.ts';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';
import { startResyncWriter } from '../support/resync-writer.ts';
import { emulatorConfig, SnowflakeAdmin, testPrivateKey, uniqueName } from '../support/snowflake-peer.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';

const password = 'table-resync-snowflake-password';

/** The source's rows and the warehouse's, both as [id, v] text pairs in key order. */
async function bothSides(source: pg.Client, admin: SnowflakeAdmin, database: string, table: string) {
  const expected = (
    await source.query<{ k: string; v: string | null }>(`SELECT id::text AS k, v FROM ${table} ORDER BY id`)
  ).rows.map((row) => [row.k, row.v]);
  let actual: unknown[] = [];
  try {
    actual = (
      await admin.rows(
        `SELECT TO_VARCHAR("ID") AS "K", "V" FROM "${database}"."PUBLIC"."${table.toUpperCase()}" ORDER BY "ID"`,
      )
    ).map((row) => [row.K, row.V]);
  } catch {
    // not there (yet)
  }
  return { expected, actual };
}

async function expectSameTable(
  source: pg.Client,
  admin: SnowflakeAdmin,
  database: string,
  table: string,
  timeoutMs = 120_000,
): Promise<void> {
  await waitFor(
    async () => {
      const { expected, actual } = await bothSides(source, admin, database, table);
      return JSON.stringify(expected) === JSON.stringify(actual);
    },
    timeoutMs,
    `${table} to match`,
  ).catch(() => {});
  const { expected, actual } = await bothSides(source, admin, database, table);
  expect(actual).toEqual(expected);
}

/** The resync writer, paced for the emulator. */
const startWriter = (client: pg.Client, table: string, other: string, seeded: number, firstId = seeded + 1) =>
  startResyncWriter(client, table, other, seeded, { firstId, pauseMs: 20 });

async function leftovers(admin: SnowflakeAdmin, database: string, mirror: string): Promise<unknown[]> {
  const shadows = await admin.rows(
    `SELECT TABLE_SCHEMA, TABLE_NAME FROM "${database}".INFORMATION_SCHEMA.TABLES WHERE LEFT(TABLE_SCHEMA, 17) = '_TRIBUTARY_RESYNC'`,
  );
  const due = await admin.rows(
    `SELECT "LIVE_TABLE" FROM "${database}"."_TRIBUTARY_INTERNAL"."SWAPS" WHERE "MIRROR" = '${mirror}'`,
  );
  return [...shadows, ...due];
}

describe('Snowflake: an online resync and a table fault, through /api/v1', () => {
  let source: TestDatabase;
  let service: StandaloneProcess;
  let admin: SnowflakeAdmin;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-resync-sf-')), 'data');
  const suffix = randomSuffix();
  const mirror = `rssf_${suffix}`;
  const config = emulatorConfig(uniqueName('RSSF'));
  const rows = 3000;

  type TableView = { sourceTableIdentifier: string; state: string; error?: { kind: string } };
  const tableOf = async (table: string) => {
    const answer = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    return ((answer.body as { tables?: TableView[] }).tables ?? []).find(
      (entry) => entry.sourceTableIdentifier === table,
    );
  };
  const resync = (table: string) =>
    service.call('POST', '/api/v1/mirrors/tables/resync', {
      flowJobName: mirror,
      sourceTableIdentifier: table,
    });
  const same = (table: string) => expectSameTable(source.client, admin, config.database, table);

  beforeAll(async () => {
    source = await createTestDatabase('rssf_src');
    await source.client.query(`CREATE TABLE live (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO live SELECT g, 'v' || g FROM generate_series(1, ${rows}) g`);
    await source.client.query(`CREATE TABLE other (id int PRIMARY KEY, v text)`);
    admin = new SnowflakeAdmin(config);
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [[`src_${suffix}`, source]]);
    const peer = await service.call('POST', '/api/v1/peers/create', {
      peer: {
        name: `wh_${suffix}`,
        type: 1,
        datawarehouse_config: {
          account_id: config.accountId,
          username: config.username,
          private_key: testPrivateKey(),
          database: config.database,
          warehouse: config.warehouse,
          role: config.role,
          query_timeout: 60,
          access_url: config.accessUrl,
        },
      },
    });
    expect(peer.body).toMatchObject({ status: 'CREATED' });
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src_${suffix}`,
      destinationPeer: `wh_${suffix}`,
      table: ['public.live', 'public.other'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 90_000, 'running');
  });

  afterAll(async () => {
    await service?.stop();
    await admin?.close();
    await source?.drop();
  });

  it('loads the table beside the live one under writes and swaps it in: readers never see fewer rows', {
    timeout: 400_000,
  }, async () => {
    await same('live');
    const live = `"${config.database}"."PUBLIC"."LIVE"`;
    await admin.rows(`COMMENT ON TABLE ${live} IS 'orders of the shop'`);
    // The destination drifted: rows gone, values changed (a resync's reason to be).
    await admin.rows(`DELETE FROM ${live} WHERE "ID" % 97 = 0`);
    await admin.rows(`UPDATE ${live} SET "V" = 'drifted' WHERE "ID" % 89 = 0`);
    const count = async () => Number((await admin.rows(`SELECT COUNT(*) AS "N" FROM ${live}`))[0]?.N);
    const before = await count();

    const reader = new SnowflakeAdmin(config);
    let polling = true;
    let fewest = Number.POSITIVE_INFINITY;
    let polled = 0;
    const polls = (async () => {
      while (polling) {
        fewest = Math.min(fewest, Number((await reader.rows(`SELECT COUNT(*) AS "N" FROM ${live}`))[0]?.N));
        polled++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const stopWriter = startWriter(source.client, 'live', 'other', rows);
    const states = new Set<string>();
    try {
      const requested = await resync('public.live');
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
      await reader.close();
    }
    expect(polled).toBeGreaterThan(0);
    expect(fewest).toBeGreaterThanOrEqual(before);
    await same('live');
    await same('other');
    // The same table to its users: its comment kept; nothing left beside it.
    const comment = await admin.rows(
      `SELECT COMMENT AS "TABLE_COMMENT" FROM "${config.database}".INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'PUBLIC' AND TABLE_NAME = 'LIVE'`,
    );
    expect(comment).toEqual([{ TABLE_COMMENT: 'orders of the shop' }]);
    expect(await leftovers(admin, config.database, mirror)).toEqual([]);
  });

  it('loads a table whose destination table was dropped under the mirror again by itself, the other streaming on', {
    timeout: 400_000,
  }, async () => {
    await same('other');
    await admin.rows(`DROP TABLE "${config.database}"."PUBLIC"."OTHER"`);
    await source.client.query(`INSERT INTO other VALUES (5000000, 'after the drop')`);
    // New keys above the first test's writer's.
    const stopWriter = startWriter(source.client, 'live', 'other', rows, 100_000);
    try {
      // The mirror owns the table: it creates it again and loads it by itself.
      await waitFor(
        async () => {
          const { body } = await service.call('POST', '/api/v1/mirrors/logs', {
            flowJobName: mirror,
            numPerPage: 200,
          });
          return ((body as { errors?: { errorMessage: string }[] }).errors ?? []).some(
            (entry) =>
              entry.errorMessage ===
              'destination table public.other was dropped under the mirror, which owns it: it is created again; its destination table is emptied and loaded again',
          );
        },
        60_000,
        'other loaded again by itself',
      );
      expect(await mirrorState(service, mirror)).toBe('STATUS_RUNNING');
      expect((await tableOf('public.live'))?.state).toBe('TABLE_STATE_STREAMING');
      // The other table is not held up by it, under writes.
      const { expected } = await bothSides(source.client, admin, config.database, 'live');
      await waitFor(
        async () =>
          (await bothSides(source.client, admin, config.database, 'live')).actual.length >= expected.length,
        60_000,
        'live to go on',
      );
      await waitFor(
        async () => (await tableOf('public.other'))?.state === 'TABLE_STATE_STREAMING',
        120_000,
        'other streaming again',
      );
    } finally {
      await stopWriter();
    }
    await source.client.query(`UPDATE other SET v = 'later' WHERE id = 5000000`);
    await same('other');
    await same('live');
  });
});

describe('Snowflake: an online resync under kill -9s of the engine', () => {
  let harness: Harness;
  let admin: SnowflakeAdmin;
  const config = emulatorConfig(uniqueName('RSSFK'));

  beforeAll(async () => {
    harness = await createHarness('rssf_kill');
    admin = new SnowflakeAdmin(config);
  });

  afterAll(async () => {
    await admin?.close();
    await harness?.close();
  });

  it('resumes the resync after each kill and ends equal row by row', { timeout: 600_000 }, async () => {
    const { source } = harness;
    const rows = 20_000;
    for (const table of ['kept', 'resynced']) {
      await source.client.query(`DROP TABLE IF EXISTS ${table}`);
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
    }
    await source.client.query(`INSERT INTO resynced SELECT g, 'v' || g FROM generate_series(1, ${rows}) g`);
    const mirror = `rssf_kill_${randomSuffix()}`;
    const destination: Peer = { name: 'warehouse', kind: 'datawarehouse', config };
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'warehouse',
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
    let running = startEngine(mirror, writeEngineConfig(harness, spec, { destination }));
    await expectSameTable(source.client, admin, config.database, 'resynced');
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
      30_000,
      'running',
    );
    running.kill('SIGTERM');
    expect(await exited(running)).toBe(0);
    await admin.rows(`DELETE FROM "${config.database}"."PUBLIC"."RESYNCED" WHERE "ID" % 50 = 0`);

    const writerClient = new pg.Client(source.config);
    await writerClient.connect();
    const stopWriter = startWriter(writerClient, 'resynced', 'kept', rows);
    const withResync = writeEngineConfig(
      harness,
      { ...spec, resyncTables: { 'public.resynced': 'one' } },
      { destination },
    );
    const statesAtKill: (string | undefined)[] = [];
    try {
      for (let round = 0; round < 2; round++) {
        running = startEngine(mirror, withResync);
        // The first start takes the request (streaming until then); a later one finds it under way or done.
        const expected = round === 0 ? ['resyncing'] : ['resyncing', 'streaming'];
        await waitFor(async () => expected.includes((await stateOf()) ?? ''), 60_000, 'resyncing');
        // The moment of the kill, some way into the copy (not a wait on a condition).
        await new Promise((resolve) => setTimeout(resolve, 500 + round * 1000));
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
      await expectSameTable(source.client, admin, config.database, 'resynced');
      await expectSameTable(source.client, admin, config.database, 'kept');
      expect(await leftovers(admin, config.database, mirror)).toEqual([]);
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  });
});
