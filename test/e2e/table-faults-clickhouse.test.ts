// A fault of one table into ClickHouse stays with that table, through a real
// engine process: the destination table dropped under the mirror stops that
// table (`errored`), the other streams on under writes; the spec's resync
// request creates the table again and loads it back, and both end equal to
// the source row by row (mirror-lifecycle.md, "A table's own fault").
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

  it('stops the table whose destination table was dropped, streams the other, and loads it back on request', async () => {
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
      await waitFor(
        async () => (await stateOf(mirror, 'public.lost'))?.state === 'errored',
        60_000,
        'lost errored',
      );
      const lost = await stateOf(mirror, 'public.lost');
      expect(lost?.problem?.kind).toBe('schema_mismatch');
      expect(lost?.problem?.remedy).toContain('resync');
      expect((await harness.catalog.getRuntime(mirror))?.phase).toBe('running');
      // The other table goes on.
      await source.client.query(`INSERT INTO kept VALUES (1000, 'streams on')`);
      await source.client.query(`UPDATE kept SET v = 'changed' WHERE id < 10`);
      await source.client.query(`DELETE FROM kept WHERE id BETWEEN 10 AND 19`);
      await sameRows('kept');
      expect((await stateOf(mirror, 'public.kept'))?.state).toBe('streaming');

      // The resync request, as the API or kubectl sets it: the engine starts again with it.
      running.kill('SIGTERM');
      expect(await exited(running)).toBe(0);
      await source.client.query(`UPDATE lost SET v = 'while stopped' WHERE id <= 5`);
      running = startEngine(
        mirror,
        writeEngineConfig(
          harness,
          { ...spec, resyncTables: { 'public.lost': 'one' } },
          { destination: peer },
        ),
      );
      await waitFor(
        async () => (await stateOf(mirror, 'public.lost'))?.state === 'streaming',
        120_000,
        'lost streaming again',
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
