import { describe, expect, it } from 'vitest';
import { parseTextValue } from '../../model/parse-text.ts';
import { type DestinationTable, type SourceTransaction, unchangedToast } from '../records.ts';
import { changeRecord, isoTimestamp, renderText, snapshotRecord, tableFormat } from './message-format.ts';

const column = (name: string, typeOid: number, typeModifier = -1) => ({
  name,
  typeOid,
  typeModifier,
  typeName: String(typeOid),
  notNull: false,
});

const table: DestinationTable = {
  source: { schema: 'public', table: 'orders' },
  destination: { schema: 'sales', table: 'orders' },
  columns: [column('id', 20), column('region', 25), column('amount', 1700), column('doc', 3802)],
  keyColumns: ['id', 'region'],
};
const transaction: SourceTransaction = {
  xid: 901,
  commitLsn: 0x1_0000_00a0n,
  commitTimeMicros: 1_700_000_000_000_001n,
};

describe('default message format', () => {
  it("writes each change with its own transaction's LSN and commit time, transactions interleaved or not", () => {
    const format = tableFormat(table);
    const later: SourceTransaction = {
      xid: 902,
      commitLsn: 0x2_0000_0010n,
      commitTimeMicros: 1_700_000_001_000_000n,
    };
    const insert = (of: SourceTransaction) =>
      changeRecord(format, { kind: 'insert', transaction: of, newRow: ['1', 'eu', '1.00', null] }).document;
    for (const of of [transaction, transaction, later, transaction, later]) {
      expect(insert(of)).toMatchObject({
        xid: of.xid,
        lsn: of === transaction ? '1/A0' : '2/10',
        commit_time: of === transaction ? '2023-11-14T22:13:20.000001Z' : '2023-11-14T22:13:21Z',
      });
    }
  });

  it('renders typed values losslessly', () => {
    expect(renderText({ kind: 'int64' }, '9223372036854775807')).toBe('9223372036854775807');
    expect(renderText({ kind: 'int32' }, '-42')).toBe(-42);
    expect(renderText({ kind: 'numeric' }, '12345678901234567890.000100')).toBe(
      '12345678901234567890.000100',
    );
    expect(renderText({ kind: 'float64' }, 'NaN')).toBe('NaN');
    expect(renderText({ kind: 'float64' }, '-Infinity')).toBe('-Infinity');
    expect(renderText({ kind: 'float64' }, '0.1')).toBe(0.1);
    expect(renderText({ kind: 'boolean' }, 't')).toBe(true);
    expect(renderText({ kind: 'bytes' }, '\\xdeadbeef')).toBe('3q2+7w==');
    expect(renderText({ kind: 'json' }, '{"big": 12345678901234567890}')).toBe(
      '{"big": 12345678901234567890}',
    );
    expect(renderText({ kind: 'date' }, '0044-03-15 BC')).toBe('-0043-03-15');
    expect(renderText({ kind: 'time' }, '24:00:00')).toBe('24:00:00');
    expect(renderText({ kind: 'time' }, '04:05:06.5')).toBe('04:05:06.5');
    expect(renderText({ kind: 'timestamptz' }, '2024-02-29 23:59:59.999999+00')).toBe(
      '2024-02-29T23:59:59.999999Z',
    );
    expect(renderText({ kind: 'timestamp' }, '1969-12-31 23:59:59.5')).toBe('1969-12-31T23:59:59.5');
    expect(renderText({ kind: 'timestamp' }, '0001-01-01 00:00:00 BC')).toBe('0000-01-01T00:00:00');
    expect(renderText({ kind: 'timestamptz' }, 'infinity')).toBe('infinity');
    expect(renderText({ kind: 'interval' }, '1 year 2 mons 3 days 04:05:06.000007')).toEqual({
      months: 14,
      days: 3,
      microseconds: '14706000007',
    });
    expect(renderText({ kind: 'array', element: { kind: 'int64' } }, '{{1,NULL},{3,4}}')).toEqual([
      ['1', null],
      ['3', '4'],
    ]);
    expect(renderText({ kind: 'hstore' }, '"a"=>"1", "b"=>NULL')).toEqual({ a: '1', b: null });
    expect(renderText({ kind: 'unknown_text', name: 'mood' }, 'happy')).toBe('happy');
  });

  it('rewrites usual timestamps as text exactly as parsing them would', () => {
    const samples = [
      '2024-02-29 23:59:59.999999',
      '1970-01-01 00:00:00',
      '2001-09-09 01:46:40.5',
      '1999-12-31 23:59:59.000001',
    ];
    for (const sample of samples) {
      expect(renderText({ kind: 'timestamp' }, sample)).toBe(
        isoTimestamp(parseTextValue({ kind: 'timestamp' }, sample), ''),
      );
      const zoned = `${sample}+00`;
      expect(renderText({ kind: 'timestamptz' }, zoned)).toBe(
        isoTimestamp(parseTextValue({ kind: 'timestamptz' }, zoned), 'Z'),
      );
    }
  });

  it('formats timestamps across the calendar', () => {
    expect(isoTimestamp(0n, 'Z')).toBe('1970-01-01T00:00:00Z');
    expect(isoTimestamp(-1n, 'Z')).toBe('1969-12-31T23:59:59.999999Z');
    expect(isoTimestamp(951_782_400_000_000n, 'Z')).toBe('2000-02-29T00:00:00Z');
    expect(isoTimestamp(253_402_300_800_000_000n, '')).toBe('10000-01-01T00:00:00');
  });

  it('describes each kind of change', () => {
    const format = tableFormat(table);
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
      oldKey: ['1', 'eu', null, null],
      newRow: ['2', 'eu', '10.00', unchangedToast],
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
      oldKey: ['3', 'us', '1.00', null],
    });
    expect(fullDelete.document.old).toEqual({ id: '3', region: 'us', amount: '1.00', doc: null });
    expect(fullDelete.key).toBe('{"id":"3","region":"us"}');

    const truncate = changeRecord(format, { kind: 'truncate', transaction });
    expect(truncate.key).toBeNull();
    expect(truncate.document).toMatchObject({ kind: 'truncate', old: null, new: null });
  });

  it('leaves keyless tables without a message key', () => {
    const keyless = tableFormat({ ...table, keyColumns: [] });
    expect(snapshotRecord(keyless, ['1', 'eu', '1', null]).key).toBeNull();
  });
});
