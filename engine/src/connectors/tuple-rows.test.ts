import { describe, expect, it } from 'vitest';
import { tupleData, wireTuple } from '../../../test/support/wire-tuple.ts';
import type { DestinationTable, RowImage } from './records.ts';
import { unchangedToast } from './records.ts';
import { rowOfCells } from './rows.ts';
import { TupleDataRows } from './tuple-rows.ts';

const table: DestinationTable = {
  source: { schema: 'public', table: 't' },
  destination: { schema: 'public', table: 'd' },
  columns: [
    { name: 'id', typeOid: 23, typeModifier: -1, typeName: 'integer', notNull: true },
    { name: 'v', typeOid: 25, typeModifier: -1, typeName: 'text', notNull: false },
  ],
  keyColumns: ['id'],
};

describe('TupleDataRows', () => {
  it('holds every row as its TupleData: decoded cells written as pgoutput sends them, the source’s bytes copied', () => {
    const rows = new TupleDataRows(table);
    const decoded: RowImage = ['1', 'tab\there, é and 😀'];
    expect(rows.add(rowOfCells(decoded))).toBe(tupleData(decoded).length);
    expect(rows.add(wireTuple(['2', null]))).toBe(tupleData(['2', null]).length);
    rows.add(rowOfCells(['3', unchangedToast]));
    expect(Buffer.concat(rows.chunks())).toEqual(
      Buffer.concat([tupleData(decoded), tupleData(['2', null]), tupleData(['3', unchangedToast])]),
    );
    expect(rows.rows().map((row) => row.cells())).toEqual([decoded, ['2', null], ['3', unchangedToast]]);
  });

  it('seals chunks on whole records, which read back in order', () => {
    const rows = new TupleDataRows(table);
    const expected: RowImage[] = [];
    for (let id = 0; id < 5000; id++) {
      const row = [String(id), 'x'.repeat(id % 97)];
      expected.push(row);
      if (id % 2 === 0) rows.add(rowOfCells(row));
      else rows.add(wireTuple(row));
    }
    expect(rows.chunks().length).toBeGreaterThan(2);
    expect(rows.rows().map((row) => row.cells())).toEqual(expected);
  });

  it('refuses a binary cell, which the source does not send, when the rows are read', () => {
    for (const row of [rowOfCells(['1', Buffer.from('x')]), wireTuple(['1', Buffer.from('x')])]) {
      const rows = new TupleDataRows(table);
      rows.add(row);
      expect(() => rows.rows()).toThrow('binary tuple value in public.d; text format expected');
    }
  });
});
