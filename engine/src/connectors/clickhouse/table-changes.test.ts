import { describe, expect, it } from 'vitest';
import { wireTuple } from '../../../../test/support/wire-tuple.ts';
import type { DestinationTable, RowChange, RowImage } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { ClickHouseTableChanges } from './table-changes.ts';

const transaction = { xid: 1, commitLsn: 100n, commitTimeMicros: 0n };
const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 't' },
  columns: [
    { name: 'id', typeOid: 23, typeModifier: -1, typeName: 'integer', notNull: true },
    { name: 'v', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false },
  ],
  keyColumns: ['id'],
};
const insert = (id: string, v: string | null): RowChange => ({
  transaction,
  kind: 'insert',
  newRow: rowOfCells([id, v]),
});
const update = (id: string, v: string): RowChange => ({
  transaction,
  kind: 'update',
  oldKey: null,
  newRow: rowOfCells([id, v]),
});
const truncate: RowChange = { transaction, kind: 'truncate' };

function held(changes: readonly RowChange[]): ClickHouseTableChanges {
  const buffer = new ClickHouseTableChanges(table);
  for (const change of changes) buffer.add(change);
  return buffer;
}

function newRowsOf(buffer: ClickHouseTableChanges): RowImage[] | undefined {
  return buffer.newRows?.rows().map((row) => row.cells());
}

describe('ClickHouseTableChanges', () => {
  it('holds the leading inserts as TupleData and every change after them as records, indexed in order', () => {
    const later = [update('1', 'b'), insert('3', 'c')];
    const buffer = held([insert('1', 'a\tb'), insert('2', null), ...later]);
    expect(newRowsOf(buffer)).toEqual([
      ['1', 'a\tb'],
      ['2', null],
    ]);
    expect(buffer.later).toEqual({ changes: later, firstIndex: 2 });
  });

  it('drops what came before a truncate, which keeps its own index', () => {
    const buffer = held([insert('1', 'a'), update('1', 'b'), truncate, insert('2', 'c')]);
    expect(buffer.newRows).toBeUndefined();
    expect(buffer.later).toEqual({ changes: [truncate, insert('2', 'c')], firstIndex: 2 });
  });

  it('has no part for what it was not given', () => {
    const buffer = held([update('1', 'b')]);
    expect(buffer.newRows).toBeUndefined();
    expect(buffer.later?.firstIndex).toBe(0);
    expect(held([insert('1', 'a')]).later).toBeUndefined();
  });

  it('counts the bytes of the TupleData of a new row and of the record of a later change', () => {
    const buffer = new ClickHouseTableChanges(table);
    // The cell count, then a kind and a length before each value.
    expect(buffer.add(insert('1', 'abc'))).toBe(2 + 5 + 1 + 5 + 3);
    expect(buffer.add(update('1', 'abcd'))).toBeGreaterThan(80);
  });

  it('holds leading inserts over the source’s bytes as new rows, counting each in the changes’ order', () => {
    const buffer = new ClickHouseTableChanges(table);
    expect(buffer.add({ transaction, kind: 'insert', newRow: wireTuple(['1', 'a\tb']) })).toBe(
      2 + 5 + 1 + 5 + 3,
    );
    buffer.add(insert('2', null));
    buffer.add(update('1', 'b'));
    // After a later change: the insert is a later change too.
    buffer.add({ transaction, kind: 'insert', newRow: wireTuple(['3', 'c']) });
    expect(newRowsOf(buffer)).toEqual([
      ['1', 'a\tb'],
      ['2', null],
    ]);
    expect(buffer.later).toEqual({ changes: [update('1', 'b'), insert('3', 'c')], firstIndex: 2 });
  });
});
