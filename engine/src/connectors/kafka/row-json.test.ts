import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import { tupleData, wireTuple } from '../../../../test/support/wire-tuple.ts';
import { parseCopyTextLines } from '../copy-text.ts';
import { type DestinationTable, type SourceTransaction, type TupleCell, unchangedToast } from '../records.ts';
import { rowOfCells, TupleDataRow } from '../rows.ts';
import { type HeldMessage, HeldMessages } from './held-messages.ts';
import { snapshotRecord, tableFormat } from './message-format.ts';
import { RowJson } from './row-json.ts';

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

/** Each change's message held from its decoded cells and from its bytes: [decoded, from bytes]. */
function heldBothWays(
  tuples: readonly TupleDataRow[],
  tableOf = table,
  kindOf: (index: number) => 'insert' | 'update' = () => 'insert',
  transactionOf: (index: number) => SourceTransaction = (index) =>
    transactions[index % 2] as SourceTransaction,
): [HeldMessage[], HeldMessage[]] {
  const decoded = new HeldMessages(tableFormat(tableOf));
  const fromBytes = new HeldMessages(tableFormat(tableOf));
  tuples.forEach((tuple, index) => {
    const transaction = transactionOf(index);
    if (kindOf(index) === 'insert') {
      decoded.add({ transaction, kind: 'insert', newRow: rowOfCells(tuple.cells()) });
      expect(fromBytes.add({ transaction, kind: 'insert', newRow: tuple })).toBeGreaterThan(0);
    } else {
      decoded.add({ transaction, kind: 'update', oldKey: null, newRow: rowOfCells(tuple.cells()) });
      expect(fromBytes.add({ transaction, kind: 'update', oldKey: null, newRow: tuple })).toBeGreaterThan(0);
    }
  });
  return [[...decoded.messages()], [...fromBytes.messages()]];
}

/** What holding the tuple gives: its message, or the error it fails with. */
function outcome(hold: () => unknown, held: HeldMessages) {
  try {
    hold();
    return { messages: [...held.messages()] };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Holding the tuple from its bytes gives what the decoded cells give: the same message or the same error. */
function expectSameOutcome(tuple: TupleDataRow) {
  const transaction = transactions[0] as SourceTransaction;
  const decoded = new HeldMessages(tableFormat(table));
  const fromBytes = new HeldMessages(tableFormat(table));
  const expected = outcome(
    () => decoded.add({ transaction, kind: 'insert', newRow: rowOfCells(tuple.cells()) }),
    decoded,
  );
  expect(outcome(() => fromBytes.add({ transaction, kind: 'insert', newRow: tuple }), fromBytes)).toEqual(
    expected,
  );
  return expected;
}

describe('inserts written from their TupleData (RowJson)', () => {
  it('writes the same key and value bytes as the decoded cells give', () => {
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
    const [decoded, fromBytes] = heldBothWays(tuples);
    expect(fromBytes).toEqual(decoded);
    expect(String(fromBytes[0]?.value)).toContain(
      '"at":"2026-11-29T10:11:12.5","at_utc":"2026-11-29T10:11:12Z"',
    );
  });

  it('writes updates without an old key as the decoded updates give them, between inserts of the same transactions', () => {
    const tuples = [
      wireTuple(row('id', '1')),
      wireTuple(row('note', 'changed "once"')),
      wireTuple(row('note', unchangedToast)),
      wireTuple(row('at_utc', 'infinity')),
      wireTuple(row('id', '2')),
      wireTuple(row('amount', null)),
    ];
    // Transactions change every second row, kinds every third: the kind alone changes between rows too.
    const [decoded, fromBytes] = heldBothWays(
      tuples,
      table,
      (index) => (index % 3 === 0 ? 'insert' : 'update'),
      (index) => transactions[Math.floor(index / 2) % 2] as SourceTransaction,
    );
    expect(fromBytes).toEqual(decoded);
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
    const [decoded, fromBytes] = heldBothWays(tuples);
    expect(fromBytes).toEqual(decoded);
    expect(String(fromBytes[1]?.value)).toContain('"new":{"small":-7,');
    expect(String(fromBytes[1]?.value)).toContain('"unchanged_columns":["note","id"]}');
  });

  it('decodes text that is not valid UTF-8 as the decoded cells do', () => {
    const cells = row('note', 'x');
    const bytes = tupleData(cells);
    // The note's one byte `x` (after the count, its kind and length) becomes a lone continuation byte.
    bytes[2 + 5] = 0x80;
    const tuple = wireTuple(cells);
    const broken = new TupleDataRow(bytes, tuple.cellCount, () => [
      bytes.toString('utf8', 7, 8),
      ...cells.slice(1),
    ]);
    const [decoded, fromBytes] = heldBothWays([broken]);
    expect(fromBytes).toEqual(decoded);
    expect(String(fromBytes[0]?.value)).toContain('"note":"\ufffd"');
  });

  it('fails on values the decoded cells fail on, with the same error, and takes what they take', () => {
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
    // Not the usual text of their kind, which the rules take as it is: whether they fail or not, as decoded.
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
    const [decoded, fromBytes] = heldBothWays([wireTuple(row('id', '5'))], partial);
    expect(fromBytes).toEqual(decoded);
    expect(String(fromBytes[0]?.key)).toBe('{"gone":null,"id":"5"}');
    const keyless: DestinationTable = { ...table, keyColumns: [] };
    const [decodedKeyless, fromBytesKeyless] = heldBothWays([wireTuple(row('id', '5'))], keyless);
    expect(fromBytesKeyless).toEqual(decodedKeyless);
    expect(fromBytesKeyless[0]?.key).toBeNull();
  });

  it('holds many inserts and a large one across chunks, as the decoded cells give them', () => {
    const tuples: TupleDataRow[] = [];
    for (let id = 0; id < 3_000; id++) tuples.push(wireTuple(row('id', String(id))));
    tuples.push(wireTuple(row('note', '\n'.repeat(100_000))));
    tuples.push(wireTuple(row('id', '1000000')));
    const [decoded, fromBytes] = heldBothWays(tuples);
    expect(fromBytes).toEqual(decoded);
  });

  it('writes a table with a column of another kind from the decoded cells, as their message', () => {
    const dated: DestinationTable = { ...table, columns: [...table.columns, typedColumn('day', oid.date)] };
    expect(RowJson.writes(tableFormat(dated))).toBe(false);
    const [decoded, fromBytes] = heldBothWays([wireTuple([...row('id', '1'), '2026-11-29'])], dated);
    expect(fromBytes).toEqual(decoded);
    expect(fromBytes).toHaveLength(1);
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

/** A block's snapshot messages held from its bytes, and as the decoded rows give them. */
function snapshotBothWays(block: Buffer, tableOf = table): [HeldMessage[], HeldMessage[]] {
  const format = tableFormat(tableOf);
  const decoded = parseCopyTextLines(block).map((values) => {
    const record = snapshotRecord(format, values);
    return {
      key: record.key === null ? null : Buffer.from(record.key),
      value: Buffer.from(record.json),
      truncate: false,
    };
  });
  const fromBytes = new HeldMessages(format);
  expect(fromBytes.addSnapshotLines(block)).toBe(decoded.length);
  return [decoded, [...fromBytes.messages()]];
}

describe('snapshot rows written from their COPY text (RowJson)', () => {
  it('writes the same key and value bytes as the decoded rows give', () => {
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
    const [decoded, fromBytes] = snapshotBothWays(Buffer.from(`${lines.join('\n')}\n`));
    expect(fromBytes).toEqual(decoded);
    expect(String(fromBytes[0]?.value)).toMatch(
      /^\{"kind":"snapshot",.*"lsn":null,"commit_time":null,"xid":null,"old":null,/,
    );
    expect(String(fromBytes[1]?.value)).toContain(
      '"note":"quote \\" backslash \\\\ escapes \\b\\f\\n\\r\\t\\u000b raw',
    );
  });

  it('decodes the escapes PostgreSQL does not write (octal, hex, others) as the decoded rows do', () => {
    const lines = ['\\101\\x42\\q', '\\', 'a\\'].map((note) =>
      copyLine(row('note', 'x')).replace(/^x/, note),
    );
    const [decoded, fromBytes] = snapshotBothWays(Buffer.from(`${lines.join('\n')}\n`));
    expect(fromBytes).toEqual(decoded);
    expect(String(fromBytes[0]?.value)).toContain('"note":"ABq"');
  });

  it('fails on a line of another width as the decoded rows fail', () => {
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

  it('writes a table without a key, and is not used for a table with a column of another kind', () => {
    const keyless: DestinationTable = { ...table, keyColumns: [] };
    const [decoded, fromBytes] = snapshotBothWays(Buffer.from(`${copyLine(row('id', '3'))}\n`), keyless);
    expect(fromBytes).toEqual(decoded);
    expect(fromBytes[0]?.key).toBeNull();
    const dated: DestinationTable = { ...table, columns: [...table.columns, typedColumn('day', oid.date)] };
    expect(HeldMessages.writesFromBytes(tableFormat(dated))).toBe(false);
    expect(HeldMessages.writesFromBytes(tableFormat(table))).toBe(true);
    expect(() => new HeldMessages(tableFormat(dated)).addSnapshotLines(Buffer.from('x\n'))).toThrow(
      'not written so',
    );
  });
});
