// The PostgreSQL destination holds a table's changes of a batch as COPY text
// (changeBuffer, table-changes.ts). The rows inserted before any other change
// are COPYed straight into the table, falling back to a staged upsert when a
// key is there already (engine/src/connectors/postgres/destination/destination.ts,
// #writeNewRows); the table's later changes are applied after them, a row
// moved to a new key keeping the TOASTed values its change did not resend
// (#fillMoves). Every way leaves the same rows and the checkpoint.
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination/destination.ts';
import type { PostgresTableChanges } from '../../engine/src/connectors/postgres/destination/table-changes.ts';
import {
  type ChangeBatch,
  type DestinationTable,
  type RowChange,
  unchangedToast,
} from '../../engine/src/connectors/records.ts';
import { rowOfCells } from '../../engine/src/connectors/rows.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { idTextTable } from '../support/id-text-table.ts';

const mirror = 'new-rows';
const transaction = { xid: 7, commitLsn: 4096n, commitTimeMicros: 0n };

type Row = [id: number, v: string | null];

describe('PostgreSQL destination: rows a batch inserts', () => {
  let database: TestDatabase;
  const logLines: string[] = [];
  let destination: PostgresDestination;

  /** Inserts of `rows`, then `changes`, as the pipeline hands them over: in the destination's own buffer. */
  const held = (
    target: DestinationTable,
    rows: readonly Row[],
    changes: RowChange[] = [],
  ): PostgresTableChanges => {
    const buffer = destination.changeBuffer(target);
    for (const [id, v] of rows)
      buffer.add({ kind: 'insert', transaction, newRow: rowOfCells([String(id), v]) });
    for (const change of changes) buffer.add(change);
    return buffer;
  };
  const batch = (
    target: DestinationTable,
    batchId: bigint,
    newRows: readonly Row[],
    changes: RowChange[] = [],
  ): ChangeBatch<PostgresTableChanges> => ({
    mirror,
    batchId,
    endLsn: 4097n + batchId,
    tables: [{ table: target, held: held(target, newRows, changes) }],
    rowCount: newRows.length + changes.length,
  });

  beforeAll(async () => {
    database = await createTestDatabase('new_rows');
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    destination = new PostgresDestination(database.config, {
      system: 'PG',
      mirrorColumns: {},
      applicationName: 'tributary:new-rows',
      logger: pino({ level: 'info' }, sink),
    });
  });
  afterAll(async () => {
    await destination?.close();
    await database?.drop();
  });

  const rows = async (name: string) =>
    (await database.client.query(`SELECT id::text, v FROM ${name} ORDER BY id`)).rows;
  const fellBack = () => logLines.filter((line) => line.includes('already at the destination'));

  it('writes new rows into the table, escaped values and nulls included', async () => {
    const target = idTextTable('fresh');
    await destination.setupTables([target]);
    await destination.syncBatch(
      batch(target, 1n, [
        [1, 'a'],
        [2, 'tab\there'],
        [3, null],
      ]),
    );
    expect(await rows('fresh')).toEqual([
      { id: '1', v: 'a' },
      { id: '2', v: 'tab\there' },
      { id: '3', v: null },
    ]);
    expect(fellBack()).toEqual([]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 1n, lsn: 4098n });
  });

  it('upserts instead when a key is at the destination already, in the same transaction', async () => {
    const target = idTextTable('taken');
    await destination.setupTables([target]);
    await database.client.query(`INSERT INTO taken VALUES (2, 'written by someone else')`);
    await destination.syncBatch(
      batch(target, 2n, [
        [1, 'a'],
        [2, 'b'],
        [3, 'c'],
      ]),
    );
    expect(await rows('taken')).toEqual([
      { id: '1', v: 'a' },
      { id: '2', v: 'b' },
      { id: '3', v: 'c' },
    ]);
    expect(fellBack()).toHaveLength(1);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 2n, lsn: 4099n });
  });

  it('a key inserted twice in one batch (a source without a unique key) ends as its last row', async () => {
    const target = idTextTable('twice');
    await destination.setupTables([target]);
    const before = fellBack().length;
    await destination.syncBatch(
      batch(target, 3n, [
        [1, 'first'],
        [2, 'b'],
        [1, 'second'],
        [1, 'third'],
      ]),
    );
    expect(await rows('twice')).toEqual([
      { id: '1', v: 'third' },
      { id: '2', v: 'b' },
    ]);
    expect(fellBack()).toHaveLength(before + 1);
  });

  it('applies the table’s later changes after its new rows', async () => {
    const target = idTextTable('later');
    await destination.setupTables([target]);
    await destination.syncBatch(
      batch(
        target,
        4n,
        [
          [1, 'a'],
          [2, 'b'],
          [3, 'c'],
        ],
        [
          { kind: 'update', transaction, oldKey: null, newRow: rowOfCells(['1', 'a2']) },
          { kind: 'delete', transaction, oldKey: rowOfCells(['2', null]) },
          // Its TOASTed value did not change: the value just inserted stays.
          { kind: 'update', transaction, oldKey: null, newRow: rowOfCells(['3', unchangedToast]) },
          { kind: 'insert', transaction, newRow: rowOfCells(['4', 'd']) },
        ],
      ),
    );
    expect(await rows('later')).toEqual([
      { id: '1', v: 'a2' },
      { id: '3', v: 'c' },
      { id: '4', v: 'd' },
    ]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 4n, lsn: 4101n });
  });

  it('a batch that fails after the COPY leaves neither its rows nor its checkpoint', async () => {
    const target = idTextTable('undone');
    await destination.setupTables([target]);
    // A second table the batch cannot write: the COPY into the first succeeds, then the batch fails.
    const missing = idTextTable('not_there');
    const failing: ChangeBatch<PostgresTableChanges> = {
      ...batch(target, 5n, [[1, 'a']]),
      tables: [
        { table: target, held: held(target, [[1, 'a']]) },
        { table: missing, held: held(missing, [[1, 'x']]) },
      ],
    };
    await expect(destination.syncBatch(failing)).rejects.toMatchObject({ kind: 'schema_mismatch' });
    expect(await rows('undone')).toEqual([]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 4n, lsn: 4101n });
  });

  it('a row moved to a new key keeps the unchanged TOAST value of its row under the old key', async () => {
    const target = idTextTable('moved');
    await destination.setupTables([target]);
    await destination.syncBatch(
      batch(target, 10n, [
        [1, 'one'],
        [2, 'two'],
        [3, 'three'],
        [4, 'four'],
      ]),
    );
    const key = (id: number) => rowOfCells([String(id), null]);
    await destination.syncBatch(
      batch(
        target,
        11n,
        [],
        [
          // The old rows are in an earlier batch: only the destination holds their values.
          { kind: 'update', transaction, oldKey: key(1), newRow: rowOfCells(['10', unchangedToast]) },
          { kind: 'update', transaction, oldKey: key(2), newRow: rowOfCells(['20', unchangedToast]) },
          { kind: 'update', transaction, oldKey: key(20), newRow: rowOfCells(['30', unchangedToast]) },
          { kind: 'update', transaction, oldKey: key(4), newRow: rowOfCells(['40', 'sent']) },
        ],
      ),
    );
    expect(await rows('moved')).toEqual([
      { id: '10', v: 'one' },
      { id: '3', v: 'three' },
      { id: '30', v: 'two' },
      { id: '40', v: 'sent' },
    ]);
    expect(logLines.filter((line) => line.includes('written as null'))).toEqual([]);
  });

  it('stages new rows with a soft-delete or synced-at column, which the upsert sets', async () => {
    const withColumns = new PostgresDestination(database.config, {
      system: 'PG',
      mirrorColumns: { softDeleteColumn: 'gone', syncedAtColumn: 'synced' },
      applicationName: 'tributary:new-rows',
      logger: pino({ level: 'silent' }),
    });
    try {
      const target = idTextTable('marked');
      await withColumns.setupTables([target]);
      const buffer = withColumns.changeBuffer(target);
      buffer.add({ kind: 'insert', transaction, newRow: rowOfCells(['1', 'a']) });
      expect(buffer.newRows).toBeUndefined();
      expect(buffer.staged?.fold().upsertCount).toBe(1);
      await withColumns.syncBatch({
        mirror: 'marked',
        batchId: 1n,
        endLsn: 4097n,
        tables: [{ table: target, held: buffer }],
        rowCount: 1,
      });
      const marked = await database.client.query(
        `SELECT id::text, v, gone, synced IS NOT NULL AS synced FROM marked`,
      );
      expect(marked.rows).toEqual([{ id: '1', v: 'a', gone: false, synced: true }]);
    } finally {
      await withColumns.close();
    }
  });
});
