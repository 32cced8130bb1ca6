// How values travel to Snowflake: exact (no float on the way), NULL as a
// missing key, unchanged TOAST values as flags, the CSV line quoting the JSON.
import { describe, expect, it } from 'vitest';
import type { DestinationTable, SourceColumn } from '../records.ts';
import { unchangedToast } from '../records.ts';
import { rowOfCells } from '../rows.ts';
import { changeLine, dataObject, unchangedFlags } from './changes-file.ts';
import { columnCodec, formatMicros } from './types.ts';

const column = (name: string, typeOid: number, typeName: string, typeModifier = -1): SourceColumn => ({
  name,
  typeOid,
  typeModifier,
  typeName,
  notNull: false,
});

describe('Snowflake column types and values', () => {
  it('maps the value model to Snowflake types', () => {
    const types = [
      column('a', 20, 'bigint'),
      column('b', 1700, 'numeric(10,2)', ((10 << 16) | 2) + 4),
      column('c', 1700, 'numeric'),
      column('d', 1700, 'numeric(40,2)', ((40 << 16) | 2) + 4),
      column('e', 3802, 'jsonb'),
      column('f', 1184, 'timestamp with time zone'),
      column('g', 1114, 'timestamp without time zone'),
      column('h', 17, 'bytea'),
      column('i', 16, 'boolean'),
      column('j', 1007, 'integer[]'),
      column('k', 1186, 'interval'),
      column('l', 600, 'point'),
    ].map((source) => columnCodec(source).sqlType);
    expect(types).toEqual([
      'NUMBER(19,0)',
      'NUMBER(10,2)',
      'VARCHAR',
      'VARCHAR',
      'VARIANT',
      'TIMESTAMP_TZ',
      'TIMESTAMP_NTZ(6)',
      'BINARY',
      'BOOLEAN',
      'VARIANT',
      'VARIANT',
      'VARCHAR',
    ]);
  });

  it('encodes values exactly', () => {
    const encode = (source: SourceColumn, text: string) => columnCodec(source).encode(text);
    expect(encode(column('a', 20, 'bigint'), '9223372036854775807')).toBe('"9223372036854775807"');
    expect(encode(column('c', 1700, 'numeric'), '12345678901234567890.000000000001')).toBe(
      '"12345678901234567890.000000000001"',
    );
    expect(encode(column('e', 3802, 'jsonb'), '{"n": 12345678901234567890123}')).toBe(
      '{"n": 12345678901234567890123}',
    );
    expect(encode(column('e', 114, 'json'), '{\n"a": 1}')).toBe('{ "a": 1}');
    expect(encode(column('h', 17, 'bytea'), '\\x00ff')).toBe('"00ff"');
    expect(encode(column('f', 1184, 'timestamp with time zone'), '2024-01-02 03:04:05.123456+02')).toBe(
      '"2024-01-02T01:04:05.123456+00:00"',
    );
    expect(encode(column('f', 1184, 'timestamp with time zone'), 'infinity')).toBeUndefined();
    expect(encode(column('j', 1016, 'bigint[]'), '{1,NULL,9223372036854775807}')).toBe(
      '[1,null,9223372036854775807]',
    );
    expect(encode(column('i', 16, 'boolean'), 'f')).toBe('false');
    expect(formatMicros(-1n)).toBe('1969-12-31 23:59:59.999999');
  });

  it('writes a row as a CSV line with NULLs left out and unchanged values flagged', () => {
    const table: DestinationTable = {
      source: { schema: 'public', table: 't' },
      destination: { schema: 'public', table: 't' },
      columns: [column('id', 23, 'integer'), column('body', 25, 'text'), column('note', 25, 'text')],
      keyColumns: ['id'],
    };
    const codecs = table.columns.map(columnCodec);
    const row = ['1', unchangedToast, 'say "hi", \\ bye'] as const;
    const data = dataObject(table, codecs, rowOfCells(row));
    expect(data).toBe('{"c0":"1","c2":"say \\"hi\\", \\\\ bye"}');
    expect(dataObject(table, codecs, rowOfCells(['2', null, null]))).toBe('{"c0":"2"}');
    expect(unchangedFlags(rowOfCells(row))).toBe('010');
    expect(unchangedFlags(rowOfCells(['1', null, 'x']))).toBe('');
    expect(changeLine(5n, 0, 3, 'U', data, '010')).toBe(
      '5,0,3,U,"{""c0"":""1"",""c2"":""say \\""hi\\"", \\\\ bye""}",010\n',
    );
  });
});
