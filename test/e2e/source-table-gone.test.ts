// A mapped source table that goes away stops alone and comes back by itself
// (issue 39, point 4; pipeline/source-tables-watch.ts), through a real engine
// process into PostgreSQL. PostgreSQL publishes nothing for DROP TABLE or
// RENAME: the mirror looks. A dropped table stops (`errored`, source_schema)
// with every change made before the drop at the destination, while the other
// table streams on, across an engine restart too; once a table of that name is
// back it is loaded again online and ends equal to the source. A table
// renamed is not gone: the mirror follows it by its identity (source-names.ts),
// away and back, streaming all along.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix, tableCells, waitFor, waitForSameRows } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';

describe('a source table that goes away', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('gone');
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

  it('stops on a drop, the other table streaming on, and loads again once it is back; follows a rename', {
    timeout: 600_000,
  }, async () => {
    const { source, destination } = harness;
    for (const table of ['kept', 'dropped', 'renamed']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 200) g`);
    }
    const mirror = `gone-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: ['kept', 'dropped', 'renamed'].map((table) => ({
        source: { schema: 'public', table },
        destination: { schema: 'public', table },
      })),
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const config = writeEngineConfig(harness, spec);
    const stateOf = async (table: string) =>
      (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table);
    let running = startEngine(mirror, config);
    try {
      await sameRows('dropped');
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
        60_000,
        'running',
      );
      // Its last changes, then the drop: every change before the drop arrives.
      await source.client.query(`INSERT INTO dropped VALUES (500, 'last')`);
      await source.client.query(`UPDATE dropped SET v = 'final' WHERE id <= 10`);
      const before = await tableCells(source.client, 'dropped', 'id');
      await source.client.query(`DROP TABLE dropped`);
      await waitFor(
        async () => (await stateOf('public.dropped'))?.state === 'errored',
        90_000,
        'dropped errored',
      );
      const stopped = await stateOf('public.dropped');
      expect(stopped?.problem?.kind).toBe('source_schema');
      expect(stopped?.problem?.message).toContain('no longer exists');
      expect(await tableCells(destination.client, 'dropped', 'id')).toEqual(before);
      expect((await harness.catalog.getRuntime(mirror))?.phase).toBe('running');
      await source.client.query(`INSERT INTO kept VALUES (1000, 'streams on')`);
      await sameRows('kept');

      // A restart keeps it stopped and the mirror running.
      running.kill('SIGTERM');
      expect(await exited(running)).toBe(0);
      running = startEngine(mirror, config);
      await source.client.query(`INSERT INTO kept VALUES (1001, 'after the restart')`);
      await sameRows('kept');
      expect((await stateOf('public.dropped'))?.state).toBe('errored');
      expect((await harness.catalog.getRuntime(mirror))?.phase).toBe('running');

      // Back, with other rows: loaded again while the mirror streams.
      await source.client.query(`CREATE TABLE dropped (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO dropped SELECT g, 'again' || g FROM generate_series(1, 300) g`);
      await waitFor(
        async () => (await stateOf('public.dropped'))?.state === 'streaming',
        120_000,
        'rejoined',
      );
      await source.client.query(`UPDATE dropped SET v = 'streamed' WHERE id <= 5`);
      await sameRows('dropped');

      // A rename, then back: followed, never stopped, nothing loaded again.
      const loadsBefore = (await harness.catalog.listSnapshotProgress(mirror)).find(
        (entry) => entry.sourceTable === 'public.renamed',
      )?.startTime;
      await source.client.query(`ALTER TABLE renamed RENAME TO renamed_away`);
      await source.client.query(`UPDATE renamed_away SET v = 'while away' WHERE id <= 20`);
      await waitFor(
        async () => (await tableCells(destination.client, 'renamed', 'id')).includes('1.v=while away'),
        90_000,
        'the change made while renamed',
      );
      await source.client.query(`ALTER TABLE renamed_away RENAME TO renamed`);
      await source.client.query(`INSERT INTO renamed VALUES (900, 'after')`);
      await sameRows('renamed');
      expect((await stateOf('public.renamed'))?.state).toBe('streaming');
      expect(
        (await harness.catalog.listSnapshotProgress(mirror)).find(
          (entry) => entry.sourceTable === 'public.renamed',
        )?.startTime,
      ).toEqual(loadsBefore);
      await source.client.query(`INSERT INTO kept VALUES (1002, 'at the end')`);
      await sameRows('kept');
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  });
});
