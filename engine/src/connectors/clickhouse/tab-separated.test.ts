import { describe, expect, it } from 'vitest';
import { tupleData } from '../../../../test/support/wire-tuple.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import { parseCopyTextLine } from '../copy-text.ts';
import { unchangedToast } from '../records.ts';
import { columnEncoder, RowBinaryWriter } from './row-binary.ts';
import { serverCapabilities } from './server.ts';
import { TabSeparatedRows, tabSeparatedPlan, tabSeparatedSettings } from './tab-separated.ts';
import { parseChType } from './types.ts';

const current = serverCapabilities('26.7.2.1');
const old = serverCapabilities('18.16.1');

/** The plan of columns given as [source type, ClickHouse type]; undefined when the table stays on RowBinary. */
function planOf(columns: readonly (readonly [ColumnType, string])[], capabilities = current) {
  const limits = { date32: capabilities.extendedDateRange };
  return tabSeparatedPlan(
    columns.map(([source, target]) => ({
      kind: source.kind,
      type: parseChType(target),
      encoder: columnEncoder('c', source, parseChType(target), limits),
    })),
    capabilities,
  );
}

/**
 * The TabSeparated text the lines of COPY text become, with a flag field and
 * the version; the same rows given as TupleData (a batch's new rows) must
 * become the same text.
 */
function convert(
  columns: readonly (readonly [ColumnType, string])[],
  lines: readonly string[],
  capabilities = current,
  firstVersion?: bigint,
): string[] {
  const plan = planOf(columns, capabilities);
  if (!plan) throw new Error('no plan');
  const rows = new TabSeparatedRows(
    { source: { schema: 'public', table: 't' }, columns: plan },
    plan,
    ['0'],
    capabilities,
  );
  const fromLines = new RowBinaryWriter(16);
  const block = Buffer.from(lines.map((line) => `${line}\n`).join(''));
  expect(rows.writeLines(block, fromLines, firstVersion)).toBe(lines.length);
  const fromTuples = new RowBinaryWriter(16);
  const records = Buffer.concat(lines.map((line) => tupleData(parseCopyTextLine(line))));
  expect(rows.writeTuples(records, fromTuples, firstVersion)).toBe(lines.length);
  const text = fromLines.take().toString('utf8');
  expect(fromTuples.take().toString('utf8')).toBe(text);
  return text.split('\n').slice(0, -1);
}

const int64 = { kind: 'int64' } as const;
const int32 = { kind: 'int32' } as const;
const text = { kind: 'string' } as const;
const uuid = { kind: 'uuid' } as const;
const numeric = { kind: 'numeric', precision: 12, scale: 2 } as const;
const timestamptz = { kind: 'timestamptz' } as const;
const timestamp = { kind: 'timestamp' } as const;

describe('tabSeparatedPlan', () => {
  it('has a rule for text, uuid, wide enough integers, numeric and timestamps', () => {
    expect(
      planOf([
        [int64, 'Int64'],
        [int32, 'Nullable(Int64)'],
        [text, 'LowCardinality(Nullable(String))'],
        [{ kind: 'json' }, 'String'],
        [uuid, 'UUID'],
        [numeric, 'Nullable(Decimal(12, 2))'],
        [timestamptz, "DateTime64(6, 'UTC')"],
      ])?.map((column) => column.rule),
    ).toEqual(['as-is', 'as-is', 'as-is', 'as-is', 'as-is', 'decimal', 'dateTime64']);
    expect(planOf([[timestamptz, 'Int64']], old)?.map((column) => column.rule)).toEqual(['micros']);
  });

  it('leaves a table with any other column on RowBinary', () => {
    expect(planOf([[int64, 'Int32']])).toBeUndefined();
    expect(planOf([[int32, 'UInt64']])).toBeUndefined();
    expect(planOf([[{ kind: 'float32' }, 'Float32']])).toBeUndefined();
    expect(planOf([[{ kind: 'float64' }, 'Float64']], old)).toBeUndefined();
    expect(planOf([[{ kind: 'date' }, 'Date']])).toBeUndefined();
    expect(planOf([[{ kind: 'date' }, 'Date32']], serverCapabilities('22.3.1'))).toBeUndefined();
    expect(planOf([[timestamptz, 'DateTime64(3)']])).toBeUndefined();
    expect(planOf([[timestamptz, "DateTime64(6, 'Europe/Berlin')"]])).toBeUndefined();
    // Before 22.8 servers read text times with another range.
    expect(planOf([[timestamptz, "DateTime64(6, 'UTC')"]], serverCapabilities('22.3.1'))).toBeUndefined();
  });
});

describe('TabSeparatedRows', () => {
  it('copies text with its escapes, uuids and integers, and appends the metadata fields', () => {
    const line = '-42\t7\ttab\\there, back\\\\slash\\nnew line é\t0f0e8d3c-9b2a-4c1d-8e7f-6a5b4c3d2e1f';
    expect(
      convert(
        [
          [int64, 'Int64'],
          [int32, 'Int32'],
          [text, 'String'],
          [uuid, 'UUID'],
        ],
        [line],
      ),
    ).toEqual([`${line}\t0\t0`]);
  });

  it("gives a batch's rows consecutive versions from the first, below 2^53 and across it", () => {
    const small = (7n << 27n) + 5n;
    expect(convert([[int64, 'Int64']], ['1', '2'], current, small)).toEqual([
      `1\t0\t${small}`,
      `2\t0\t${small + 1n}`,
    ]);
    // The last version of the block past 2^53: every row's is counted exactly.
    const edge = BigInt(Number.MAX_SAFE_INTEGER) - 1n;
    expect(convert([[int64, 'Int64']], ['1', '2', '3', '4'], current, edge)).toEqual([
      `1\t0\t${edge}`,
      `2\t0\t${edge + 1n}`,
      `3\t0\t${edge + 2n}`,
      `4\t0\t${edge + 3n}`,
    ]);
  });

  it("gives a batch's rows consecutive versions from the first, past 2^53", () => {
    const first = (123_456_789n << 27n) + 5n;
    expect(first > BigInt(Number.MAX_SAFE_INTEGER)).toBe(true);
    expect(convert([[int64, 'Int64']], ['1', '2', '3'], current, first)).toEqual([
      `1\t0\t${first}`,
      `2\t0\t${first + 1n}`,
      `3\t0\t${first + 2n}`,
    ]);
  });

  it('writes NULL as \\N into a Nullable column and as the zero of the type into any other', () => {
    const columns = [
      [int64, 'Int64'],
      [text, 'Nullable(String)'],
      [text, 'String'],
      [uuid, 'UUID'],
      [numeric, 'Decimal(12, 2)'],
      [timestamptz, "DateTime64(6, 'UTC')"],
    ] as const;
    expect(convert(columns, ['\\N\t\\N\t\\N\t\\N\t\\N\t\\N'])).toEqual([
      '0\t\\N\t\t00000000-0000-0000-0000-000000000000\t0\t1970-01-01 00:00:00.000000\t0\t0',
    ]);
  });

  it('copies decimals that fit and converts the others as RowBinary would store them', () => {
    const columns = [
      [int32, 'Int32'],
      [numeric, 'Nullable(Decimal(12, 2))'],
    ] as const;
    expect(
      convert(columns, ['1\t12.30', '2\t-0.5', '3\t1.500', '4\tNaN', '5\t9999999999.99', '6\t123']),
    ).toEqual(
      ['1\t12.30', '2\t-0.5', '3\t1.50', '4\t\\N', '5\t9999999999.99', '6\t123'].map((row) => `${row}\t0\t0`),
    );
    // What RowBinary refuses, TabSeparated refuses with the same error.
    expect(() => convert([[numeric, 'Decimal(12, 2)']], ['NaN'])).toThrow(/NaN cannot be stored as Decimal/);
    expect(() => convert([[numeric, 'Decimal(4, 2)']], ['123.00'])).toThrow(
      /out of the range of Decimal\(4, 2\)/,
    );
  });

  it('writes timestamps into Int64 as microseconds since the epoch', () => {
    const columns = [
      [timestamptz, 'Int64'],
      [timestamp, 'Nullable(Int64)'],
    ] as const;
    expect(
      convert(
        columns,
        [
          '2024-01-02 03:04:05.123456+00\t1970-01-01 00:00:00',
          '1969-12-31 23:59:59.5+00\t2024-01-02 03:04:05.1',
          // Past mid-2255, BC and infinity: through the value model (figures from PostgreSQL's extract(epoch …)).
          '2300-01-01 00:00:00+00\t0044-03-15 12:00:00 BC',
          'infinity\t\\N',
        ],
        old,
      ),
    ).toEqual([
      '1704164645123456\t0\t0\t0',
      '-500000\t1704164645100000\t0\t0',
      '10413792000000000\t-63517780800000000\t0\t0',
      '9223372036854775807\t\\N\t0\t0',
    ]);
  });

  it("copies DateTime64 text without its +00 inside the server's range and clamps the rest", () => {
    const columns = [[timestamptz, "DateTime64(6, 'UTC')"]] as const;
    expect(
      convert(columns, [
        '2024-01-02 03:04:05.12+00',
        '1901-01-01 00:00:00+00',
        '1800-06-01 00:00:00+00',
        '2299-12-31 23:59:59.999999+00',
        '2400-01-01 00:00:00+00',
        'infinity',
        '-infinity',
      ]),
    ).toEqual([
      '2024-01-02 03:04:05.12\t0\t0',
      '1901-01-01 00:00:00\t0\t0',
      '1900-01-01 00:00:00.000000\t0\t0',
      '2299-12-31 23:59:59.999999\t0\t0',
      '2299-12-31 23:59:59.999999\t0\t0',
      '2299-12-31 23:59:59.999999\t0\t0',
      '1900-01-01 00:00:00.000000\t0\t0',
    ]);
  });

  it("writes bytea's hex text as its bytes, escaped where TabSeparated needs it", () => {
    const columns = [[{ kind: 'bytes' }, 'Nullable(String)']] as const;
    expect(planOf(columns)?.map((column) => column.rule)).toEqual(['bytes']);
    // COPY doubles the backslash of `\x…`.
    expect(convert(columns, ['\\\\x41005c090a0d08097f', '\\\\x', '\\N'])).toEqual([
      'A\\0\\\\\\t\\n\\r\\b\\t\x7f\t0\t0',
      '\t0\t0',
      '\\N\t0\t0',
    ]);
  });

  it('writes booleans as 1 and 0 into Bool and integer columns', () => {
    const boolean = { kind: 'boolean' } as const;
    const columns = [
      [boolean, 'Bool'],
      [boolean, 'Nullable(UInt8)'],
      [boolean, 'Int32'],
    ] as const;
    expect(planOf(columns)?.map((column) => column.rule)).toEqual(['boolean', 'boolean', 'boolean']);
    expect(convert(columns, ['t\tf\t\\N', 'f\t\\N\tt'])).toEqual(['1\t0\t0\t0\t0', '0\t\\N\t1\t0\t0']);
    expect(() => convert(columns, ['x\tt\tt'])).toThrow(/boolean/);
  });

  it('copies floats into Float64, and dates into Date32 inside the range, clamping the rest', () => {
    const columns = [
      [{ kind: 'float64' }, 'Float64'],
      [{ kind: 'float32' }, 'Nullable(Float64)'],
      [{ kind: 'date' }, 'Nullable(Date32)'],
      [{ kind: 'date' }, 'Date32'],
    ] as const;
    expect(planOf(columns)?.map((column) => column.rule)).toEqual(['as-is', 'as-is', 'date32', 'date32']);
    expect(
      convert(columns, [
        '1.5\t0.1\t2024-02-29\t1901-01-01',
        'NaN\t-Infinity\t1899-12-31\t2300-01-01',
        '-0\t\\N\tinfinity\t-infinity',
        '\\N\t4.9e-324\t0044-03-15 BC\t\\N',
      ]),
    ).toEqual([
      '1.5\t0.1\t2024-02-29\t1901-01-01\t0\t0',
      'NaN\t-Infinity\t1900-01-01\t2299-12-31\t0\t0',
      '-0\t\\N\t2299-12-31\t1900-01-01\t0\t0',
      '0\t4.9e-324\t1900-01-01\t1970-01-01\t0\t0',
    ]);
  });

  it('refuses a row with too few or too many fields', () => {
    const columns = [
      [int64, 'Int64'],
      [text, 'String'],
    ] as const;
    expect(() => convert(columns, ['1'])).toThrow('a COPY row of public.t has 1 fields, not 2');
    expect(() => convert(columns, ['1\ta\tb'])).toThrow('a COPY row of public.t has 3 fields, not 2');
  });

  it('writes TupleData: a text of backslash-N escaped, an unchanged TOAST cell as NULL; refuses binary cells and a wrong count', () => {
    const columns = [
      [int64, 'Int64'],
      [text, 'Nullable(String)'],
    ] as const;
    const plan = planOf(columns);
    if (!plan) throw new Error('no plan');
    const rows = new TabSeparatedRows(
      { source: { schema: 'public', table: 't' }, columns: plan },
      plan,
      [],
      current,
    );
    const out = new RowBinaryWriter(16);
    const records = Buffer.concat([tupleData(['1', '\\N']), tupleData(['2', unchangedToast])]);
    expect(rows.writeTuples(records, out, 5n)).toBe(2);
    expect(out.take().toString()).toBe('1\t\\\\N\t5\n2\t\\N\t6\n');
    expect(() => rows.writeTuples(tupleData(['1', Buffer.from('x')]), out)).toThrow(
      'binary tuple value in public.t; text format expected',
    );
    expect(() => rows.writeTuples(tupleData(['1']), out)).toThrow(
      'a COPY row of public.t has 1 fields, not 2',
    );
  });
});

describe('tabSeparatedSettings', () => {
  it('turns off skipping rows, and header detection where the server has it (18.16 refuses the setting)', () => {
    expect(tabSeparatedSettings(old)).toEqual({
      input_format_allow_errors_num: '0',
      input_format_allow_errors_ratio: '0',
    });
    expect(tabSeparatedSettings(current)).toMatchObject({
      input_format_tsv_detect_header: '0',
      input_format_tsv_skip_first_lines: '0',
    });
  });
});

describe('RowBinaryWriter.digits', () => {
  it('writes safe integers as decimal digits', () => {
    const writer = new RowBinaryWriter(4);
    for (const value of [
      0,
      7,
      10,
      -1,
      -500000,
      1704164645123456,
      Number.MAX_SAFE_INTEGER,
      -Number.MAX_SAFE_INTEGER,
    ]) {
      writer.digits(value);
      writer.ascii(' ');
    }
    expect(writer.take().toString()).toBe(
      '0 7 10 -1 -500000 1704164645123456 9007199254740991 -9007199254740991 ',
    );
  });
});
