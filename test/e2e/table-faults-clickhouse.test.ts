// A fault of one table into ClickHouse stays with that table, through a real
// engine process: the destination table dropped under the mirror, which owns
// it, is created again and loaded back by itself while the other table streams
// on, and again when it was dropped while no engine ran; both end equal to the
// source row by row (mirror-lifecycle.md, "A table's own fault").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { ClickHouseScratch } from '../support/clickhouse-scratch.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';

describe('a fault of one table into ClickHouse', () => {
  const engine = clickhouseEngines[0];
  if (!engine) throw new Error('no ClickHouse engine');
  const scratch = new ClickHouseScratch(engine, 'tf');
  const { database, config } = scratch;
  let harness: Harness;
  const sameRows = (table: string) => scratch.expectSameRows(harness.source.client, table, 90_000);
  const stateOf = async (mirror: string, table: string) =>
    (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table);

  beforeAll(async () => {
    harness = await createHarness('tf_ch');
    await scratch.create();
  });

  afterAll(async () => {
    await scratch.drop();
    await harness?.close();
  });

  it('loads a table whose destination table was dropped under the mirror again by itself, the other streaming on', async () => {
    const { source } = harness;
    for (const table of ['kept', 'lost']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 300) g`);
    }
    const mirror = `tf-ch-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'analytics',
      tableMappings: ['kept', 'lost'].map((table) => ({
        source: { schema: 'public', table },
        destination: { schema: database, table },
      })),
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const peer = { name: 'analytics', kind: 'analytics' as const, config };
    let running = startEngine(mirror, writeEngineConfig(harness, spec, { destination: peer }));
    try {
      await sameRows('kept');
      await sameRows('lost');
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
        30_000,
        'running',
      );
      await scratch.admin.command({ query: `DROP TABLE ${database}.lost` });
      await source.client.query(`INSERT INTO lost VALUES (1000, 'after the drop')`);
      // The other table goes on meanwhile.
      await source.client.query(`INSERT INTO kept VALUES (1000, 'streams on')`);
      await source.client.query(`UPDATE kept SET v = 'changed' WHERE id < 10`);
      await source.client.query(`DELETE FROM kept WHERE id BETWEEN 10 AND 19`);
      // The mirror owns the table: it creates it again and loads it by itself.
      await waitFor(
        async () =>
          (await harness.catalog.listLogs({ mirror, offset: 0, limit: 200 })).entries.some(
            (entry) =>
              entry.message ===
              `destination table ${database}.lost was dropped under the mirror, which owns it: it is created again; its destination table is emptied and loaded again`,
          ),
        60_000,
        'lost loaded again by itself',
      );
      await waitFor(
        async () => (await stateOf(mirror, 'public.lost'))?.state === 'streaming',
        120_000,
        'lost streaming again',
      );
      await sameRows('lost');
      await sameRows('kept');
      expect((await stateOf(mirror, 'public.kept'))?.state).toBe('streaming');
      expect((await harness.catalog.getRuntime(mirror))?.phase).toBe('running');

      // Dropped while no engine runs: found at the start and loaded again,
      // not streamed into an empty table made in its place.
      running.kill('SIGTERM');
      expect(await exited(running)).toBe(0);
      await scratch.admin.command({ query: `DROP TABLE ${database}.lost` });
      await source.client.query(`UPDATE lost SET v = 'while stopped' WHERE id <= 5`);
      running = startEngine(mirror, writeEngineConfig(harness, spec, { destination: peer }));
      await waitFor(
        async () => (await stateOf(mirror, 'public.lost'))?.state === 'streaming',
        120_000,
        'lost streaming after the restart',
      );
      await source.client.query(`DELETE FROM lost WHERE id = 300`);
      await sameRows('lost');
      await sameRows('kept');
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  });
});
