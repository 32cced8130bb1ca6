// The PostgreSQL source against a real server: what it reads, and that driver
// errors on the paths the pipeline used to run itself (partition planning,
// partition copy, type lookup) leave it classified.
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyTextRowBatches } from '../../engine/src/connectors/copy-text.ts';
import { createSource } from '../../engine/src/connectors/registry.ts';
import type { Source } from '../../engine/src/connectors/source.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/databases.ts';
import { freePort } from '../support/engine-process.ts';

let database: TestDatabase;
let source: Source;

const items = { schema: 'public', table: 'items' };

/** Counts the rows of a COPY of `columns` of items. */
function countRows(columns: readonly string[]) {
  return async (copyText: Readable): Promise<number> => {
    let rows = 0;
    for await (const batch of copyTextRowBatches(copyText, { source: items, columns })) rows += batch.length;
    return rows;
  };
}

beforeAll(async () => {
  database = await createTestDatabase('pgsource');
  await database.client.query(`CREATE TABLE items (id int PRIMARY KEY, amount numeric(8,3))`);
  await database.client.query(`INSERT INTO items SELECT g, g FROM generate_series(1, 500) g`);
  source = createSource({ kind: 'relational', config: database.config }, { mirror: 'seam' });
});

afterAll(async () => {
  await source?.close();
  await database?.drop();
});

/** The walsender of a closed stream ends on its own time: its slot stays active until it has. */
function slotReleased(slotName: string): Promise<void> {
  return waitFor(
    async () =>
      (
        await database.client.query(
          `SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`,
          [slotName],
        )
      ).rowCount === 1,
    10_000,
    `${slotName} to be released`,
  );
}

describe('PostgreSQL source', () => {
  it('plans partitions and copies each under one reader', async () => {
    const partitions = await source.planPartitions({ schema: 'public', table: 'items' }, null, 100);
    expect(partitions.length).toBeGreaterThan(0);
    const reader = await source.openSnapshotReader(null);
    try {
      let total = 0;
      for (const partition of partitions) {
        total += await reader.copyPartition(
          { schema: 'public', table: 'items' },
          ['id', 'amount'],
          partition,
          countRows(['id', 'amount']),
        );
      }
      expect(total).toBe(500);
    } finally {
      await reader.close();
    }
  });

  it('classifies a missing table in partition planning and in a copy, and the reader stays usable', async () => {
    const missing = { schema: 'public', table: 'no_such_table' };
    await expect(source.planPartitions(missing, null, 100)).rejects.toMatchObject({
      name: 'EngineError',
      kind: 'source_schema',
    });
    const reader = await source.openSnapshotReader(null);
    try {
      await expect(
        reader.copyPartition(missing, ['id'], { fromPage: 0, toPage: null }, countRows(['id'])),
      ).rejects.toMatchObject({ name: 'EngineError', kind: 'source_schema' });
      // The failed partition was rolled back: the next one runs on the same connection.
      const rows = await reader.copyPartition(
        { schema: 'public', table: 'items' },
        ['id'],
        { fromPage: 0, toPage: null },
        countRows(['id']),
      );
      expect(rows).toBe(500);
    } finally {
      await reader.close();
    }
  });

  it('rolls back and reports a failed destination write, and the reader stays usable', async () => {
    const reader = await source.openSnapshotReader(null);
    const whole = { fromPage: 0, toPage: null };
    try {
      const failure = new Error('destination gone');
      const thrown = await reader
        .copyPartition(items, ['id'], whole, async (rows) => {
          await countRows(['id'])(rows);
          throw failure;
        })
        .catch((error: unknown) => error);
      // The write's error is the destination's, not the source's.
      expect(thrown).toMatchObject({ name: 'EngineError', kind: 'destination_write', cause: failure });
      expect((thrown as Error).message).toMatch(/^destination: initial load of public\.items/);
      expect(await reader.copyPartition(items, ['id'], whole, countRows(['id']))).toBe(500);
    } finally {
      await reader.close();
    }
  });

  it('reports the write’s own error when it stops reading part way (its loop left on a full disk)', async () => {
    const reader = await source.openSnapshotReader(null);
    const whole = { fromPage: 0, toPage: null };
    try {
      // Rows enough that the COPY is still running when the write gives up.
      await database.client.query(
        `CREATE TABLE bulk AS SELECT g AS id, repeat('x', 200) AS v FROM generate_series(1, 200000) g`,
      );
      const full = Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
      const thrown = await reader
        .copyPartition({ schema: 'public', table: 'bulk' }, ['id', 'v'], whole, async (rows) => {
          // As the Snowflake destination streams a partition to its batch file:
          // the file's write fails, pipeline() ends the generator reading the COPY.
          await pipeline(
            Readable.from(
              (async function* () {
                for await (const batch of copyTextRowBatches(rows, { source: items, columns: ['id', 'v'] })) {
                  yield `${batch.length}\n`;
                }
              })(),
            ),
            new Writable({
              write(_chunk, _encoding, callback) {
                callback(full);
              },
            }),
          );
          return 0;
        })
        .catch((error: unknown) => error);
      expect(thrown).toMatchObject({ kind: 'engine_resource' });
      expect((thrown as Error).message).toMatch(/^destination: initial load of public\.bulk/);
      expect(await reader.copyPartition(items, ['id'], whole, countRows(['id']))).toBe(500);
    } finally {
      await reader.close();
    }
  });

  it('gives up a COPY its write never read, at once, and the reader stays usable', async () => {
    const reader = await source.openSnapshotReader(null);
    const whole = { fromPage: 0, toPage: null };
    try {
      // A destination that cannot open its batch file throws before it reads a
      // row: the ROLLBACK must not queue behind the unread COPY.
      const refused = new Error('cannot create the batch file');
      const thrown = await reader
        .copyPartition(items, ['id'], whole, async () => {
          throw refused;
        })
        .catch((error: unknown) => error);
      expect(thrown).toMatchObject({ kind: 'destination_write', cause: refused });
      // One that returns without reading is a bug to report, not a wait.
      const returned = await reader
        .copyPartition(items, ['id'], whole, async () => 0)
        .catch((error: unknown) => error);
      expect(returned).toMatchObject({ kind: 'internal' });
      expect((returned as Error).message).toMatch(/returned before reading its rows to the end/);
      expect(await reader.copyPartition(items, ['id'], whole, countRows(['id']))).toBe(500);
    } finally {
      await reader.close();
    }
  });

  it('looks up type names, and classifies a refused connection', async () => {
    expect(await source.typeNames([{ typeOid: 1700, typeModifier: (8 << 16) + 3 + 4 }])).toEqual([
      'numeric(8,3)',
    ]);
    const unreachable = createSource(
      { kind: 'relational', config: { ...database.config, host: '127.0.0.1', port: await freePort() } },
      { mirror: 'seam' },
    );
    try {
      await expect(unreachable.typeNames([{ typeOid: 23, typeModifier: -1 }])).rejects.toMatchObject({
        kind: 'connection',
      });
    } finally {
      await unreachable.close();
    }
  });
  it('leaves out the changes of an interrupted transaction below the given LSN, and nothing else', async () => {
    const { client } = database;
    await client.query(`CREATE TABLE resumed (id int PRIMARY KEY)`);
    await client.query(`CREATE PUBLICATION resumed_pub FOR TABLE resumed`);
    await client.query(`SELECT pg_create_logical_replication_slot('resumed_slot', 'pgoutput')`);
    await client.query(`INSERT INTO resumed VALUES (0)`);
    await client.query(`INSERT INTO resumed SELECT generate_series(1, 50)`);

    /** Every event up to the second commit, as [tag, walStart, id of a row]. */
    const read = async (skipBefore?: { commitLsn: bigint; changeLsn: bigint }) => {
      const stream = await source.openStream({
        slotName: 'resumed_slot',
        publicationName: 'resumed_pub',
        startLsn: 0n,
        skipBefore,
      });
      const seen: { tag: string; lsn: bigint; id?: unknown; finalLsn?: bigint }[] = [];
      try {
        let commits = 0;
        for await (const events of stream.events()) {
          for (const event of events) {
            if (event.tag !== 'change') continue;
            const { message } = event;
            seen.push({
              tag: message.tag,
              lsn: event.walStart,
              ...(message.tag === 'insert' ? { id: message.newTuple.cell(0) } : {}),
              ...(message.tag === 'begin' ? { finalLsn: message.finalLsn } : {}),
            });
            if (message.tag === 'commit') commits++;
          }
          if (commits === 2) break;
        }
      } finally {
        await stream.close();
      }
      return seen;
    };
    const released = () => slotReleased('resumed_slot');
    const everything = await read();
    const inserts = everything.filter((event) => event.tag === 'insert');
    expect(inserts).toHaveLength(51);
    const second = everything.filter((event) => event.tag === 'begin')[1];
    const cut = inserts[31];
    if (!second?.finalLsn || !cut) throw new Error('the transactions were not read');

    await released();
    const resumed = await read({ commitLsn: second.finalLsn, changeLsn: cut.lsn });
    // The first transaction whole, the second from the change at the cut on.
    expect(resumed.filter((event) => event.tag === 'insert').map((event) => event.id)).toEqual([
      '0',
      ...inserts.slice(31).map((event) => event.id),
    ]);
    expect(resumed.map((event) => event.tag).filter((tag) => tag !== 'insert')).toEqual(
      everything.map((event) => event.tag).filter((tag) => tag !== 'insert'),
    );
    await released();
    await client.query(`SELECT pg_drop_replication_slot('resumed_slot')`);
  });

  it('streams a backlog larger than what it holds unread to a slow reader, whole and in order', async () => {
    const { client } = database;
    await client.query(`CREATE TABLE backlog (id int PRIMARY KEY, note text)`);
    await client.query(`CREATE PUBLICATION backlog_pub FOR TABLE backlog`);
    await client.query(`SELECT pg_create_logical_replication_slot('backlog_slot', 'pgoutput')`);
    // Five times the 4,096 events the stream holds before it pauses the socket.
    const rowCount = 20_000;
    await client.query(
      `INSERT INTO backlog SELECT g, 'row ' || g || E'\\t' || repeat('x', g % 50) FROM generate_series(1, $1) g`,
      [rowCount],
    );
    const stream = await source.openStream({
      slotName: 'backlog_slot',
      publicationName: 'backlog_pub',
      startLsn: 0n,
    });
    const ids: number[] = [];
    let notesRight = true;
    try {
      for await (const events of stream.events()) {
        for (const event of events) {
          if (event.tag !== 'change' || event.message.tag !== 'insert') continue;
          const [id, note] = event.message.newTuple.cells().map(String);
          ids.push(Number(id));
          notesRight &&= note === `row ${id}\t${'x'.repeat(Number(id) % 50)}`;
        }
        if (ids.length === rowCount) break;
        // A reader slower than the server: the socket pauses while events wait.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      await stream.close();
    }
    expect(ids).toEqual(Array.from({ length: rowCount }, (_, index) => index + 1));
    expect(notesRight).toBe(true);
    await slotReleased('backlog_slot');
    await client.query(`SELECT pg_drop_replication_slot('backlog_slot')`);
  });

  it("ends the stream with the server's error of START_REPLICATION, classified", async () => {
    const stream = await source.openStream({
      slotName: 'no_such_slot',
      publicationName: 'no_such_pub',
      startLsn: 0n,
    });
    try {
      const reading = (async () => {
        for await (const _events of stream.events()) {
          // Nothing can arrive from a slot that does not exist.
        }
      })();
      // The server's error (42704, the slot does not exist) reaches the reader classified.
      await expect(reading).rejects.toMatchObject({ name: 'EngineError', kind: 'slot_invalidated' });
    } finally {
      await stream.close();
    }
  });
});
