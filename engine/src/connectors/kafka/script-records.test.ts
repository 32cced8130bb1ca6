import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import type { LuaInput } from '../../scripting/lua-vm.ts';
import { type RecordScript, type ScriptMessage, scriptBatchRecords } from '../../scripting/record-script.ts';
import { type DestinationTable, type SourceTransaction, unchangedToast } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { type TableFormat, tableFormat } from './message-format.ts';
import { type ChangeRecord, changeRecord, luaRecord, recordSink, snapshotRecord } from './script-records.ts';

const table: DestinationTable = {
  source: { schema: 'public', table: 'orders' },
  destination: { schema: 'public', table: 'orders' },
  columns: [typedColumn('id', 23), typedColumn('note', 25)],
  keyColumns: ['id'],
};
const transaction: SourceTransaction = { xid: 7, commitLsn: 0x10n, commitTimeMicros: 1_700_000_000_000_000n };
const format = tableFormat(table);

function insert(id: number): ChangeRecord {
  return changeRecord(format, { transaction, kind: 'insert', newRow: rowOfCells([String(id), 'n']) });
}

/** A script that answers each record with one message whose value is the row's id, counting its calls. */
function countingScript() {
  const runs: number[] = [];
  const script = {
    name: 'counting',
    transform: async (records: readonly LuaInput[]) => {
      runs.push(records.length);
      return records.map((record) => [
        { value: String((record as { row: { id: number } }).row.id) } satisfies ScriptMessage,
      ]);
    },
  } as unknown as RecordScript;
  return { script, runs };
}

describe('recordSink', () => {
  it('without a script delivers each record at once with no messages of its own', async () => {
    const delivered: (readonly ScriptMessage[] | undefined)[] = [];
    const sink = recordSink(undefined, (_format, _record, wanted) => {
      delivered.push(wanted);
      return undefined;
    });
    expect(sink.add(format, insert(1))).toBeUndefined();
    expect(delivered).toEqual([undefined]);
  });

  it('with a script crosses to it once per run and delivers in order', async () => {
    const { script, runs } = countingScript();
    const delivered: string[] = [];
    const sink = recordSink(script, (_format: TableFormat, _record, wanted) => {
      delivered.push(wanted?.[0]?.value ?? 'none');
      return undefined;
    });
    const total = scriptBatchRecords + 3;
    for (let id = 1; id <= total; id++) {
      const adding = sink.add(format, insert(id));
      if (adding) await adding;
    }
    expect(runs).toEqual([scriptBatchRecords]);
    await sink.flush();
    expect(runs).toEqual([scriptBatchRecords, 3]);
    expect(delivered).toEqual(Array.from({ length: total }, (_, index) => String(index + 1)));
  });
});

describe('luaRecord', () => {
  it('is the default message document with the script-only fields', () => {
    const record = luaRecord(insert(5)) as Record<string, unknown>;
    expect(record).toMatchObject({
      kind: 'insert',
      source: { schema: 'public', table: 'orders' },
      target: 'orders',
      new: { id: 5, note: 'n' },
      row: { id: 5, note: 'n' },
      key: '{"id":5}',
      checkpoint: 0x10n,
      lsn: '0/10',
      xid: 7,
      unchanged_columns: {},
    });
    expect(record.old).toBeUndefined();
  });
});

const orders: DestinationTable = {
  source: { schema: 'public', table: 'orders' },
  destination: { schema: 'sales', table: 'orders' },
  columns: [
    typedColumn('id', 20),
    typedColumn('region', 25),
    typedColumn('amount', 1700),
    typedColumn('doc', 3802),
  ],
  keyColumns: ['id', 'region'],
};

describe("a change's record", () => {
  const transaction: SourceTransaction = {
    xid: 901,
    commitLsn: 0x1_0000_00a0n,
    commitTimeMicros: 1_700_000_000_000_001n,
  };

  it("renders each change with its own transaction's LSN and commit time, transactions interleaved or not", () => {
    const format = tableFormat(orders);
    const later: SourceTransaction = {
      xid: 902,
      commitLsn: 0x2_0000_0010n,
      commitTimeMicros: 1_700_000_001_000_000n,
    };
    const insert = (of: SourceTransaction) =>
      changeRecord(format, { kind: 'insert', transaction: of, newRow: rowOfCells(['1', 'eu', '1.00', null]) })
        .document;
    for (const of of [transaction, transaction, later, transaction, later]) {
      expect(insert(of)).toMatchObject({
        xid: of.xid,
        lsn: of === transaction ? '1/A0' : '2/10',
        commit_time: of === transaction ? '2023-11-14T22:13:20.000001Z' : '2023-11-14T22:13:21Z',
      });
    }
  });

  it('describes each kind of change', () => {
    const format = tableFormat(orders);
    expect(format.topic).toBe('sales.orders');
    const snapshot = snapshotRecord(format, ['1', 'eu', '9.50', null]);
    expect(snapshot.key).toBe('{"id":"1","region":"eu"}');
    expect(snapshot.document).toEqual({
      kind: 'snapshot',
      source: { schema: 'public', table: 'orders' },
      target: 'sales.orders',
      lsn: null,
      commit_time: null,
      xid: null,
      old: null,
      new: { id: '1', region: 'eu', amount: '9.50', doc: null },
      unchanged_columns: [],
    });

    const update = changeRecord(format, {
      kind: 'update',
      transaction,
      oldKey: rowOfCells(['1', 'eu', null, null]),
      newRow: rowOfCells(['2', 'eu', '10.00', unchangedToast]),
    });
    expect(update.key).toBe('{"id":"2","region":"eu"}');
    expect(update.commitLsn).toBe(0x1_0000_00a0n);
    expect(update.document).toMatchObject({
      kind: 'update',
      lsn: '1/A0',
      commit_time: '2023-11-14T22:13:20.000001Z',
      xid: 901,
      old: { id: '1', region: 'eu' },
      new: { id: '2', region: 'eu', amount: '10.00' },
      unchanged_columns: ['doc'],
    });

    // REPLICA IDENTITY FULL: the whole old row.
    const fullDelete = changeRecord(format, {
      kind: 'delete',
      transaction,
      oldKey: rowOfCells(['3', 'us', '1.00', null]),
    });
    expect(fullDelete.document.old).toEqual({ id: '3', region: 'us', amount: '1.00', doc: null });
    expect(fullDelete.key).toBe('{"id":"3","region":"us"}');

    const truncate = changeRecord(format, { kind: 'truncate', transaction });
    expect(truncate.key).toBeNull();
    expect(truncate.document).toMatchObject({ kind: 'truncate', old: null, new: null });
  });

  it('leaves keyless tables without a message key', () => {
    const keyless = tableFormat({ ...orders, keyColumns: [] });
    expect(snapshotRecord(keyless, ['1', 'eu', '1', null]).key).toBeNull();
  });
});
