import { describe, expect, it } from 'vitest';
import { tupleData, wireTuple } from '../../../../test/support/wire-tuple.ts';
import { parseTextValue } from '../../model/parse-text.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import { escapeCopyText, parseCopyTextLine } from '../copy-text.ts';
import { unchangedToast } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { columnEncoder } from './column-encoder.ts';
import {
  RowBinaryReader,
  RowBinaryWriter,
  unwrapLowCardinality,
  valueContext,
  writeDefault,
  writeValue,
} from './row-binary.ts';
import { RowWriter } from './row-writer.ts';
import { serverCapabilities } from './server.ts';
import { type ChType, parseChType } from './types.ts';

const limitsOf = (version: string) => ({ date32: serverCapabilities(version).extendedDateRange });
const current = limitsOf('26.7.2.1');
const old = limitsOf('18.16.1');
const table = { source: { schema: 'public', table: 't' }, columns: [] as unknown[] };

type Column = readonly [ColumnType, string];

function rowWriter(columns: readonly Column[], limits = current, softDelete = false): RowWriter {
  const encoders = columns.map(([source, target]) => columnEncoder('c', source, parseChType(target), limits));
  return new RowWriter({ ...table, columns }, 'db.t', encoders, softDelete);
}

/** A cell through the value model alone (parse-text.ts, then writeValue): what every reader must agree with. */
function referenceCell(
  writer: RowBinaryWriter,
  [source, target]: Column,
  cell: string | null,
  limits = current,
) {
  const base: ChType = unwrapLowCardinality(parseChType(target));
  if (cell === null) writeDefault(writer, base);
  else writeValue(writer, base, parseTextValue(source, cell), cell, valueContext('c', limits));
}

/**
 * The RowBinary of rows given as decoded cells, written from COPY text lines
 * and from TupleData; both must equal what the value model alone writes.
 * Returns the mapped columns' bytes of each row, hex.
 */
function encode(columns: readonly Column[], rows: readonly (string | null)[][], limits = current): string[] {
  const writer = rowWriter(columns, limits);
  const flags = 1 + 8;
  const lines = rows.map((cells) =>
    cells.map((cell) => (cell === null ? '\\N' : escapeCopyText(cell))).join('\t'),
  );
  const fromLines = new RowBinaryWriter(16);
  expect(writer.writeLines(Buffer.from(lines.map((line) => `${line}\n`).join('')), fromLines)).toBe(
    rows.length,
  );
  const fromTuples = new RowBinaryWriter(16);
  expect(writer.writeTuples(Buffer.concat(rows.map((cells) => tupleData(cells))), fromTuples, 0n)).toBe(
    rows.length,
  );
  // The mapped columns then is_deleted and the version: 0 for a load, each row its index from TupleData.
  const reference = new RowBinaryWriter(16);
  const referenceTuples = new RowBinaryWriter(16);
  rows.forEach((cells, rowIndex) => {
    const start = reference.length;
    for (const [index, column] of columns.entries())
      referenceCell(reference, column, cells[index] ?? null, limits);
    referenceTuples.bytes(reference.copyFrom(start));
    reference.zeros(flags);
    referenceTuples.u8(0);
    referenceTuples.integer(rowIndex, 8);
  });
  const expected = reference.take();
  expect(fromLines.take().toString('hex')).toBe(expected.toString('hex'));
  expect(fromTuples.take().toString('hex')).toBe(referenceTuples.take().toString('hex'));
  // Split back into rows, without the flags.
  const reader = new RowBinaryReader(expected);
  return rows.map(() => {
    const start = reader.offset;
    for (const [, target] of columns) reader.value(parseChType(target));
    const cells = expected.subarray(start, reader.offset).toString('hex');
    reader.value({ name: 'UInt8' });
    reader.value({ name: 'UInt64' });
    return cells;
  });
}

/** Each text alone in a one-column table of `column`, through every way. */
function encodeEach(column: Column, texts: readonly (string | null)[], limits = current): string[] {
  return encode(
    [column],
    texts.map((text) => [text]),
    limits,
  );
}

/** The error the value model words for `text`, which every way must throw. */
function expectSameError(column: Column, text: string, limits = current): void {
  const reference = new RowBinaryWriter(16);
  let message = '';
  try {
    referenceCell(reference, column, text, limits);
  } catch (error) {
    message = (error as Error).message;
  }
  expect(message).not.toBe('');
  expect(() =>
    rowWriter([column], limits).writeLines(Buffer.from(`${escapeCopyText(text)}\n`), reference),
  ).toThrow(message);
  expect(() => rowWriter([column], limits).writeTuples(tupleData([text]), reference, 0n)).toThrow(message);
}

const int16 = { kind: 'int16' } as const;
const int32 = { kind: 'int32' } as const;
const int64 = { kind: 'int64' } as const;
const text = { kind: 'string' } as const;
const numeric = { kind: 'numeric', precision: 12, scale: 2 } as const;
const timestamptz = { kind: 'timestamptz' } as const;
const timestamp = { kind: 'timestamp' } as const;
const boolean = { kind: 'boolean' } as const;
const date = { kind: 'date' } as const;

describe('every way of writing a cell writes what the value model does', () => {
  it('integers, into integer columns of any width', () => {
    const values = ['0', '-0', '7', '-32768', '32767', '999999999999999', '-999999999999999'];
    encodeEach([int64, 'Int64'], [...values, '9223372036854775807', '-9223372036854775808', null]);
    encodeEach([int32, 'Nullable(Int64)'], ['2147483647', '-2147483648', null]);
    encodeEach([int16, 'Int16'], ['-32768', '32767', null]);
    encodeEach([int32, 'LowCardinality(Nullable(Int32))'], ['5', null]);
    expectSameError([int16, 'Int16'], '32768');
    expectSameError([int32, 'Int32'], '12a');
    expectSameError([int64, 'Int32'], '2147483648');
    expectSameError([int32, 'UInt32'], '-1');
  });

  it('text, json and bytea into String, with every escape COPY writes', () => {
    encodeEach([text, 'String'], ['', 'x', 'tab\there\nnew\\back\rcr\bbs\ffeed\vvt é 日本 \\N', '\\', null]);
    encodeEach([{ kind: 'json' }, 'Nullable(String)'], ['{"a": "x\\ty"}', null]);
    const bytes = [0, 1, 9, 10, 13, 92, 127, 128, 255].map((byte) => byte.toString(16).padStart(2, '0'));
    encodeEach([{ kind: 'bytes' }, 'Nullable(String)'], [`\\x${bytes.join('')}`, '\\x', '\\xABcd', null]);
    expectSameError([{ kind: 'bytes' }, 'String'], '\\x4');
    expectSameError([{ kind: 'bytes' }, 'String'], '\\xzz');
  });

  it('booleans into Bool and integer columns', () => {
    encodeEach([boolean, 'Bool'], ['t', 'f', null]);
    encodeEach([boolean, 'Nullable(UInt8)'], ['t', null]);
    encodeEach([boolean, 'Int32'], ['t', 'f']);
    expectSameError([boolean, 'Bool'], 'x');
  });

  it('decimals that fit, and the others as the value model takes them', () => {
    const values = ['12.30', '-0.5', '1.500', '0', '-0.00', '9999999999.99', '123', '0.01', '00012.5'];
    encodeEach([numeric, 'Nullable(Decimal(12, 2))'], [...values, 'NaN', null]);
    encodeEach([numeric, 'Decimal(38, 10)'], ['1.5', '-123456789012345678.0123456789']);
    encodeEach([numeric, 'Decimal(2, 2)'], ['0.50', '-0.01']);
    expectSameError([numeric, 'Decimal(12, 2)'], 'NaN');
    expectSameError([numeric, 'Decimal(4, 2)'], '123.00');
    expectSameError([numeric, 'Decimal(12, 1)'], '1.25');
    expectSameError([numeric, 'Decimal(12, 2)'], '1.2.3');
  });

  it('UUIDs in either case', () => {
    encodeEach(
      [{ kind: 'uuid' }, 'Nullable(UUID)'],
      ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', null],
    );
    expectSameError([{ kind: 'uuid' }, 'UUID'], 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g');
  });

  it('dates into Date and Date32, clamped, on both ranges', () => {
    const values = ['2024-02-29', '1901-01-01', '1899-12-31', '2300-01-01', '1969-12-31', '0044-03-15 BC'];
    for (const limits of [current, old]) {
      encodeEach([date, 'Nullable(Date32)'], [...values, 'infinity', '-infinity', null], limits);
      encodeEach([date, 'Date'], [...values, 'infinity', null], limits);
    }
    expectSameError([date, 'Date32'], '2023-02-29');
    expectSameError([date, 'Date32'], '2024-13-01');
    expectSameError([date, 'Date32'], '0000-01-01');
  });

  it('timestamps into DateTime64 of any precision and zone, DateTime and Int64, clamped, on both ranges', () => {
    const values = [
      '2024-01-02 03:04:05.123456+00',
      '2024-01-02 03:04:05.1+00',
      '1969-12-31 23:59:59.5+00',
      '1999-12-31 23:59:59.5+02',
      '1999-12-31 23:59:59-08',
      '1901-01-01 00:00:00+00',
      '1800-06-01 00:00:00+00',
      '2299-12-31 23:59:59.999999+00',
      '2400-01-01 00:00:00+00',
      '2300-01-01 00:00:00+00',
      '0044-03-15 12:00:00+00 BC',
      '1999-12-31 23:59:59+05:30',
      'infinity',
      '-infinity',
    ];
    const types = [
      "DateTime64(6, 'UTC')",
      'Nullable(DateTime64(3))',
      "DateTime64(9, 'Europe/Berlin')",
      'DateTime',
      'Int64',
    ];
    for (const limits of [current, old]) {
      for (const type of types) encodeEach([timestamptz, type], [...values, null], limits);
    }
    encodeEach(
      [timestamp, "DateTime64(6, 'UTC')"],
      ['2024-02-29 23:59:59.5', '0044-03-15 12:00:00 BC', null],
    );
    encodeEach([timestamp, 'Nullable(Int64)'], ['1970-01-01 00:00:00', '2024-01-02 03:04:05.1', null]);
    expectSameError([timestamptz, "DateTime64(6, 'UTC')"], '2024-01-02 03:04:05');
    expectSameError([timestamp, "DateTime64(6, 'UTC')"], '2024-01-02 03:04:05+00');
    expectSameError([timestamptz, "DateTime64(6, 'UTC')"], '2024-01-02 24:00:00+00');
    expectSameError([timestamptz, "DateTime64(6, 'UTC')"], '2024-02-30 00:00:00+00');
  });

  it('floats into Float64 and Float32, plain numbers read from the bytes and the rest by the value model', () => {
    const values = ['1.5', '-0', '0', '.5', '5.', '1.5e+300', '-1e-05', '4.9e-324', '1.7976931348623157e308'];
    const specials = ['NaN', 'Infinity', '-Infinity', null];
    encodeEach([{ kind: 'float64' }, 'Float64'], [...values, ...specials]);
    encodeEach(
      [{ kind: 'float32' }, 'Nullable(Float32)'],
      ['0.1', '3.4e38', '1e-45', ...values, ...specials],
    );
    encodeEach([{ kind: 'float64' }, 'Nullable(Float32)'], ['0.1', '1e300', null]);
    for (const text of ['abc', '1..2', '0x10', '1e', '-', '.', '1e+', ' 1']) {
      expectSameError([{ kind: 'float64' }, 'Float64'], text);
    }
  });

  it('other kinds, through the value model alone', () => {
    encodeEach([{ kind: 'int32' }, 'Float64'], ['7', null]);
    encodeEach([{ kind: 'array', element: int32 }, 'Array(Nullable(Int32))'], ['{1,NULL}', null]);
    encodeEach([{ kind: 'interval' }, 'String'], ['1 day', null]);
  });
});

describe('RowWriter', () => {
  it('writes NULL as NULL into a Nullable column and as the zero of the type into any other', () => {
    const columns: Column[] = [
      [int64, 'Int64'],
      [text, 'Nullable(String)'],
      [text, 'String'],
      [{ kind: 'uuid' }, 'UUID'],
      [numeric, 'Decimal(12, 2)'],
      [timestamptz, "DateTime64(6, 'UTC')"],
    ];
    expect(encode(columns, [[null, null, null, null, null, null]])).toEqual([
      `${'00'.repeat(8)}0100${'00'.repeat(16)}${'00'.repeat(8)}${'00'.repeat(8)}`,
    ]);
  });

  it("undoes COPY's escapes: the letters, octal and hex, and a backslash before any other byte stands for that byte", () => {
    const writer = rowWriter([[text, 'String']]);
    const out = new RowBinaryWriter(16);
    writer.writeLines(Buffer.from('a\\tb\\\\c\\101\\x42\\x4\\q\\N\n\\N\n'), out);
    expect(new RowBinaryReader(out.take()).value({ name: 'String' })).toEqual(Buffer.from('a\tb\\cAB\x04qN'));
    expect(parseCopyTextLine('a\\tb\\\\c\\101\\x42\\x4\\q\\N')).toEqual(['a\tb\\cAB\x04qN']);
  });

  it("writes the flags and gives a batch's rows consecutive versions, below 2^53, across it and past it", () => {
    const writer = rowWriter([[int64, 'Int64']], current, true);
    for (const first of [
      (7n << 27n) + 5n,
      BigInt(Number.MAX_SAFE_INTEGER) - 1n,
      (123_456_789n << 27n) + 5n,
    ]) {
      const out = new RowBinaryWriter(16);
      expect(
        writer.writeTuples(Buffer.concat([tupleData(['1']), tupleData(['2']), tupleData(['3'])]), out, first),
      ).toBe(3);
      const reader = new RowBinaryReader(out.take());
      for (const index of [0n, 1n, 2n]) {
        expect(reader.value({ name: 'Int64' })).toBe(index + 1n);
        expect([reader.value({ name: 'UInt8' }), reader.value({ name: 'UInt8' })]).toEqual([0n, 0n]);
        expect(reader.value({ name: 'UInt64' })).toBe(first + index);
      }
    }
  });

  it('fills unchanged TOAST values from the stored row, and says when there was none', () => {
    const writer = rowWriter(
      [
        [int64, 'Int64'],
        [text, 'String'],
      ],
      current,
      true,
    );
    const stored = [Buffer.from('0100000000000000', 'hex'), Buffer.from('0378797a', 'hex')];
    for (const row of [wireTuple(['1', unchangedToast]), rowOfCells(['1', unchangedToast])]) {
      const out = new RowBinaryWriter(16);
      expect(writer.writeRow(out, row, stored, { softDeleted: true, deleted: false, version: 9n })).toBe(
        false,
      );
      expect(out.take().toString('hex')).toBe(`01000000000000000378797a0100${'09'}${'00'.repeat(7)}`);
      expect(writer.writeRow(out, row, undefined, { softDeleted: false, deleted: true, version: 1n })).toBe(
        true,
      );
      expect(out.take().toString('hex')).toBe(`0100000000000000000001${'01'}${'00'.repeat(7)}`);
    }
    const out = new RowBinaryWriter(16);
    writer.writeStored(out, stored, { softDeleted: false, deleted: true, version: 2n });
    expect(out.take().toString('hex')).toBe(`01000000000000000378797a0001${'02'}${'00'.repeat(7)}`);
  });

  it('refuses a row with too few or too many fields, and binary cells', () => {
    const writer = rowWriter([
      [int64, 'Int64'],
      [text, 'String'],
    ]);
    const out = new RowBinaryWriter(16);
    expect(() => writer.writeLines(Buffer.from('1\n'), out)).toThrow(
      'a COPY row of public.t has 1 fields, not 2',
    );
    expect(() => writer.writeLines(Buffer.from('1\ta\tb\n'), out)).toThrow(
      'a COPY row of public.t has 3 fields, not 2',
    );
    expect(() => writer.writeTuples(tupleData(['1']), out, 0n)).toThrow(
      'a COPY row of public.t has 1 fields, not 2',
    );
    expect(() => writer.writeTuples(tupleData(['1', Buffer.from('x')]), out, 0n)).toThrow(
      'binary tuple value in db.t; text format expected',
    );
  });
});
