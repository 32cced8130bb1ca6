import { describe, expect, it } from 'vitest';
import { typedColumn } from '../../../../test/support/text-table.ts';
import { parseTextValue } from '../../model/parse-text.ts';
import { cellJson, isoTimestamp, renderCell, renderText, tableFormat } from './message-format.ts';

describe('the per-value rendering', () => {
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

  it("gives a value's JSON as JSON.stringify of its rendering", () => {
    const format = tableFormat({
      source: { schema: 'public', table: 't' },
      destination: { schema: 'public', table: 't' },
      columns: [typedColumn('n', 1700), typedColumn('s', 25), typedColumn('d', 1082), typedColumn('i', 1186)],
      keyColumns: [],
    });
    const samples: [number, string][] = [
      [0, 'NaN'],
      [0, '-0.5'],
      [1, 'quote " \\ \u0001 é'],
      [2, '0044-03-15 BC'],
      [3, '1 day'],
    ];
    for (const [index, text] of samples) {
      expect(cellJson(format, index, text)).toBe(JSON.stringify(renderCell(format, index, text)));
    }
  });
});
