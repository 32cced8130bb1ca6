import { describe, expect, it } from 'vitest';
import { civilFromDays, formatCivilDate } from '../../model/calendar.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import { columnEncoder, writeTextCell } from './column-encoder.ts';
import { dateDays, RowBinaryReader, RowBinaryWriter } from './row-binary.ts';
import { sqlLiteral, stringLiteral } from './sql.ts';
import { parseChType } from './types.ts';

const limits = { date32: { minDay: -25_567, maxDay: 120_529 } };

function encode(source: ColumnType, target: string, cell: string | null): string {
  const writer = new RowBinaryWriter(8);
  writeTextCell(writer, columnEncoder('c', source, parseChType(target), limits), cell);
  return writer.take().toString('hex');
}

describe('RowBinary encoding of source values', () => {
  it('writes integers, floats, booleans and strings little-endian', () => {
    expect(encode({ kind: 'int32' }, 'Int32', '-2')).toBe('feffffff');
    expect(encode({ kind: 'int64' }, 'Int64', '9223372036854775807')).toBe('ffffffffffffff7f');
    expect(encode({ kind: 'int16' }, 'Nullable(Int16)', null)).toBe('01');
    expect(encode({ kind: 'int16' }, 'Nullable(Int16)', '1')).toBe('000100');
    expect(encode({ kind: 'float64' }, 'Float64', '1.5')).toBe('000000000000f83f');
    expect(encode({ kind: 'boolean' }, 'Bool', 't')).toBe('01');
    // A boolean in a wider integer column takes the column's width.
    expect(encode({ kind: 'boolean' }, 'Int32', 't')).toBe('01000000');
    expect(encode({ kind: 'string' }, 'String', 'é')).toBe('02c3a9');
    expect(encode({ kind: 'string' }, 'String', 'x'.repeat(200)).slice(0, 4)).toBe('c801');
    // NULL in a non-Nullable column: the type's zero value.
    expect(encode({ kind: 'int32' }, 'Int32', null)).toBe('00000000');
    expect(encode({ kind: 'string' }, 'String', null)).toBe('00');
  });

  it('writes bytea as its bytes and other text kinds as their text', () => {
    expect(encode({ kind: 'bytes' }, 'String', '\\xdead00')).toBe('03dead00');
    expect(encode({ kind: 'interval' }, 'String', '1 day')).toBe(Buffer.from('\x051 day').toString('hex'));
    expect(encode({ kind: 'numeric' }, 'String', 'NaN')).toBe(Buffer.from('\x03NaN').toString('hex'));
  });

  it('writes Decimal as the scaled integer of its width, and refuses what does not fit', () => {
    const numeric = { kind: 'numeric', precision: 12, scale: 2 } as const;
    expect(encode(numeric, 'Decimal(12, 2)', '-12.50')).toBe('1efbffffffffffff');
    expect(encode(numeric, 'Decimal(9, 2)', '1.5')).toBe('96000000');
    expect(encode(numeric, 'Decimal(38, 2)', '1')).toBe(`64${'00'.repeat(15)}`);
    expect(encode(numeric, 'Decimal(76, 2)', '-1')).toBe(`9c${'ff'.repeat(31)}`);
    expect(() => encode(numeric, 'Decimal(3, 2)', '12.50')).toThrow(/out of the range/);
    expect(() => encode(numeric, 'Decimal(12, 1)', '1.25')).toThrow(/more fraction digits/);
    expect(() => encode(numeric, 'Decimal(12, 2)', 'NaN')).toThrow(/NaN cannot be stored/);
    expect(encode(numeric, 'Nullable(Decimal(12, 2))', 'NaN')).toBe('01');
  });

  it('writes UUIDs as two little-endian halves', () => {
    expect(encode({ kind: 'uuid' }, 'UUID', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11')).toBe(
      'f84e0b9c99bceea0110a38bdb96b6dbb',
    );
  });

  it('writes dates and timestamps, clamped to what the type can show', () => {
    expect(encode({ kind: 'date' }, 'Date32', '1969-12-31')).toBe('ffffffff');
    expect(encode({ kind: 'date' }, 'Date32', '0044-03-15 BC')).toBe(
      encode({ kind: 'date' }, 'Date32', '1900-01-01'),
    );
    expect(encode({ kind: 'date' }, 'Date32', 'infinity')).toBe(
      encode({ kind: 'date' }, 'Date32', '2299-12-31'),
    );
    expect(encode({ kind: 'date' }, 'Date', '1969-12-31')).toBe('0000');
    const micros = (text: string) => encode({ kind: 'timestamptz' }, 'Int64', text);
    expect(micros('1970-01-01 00:00:01.5+00')).toBe('60e3160000000000');
    expect(micros('infinity')).toBe('ffffffffffffff7f');
    const dateTime64 = (text: string, precision = 6) =>
      encode({ kind: 'timestamptz' }, `DateTime64(${precision}, 'UTC')`, text);
    expect(dateTime64('1970-01-01 00:00:01.5+00')).toBe(micros('1970-01-01 00:00:01.5+00'));
    expect(dateTime64('1970-01-01 00:00:01.5+00', 3)).toBe('dc05000000000000');
    expect(dateTime64('infinity')).toBe(dateTime64('2299-12-31 23:59:59.999999+00'));
    expect(encode({ kind: 'timestamptz' }, "DateTime('UTC')", '1970-01-01 00:00:01.5+00')).toBe('01000000');
  });

  it('writes arrays and maps, and refuses an array of other dimensions', () => {
    const ints = { kind: 'array', element: { kind: 'int32' } } as const;
    expect(encode(ints, 'Array(Nullable(Int32))', '{1,NULL}')).toBe('02000100000001');
    expect(encode(ints, 'Array(Array(Nullable(Int32)))', '{{1},{2}}')).toBe('02010001000000010002000000');
    expect(encode(ints, 'Array(Nullable(Int32))', null)).toBe('00');
    expect(() => encode(ints, 'Array(Nullable(Int32))', '{{1},{2}}')).toThrow(/2-dimensional/);
    expect(encode({ kind: 'hstore' }, 'Map(String, Nullable(String))', 'a=>1, b=>NULL')).toBe(
      '0201610001310162' + '01',
    );
  });

  it('refuses a source type the column cannot hold', () => {
    expect(() => columnEncoder('c', { kind: 'uuid' }, parseChType('Int32'), limits)).toThrow(
      /column c: a uuid value cannot be written to ClickHouse Int32/,
    );
  });
});

describe('reading RowBinary back as SQL literals', () => {
  it('round-trips every key type to a typed literal', () => {
    const cases: [ColumnType, string, string, string][] = [
      [{ kind: 'int64' }, 'Int64', '-5', "CAST('-5' AS Int64)"],
      [{ kind: 'string' }, 'String', "it's \\ é", "'it\\'s \\\\ \\xc3\\xa9'"],
      [
        { kind: 'uuid' },
        'UUID',
        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
        "CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID)",
      ],
      [
        { kind: 'numeric', precision: 12, scale: 2 },
        'Decimal(12, 2)',
        '-0.05',
        "CAST('-0.05' AS Decimal(12, 2))",
      ],
      [{ kind: 'date' }, 'Date32', '1900-01-01', "CAST('1900-01-01' AS Date32)"],
      [
        { kind: 'timestamptz' },
        "DateTime64(6, 'UTC')",
        '1969-12-31 23:59:59.5+00',
        "CAST('1969-12-31 23:59:59.500000' AS DateTime64(6, 'UTC'))",
      ],
      [{ kind: 'boolean' }, 'Bool', 't', "CAST('true' AS Bool)"],
    ];
    for (const [source, target, text, literal] of cases) {
      const type = parseChType(target);
      const writer = new RowBinaryWriter(8);
      writeTextCell(writer, columnEncoder('c', source, type, limits), text);
      const bytes = writer.take();
      const reader = new RowBinaryReader(bytes);
      expect(sqlLiteral(type, reader.value(type))).toBe(literal);
      expect(reader.atEnd).toBe(true);
      expect(new RowBinaryReader(bytes).rawValue(type)).toEqual(bytes);
    }
  });

  it('escapes any byte in a string literal', () => {
    expect(stringLiteral(Buffer.from([0x00, 0x27, 0x5c, 0xff, 0x41]))).toBe("'\\x00\\'\\\\\\xffA'");
  });

  it('converts between day numbers and civil dates', () => {
    for (const date of [
      '1970-01-01',
      '1900-01-01',
      '2299-12-31',
      '2024-02-29',
      '-0043-03-15',
      '10000-01-01',
    ]) {
      expect(formatCivilDate(civilFromDays(dateDays(date)))).toBe(date);
    }
    expect(dateDays('1970-01-02')).toBe(1);
  });
});
