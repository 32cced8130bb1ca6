import { describe, expect, it } from 'vitest';
import type { SourceColumn } from '../records.ts';
import { serverCapabilities } from './server.ts';
import { chTypeFor, formatChType, parseChType, sourceColumnType } from './types.ts';

const old = serverCapabilities('18.16.1');
const current = serverCapabilities('26.7.2.1');

function column(typeOid: number, typeName: string, extra: Partial<SourceColumn> = {}): SourceColumn {
  return { name: 'c', typeOid, typeModifier: -1, typeName, notNull: false, ...extra };
}

describe('ClickHouse type names', () => {
  it('parses what system.columns reports and writes it back', () => {
    for (const text of [
      'Int32',
      'UInt64',
      'Nullable(String)',
      'Array(Array(Nullable(Int32)))',
      "DateTime64(6, 'UTC')",
      "DateTime('Europe/Paris')",
      'DateTime',
      'Decimal(38, 10)',
      'Map(String, Nullable(String))',
      'LowCardinality(Nullable(String))',
      'Date32',
      'Bool',
      'UUID',
    ]) {
      expect(formatChType(parseChType(text))).toBe(text);
    }
    expect(parseChType('Decimal128(4)')).toEqual({ name: 'Decimal', precision: 38, scale: 4 });
    expect(parseChType('DateTime64(3)')).toEqual({ name: 'DateTime64', precision: 3 });
  });

  it('refuses types the connector cannot write', () => {
    expect(() => parseChType('Tuple(a Int32, b String)')).toThrow(/not one the connector can write/);
    expect(() => parseChType('FixedString(3)')).toThrow(/not one the connector can write/);
    expect(() => parseChType('Array(Int32')).toThrow(/not one the connector can write/);
  });
});

describe('value-model types to ClickHouse', () => {
  it('picks the best type the server has, and falls back on 18.16', () => {
    const expectations: [SourceColumn, string, string][] = [
      [column(20, 'bigint'), 'Int64', 'Int64'],
      [column(16, 'boolean'), 'Bool', 'UInt8'],
      [column(1082, 'date'), 'Date32', 'Date'],
      [column(1184, 'timestamp with time zone'), "DateTime64(6, 'UTC')", 'Int64'],
      [column(1114, 'timestamp without time zone'), "DateTime64(6, 'UTC')", 'Int64'],
      [column(1083, 'time without time zone'), 'Int64', 'Int64'],
      [
        column(1700, 'numeric(12,2)', { typeModifier: ((12 << 16) | 2) + 4 }),
        'Decimal(12, 2)',
        'Decimal(12, 2)',
      ],
      [column(1700, 'numeric(60,4)', { typeModifier: ((60 << 16) | 4) + 4 }), 'Decimal(60, 4)', 'String'],
      [
        column(1700, 'numeric(5,-2)', { typeModifier: ((5 << 16) | (-2 & 0x7ff)) + 4 }),
        'Decimal(7, 0)',
        'Decimal(7, 0)',
      ],
      [column(1700, 'numeric(3,5)', { typeModifier: ((3 << 16) | 5) + 4 }), 'Decimal(5, 5)', 'Decimal(5, 5)'],
      [column(1700, 'numeric'), 'String', 'String'],
      [column(3802, 'jsonb'), 'String', 'String'],
      [column(2950, 'uuid'), 'UUID', 'UUID'],
      [column(17, 'bytea'), 'String', 'String'],
      [column(1186, 'interval'), 'String', 'String'],
      [column(1007, 'integer[]'), 'Array(Nullable(Int32))', 'Array(Nullable(Int32))'],
      [
        column(1007, 'integer[]', { arrayDimensions: 2 }),
        'Array(Array(Nullable(Int32)))',
        'Array(Array(Nullable(Int32)))',
      ],
      [
        column(1185, 'timestamp with time zone[]'),
        "Array(Nullable(DateTime64(6, 'UTC')))",
        'Array(Nullable(Int64))',
      ],
      [column(16_500, 'hstore'), 'Map(String, Nullable(String))', 'String'],
      [column(16_501, 'hstore[]'), 'String', 'String'],
      [column(16_502, 'mood'), 'String', 'String'],
      [column(16_503, 'positive_int', { domainBaseTypeName: 'integer' }), 'Int32', 'Int32'],
      [
        column(16_504, 'money_range', { domainBaseTypeName: 'numeric(10,2)' }),
        'Decimal(10, 2)',
        'Decimal(10, 2)',
      ],
      [
        column(16_505, 'tags', { domainBaseTypeName: 'text[]' }),
        'Array(Nullable(String))',
        'Array(Nullable(String))',
      ],
    ];
    for (const [source, modern, fallback] of expectations) {
      const type = sourceColumnType(source);
      expect(formatChType(chTypeFor(type, current, source.arrayDimensions)), source.typeName).toBe(modern);
      expect(formatChType(chTypeFor(type, old, source.arrayDimensions)), source.typeName).toBe(fallback);
    }
  });

  it('derives capabilities from the server version', () => {
    expect(old).toMatchObject({
      isDeletedColumn: false,
      dateTime64: false,
      date32: false,
      maxDecimalPrecision: 38,
    });
    expect(current).toMatchObject({
      isDeletedColumn: true,
      dateTime64: true,
      date32: true,
      maxDecimalPrecision: 76,
    });
    expect(serverCapabilities('23.1.3').isDeletedColumn).toBe(false);
    expect(serverCapabilities('23.2.1').isDeletedColumn).toBe(true);
    expect(current.extendedDateRange).toEqual({ minDay: -25_567, maxDay: 120_529 });
  });
});
