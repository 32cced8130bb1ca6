// The PostgreSQL destination COPYs a table's rows straight into it when the
// batch only inserts into that table, and falls back to the staged upsert when
// a key is there already (engine/src/connectors/postgres/destination.ts,
// #copyNewRows). Both ways leave the same rows and the checkpoint.
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresDestination } from '../../engine/src/connectors/postgres/destination.ts';
import type { ChangeBatch, DestinationTable, RowChange } from '../../engine/src/connectors/records.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { idTextTable } from '../support/id-text-table.ts';

const mirror = 'new-rows';
const transaction = { xid: 7, commitLsn: 4096n, commitTimeMicros: 0n };

const insert = (id: number, v: string | null): RowChange => ({
  kind: 'insert',
  transaction,
  newRow: [String(id), v],
});

function batch(target: DestinationTable, batchId: bigint, changes: RowChange[]): ChangeBatch {
  return {
    mirror,
    batchId,
    endLsn: 4097n + batchId,
    tables: [{ table: target, changes }],
    rowCount: changes.length,
  };
}

describe('PostgreSQL destination: batches that only insert', () => {
  let database: TestDatabase;
  const logLines: string[] = [];
  let destination: PostgresDestination;

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
    await destination.syncBatch(batch(target, 1n, [insert(1, 'a'), insert(2, 'tab\there'), insert(3, null)]));
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
    await destination.syncBatch(batch(target, 2n, [insert(1, 'a'), insert(2, 'b'), insert(3, 'c')]));
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
    await destination.syncBatch(batch(target, 3n, [insert(1, 'first'), insert(2, 'b'), insert(1, 'second')]));
    expect(await rows('twice')).toEqual([
      { id: '1', v: 'second' },
      { id: '2', v: 'b' },
    ]);
    expect(fellBack()).toHaveLength(before + 1);
  });

  it('a batch that fails after the COPY leaves neither its rows nor its checkpoint', async () => {
    const target = idTextTable('undone');
    await destination.setupTables([target]);
    // A second table the batch cannot write: the COPY into the first succeeds, then the batch fails.
    const missing = idTextTable('not_there');
    const failing: ChangeBatch = {
      ...batch(target, 4n, [insert(1, 'a')]),
      tables: [
        { table: target, changes: [insert(1, 'a')] },
        { table: missing, changes: [insert(1, 'x')] },
      ],
    };
    await expect(destination.syncBatch(failing)).rejects.toMatchObject({ kind: 'schema_mismatch' });
    expect(await rows('undone')).toEqual([]);
    expect(await destination.readCheckpoint(mirror)).toEqual({ batchId: 3n, lsn: 4100n });
  });
});
