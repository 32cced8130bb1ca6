import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import { EngineError } from '../../errors.ts';
import { parseTextValue } from '../../model/parse-text.ts';
import { type DestinationTable, type RowImage, type SourceTransaction, unchangedToast } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { changeRecord, isoTimestamp, renderText, snapshotRecord, tableFormat } from './message-format.ts';

const table: DestinationTable = {
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
    const keyless = tableFormat({ ...table, keyColumns: [] });
    expect(snapshotRecord(keyless, ['1', 'eu', '1', null]).key).toBeNull();
  });
});

describe('default message JSON', () => {
  // Every kind the format renders, with values whose JSON is easy to get wrong.
  const columns = [
    typedColumn('id', 20),
    typedColumn('small', 21),
    typedColumn('count', 23),
    typedColumn('price', 1700, ((12 << 16) | 2) + 4),
    typedColumn('name', 25),
    typedColumn('doc', 3802),
    typedColumn('raw', 114),
    typedColumn('flag', 16),
    typedColumn('bytes', 17),
    typedColumn('ratio', 701),
    typedColumn('single', 700),
    typedColumn('at', 1114),
    typedColumn('at_utc', 1184),
    typedColumn('day', 1082),
    typedColumn('clock', 1083),
    typedColumn('span', 1186),
    typedColumn('uid', 2950),
    typedColumn('counts', 1007),
    typedColumn('labels', 1009),
    typedColumn('mood', 99_999),
  ];
  const wide: DestinationTable = {
    source: { schema: 'public', table: 'every "kind"' },
    destination: { schema: 'sales', table: 'every_kind' },
    columns,
    keyColumns: ['id', 'name'],
  };
  const format = tableFormat(wide);
  const rows: RowImage[] = [
    [
      '9223372036854775807',
      '-32768',
      '-2147483648',
      '1234567890.50',
      'quote " backslash \\ tab \t newline \n bell \u0007 del \u007f',
      '{"big": 12345678901234567890, "s": "\\u00e9"}',
      '[1, 2]',
      't',
      '\\x00ff22',
      '-1.5e-300',
      'NaN',
      '2024-02-29 23:59:59.999999',
      '1999-12-31 23:59:59+00',
      '0044-03-15 BC',
      '24:00:00',
      '1 year 2 mons -3 days 04:05:06.000007',
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
      '{1,NULL,-3}',
      '{"a \\"b\\"",NULL,"",émoji 🎉}',
      'happy',
    ],
    [
      '0',
      '0',
      '2147483647',
      'NaN',
      'lone surrogates \ud800 and \udfff, emoji 🎉, é, \u2028',
      'null',
      '"just a string"',
      'f',
      '\\x',
      'Infinity',
      '-Infinity',
      'infinity',
      '-infinity',
      'infinity',
      '00:00:00.000001',
      '00:00:00',
      'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
      '{}',
      '{{a,b},{c,d}}',
      '',
    ],
    [
      '-1',
      null,
      null,
      null,
      'x',
      null,
      null,
      null,
      null,
      null,
      null,
      '0001-01-01 00:00:00 BC',
      '2024-01-01 00:00:00.5+00',
      null,
      null,
      null,
      null,
      null,
      null,
      null,
    ],
  ];
  const transaction: SourceTransaction = {
    xid: 4_000_000_000,
    commitLsn: 0xff_0000_0001n,
    commitTimeMicros: 0n,
  };

  it('is exactly JSON.stringify of the document, for every kind of change', () => {
    const records = rows.flatMap((row, index) => {
      const other = rows[(index + 1) % rows.length] as RowImage;
      const keyOnly = row.map((cell, column) => (column === 0 || column === 4 ? cell : null));
      const toasted = row.map((cell, column) => (column === 5 || column === 18 ? unchangedToast : cell));
      return [
        snapshotRecord(format, row as (string | null)[]),
        changeRecord(format, { kind: 'insert', transaction, newRow: rowOfCells(row) }),
        changeRecord(format, { kind: 'update', transaction, oldKey: null, newRow: rowOfCells(toasted) }),
        changeRecord(format, {
          kind: 'update',
          transaction,
          oldKey: rowOfCells(keyOnly),
          newRow: rowOfCells(other),
        }),
        changeRecord(format, {
          kind: 'update',
          transaction,
          oldKey: rowOfCells(other),
          newRow: rowOfCells(row),
        }),
        changeRecord(format, { kind: 'delete', transaction, oldKey: rowOfCells(keyOnly) }),
        changeRecord(format, { kind: 'delete', transaction, oldKey: rowOfCells(row) }),
        changeRecord(format, { kind: 'truncate', transaction }),
      ];
    });
    for (const record of records) {
      expect(record.json).toBe(JSON.stringify(record.document));
      // The JSON is valid, and the document reads back from it.
      expect(JSON.parse(record.json)).toEqual(JSON.parse(JSON.stringify(record.document)));
    }
    // A key column that did not change comes from the old image.
    const keyUnchanged = changeRecord(format, {
      kind: 'update',
      transaction,
      oldKey: rowOfCells(rows[0] as RowImage),
      newRow: rowOfCells((rows[0] as RowImage).map((cell, index) => (index === 4 ? unchangedToast : cell))),
    });
    expect(JSON.parse(keyUnchanged.key ?? '')).toEqual({
      id: '9223372036854775807',
      name: (keyUnchanged.document.old as Record<string, unknown>).name,
    });
    expect(keyUnchanged.key).toBe(
      JSON.stringify({
        id: '9223372036854775807',
        name: (keyUnchanged.document.old as Record<string, unknown>).name,
      }),
    );
  });

  it('writes the values as the document renders them', () => {
    const document = JSON.parse(snapshotRecord(format, rows[0] as (string | null)[]).json);
    expect(document.new).toMatchObject({
      id: '9223372036854775807',
      small: -32768,
      count: -2147483648,
      price: '1234567890.50',
      flag: true,
      bytes: 'AP8i',
      ratio: -1.5e-300,
      single: 'NaN',
      at: '2024-02-29T23:59:59.999999',
      at_utc: '1999-12-31T23:59:59Z',
      day: '-0043-03-15',
      span: { months: 14, days: -3, microseconds: '14706000007' },
      counts: [1, null, -3],
      mood: 'happy',
    });
    expect(document).toMatchObject({ lsn: null, commit_time: null, xid: null, unchanged_columns: [] });
  });

  it('refuses a binary cell, and integers PostgreSQL would not print, as the document does', () => {
    const binary = [Buffer.from('1'), ...(rows[0] as RowImage).slice(1)];
    expect(
      () => changeRecord(format, { kind: 'insert', transaction, newRow: rowOfCells(binary) }).json,
    ).toThrow(EngineError);
    const withSmall = (text: string) =>
      changeRecord(format, {
        kind: 'insert',
        transaction,
        newRow: rowOfCells((rows[0] as RowImage).map((cell, index) => (index === 1 ? text : cell))),
      });
    for (const bad of ['40000', '-32769', '1e3', ' 1', '+1', '']) {
      expect(() => withSmall(bad).json, bad).toThrow(EngineError);
      expect(() => withSmall(bad).document, bad).toThrow(EngineError);
    }
    // Accepted by the parse though PostgreSQL never prints them: the same number either way.
    for (const odd of ['01', '-0', '00032767']) {
      const record = withSmall(odd);
      expect(record.json, odd).toBe(JSON.stringify(record.document));
    }
  });

  it('writes a key column that is not replicated as null, as the document does', () => {
    const partial = tableFormat({
      source: { schema: 'public', table: 'p' },
      destination: { schema: 'public', table: 'p' },
      columns: [typedColumn('id', 20), typedColumn('note', 25)],
      keyColumns: ['id', 'region'],
    });
    const records = [
      snapshotRecord(partial, ['7', 'x']),
      changeRecord(partial, {
        kind: 'update',
        transaction,
        oldKey: rowOfCells(['6', null]),
        newRow: rowOfCells(['7', unchangedToast]),
      }),
      changeRecord(partial, { kind: 'delete', transaction, oldKey: rowOfCells(['7', null]) }),
    ];
    for (const record of records) {
      expect(record.key).toBe('{"id":"7","region":null}');
      expect(record.json).toBe(JSON.stringify(record.document));
    }
  });

  it("keeps the table's column order, also for names that read as numbers", () => {
    const numbered = tableFormat({
      source: { schema: 'public', table: 'n' },
      destination: { schema: 'public', table: 'n' },
      columns: [typedColumn('b', 25), typedColumn('10', 25), typedColumn('2', 25)],
      keyColumns: ['b', '10'],
    });
    const record = snapshotRecord(numbered, ['x', 'y', 'z']);
    expect(record.json).toContain('"new":{"b":"x","10":"y","2":"z"}');
    expect(record.key).toBe('{"b":"x","10":"y"}');
    // An object would put "2" and "10" first: the document has the same members, not the same order.
    expect(Object.keys(record.document.new ?? {})).toEqual(['2', '10', 'b']);
  });
});
