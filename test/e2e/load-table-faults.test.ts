// A fault of one table during the initial load stays with that table (issue
// 39, point 4), through a real engine process into PostgreSQL: a row the
// destination refuses (a CHECK constraint of a destination table made before
// the mirror) stops that table's load, with every worker of it ended, while
// the other table loads and streams on; after the constraint is dropped, a
// resync request loads the table from nothing and both end equal to the
// source row by row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix, tableCells, waitFor, waitForSameRows } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';

describe('a fault of one table during the initial load', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('ltf');
  });

  afterAll(async () => {
    await harness?.close();
  });

  const sameRows = async (table: string) => {
    const { source, destination } = harness;
    await waitForSameRows(source.client, destination.client, table, 120_000).catch(() => {});
    expect(await tableCells(destination.client, table, 'id')).toEqual(
      await tableCells(source.client, table, 'id'),
    );
  };

  it('stops the table the destination refuses a row of, loads and streams the other, and loads it back on request', {
    timeout: 300_000,
  }, async () => {
    const { source, destination } = harness;
    for (const table of ['good', 'picky']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 2000) g`);
    }
    await source.client.query(`UPDATE picky SET v = repeat('x', 40) WHERE id = 1500`);
    await destination.client.query(
      `CREATE TABLE picky (id int PRIMARY KEY, v text, CONSTRAINT short_v CHECK (length(v) < 20))`,
    );
    const mirror = `ltf-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: ['good', 'picky'].map((table) => ({
        source: { schema: 'public', table },
        destination: { schema: 'public', table },
      })),
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      // Several partitions copied at once: the refused one's fault ends them all.
      snapshotNumRowsPerPartition: 200,
      snapshotMaxParallelWorkers: 3,
    };
    const stateOf = async (table: string) =>
      (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table);
    let running = startEngine(mirror, writeEngineConfig(harness, spec));
    try {
      await waitFor(
        async () => (await stateOf('public.picky'))?.state === 'errored',
        90_000,
        'picky errored',
      );
      const picky = await stateOf('public.picky');
      expect(picky?.problem?.kind).toBe('schema_mismatch');
      expect(picky?.problem?.message).toContain('short_v');
      expect(picky?.problem?.message).toContain('initial load');
      expect(picky?.problem?.remedy).toContain('resync');
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
        90_000,
        'running',
      );
      await sameRows('good');
      await source.client.query(`INSERT INTO good VALUES (5000, 'streams')`);
      await source.client.query(`DELETE FROM good WHERE id <= 10`);
      await source.client.query(`INSERT INTO picky VALUES (5000, 'while stopped')`);
      await sameRows('good');
      expect((await stateOf('public.picky'))?.state).toBe('errored');

      // The cause fixed, the resync request (as the API or kubectl sets it).
      await destination.client.query(`ALTER TABLE picky DROP CONSTRAINT short_v`);
      running.kill('SIGTERM');
      expect(await exited(running)).toBe(0);
      running = startEngine(
        mirror,
        writeEngineConfig(harness, { ...spec, resyncTables: { 'public.picky': 'one' } }),
      );
      await waitFor(
        async () => (await stateOf('public.picky'))?.state === 'streaming',
        120_000,
        'picky back',
      );
      await source.client.query(`UPDATE picky SET v = 'after' WHERE id <= 5`);
      await sameRows('picky');
      await sameRows('good');
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  });
});
