import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import type { LuaInput } from '../../scripting/lua-vm.ts';
import { type RecordScript, type ScriptMessage, scriptBatchRecords } from '../../scripting/record-script.ts';
import type { DestinationTable, SourceTransaction } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { type ChangeRecord, changeRecord, type TableFormat, tableFormat } from './message-format.ts';
import { luaRecord, recordSink } from './script-records.ts';

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
