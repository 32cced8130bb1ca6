import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPublicationName, defaultSlotName } from '../../engine/src/connectors/postgres/source/slot.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  createHarness,
  dropMirror,
  expectSameRows,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { postgres, sourcePostgres } from '../support/testenv.ts';

describe('PostgreSQL to PostgreSQL', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('p2p');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('loads a partitioned snapshot, then streams inserts, updates, deletes and truncates', async () => {
    const { source, destination } = harness;
    await source.client.query(
      `CREATE TABLE orders (id bigint PRIMARY KEY, customer text, amount numeric(12,2))`,
    );
    await source.client.query(`CREATE TABLE notes (id int PRIMARY KEY, body text)`);
    await source.client.query(
      `INSERT INTO orders SELECT g, 'customer ' || g, g * 1.5 FROM generate_series(1, 20000) g`,
    );
    await source.client.query(
      `INSERT INTO notes VALUES (1, 'first'), (2, E'tab\\there\\nnew line \\\\ slash')`,
    );
    await source.client.query(`ANALYZE orders`);

    const spec: SpecInput = {
      name: `snap-${randomSuffix()}`,
      tableMappings: [mapping('orders'), mapping('notes')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      snapshotNumRowsPerPartition: 3000,
      snapshotMaxParallelWorkers: 3,
      snapshotNumTablesInParallel: 2,
    };
    const mirror = startMirror(harness, spec);
    await expectSameRows(harness, 'orders');
    await expectSameRows(harness, 'notes');

    const progress = await harness.catalog.listSnapshotProgress(spec.name);
    const orders = progress.find((table) => table.sourceTable === 'public.orders');
    expect(orders?.partitionsTotal).toBeGreaterThan(3);
    expect(orders?.partitionsCompleted).toBe(orders?.partitionsTotal);
    expect(orders?.rowsSynced).toBe(20000n);
    expect(orders?.consolidateCompleted).toBe(true);

    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );
    await source.client.query(`INSERT INTO orders VALUES (20001, 'new', 1), (20002, 'newer', 2)`);
    await source.client.query(`UPDATE orders SET amount = amount + 100 WHERE id % 1000 = 0`);
    await source.client.query(`UPDATE orders SET id = 30000 WHERE id = 5`);
    await source.client.query(`DELETE FROM orders WHERE id BETWEEN 100 AND 199`);
    await source.client.query(`INSERT INTO notes VALUES (3, NULL)`);
    await source.client.query(`TRUNCATE notes`);
    await source.client.query(`INSERT INTO notes VALUES (4, 'after truncate')`);
    await expectSameRows(harness, 'orders');
    await expectSameRows(harness, 'notes');

    const { batches } = await harness.catalog.listBatches(spec.name, { limit: 0, ascending: true });
    expect(batches.length).toBeGreaterThan(0);
    for (const batch of batches) expect(batch.endTime).not.toBeNull();
    const ids = batches.map((batch) => batch.batchId);
    expect(ids).toEqual([...ids].sort((a, b) => (a < b ? -1 : 1)));

    expect(await mirror.stop()).toBe('stopped');
    const slot = await source.client.query<{ confirmed: string; checkpoint: string }>(
      `SELECT (confirmed_flush_lsn - '0/0')::text AS confirmed FROM pg_replication_slots WHERE slot_name = $1`,
      [defaultSlotName(spec.name, await harness.catalog.installationId())],
    );
    const checkpoint = await destination.client.query<{ lsn: string }>(
      `SELECT lsn::text FROM _tributary.checkpoints WHERE mirror = $1`,
      [spec.name],
    );
    // The slot never confirms past what the destination holds... unless idle
    // keepalives moved it on with nothing pending, which only moves it forward.
    expect(BigInt(slot.rows[0]?.confirmed ?? '0')).toBeGreaterThanOrEqual(
      BigInt(checkpoint.rows[0]?.lsn ?? '0'),
    );
    await dropMirror(harness, spec);
  });

  it('keeps unchanged TOAST values and honours exclusions, soft delete and synced-at', async () => {
    const { source, destination } = harness;
    await source.client.query(`CREATE TABLE docs (id int PRIMARY KEY, title text, body text, secret text)`);
    // EXTERNAL storage keeps long values out of line (TOASTed) and uncompressed.
    await source.client.query(`ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL`);
    await source.client.query(
      `INSERT INTO docs SELECT g, 'title ' || g, (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400)), 's' FROM generate_series(1, 3) g`,
    );
    const toastTable = await source.client.query<{ name: string }>(
      `SELECT reltoastrelid::regclass::text AS name FROM pg_class WHERE oid = 'docs'::regclass`,
    );
    const toastedChunks = await source.client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${toastTable.rows[0]?.name}`,
    );
    expect(toastedChunks.rows[0]?.n).toBeGreaterThan(0);
    const spec: SpecInput = {
      name: `toast-${randomSuffix()}`,
      tableMappings: [mapping('docs', ['secret'])],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      softDeleteColName: '_deleted',
      syncedAtColName: '_synced_at',
    };
    const mirror = startMirror(harness, spec);
    await expectSameRows(harness, 'docs', { columns: 'id, title, body' });
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );

    await source.client.query(`UPDATE docs SET title = 'changed' WHERE id = 1`);
    await source.client.query(`DELETE FROM docs WHERE id = 2`);
    // A new key, the TOASTed body not resent: it comes from the row under the old key.
    await source.client.query(`UPDATE docs SET id = 30 WHERE id = 3`);
    await waitFor(
      async () =>
        (await destination.client.query(`SELECT 1 FROM docs WHERE id IN (2, 3) AND _deleted`)).rowCount ===
          2 && (await destination.client.query(`SELECT 1 FROM docs WHERE id = 30`)).rowCount === 1,
      30_000,
      'soft deletes and the moved row',
    );
    const rows = await destination.client.query<{
      id: number;
      title: string;
      same_body: boolean;
      _deleted: boolean;
    }>(`SELECT d.id, d.title, d._deleted, d._synced_at IS NOT NULL AS synced FROM docs d ORDER BY id`);
    expect(rows.rows.map(({ id, title, _deleted }) => ({ id, title, _deleted }))).toEqual([
      { id: 1, title: 'changed', _deleted: false },
      { id: 2, title: 'title 2', _deleted: true },
      { id: 3, title: 'title 3', _deleted: true },
      { id: 30, title: 'title 3', _deleted: false },
    ]);
    for (const id of [1, 30]) {
      const sourceBody = await source.client.query<{ body: string }>(`SELECT body FROM docs WHERE id = $1`, [
        id,
      ]);
      const destinationBody = await destination.client.query<{ body: string }>(
        `SELECT body FROM docs WHERE id = $1`,
        [id],
      );
      expect(destinationBody.rows[0]?.body).toBe(sourceBody.rows[0]?.body);
      expect(destinationBody.rows[0]?.body.length).toBe(12_800);
    }
    const columns = await destination.client.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'docs' ORDER BY ordinal_position`,
    );
    expect(columns.rows.map((row) => row.column_name)).toEqual([
      'id',
      'title',
      'body',
      '_deleted',
      '_synced_at',
    ]);
    await mirror.stop();
    await dropMirror(harness, spec);
  });

  it('adds a column that appears at the source without a restart', async () => {
    const { source, destination } = harness;
    await source.client.query(`CREATE TABLE evolving (id int PRIMARY KEY, a text)`);
    const spec: SpecInput = {
      name: `ddl-${randomSuffix()}`,
      tableMappings: [mapping('evolving')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );
    await source.client.query(`INSERT INTO evolving VALUES (1, 'before')`);
    await source.client.query(`ALTER TABLE evolving ADD COLUMN b numeric(8,3)`);
    await source.client.query(`INSERT INTO evolving VALUES (2, 'after', 12.5)`);
    await expectSameRows(harness, 'evolving');
    // A dropped column is dropped and a widened type widened (schemaChanges: apply, the default), and logged.
    await source.client.query(`ALTER TABLE evolving DROP COLUMN a`);
    await source.client.query(`ALTER TABLE evolving ALTER COLUMN b TYPE numeric(10,3)`);
    await source.client.query(`INSERT INTO evolving VALUES (3, 1234567.25)`);
    await expectSameRows(harness, 'evolving');
    const columns = await destination.client.query<{ column: string }>(
      `SELECT attname || ' ' || format_type(atttypid, atttypmod) AS column FROM pg_attribute
       WHERE attrelid = 'evolving'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    );
    expect(columns.rows.map((row) => row.column)).toEqual(['id integer', 'b numeric(10,3)']);
    const logs = await harness.catalog.listLogs({ mirror: spec.name, offset: 0, limit: 50 });
    expect(logs.entries.map((entry) => entry.message)).toEqual(
      expect.arrayContaining([
        'public.evolving follows its schema change at the destination: column b added',
        // Both changes come before the next row: one Relation message, one alteration.
        'public.evolving follows its schema change at the destination: column a dropped, column b changed type',
      ]),
    );
    await mirror.stop();
    await dropMirror(harness, spec);
  });

  it('pauses at a batch boundary under load and resumes without loss or duplicates', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE ticks (id bigint PRIMARY KEY, n int NOT NULL)`);
    const spec: SpecInput = {
      name: `pause-${randomSuffix()}`,
      tableMappings: [mapping('ticks')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      maxBatchSize: 500,
    };
    let mirror = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );
    let next = 1;
    const write = async (count: number) => {
      for (let i = 0; i < count; i++, next++) {
        await source.client.query(`INSERT INTO ticks VALUES ($1, 0)`, [next]);
        if (next % 7 === 0) await source.client.query(`UPDATE ticks SET n = n + 1 WHERE id = $1`, [next - 3]);
      }
    };
    await write(300);
    const writing = write(700);
    await mirror.stop();
    await writing;
    mirror = startMirror(harness, spec);
    await write(200);
    await expectSameRows(harness, 'ticks');
    await mirror.stop();
    await dropMirror(harness, spec);
  });

  // The engine's own doing, the same on every major: run on the shared server only.
  it.skipIf(sourcePostgres !== postgres)(
    'with streaming, writes each commit without waiting for the idle timeout',
    async () => {
      const { source, destination } = harness;
      await source.client.query(`CREATE TABLE live (id int PRIMARY KEY, v text)`);
      // An hour of idle timeout: without streaming nothing below would arrive
      // before the waits give up.
      const spec: SpecInput = {
        name: `live-${randomSuffix()}`,
        tableMappings: [mapping('live')],
        doInitialSnapshot: false,
        idleTimeoutSeconds: 3600,
        streaming: true,
      };
      const mirror = startMirror(harness, spec);
      try {
        await waitFor(
          async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
          30_000,
          'running',
        );
        for (let id = 1; id <= 20; id++) {
          await source.client.query(`INSERT INTO live VALUES ($1, $2)`, [id, `v${id}`]);
          // Each commit on its own, seen at the destination before the next is made.
          await waitFor(
            async () =>
              (await destination.client.query(`SELECT 1 FROM live WHERE id = $1`, [id])).rowCount === 1,
            30_000,
            `row ${id}`,
          );
        }
        await source.client.query(`BEGIN`);
        await source.client.query(`UPDATE live SET v = 'changed' WHERE id <= 10`);
        await source.client.query(`DELETE FROM live WHERE id > 15`);
        await source.client.query(`COMMIT`);
        await expectSameRows(harness, 'live', { timeoutMs: 30_000 });
        // One batch per commit seen above (20 inserts, then the update and delete).
        const { total } = await harness.catalog.listBatches(spec.name, { limit: 0, ascending: true });
        expect(total).toBeGreaterThanOrEqual(21);
      } finally {
        expect(await mirror.stop()).toBe('stopped');
      }
      await dropMirror(harness, spec);
    },
  );

  // The engine's own doing, the same on every major, and the longest test here:
  // run on the shared server only.
  it.skipIf(sourcePostgres !== postgres)(
    'pauses during the initial load and loads again on resume',
    async () => {
      const { source } = harness;
      await source.client.query(`CREATE TABLE paused_load (id int PRIMARY KEY, v text)`);
      await source.client.query(
        `INSERT INTO paused_load SELECT g, repeat('y', 100) FROM generate_series(1, 200000) g`,
      );
      await source.client.query(`ANALYZE paused_load`);
      const spec: SpecInput = {
        name: `pload-${randomSuffix()}`,
        tableMappings: [mapping('paused_load')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        snapshotNumRowsPerPartition: 5_000,
        snapshotMaxParallelWorkers: 1,
      };
      const first = startMirror(harness, spec);
      await waitFor(
        async () =>
          ((await harness.catalog.listSnapshotProgress(spec.name))[0]?.partitionsCompleted ?? 0) >= 1,
        30_000,
        'a partition',
      );
      expect(await first.stop()).toBe('stopped');
      const second = startMirror(harness, spec);
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
        60_000,
        'running',
      );
      await expectSameRows(harness, 'paused_load');
      await second.stop();
      await dropMirror(harness, spec);
    },
  );

  it('loads a table added by an edit under concurrent writes, and stops replicating a removed one', async () => {
    const { source, destination } = harness;
    await source.client.query(`CREATE TABLE first_table (id int PRIMARY KEY, v int)`);
    await source.client.query(`CREATE TABLE added_table (id int PRIMARY KEY, v int)`);
    await source.client.query(`INSERT INTO first_table SELECT g, g FROM generate_series(1, 100) g`);
    await source.client.query(`INSERT INTO added_table SELECT g, g FROM generate_series(1, 20000) g`);
    const spec: SpecInput = {
      name: `edit-${randomSuffix()}`,
      tableMappings: [mapping('first_table')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      snapshotNumRowsPerPartition: 2_000,
    };
    const first = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      20_000,
      'running',
    );
    await expectSameRows(harness, 'first_table');
    expect(await first.stop()).toBe('stopped');

    // Changes made while the mirror is stopped, then during its restart.
    await source.client.query(`UPDATE added_table SET v = -v WHERE id <= 100`);
    let writing = true;
    const writer = (async () => {
      for (let id = 20_001; writing; id++) {
        await source.client.query(`INSERT INTO added_table VALUES ($1, $1)`, [id]);
        await source.client.query(`UPDATE added_table SET v = v + 1 WHERE id = $1`, [id - 19_000]);
      }
    })();
    const edited: SpecInput = { ...spec, tableMappings: [mapping('first_table'), mapping('added_table')] };
    const second = startMirror(harness, edited);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      60_000,
      'running',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    writing = false;
    await writer;
    await expectSameRows(harness, 'added_table', { timeoutMs: 60_000 });
    await source.client.query(`UPDATE first_table SET v = 0 WHERE id = 1`);
    await expectSameRows(harness, 'first_table');
    expect(await second.stop()).toBe('stopped');

    // Removing first_table: its later changes stay at the source only.
    const trimmed: SpecInput = { ...spec, tableMappings: [mapping('added_table')] };
    const third = startMirror(harness, trimmed);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      20_000,
      'running',
    );
    await source.client.query(`UPDATE first_table SET v = 12345 WHERE id = 2`);
    await source.client.query(`UPDATE added_table SET v = 777 WHERE id = 1`);
    await expectSameRows(harness, 'added_table');
    expect((await destination.client.query(`SELECT v FROM first_table WHERE id = 2`)).rows[0]).toEqual({
      v: 2,
    });
    const publication = defaultPublicationName(spec.name, await harness.catalog.installationId());
    const published = await source.client.query(
      `SELECT tablename FROM pg_publication_tables WHERE pubname = $1`,
      [publication],
    );
    expect(published.rows).toEqual([{ tablename: 'added_table' }]);
    await third.stop();
    await dropMirror(harness, trimmed);
  });

  it('runs an initial-load-only mirror to completion and leaves no slot behind', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE once (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO once SELECT g, 'v' || g FROM generate_series(1, 1000) g`);
    const spec: SpecInput = {
      name: `once-${randomSuffix()}`,
      tableMappings: [mapping('once')],
      doInitialSnapshot: true,
      initialSnapshotOnly: true,
    };
    const mirror = startMirror(harness, spec);
    expect(await mirror.done).toBe('completed');
    await expectSameRows(harness, 'once');
    expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('completed');
    const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
    expect(
      (await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [slotName]))
        .rowCount,
    ).toBe(0);
    expect(
      (await source.client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [slotName])).rowCount,
    ).toBe(0);
    // Running it again does not load again.
    await source.client.query(`INSERT INTO once VALUES (1001, 'late')`);
    expect(await startMirror(harness, spec).done).toBe('completed');
    expect((await harness.destination.client.query(`SELECT count(*)::int AS n FROM once`)).rows[0]).toEqual({
      n: 1000,
    });
  });

  it('drops the slot and the publication it created, and keeps the tables', async () => {
    const { source, destination } = harness;
    await source.client.query(`CREATE TABLE kept (id int PRIMARY KEY)`);
    await source.client.query(`INSERT INTO kept VALUES (1)`);
    const spec: SpecInput = {
      name: `drop-${randomSuffix()}`,
      tableMappings: [mapping('kept')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec);
    await expectSameRows(harness, 'kept');
    await mirror.stop();
    const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
    expect(
      (await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [slotName]))
        .rowCount,
    ).toBe(1);
    await dropMirror(harness, spec);
    expect(
      (await source.client.query(`SELECT 1 FROM pg_replication_slots WHERE slot_name = $1`, [slotName]))
        .rowCount,
    ).toBe(0);
    expect(
      (await source.client.query(`SELECT 1 FROM pg_publication WHERE pubname = $1`, [slotName])).rowCount,
    ).toBe(0);
    expect((await destination.client.query(`SELECT count(*)::int AS n FROM kept`)).rows[0]).toEqual({ n: 1 });
    expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('terminated');
  });

  it('starts a mirror created again under a dropped name clean, with the old logs kept apart', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE reborn (id int PRIMARY KEY)`);
    await source.client.query(`INSERT INTO reborn VALUES (1)`);
    const spec: SpecInput = {
      name: `reborn-${randomSuffix()}`,
      tableMappings: [mapping('reborn')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const first = startMirror(harness, spec);
    await expectSameRows(harness, 'reborn');
    await first.stop();
    await dropMirror(harness, spec);
    const second = startMirror(harness, spec);
    try {
      await source.client.query(`INSERT INTO reborn VALUES (2)`);
      await expectSameRows(harness, 'reborn');
      const logs = await harness.catalog.listLogs({ mirror: spec.name, offset: 0, limit: 1000 });
      expect(logs.entries.some((entry) => entry.message.startsWith('mirror dropped'))).toBe(false);
      expect(logs.entries.every((entry) => entry.incarnation === 0)).toBe(true);
      const old = await harness.catalog.listLogs({
        mirror: spec.name,
        incarnation: 1,
        offset: 0,
        limit: 1000,
      });
      expect(old.entries[0]?.message).toMatch(/^mirror dropped/);
    } finally {
      await second.stop();
    }
  });

  it('records each batch from its first change LSN to its last commit, in order', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE lsn_ticks (id int PRIMARY KEY)`);
    const spec: SpecInput = {
      name: `lsn-${randomSuffix()}`,
      tableMappings: [mapping('lsn_ticks')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
      maxBatchSize: 2,
    };
    const mirror = startMirror(harness, spec);
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
        30_000,
        'mirror running',
      );
      // One-row transactions fill a 2-row batch inside the next transaction.
      for (let id = 1; id <= 15; id++) await source.client.query(`INSERT INTO lsn_ticks VALUES ($1)`, [id]);
      await source.client.query(`INSERT INTO lsn_ticks SELECT g FROM generate_series(16, 24) g`);
      await expectSameRows(harness, 'lsn_ticks');
      await waitFor(
        async () => {
          const { batches } = await harness.catalog.listBatches(spec.name, { limit: 0, ascending: true });
          return batches.length > 0 && batches.every((batch) => batch.endTime !== null);
        },
        30_000,
        'batches finished',
      );
      const { batches } = await harness.catalog.listBatches(spec.name, { limit: 0, ascending: true });
      expect(batches.length).toBeGreaterThan(10);
      let previousEnd = 0n;
      for (const batch of batches) {
        expect(batch.startLsn, `batch ${batch.batchId} start`).toBeGreaterThan(0n);
        expect(batch.endLsn, `batch ${batch.batchId} end`).toBeGreaterThanOrEqual(batch.startLsn);
        expect(batch.endLsn, `batch ${batch.batchId} after the previous one`).toBeGreaterThanOrEqual(
          previousEnd,
        );
        previousEnd = batch.endLsn;
      }
    } finally {
      await mirror.stop();
    }
  });
});

describe('PostgreSQL to PostgreSQL value round trip', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('p2ptypes');
    await harness.source.client.query(`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`);
    await harness.source.client.query(`CREATE DOMAIN positive_int AS int CHECK (VALUE > 0)`);
  });

  afterAll(async () => {
    await harness?.close();
  });

  const columns = `
    id int PRIMARY KEY, i2 smallint, i8 bigint, num numeric, num_scaled numeric(30,10), f4 real, f8 double precision,
    b boolean, t text, c char(5), vc varchar(20), by bytea, u uuid, j json, jb jsonb, d date, tm time, ttz timetz,
    ts timestamp, tstz timestamptz, iv interval, ia int[], ta text[], nested int[][], e mood, dom positive_int,
    ip inet, net cidr, mac macaddr, hs hstore, pt point, bx box, m money, bt bit(4), vb varbit, x xml`;
  const values = `
    (1, -32768, 9223372036854775807, 123456789012345678901234567890.123456789, -1.5, 'NaN', 'Infinity',
     true, E'multi\\nline\\ttab \\\\ "quoted"', 'ab', 'varchar', '\\xdeadbeef', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
     '{"big": 12345678901234567890}', '{"a": [1, 2, {"b": null}]}', '2024-02-29', '23:59:59.999999', '12:00:00+05:30',
     '2024-01-01 12:34:56.123456', '1999-12-31 23:59:59.5+02', '1 year 2 mons 3 days 04:05:06.789',
     '{1,NULL,3}', '{"a,b","NULL",NULL,"q\\"uote"}', '{{1,2},{3,4}}', 'happy', 7,
     '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', 'a=>1, "b c"=>NULL', '(1.5,-2)', '((0,0),(1,1))', '12.34',
     B'1010', B'10101', '<a>x</a>'),
    (2, NULL, -9223372036854775808, 'NaN', 0, '-Infinity', -0.0, false, '', NULL, NULL, '\\x', NULL, 'null', '[]',
     '0044-03-15 BC', '00:00:00', NULL, 'infinity', '-infinity', '-1 days +02:03:00', '{}', '{}', NULL, 'sad', 1,
     '::1', '::/0', NULL, '', NULL, NULL, '-0.01', B'0000', B'', NULL)`;

  const columnNames =
    'id, i2, i8, num, num_scaled, f4, f8, b, t, c, vc, by, u, j, jb, d, tm, ttz, ts, tstz, iv, ia, ta, nested, e, dom, ip, net, mac, hs, pt, bx, m, bt, vb, x';

  for (const system of ['PG', 'Q'] as const) {
    it(`copies and streams every supported type exactly (system ${system})`, async () => {
      const table = `types_${system.toLowerCase()}`;
      await harness.source.client.query(`CREATE TABLE ${table} (${columns})`);
      await harness.source.client.query(`INSERT INTO ${table} VALUES ${values}`);
      const spec: SpecInput = {
        name: `types-${system.toLowerCase()}-${randomSuffix()}`,
        tableMappings: [mapping(table)],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        system,
      };
      const mirror = startMirror(harness, spec);
      // System Q keeps extension types such as hstore as their text.
      const compared = system === 'Q' ? { columns: columnNames.replace(' hs,', ' hs::text AS hs,') } : {};
      await expectSameRows(harness, table, compared);
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
        10_000,
        'running',
      );
      // The same values again, now through pgoutput instead of COPY.
      await harness.source.client.query(
        `INSERT INTO ${table} SELECT id + 10, ${columnNames.replace('id, ', '')} FROM ${table}`,
      );
      await harness.source.client.query(`UPDATE ${table} SET t = t || '!' WHERE id = 1`);
      await expectSameRows(harness, table, compared);
      await mirror.stop();
      await dropMirror(harness, spec);
    });
  }
});
