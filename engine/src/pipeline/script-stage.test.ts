import { Readable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { typedColumn } from '../../../test/support/text-table.ts';
import { MemoryDestination } from '../connectors/memory/destination.ts';
import {
  type ChangeBatch,
  ChangeList,
  type DestinationTable,
  type RowChange,
  type SourceTransaction,
  unchangedToast,
} from '../connectors/records.ts';
import { rowOfCells } from '../connectors/rows.ts';
import { EngineError } from '../errors.ts';
import { changeRecord, ScriptStage } from './script-stage.ts';

const logger = pino({ level: 'silent' });
const table: DestinationTable = {
  source: { schema: 'public', table: 'orders' },
  destination: { schema: 'public', table: 'orders' },
  columns: [typedColumn('id', 23), typedColumn('email', 25), typedColumn('status', 25)],
  keyColumns: ['id'],
};
const transaction: SourceTransaction = {
  xid: 9,
  commitLsn: 0x1a2b3c8n,
  commitTimeMicros: 1_700_000_000_123_456n,
};

const lowerAndDropTests = `
function onRecord(r)
  if r.row.status == 'test' then return nil end
  if r.new then r.new.email = string.lower(r.new.email) end
  return r.new or true
end`;

const stages: ScriptStage<ChangeList>[] = [];
afterEach(async () => {
  for (const stage of stages.splice(0)) await stage.close();
});

async function stage(source: string): Promise<{ stage: ScriptStage<ChangeList>; memory: MemoryDestination }> {
  const memory = new MemoryDestination();
  const scripted = new ScriptStage(memory, {
    script: { name: 'orders', lang: 'lua', source },
    logger,
    limits: { timeLimitMs: 500, memoryLimitBytes: 16 << 20 },
  });
  stages.push(scripted);
  await scripted.setupTables([table]);
  return { stage: scripted, memory };
}

function batch(batchId: bigint, changes: readonly RowChange[]): ChangeBatch<ChangeList> {
  return {
    mirror: 'm',
    batchId,
    endLsn: 0x2000n,
    tables: [{ table, held: ChangeList.of(changes) }],
    rowCount: changes.length,
  };
}

async function scriptError(run: () => Promise<unknown>): Promise<EngineError> {
  const error = await run().then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(EngineError);
  expect((error as EngineError).kind).toBe('script');
  return error as EngineError;
}

describe('ScriptStage', () => {
  it('holds a scripted mirror’s changes as objects, for the script to read at the write', async () => {
    const { stage: scripted } = await stage(lowerAndDropTests);
    expect(scripted.changeBuffer()).toBeInstanceOf(ChangeList);
  });

  it('changes values and drops rows of a batch, then stores its checkpoint', async () => {
    const { stage: scripted, memory } = await stage(lowerAndDropTests);
    await scripted.syncBatch(
      batch(1n, [
        { transaction, kind: 'insert', newRow: rowOfCells(['1', 'Ann@Example.COM', 'paid']) },
        { transaction, kind: 'insert', newRow: rowOfCells(['2', 'T@x', 'test']) },
        { transaction, kind: 'insert', newRow: rowOfCells(['3', 'Bo@X', 'open']) },
        { transaction, kind: 'update', oldKey: null, newRow: rowOfCells(['3', 'BO@Y', unchangedToast]) },
        { transaction, kind: 'delete', oldKey: rowOfCells(['1', null, null]) },
      ]),
    );
    expect(memory.rows('public.orders')).toEqual([['3', 'bo@y', 'open']]);
    expect(await memory.readCheckpoint('m')).toMatchObject({ batchId: 1n, lsn: 0x2000n });
  });

  it('stores the checkpoint of a batch whose every change was dropped', async () => {
    const { stage: scripted, memory } = await stage('function onRecord(r) return nil end');
    await scripted.syncBatch(
      batch(4n, [{ transaction, kind: 'insert', newRow: rowOfCells(['1', 'a', 'b']) }]),
    );
    expect(memory.rows('public.orders')).toEqual([]);
    expect(memory.appliedBatchIds).toEqual([4n]);
  });

  it('writes the initial load rows the script kept, as it changed them', async () => {
    const { stage: scripted, memory } = await stage(lowerAndDropTests);
    const lines = ['1\tA@B\tpaid\n', '2\tx\ttest\n', '3\tC\\tD@E\t\\N\n'];
    const written = await scripted.writeSnapshotPartition(
      table,
      Readable.from(lines.map((l) => Buffer.from(l))),
    );
    expect(written).toBe(2);
    expect(memory.rows('public.orders')).toEqual([
      ['1', 'a@b', 'paid'],
      ['3', 'c\td@e', null],
    ]);
  });

  it('fails with a script error on a new column, a changed key, or a changed delete', async () => {
    const adds = await stage(`function onRecord(r) r.new.extra = 'x' return r.new end`);
    expect(
      (
        await scriptError(() =>
          adds.stage.syncBatch(
            batch(1n, [{ transaction, kind: 'insert', newRow: rowOfCells(['1', 'a', 'b']) }]),
          ),
        )
      ).message,
    ).toBe(
      'script orders: onRecord set "extra", which is not a column of public.orders; a script cannot add columns',
    );
    const rekeys = await stage(`function onRecord(r) r.row.id = '99' return r.row end`);
    expect(
      (
        await scriptError(() =>
          rekeys.stage.syncBatch(
            batch(1n, [{ transaction, kind: 'insert', newRow: rowOfCells(['1', 'a', 'b']) }]),
          ),
        )
      ).message,
    ).toBe(
      "script orders: onRecord changed key column id of public.orders; a script cannot change a row's key",
    );
    const deletes = await stage(`function onRecord(r) r.row.email = 'x' return r.row end`);
    expect(
      (
        await scriptError(() =>
          deletes.stage.syncBatch(
            batch(1n, [{ transaction, kind: 'delete', oldKey: rowOfCells(['1', 'a', 'b']) }]),
          ),
        )
      ).message,
    ).toMatch(/changed a delete of public.orders; a script may keep it \(true\) or drop it \(nil\)/);
    expect(rekeys.memory.appliedBatchIds).toEqual([]);
  });

  it('fails an initial load partition with the script error, not the destination error', async () => {
    const { stage: scripted } = await stage(`function onRecord(r) error('boom') end`);
    const error = await scriptError(() =>
      scripted.writeSnapshotPartition(table, Readable.from([Buffer.from('1\ta\tb\n')])),
    );
    expect(error.message).toMatch(/^script orders failed in onRecord: orders:1: boom/);
  });
});

describe('changeRecord', () => {
  it('gives values as text, NULL as nil in Lua (json.null), and the transaction', () => {
    expect(
      changeRecord(table, {
        transaction,
        kind: 'update',
        oldKey: rowOfCells(['1', null, null]),
        newRow: rowOfCells(['2', null, unchangedToast]),
      }),
    ).toEqual({
      kind: 'update',
      source: { schema: 'public', table: 'orders' },
      target: 'public.orders',
      new: { id: '2', email: null },
      old: { id: '1' },
      row: { id: '2', email: null },
      key: '{"id":"2"}',
      checkpoint: 0x1a2b3c8n,
      lsn: '0/1A2B3C8',
      commit_time: '2023-11-14T22:13:20.123456Z',
      xid: 9,
      unchanged_columns: { status: true },
    });
  });
});
