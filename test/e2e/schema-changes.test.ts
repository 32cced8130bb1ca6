// Schema changes beyond ADD COLUMN reach a PostgreSQL destination under the
// mirror's policy (docs/engine.md, "Schema changes"; pipeline/schema-evolution.ts),
// through a real engine process, with rows written before, during and after
// each change, and kill -9s between a change and the rows that carry it:
// - apply: columns added, renamed (told from a drop and an add by attnum),
//   dropped, widened; the destination ends with the source's shape and rows;
// - hold: the table stops (`held`) at its change while another streams on; a
//   resync accepts the change and loads it again;
// - a narrowing under apply is held with the reason; ignore adds columns only;
// - a table renamed (or moved to another schema) is followed by its identity
//   into the same destination table, with rows on both sides of the rename in
//   one transaction, with no change after it, and while no engine runs; one
//   dropped and made again under its name is loaded again from the new one;
//   under hold the rename holds the table until a resync accepts it.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix, tableCells, tableRows, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import {
  createHarness,
  expectSameRows,
  type Harness,
  mapping,
  startMirror,
} from '../support/mirror-harness.ts';

type Client = Harness['source']['client'];

/** A table's columns as `name type`, by name: the shape compared between source and destination. */
async function shapeOf(client: Client, table: string): Promise<string[]> {
  const { rows } = await client.query<{ column: string }>(
    `SELECT attname || ' ' || format_type(atttypid, atttypmod) AS column FROM pg_attribute
     WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attname`,
    [table],
  );
  return rows.map((row) => row.column);
}

/**
 * Inserts and updates rows of `shaped` every few milliseconds, whatever its
 * shape, from `start` to `stop` (which waits for its last write).
 */
function writer(client: Client) {
  let next = 10_000;
  let running: { stopped: boolean; done: Promise<void> } | undefined;
  return {
    start() {
      const run = { stopped: false, done: Promise.resolve() };
      run.done = (async () => {
        while (!run.stopped) {
          await client.query(`INSERT INTO shaped (id, v) VALUES ($1, $2)`, [next, `w${next}`]);
          await client.query(`UPDATE shaped SET v = v || '+' WHERE id = $1`, [next - 7]);
          next += 1;
          await new Promise((resolve) => setTimeout(resolve, 15));
        }
      })();
      running = run;
    },
    async stop() {
      if (!running) return;
      running.stopped = true;
      await running.done;
      running = undefined;
    },
  };
}

describe('schema changes into PostgreSQL', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('schema');
  });

  afterAll(async () => {
    await harness?.close();
  });

  const stateOf = async (mirror: string, table: string) =>
    (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table);

  const sameShapeAndRows = async (table: string) => {
    await waitFor(
      async () =>
        JSON.stringify(await shapeOf(harness.source.client, table)) ===
        JSON.stringify(await shapeOf(harness.destination.client, table)),
      120_000,
      `${table} to take the source's shape`,
    ).catch(() => {});
    expect(await shapeOf(harness.destination.client, table)).toEqual(
      await shapeOf(harness.source.client, table),
    );
    await expectSameRows(harness, table, { timeoutMs: 120_000 });
  };

  it('applies adds, renames, drops and widenings under writes and kill -9s', {
    timeout: 600_000,
  }, async () => {
    const { source } = harness;
    await source.client.query(
      `CREATE TABLE shaped (id int PRIMARY KEY, v text, a int, b varchar(10), c text, d numeric(8,2), gone text)`,
    );
    await source.client.query(
      `INSERT INTO shaped SELECT g, 'v' || g, g, 'b' || g, 'c' || g, g / 3.0, 'gone' FROM generate_series(1, 300) g`,
    );
    const mirror = `schema-${randomSuffix()}`;
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [mapping('shaped')],
      doInitialSnapshot: true,
      streaming: true,
      idleTimeoutSeconds: 1,
    };
    const config = writeEngineConfig(harness, spec);
    let engine = startEngine(mirror, config);
    const writes = writer(source.client);
    // The rows are compared with no write under way (a write between the two reads would differ).
    const compared = async () => {
      await writes.stop();
      await sameShapeAndRows('shaped');
      writes.start();
    };
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
        120_000,
        'running',
      );
      writes.start();
      const step = async (ddl: string, rows: string) => {
        await source.client.query(ddl);
        await source.client.query(rows);
      };
      await step(`ALTER TABLE shaped ADD COLUMN e text`, `UPDATE shaped SET e = 'e' || id WHERE id <= 50`);
      await step(
        `ALTER TABLE shaped RENAME COLUMN c TO c2`,
        `UPDATE shaped SET c2 = 'c2.' || id WHERE id <= 60`,
      );
      await step(
        `ALTER TABLE shaped DROP COLUMN gone`,
        `UPDATE shaped SET v = 'after the drop' WHERE id <= 5`,
      );
      await step(
        `ALTER TABLE shaped ALTER COLUMN a TYPE bigint`,
        `UPDATE shaped SET a = a + 3000000000 WHERE id <= 10`,
      );
      await step(
        `ALTER TABLE shaped ALTER COLUMN b TYPE varchar(40)`,
        `UPDATE shaped SET b = repeat('x', 30) WHERE id <= 10`,
      );
      await step(
        `ALTER TABLE shaped ALTER COLUMN d TYPE numeric(12,2)`,
        `UPDATE shaped SET d = 1234567890.12 WHERE id <= 10`,
      );
      await compared();

      // Changed while no engine runs: the restart meets the change in the stream.
      engine.kill('SIGKILL');
      await exited(engine);
      await step(
        `ALTER TABLE shaped RENAME COLUMN e TO e2; ALTER TABLE shaped ADD COLUMN f int`,
        `UPDATE shaped SET e2 = 'e2.' || id, f = id WHERE id <= 40`,
      );
      engine = startEngine(mirror, config);
      await compared();

      // Killed right after a change and its first row: the change is made once.
      await step(
        `ALTER TABLE shaped ADD COLUMN g text, DROP COLUMN f`,
        `UPDATE shaped SET g = 'g' WHERE id <= 3`,
      );
      await waitFor(
        async () =>
          (await shapeOf(harness.destination.client, 'shaped')).some((column) => column.startsWith('g ')),
        60_000,
        'the destination to take the change',
      );
      engine.kill('SIGKILL');
      await exited(engine);
      engine = startEngine(mirror, config);
      await writes.stop();
      await sameShapeAndRows('shaped');
      expect((await stateOf(mirror, 'public.shaped'))?.state).toBe('streaming');
      const logs = await harness.catalog.listLogs({ mirror, offset: 0, limit: 200 });
      expect(logs.entries.map((entry) => entry.message)).toContain(
        'public.shaped follows its schema change at the destination: column c renamed to c2',
      );
    } finally {
      await writes.stop();
      engine.kill('SIGTERM');
      await exited(engine);
    }
  });

  it('holds a table at its change while another streams on, and a resync accepts it', {
    timeout: 300_000,
  }, async () => {
    const { source, destination } = harness;
    for (const table of ['held_t', 'other_t']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text, x int)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g, g FROM generate_series(1, 100) g`);
    }
    const input = {
      name: `hold-${randomSuffix()}`,
      tableMappings: [mapping('held_t'), mapping('other_t')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      schemaChanges: 'hold' as const,
    };
    let mirror = startMirror(harness, input);
    try {
      await expectSameRows(harness, 'held_t');
      await source.client.query(`UPDATE held_t SET v = 'before the change' WHERE id <= 5`);
      await expectSameRows(harness, 'held_t');
      await source.client.query(`ALTER TABLE held_t RENAME COLUMN v TO w`);
      await source.client.query(`UPDATE held_t SET w = 'after the change' WHERE id <= 10`);
      await waitFor(
        async () => (await stateOf(input.name, 'public.held_t'))?.state === 'held',
        60_000,
        'held',
      );
      const held = await stateOf(input.name, 'public.held_t');
      expect(held?.problem?.message).toBe(
        'schema change of public.held_t held (schemaChanges: hold): column v renamed to w',
      );
      expect(held?.problem?.remedy).toMatch(/^accept it by resyncing the table/);
      expect(held?.behindLsn).not.toBeNull();
      // Its destination stays at the point before the change.
      expect(await shapeOf(destination.client, 'held_t')).toEqual(['id integer', 'v text', 'x integer']);
      await source.client.query(`INSERT INTO other_t VALUES (500, 'streams on', 5)`);
      await expectSameRows(harness, 'other_t');

      await mirror.stop();
      mirror = startMirror(harness, { ...input, resyncTables: { 'public.held_t': 'accept-1' } });
      await waitFor(
        async () => (await stateOf(input.name, 'public.held_t'))?.state === 'streaming',
        120_000,
        'accepted and loaded again',
      );
      await source.client.query(`UPDATE held_t SET w = 'streamed' WHERE id <= 3`);
      await sameShapeAndRows('held_t');
    } finally {
      await mirror.stop().catch(() => {});
    }
  });

  /** Waits until `destinationTable` holds `sourceTable`'s rows, then compares them cell by cell. */
  const sameRowsAs = async (sourceTable: string, destinationTable: string) => {
    const { source, destination } = harness;
    await waitFor(
      async () =>
        JSON.stringify(await tableRows(source.client, sourceTable, 'id')) ===
        JSON.stringify(await tableRows(destination.client, destinationTable, 'id')),
      120_000,
      `${destinationTable} to hold the rows of ${sourceTable}`,
    ).catch(() => {});
    expect(await tableCells(destination.client, destinationTable, 'id')).toEqual(
      await tableCells(source.client, sourceTable, 'id'),
    );
  };
  const logsOf = async (mirror: string) =>
    (await harness.catalog.listLogs({ mirror, offset: 0, limit: 500 })).entries.map((entry) => entry.message);

  it('follows a table renamed at the source into the same destination table, under writes and across a kill -9', {
    timeout: 600_000,
  }, async () => {
    const { source, destination } = harness;
    const archive = `archive_${randomSuffix()}`;
    await source.client.query(`CREATE TABLE moved (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO moved SELECT g, 'v' || g FROM generate_series(1, 200) g`);
    const mirror = `rename-${randomSuffix()}`;
    const config = writeEngineConfig(harness, {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [mapping('moved')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    });
    let engine = startEngine(mirror, config);
    try {
      await sameRowsAs('moved', 'moved');
      // Rows on both sides of the rename in one transaction, then rows after it.
      await source.client.query(
        `BEGIN;
         UPDATE moved SET v = 'before the rename' WHERE id <= 10;
         ALTER TABLE moved RENAME TO moved_v2;
         UPDATE moved_v2 SET v = 'after the rename' WHERE id <= 5;
         INSERT INTO moved_v2 VALUES (1000, 'new');
         COMMIT`,
      );
      await source.client.query(`DELETE FROM moved_v2 WHERE id = 20`);
      await sameRowsAs('moved_v2', 'moved');

      // Renamed with no change after it: the look for the mapped tables finds it by its identity.
      await source.client.query(`ALTER TABLE moved_v2 RENAME TO moved_v3`);
      await waitFor(
        async () =>
          (await logsOf(mirror)).includes(
            'source table public.moved_v2 is named public.moved_v3 now: the mirror follows it by its identity, as public.moved of its table mappings, into the same destination table',
          ),
        60_000,
        'the rename to be seen with no change after it',
      );
      expect((await stateOf(mirror, 'public.moved'))?.state).toBe('streaming');
      await source.client.query(`INSERT INTO moved_v3 VALUES (1001, 'after the look')`);
      await sameRowsAs('moved_v3', 'moved');

      // Moved to another schema and changed while no engine runs.
      engine.kill('SIGKILL');
      await exited(engine);
      await source.client.query(`CREATE SCHEMA ${archive}`);
      await source.client.query(`ALTER TABLE moved_v3 SET SCHEMA ${archive}`);
      await source.client.query(`UPDATE ${archive}.moved_v3 SET v = 'while no engine ran' WHERE id <= 3`);
      engine = startEngine(mirror, config);
      await source.client.query(`INSERT INTO ${archive}.moved_v3 VALUES (1002, 'after the restart')`);
      await sameRowsAs(`${archive}.moved_v3`, 'moved');
      expect((await stateOf(mirror, 'public.moved'))?.state).toBe('streaming');
      expect(await shapeOf(destination.client, 'moved')).toEqual(['id integer', 'v text']);

      // Dropped, and another table made under the mapped name: loaded again from it.
      await source.client.query(`DROP TABLE ${archive}.moved_v3`);
      await source.client.query(`CREATE TABLE moved (id int PRIMARY KEY, v text)`);
      await source.client.query(
        `INSERT INTO moved SELECT g, 'remade ' || g FROM generate_series(500, 540) g`,
      );
      await waitFor(
        async () =>
          (await logsOf(mirror)).some((message) =>
            message.startsWith('source table public.moved exists again'),
          ),
        60_000,
        'the table made again to rejoin',
      );
      await source.client.query(`UPDATE moved SET v = 'streamed' WHERE id = 500`);
      await sameRowsAs('moved', 'moved');
      await waitFor(
        async () => (await stateOf(mirror, 'public.moved'))?.state === 'streaming',
        60_000,
        'streaming again',
      );
    } finally {
      engine.kill('SIGTERM');
      await exited(engine);
    }
  });

  it('holds a table renamed under hold while another streams on, and a resync accepts it', {
    timeout: 300_000,
  }, async () => {
    const { source } = harness;
    for (const table of ['renamed_held', 'renamed_other']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 100) g`);
    }
    const input = {
      name: `rename-hold-${randomSuffix()}`,
      tableMappings: [mapping('renamed_held'), mapping('renamed_other')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      schemaChanges: 'hold' as const,
    };
    let mirror = startMirror(harness, input);
    try {
      await sameRowsAs('renamed_held', 'renamed_held');
      await source.client.query(`ALTER TABLE renamed_held RENAME TO renamed_held_v2`);
      await source.client.query(`UPDATE renamed_held_v2 SET v = 'after the rename' WHERE id <= 10`);
      await waitFor(
        async () => (await stateOf(input.name, 'public.renamed_held'))?.state === 'held',
        60_000,
        'held',
      );
      expect((await stateOf(input.name, 'public.renamed_held'))?.problem?.message).toBe(
        'schema change of public.renamed_held held (schemaChanges: hold): source table public.renamed_held was renamed to public.renamed_held_v2',
      );
      await source.client.query(`INSERT INTO renamed_other VALUES (500, 'streams on')`);
      await sameRowsAs('renamed_other', 'renamed_other');

      await mirror.stop();
      mirror = startMirror(harness, { ...input, resyncTables: { 'public.renamed_held': 'accept-1' } });
      await waitFor(
        async () => (await stateOf(input.name, 'public.renamed_held'))?.state === 'streaming',
        120_000,
        'accepted and loaded again',
      );
      await source.client.query(`UPDATE renamed_held_v2 SET v = 'streamed' WHERE id <= 3`);
      await sameRowsAs('renamed_held_v2', 'renamed_held');
    } finally {
      await mirror.stop().catch(() => {});
    }
  });

  it('tells a column added and renamed while the mirror is behind from a drop and an add', {
    timeout: 300_000,
  }, async () => {
    const { source, destination } = harness;
    await source.client.query(`CREATE TABLE lagged (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO lagged SELECT g, 'v' || g FROM generate_series(1, 40) g`);
    const input = {
      name: `lagged-${randomSuffix()}`,
      tableMappings: [mapping('lagged')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, input);
    // Holds the destination table, so the mirror falls behind: it reads the
    // source's catalog for the added column only after the rename.
    const locker = new pg.Client(destination.config);
    await locker.connect();
    try {
      await sameRowsAs('lagged', 'lagged');
      await locker.query(`BEGIN; LOCK TABLE lagged IN ACCESS EXCLUSIVE MODE`);
      await source.client.query(`UPDATE lagged SET v = 'before the add' WHERE id <= 3`);
      await source.client.query(`ALTER TABLE lagged ADD COLUMN e text`);
      await source.client.query(`UPDATE lagged SET e = 'e' || id WHERE id <= 20`);
      await source.client.query(`ALTER TABLE lagged RENAME COLUMN e TO e2`);
      await source.client.query(`UPDATE lagged SET e2 = 'after the rename' WHERE id = 1`);
      await locker.query('COMMIT');
      await sameShapeAndRows('lagged');
      const logs = await logsOf(input.name);
      expect(logs).toContain(
        'public.lagged follows its schema change at the destination: column e renamed to e2',
      );
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await locker.end().catch(() => {});
      await mirror.stop().catch(() => {});
    }
  });

  it('holds a table whose primary key changed, and loads it under its new key once its destination table is dropped', {
    timeout: 300_000,
  }, async () => {
    const { source, destination } = harness;
    await source.client.query(
      `CREATE TABLE rekeyed (id int, region text NOT NULL, v text, PRIMARY KEY (id))`,
    );
    await source.client.query(
      `INSERT INTO rekeyed SELECT g, 'r' || (g % 3), 'v' || g FROM generate_series(1, 60) g`,
    );
    const input = {
      name: `rekey-${randomSuffix()}`,
      tableMappings: [mapping('rekeyed')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    let mirror = startMirror(harness, input);
    try {
      await sameRowsAs('rekeyed', 'rekeyed');
      await source.client.query(
        `ALTER TABLE rekeyed DROP CONSTRAINT rekeyed_pkey, ADD PRIMARY KEY (id, region)`,
      );
      await source.client.query(`INSERT INTO rekeyed VALUES (1, 'other region', 'same id, another key')`);
      await waitFor(
        async () => (await stateOf(input.name, 'public.rekeyed'))?.state === 'held',
        60_000,
        'held',
      );
      expect((await stateOf(input.name, 'public.rekeyed'))?.problem?.message).toBe(
        "the primary key of public.rekeyed changed at the source from (id) to (id, region), and the destination's rows are keyed by the old one: drop the destination table public.rekeyed so that the mirror creates it with the new key, then resync the table",
      );
      // Nothing of the change was applied: the row of the new key did not overwrite id 1's.
      expect(await tableCells(destination.client, '(SELECT * FROM rekeyed WHERE id = 1)', 'id')).toEqual([
        '1.id=1',
        '1.region=r1',
        '1.v=v1',
      ]);

      await mirror.stop();
      await destination.client.query(`DROP TABLE rekeyed`);
      mirror = startMirror(harness, { ...input, resyncTables: { 'public.rekeyed': 'rekeyed-1' } });
      await waitFor(
        async () => (await stateOf(input.name, 'public.rekeyed'))?.state === 'streaming',
        120_000,
        'loaded under its new key',
      );
      await source.client.query(`INSERT INTO rekeyed VALUES (2, 'other region', 'after the resync')`);
      await expectSameRows(harness, 'rekeyed', { orderBy: 'id, region' });
    } finally {
      await mirror.stop().catch(() => {});
    }
  });

  it('holds a narrowing under apply, and under ignore adds columns only', { timeout: 300_000 }, async () => {
    const { source, destination } = harness;
    await source.client.query(`CREATE TABLE narrowed (id int PRIMARY KEY, a bigint)`);
    await source.client.query(`CREATE TABLE ignored (id int PRIMARY KEY, v text, x int)`);
    for (const table of ['narrowed', 'ignored']) {
      await source.client.query(`INSERT INTO ${table} (id) SELECT g FROM generate_series(1, 50) g`);
    }
    const apply = {
      name: `narrow-${randomSuffix()}`,
      tableMappings: [mapping('narrowed')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const ignore = {
      name: `ignore-${randomSuffix()}`,
      tableMappings: [mapping('ignored')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      schemaChanges: 'ignore' as const,
    };
    const mirrors = [startMirror(harness, apply), startMirror(harness, ignore)];
    try {
      await expectSameRows(harness, 'narrowed');
      await expectSameRows(harness, 'ignored');
      await source.client.query(`ALTER TABLE narrowed ALTER COLUMN a TYPE int`);
      await source.client.query(`UPDATE narrowed SET a = 1 WHERE id = 1`);
      await waitFor(
        async () => (await stateOf(apply.name, 'public.narrowed'))?.state === 'held',
        60_000,
        'held',
      );
      expect((await stateOf(apply.name, 'public.narrowed'))?.problem?.message).toBe(
        'schema change of public.narrowed held: column a changed from bigint to integer, which does not widen it, so rows at the destination could not all take it (column a changed type)',
      );
      expect(await shapeOf(destination.client, 'narrowed')).toEqual(['a bigint', 'id integer']);

      await source.client.query(`ALTER TABLE ignored RENAME COLUMN v TO w`);
      await source.client.query(`ALTER TABLE ignored DROP COLUMN x, ADD COLUMN y int`);
      await source.client.query(`INSERT INTO ignored VALUES (100, 'new', 7)`);
      await waitFor(
        async () =>
          (await tableCells(destination.client, '(SELECT * FROM ignored WHERE id = 100)', 'id')).length > 0,
        60_000,
        'the row after the changes',
      );
      expect(await shapeOf(destination.client, 'ignored')).toEqual([
        'id integer',
        'v text',
        'w text',
        'x integer',
        'y integer',
      ]);
      expect(await tableCells(destination.client, '(SELECT * FROM ignored WHERE id = 100)', 'id')).toEqual([
        '1.id=100',
        '1.v=NULL',
        '1.w=new',
        '1.x=NULL',
        '1.y=7',
      ]);
      expect((await stateOf(ignore.name, 'public.ignored'))?.state).toBe('streaming');
    } finally {
      await Promise.all(mirrors.map((mirror) => mirror.stop().catch(() => {})));
    }
  });
});
