import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import { tupleData, wireTuple } from '../../../../test/support/wire-tuple.ts';
import { EngineError } from '../../errors.ts';
import { parseCopyTextLines } from '../copy-text.ts';
import {
  type DestinationTable,
  type Row,
  type RowChange,
  type RowImage,
  type SourceTransaction,
  type TupleCell,
  unchangedToast,
} from '../records.ts';
import { rowOfCells, TupleDataRow } from '../rows.ts';
import { type HeldMessage, HeldMessages } from './held-messages.ts';
import {
  binaryValue,
  type RecordDocument,
  renderCell,
  type TableFormat,
  tableFormat,
} from './message-format.ts';
import { type ChangeRecord, changeRecord, snapshotRecord } from './script-records.ts';

const oid = {
  boolean: 16,
  int2: 21,
  int4: 23,
  int8: 20,
  text: 25,
  jsonb: 3802,
  numeric: 1700,
  timestamp: 1114,
  timestamptz: 1184,
  date: 1082,
};
// Every kind with a rule, a key of two columns out of column order, names JSON escapes.
const table: DestinationTable = {
  source: { schema: 'public', table: 'every' },
  destination: { schema: 'sales', table: 'every "kind"' },
  columns: [
    typedColumn('note', oid.text),
    typedColumn('id', oid.int8),
    typedColumn('small', oid.int2),
    typedColumn('region', oid.int4),
    typedColumn('amount', oid.numeric),
    typedColumn('at', oid.timestamp),
    typedColumn('at_utc', oid.timestamptz),
    typedColumn('flag', oid.boolean),
    typedColumn('doc "json"', oid.jsonb),
  ],
  keyColumns: ['region', 'id'],
};
const transactions: SourceTransaction[] = [
  { xid: 7, commitLsn: 0x10n, commitTimeMicros: 1_700_000_000_000_000n },
  { xid: 8, commitLsn: 0x1_0000_0020n, commitTimeMicros: 1_700_000_000_123_456n },
];

/** A row of usual values, with one column set to `value`. */
function row(name: string, value: TupleCell): TupleCell[] {
  const usual: TupleCell[] = [
    'plain',
    '42',
    '-7',
    '1000',
    '12.50',
    '2026-11-29 10:11:12.5',
    '2026-11-29 10:11:12+00',
    't',
    '{"a": [1, 2]}',
  ];
  usual[table.columns.findIndex((candidate) => candidate.name === name)] = value;
  return usual;
}

/**
 * The message a record's document gives, the oracle of the encoder: its value
 * JSON.stringify(document) (the values rendered one by one, renderText), its
 * key the key columns in key order, from the new row or else the old one.
 */
function documentMessage(format: TableFormat, record: ChangeRecord): { key: string | null; value: string } {
  const document: RecordDocument = record.document;
  const image = document.new ?? document.old;
  const { keyColumns } = format.table;
  const key =
    image === null || keyColumns.length === 0
      ? null
      : `{${keyColumns.map((name) => `${JSON.stringify(name)}:${JSON.stringify(document.new?.[name] ?? document.old?.[name] ?? null)}`).join(',')}}`;
  return { key, value: JSON.stringify(document) };
}

/** A held message as text, and whether it is a truncate's. */
function asText({ key, value, truncate }: HeldMessage) {
  return { key: key === null ? null : key.toString('utf8'), value: value.toString('utf8'), truncate };
}

/** The change with its rows as decoded cells. */
function cellsChange(change: RowChange): RowChange {
  const cellsOf = (row: Row) => rowOfCells(row.cells());
  switch (change.kind) {
    case 'insert':
      return { ...change, newRow: cellsOf(change.newRow) };
    case 'update':
      return { ...change, oldKey: change.oldKey && cellsOf(change.oldKey), newRow: cellsOf(change.newRow) };
    case 'delete':
      return { ...change, oldKey: cellsOf(change.oldKey) };
    case 'truncate':
      return change;
  }
}

/**
 * Each change held with its rows as the source's bytes (TupleDataRow) and as
 * decoded cells (written into TupleData by rows.ts), and the messages the
 * changes' documents give: [from cells, from bytes, documents'].
 */
function heldThreeWays(
  changes: readonly RowChange[],
  tableOf = table,
): [ReturnType<typeof asText>[], ReturnType<typeof asText>[], ReturnType<typeof asText>[]] {
  const format = tableFormat(tableOf);
  const fromCells = new HeldMessages(format);
  const fromBytes = new HeldMessages(format);
  const cellsOf = (row: Row) => rowOfCells(row.cells());
  for (const change of changes) {
    expect(fromBytes.add(change)).toBeGreaterThan(0);
    switch (change.kind) {
      case 'insert':
        fromCells.add({ ...change, newRow: cellsOf(change.newRow) });
        break;
      case 'update':
        fromCells.add({
          ...change,
          oldKey: change.oldKey && cellsOf(change.oldKey),
          newRow: cellsOf(change.newRow),
        });
        break;
      case 'delete':
        fromCells.add({ ...change, oldKey: cellsOf(change.oldKey) });
        break;
      case 'truncate':
        fromCells.add(change);
    }
  }
  const documents = changes.map((change) => ({
    ...documentMessage(format, changeRecord(format, change)),
    truncate: change.kind === 'truncate',
  }));
  return [[...fromCells.messages()].map(asText), [...fromBytes.messages()].map(asText), documents];
}

/** Inserts (or updates without an old key) of `tuples`, transactions alternating. */
function newRows(
  tuples: readonly TupleDataRow[],
  kindOf: (index: number) => 'insert' | 'update' = () => 'insert',
  transactionOf: (index: number) => SourceTransaction = (index) =>
    transactions[index % 2] as SourceTransaction,
): RowChange[] {
  return tuples.map((tuple, index) => {
    const transaction = transactionOf(index);
    return kindOf(index) === 'insert'
      ? { transaction, kind: 'insert', newRow: tuple }
      : { transaction, kind: 'update', oldKey: null, newRow: tuple };
  });
}

/** Holds the changes three ways (heldThreeWays) and expects the same messages; returns them. */
function expectHeldAsDocuments(changes: readonly RowChange[], tableOf = table) {
  const [fromCells, fromBytes, documents] = heldThreeWays(changes, tableOf);
  expect(fromBytes).toEqual(documents);
  expect(fromCells).toEqual(documents);
  return fromBytes;
}

/** What holding the change gives: its messages, or the error it fails with. */
function outcome(change: RowChange) {
  const held = new HeldMessages(tableFormat(table));
  try {
    held.add(change);
    return { messages: [...held.messages()].map(asText) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/**
 * Holding the tuple's insert gives its document's message, or fails with the
 * error the first bad value's rendering fails with (key columns first, as the
 * key is written before the value).
 */
function expectSameOutcome(tuple: TupleDataRow) {
  const transaction = transactions[0] as SourceTransaction;
  const change: RowChange = { transaction, kind: 'insert', newRow: tuple };
  const format = tableFormat(table);
  const cells = tuple.cells();
  let expected: { messages: ReturnType<typeof asText>[] } | { error: string } | undefined;
  for (const index of [...format.keyIndexes, ...cells.keys()]) {
    const cell = cells[index] ?? null;
    if (cell === null || cell === unchangedToast || expected) continue;
    try {
      if (typeof cell !== 'string') throw binaryValue(format);
      renderCell(format, index, cell);
    } catch (error) {
      expected = { error: (error as Error).message };
    }
  }
  expected ??= { messages: [{ ...documentMessage(format, changeRecord(format, change)), truncate: false }] };
  expect(outcome(change)).toEqual(expected);
  return expected;
}

describe('new rows written from their TupleData (MessageJson)', () => {
  it('writes the key and value its document gives, from the bytes as from decoded cells', () => {
    const values: [string, TupleCell][] = [
      ['note', 'plain'],
      ['note', 'quote " backslash \\ controls \b\f\n\r\t \u0001\u001f del \u007f'],
      ['note', 'é ✓ 𝄞 past ASCII'],
      ['note', ''],
      ['note', null],
      ['note', unchangedToast],
      ['id', '-9223372036854775808'],
      ['small', '0'],
      ['small', '32767'],
      ['small', '-32768'],
      ['region', '2147483647'],
      ['region', '-2147483648'],
      ['region', null],
      ['amount', '0'],
      ['amount', '-0.000001'],
      ['amount', 'NaN'],
      ['amount', 'Infinity'],
      ['amount', '-Infinity'],
      ['at', '2026-11-29 10:11:12'],
      ['at', '2026-11-29 10:11:12.000100'],
      ['at', '2026-11-29 10:11:12.123456'],
      ['at', 'infinity'],
      ['at', '-infinity'],
      ['at', '0044-03-15 12:00:00 BC'],
      ['at_utc', '2026-11-29 10:11:12.1+00'],
      ['at_utc', '2026-11-29 10:11:12+05:30'],
      ['at_utc', '20261-11-29 10:11:12+00'],
      ['flag', 'f'],
      ['flag', null],
      ['doc "json"', '{"nested": "a\\"b"}'],
    ];
    const tuples = values.map(([name, value]) => wireTuple(row(name, value)));
    const fromBytes = expectHeldAsDocuments(newRows(tuples));
    expect(String(fromBytes[0]?.value)).toContain(
      '"at":"2026-11-29T10:11:12.5","at_utc":"2026-11-29T10:11:12Z"',
    );
  });

  it('writes updates without an old key as their documents give them, between inserts of the same transactions', () => {
    const tuples = [
      wireTuple(row('id', '1')),
      wireTuple(row('note', 'changed "once"')),
      wireTuple(row('note', unchangedToast)),
      wireTuple(row('at_utc', 'infinity')),
      wireTuple(row('id', '2')),
      wireTuple(row('amount', null)),
    ];
    // Transactions change every second row, kinds every third: the kind alone changes between rows too.
    const fromBytes = expectHeldAsDocuments(
      newRows(
        tuples,
        (index) => (index % 3 === 0 ? 'insert' : 'update'),
        (index) => transactions[Math.floor(index / 2) % 2] as SourceTransaction,
      ),
    );
    expect(String(fromBytes[1]?.value)).toMatch(
      /^\{"kind":"update",.*"old":null,"new":\{"note":"changed \\"once\\""/,
    );
    expect(String(fromBytes[2]?.value)).toContain('"unchanged_columns":["note"]}');
    expect(String(fromBytes[3]?.value)).toMatch(/^\{"kind":"insert"/);
  });

  it('writes a first column left out (unchanged TOAST) without the comma before the next', () => {
    const tuples = [
      wireTuple(row('note', unchangedToast)),
      wireTuple([unchangedToast, unchangedToast, ...row('note', 'x').slice(2)]),
    ];
    const fromBytes = expectHeldAsDocuments(newRows(tuples));
    expect(String(fromBytes[1]?.value)).toContain('"new":{"small":-7,');
    expect(String(fromBytes[1]?.value)).toContain('"unchanged_columns":["note","id"]}');
  });

  it('decodes text that is not valid UTF-8 as its document does', () => {
    const cells = row('note', 'x');
    const bytes = tupleData(cells);
    // The note's one byte `x` (after the count, its kind and length) becomes a lone continuation byte.
    bytes[2 + 5] = 0x80;
    const tuple = wireTuple(cells);
    const broken = new TupleDataRow(bytes, tuple.cellCount, () => [
      bytes.toString('utf8', 7, 8),
      ...cells.slice(1),
    ]);
    const fromBytes = expectHeldAsDocuments(newRows([broken]));
    expect(String(fromBytes[0]?.value)).toContain('"note":"\ufffd"');
  });

  it('fails on values their document fails on, with the same error, and takes what it takes', () => {
    const failing: [string, TupleCell][] = [
      ['small', '32768'],
      ['region', '12345678901'],
      ['amount', '1e5'],
      ['amount', '1.'],
      ['flag', 'true'],
      ['at_utc', '2026-11-29 10:11:12'],
      ['note', Buffer.from('binary')],
    ];
    for (const [name, value] of failing) {
      expect(expectSameOutcome(wireTuple(row(name, value)))).toHaveProperty('error');
    }
    // Not the usual text of their kind, which the rules take as it is: whether they fail or not, as rendered.
    const unusual: [string, TupleCell][] = [
      ['small', '007'],
      ['region', '-0'],
      ['region', '+5'],
      ['amount', '.5'],
      ['at', '2026-11-29 10:11:12.000'],
      ['at', '2026-11-29T10:11:12'],
      ['at', '2026-11-29 10:11:12+00'],
    ];
    for (const [name, value] of unusual) expectSameOutcome(wireTuple(row(name, value)));
  });

  it('writes a key column that is not replicated as null, and no key for a table without one', () => {
    const partial: DestinationTable = { ...table, keyColumns: ['gone', 'id'] };
    const fromBytes = expectHeldAsDocuments(newRows([wireTuple(row('id', '5'))]), partial);
    expect(String(fromBytes[0]?.key)).toBe('{"gone":null,"id":"5"}');
    const keyless: DestinationTable = { ...table, keyColumns: [] };
    const fromBytesKeyless = expectHeldAsDocuments(newRows([wireTuple(row('id', '5'))]), keyless);
    expect(fromBytesKeyless[0]?.key).toBeNull();
  });

  it('holds many inserts and a large one across chunks, as their documents give them', () => {
    const tuples: TupleDataRow[] = [];
    for (let id = 0; id < 1_000; id++) tuples.push(wireTuple(row('id', String(id))));
    tuples.push(wireTuple(row('note', '\n'.repeat(100_000))));
    tuples.push(wireTuple(row('id', '1000000')));
    expectHeldAsDocuments(newRows(tuples));
  });

  it('writes a column of a kind with no byte rule by rendering its decoded value', () => {
    const dated: DestinationTable = { ...table, columns: [...table.columns, typedColumn('day', oid.date)] };
    const fromBytes = expectHeldAsDocuments(
      newRows([
        wireTuple([...row('id', '1'), '2026-11-29']),
        wireTuple([...row('id', '2'), '0044-03-15 BC']),
      ]),
      dated,
    );
    expect(fromBytes[1]?.value).toContain('"day":"-0043-03-15"}');
  });
});

/** A COPY text line of `cells` as PostgreSQL writes it: its escapes, `\N` for null. */
function copyLine(cells: readonly TupleCell[]): string {
  const escapes: Record<string, string> = {
    '\\': '\\\\',
    '\b': '\\b',
    '\f': '\\f',
    '\n': '\\n',
    '\r': '\\r',
    '\t': '\\t',
    '\v': '\\v',
  };
  return cells
    .map((cell) =>
      typeof cell === 'string' ? cell.replace(/[\\\b\f\n\r\t\v]/g, (char) => escapes[char] as string) : '\\N',
    )
    .join('\t');
}

/**
 * A block's snapshot messages held from its COPY text, the messages of its
 * rows decoded (a script's records, through TupleData written from the cells),
 * and those of their documents: [from COPY text, from cells, documents'].
 */
function snapshotThreeWays(
  block: Buffer,
  tableOf = table,
): [ReturnType<typeof asText>[], ReturnType<typeof asText>[], ReturnType<typeof asText>[]] {
  const format = tableFormat(tableOf);
  const records = parseCopyTextLines(block).map((values) => snapshotRecord(format, values));
  const fromBytes = new HeldMessages(format);
  expect(fromBytes.addSnapshotLines(block)).toBe(records.length);
  return [
    [...fromBytes.messages()].map(asText),
    records.map((record) => ({ key: record.key, value: record.json, truncate: false })),
    records.map((record) => ({ ...documentMessage(format, record), truncate: false })),
  ];
}

/** The block's snapshot messages, expected the same three ways (snapshotThreeWays). */
function expectSnapshotAsDocuments(block: Buffer, tableOf = table) {
  const [fromBytes, fromCells, documents] = snapshotThreeWays(block, tableOf);
  expect(fromBytes).toEqual(documents);
  expect(fromCells).toEqual(documents);
  return fromBytes;
}

describe('snapshot rows written from their COPY text (MessageJson)', () => {
  it('writes the key and value their documents give', () => {
    const notes = [
      'plain',
      'quote " backslash \\ escapes \b\f\n\r\t\v raw controls \u0001\u001f del \u007f',
      'é ✓ 𝄞 past ASCII',
      '',
      '\\N is not null',
    ];
    const lines = notes.map((note) => copyLine(row('note', note)));
    lines.push(copyLine(row('note', null)), copyLine(row('amount', 'NaN')), copyLine(row('at', 'infinity')));
    lines.push(copyLine(row('flag', 'f')), copyLine(row('region', null)), copyLine(row('small', '-32768')));
    const fromBytes = expectSnapshotAsDocuments(Buffer.from(`${lines.join('\n')}\n`));
    expect(String(fromBytes[0]?.value)).toMatch(
      /^\{"kind":"snapshot",.*"lsn":null,"commit_time":null,"xid":null,"old":null,/,
    );
    expect(String(fromBytes[1]?.value)).toContain(
      '"note":"quote \\" backslash \\\\ escapes \\b\\f\\n\\r\\t\\u000b raw',
    );
  });

  it('decodes the escapes PostgreSQL does not write (octal, hex, others) as the decoded rows have them', () => {
    const lines = ['\\101\\x42\\q', '\\', 'a\\'].map((note) =>
      copyLine(row('note', 'x')).replace(/^x/, note),
    );
    const fromBytes = expectSnapshotAsDocuments(Buffer.from(`${lines.join('\n')}\n`));
    expect(String(fromBytes[0]?.value)).toContain('"note":"ABq"');
  });

  it('fails on a line of another width as copy-text.ts fails', () => {
    const format = tableFormat(table);
    const short = `${copyLine(row('id', '1')).split('\t').slice(1).join('\t')}\n`;
    expect(() => new HeldMessages(format).addSnapshotLines(Buffer.from(short))).toThrow(
      'a COPY row of public.every has 8 fields, not 9',
    );
    const long = `${copyLine(row('id', '1'))}\textra\n`;
    expect(() => new HeldMessages(format).addSnapshotLines(Buffer.from(long))).toThrow(
      'has 10 fields, not 9',
    );
  });

  it('writes a table without a key, and a column of a kind with no byte rule by rendering it', () => {
    const keyless: DestinationTable = { ...table, keyColumns: [] };
    const fromBytes = expectSnapshotAsDocuments(Buffer.from(`${copyLine(row('id', '3'))}\n`), keyless);
    expect(fromBytes[0]?.key).toBeNull();
    const dated: DestinationTable = { ...table, columns: [...table.columns, typedColumn('day', oid.date)] };
    const days = ['2026-11-29', '0044-03-15 BC', 'infinity'].map((day) => copyLine([...row('id', '4'), day]));
    const datedMessages = expectSnapshotAsDocuments(Buffer.from(`${days.join('\n')}\n`), dated);
    expect(datedMessages[1]?.value).toContain('"day":"-0043-03-15"}');
  });
});

describe('every kind of change, every column kind (MessageJson)', () => {
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
      'not ASCII: emoji 🎉, é, \u2028',
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

  /** Every kind of change of each row, its images the source's bytes. */
  const changes: RowChange[] = rows.flatMap((row, index) => {
    const other = rows[(index + 1) % rows.length] as RowImage;
    const keyOnly = row.map((cell, column) => (column === 0 || column === 4 ? cell : null));
    const toasted = row.map((cell, column) => (column === 5 || column === 18 ? unchangedToast : cell));
    return [
      { kind: 'insert', transaction, newRow: wireTuple(row) },
      { kind: 'update', transaction, oldKey: null, newRow: wireTuple(toasted) },
      { kind: 'update', transaction, oldKey: wireTuple(keyOnly), newRow: wireTuple(other) },
      { kind: 'update', transaction, oldKey: wireTuple(other), newRow: wireTuple(row) },
      { kind: 'update', transaction, oldKey: wireTuple(other), newRow: wireTuple(toasted) },
      { kind: 'delete', transaction, oldKey: wireTuple(keyOnly) },
      { kind: 'delete', transaction, oldKey: wireTuple(row) },
      { kind: 'truncate', transaction },
    ];
  });

  it('holds every kind of change as its document gives it, from the bytes as from decoded cells', () => {
    const held = expectHeldAsDocuments(changes, wide);
    expect(held.map(({ truncate }) => truncate)).toEqual(changes.map(({ kind }) => kind === 'truncate'));
    // A key column left out of the new row (unchanged TOAST) comes from the old image.
    expect(held[4]?.key).toBe(held[3]?.key);
    const lines = rows.map((row) => copyLine(row));
    expectSnapshotAsDocuments(Buffer.from(`${lines.join('\n')}\n`), wide);
  });

  it('is exactly JSON.stringify of the document, for every kind of change', () => {
    const records = [
      ...rows.map((row) => snapshotRecord(format, row as (string | null)[])),
      ...changes.map((change) => changeRecord(format, change)),
      ...changes.map((change) => changeRecord(format, cellsChange(change))),
    ];
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

describe('values only decoded cells can hold', () => {
  it('writes a lone UTF-16 surrogate, which PostgreSQL text never holds, as U+FFFD: TupleData is UTF-8', () => {
    const format = tableFormat(table);
    const held = new HeldMessages(format);
    const transaction = transactions[0] as SourceTransaction;
    held.add({ transaction, kind: 'insert', newRow: rowOfCells(row('note', 'lone \ud800')) });
    expect(String([...held.messages()][0]?.value)).toContain('"note":"lone \ufffd"');
  });

  it('holds rows of many short values that render longer than their text (intervals)', () => {
    const spans: DestinationTable = {
      source: { schema: 'public', table: 'spans' },
      destination: { schema: 'public', table: 'spans' },
      columns: Array.from({ length: 40 }, (_, index) => typedColumn(`s${index}`, 1186)),
      keyColumns: ['s0'],
    };
    const transaction = transactions[0] as SourceTransaction;
    const cells = Array.from({ length: 40 }, () => '1 day');
    const held = expectHeldAsDocuments([{ transaction, kind: 'insert', newRow: wireTuple(cells) }], spans);
    expect(held[0]?.key).toBe('{"s0":{"months":0,"days":1,"microseconds":"0"}}');
    expectSnapshotAsDocuments(Buffer.from(`${cells.join('\t')}\n`), spans);
  });
});
