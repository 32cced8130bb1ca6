// The typed value model against a real PostgreSQL: every supported type's
// output-function text, read with the source session settings, must parse to
// the value PostgreSQL itself computes by another route (extract(epoch …),
// to_json, hstore_to_json, encode …), and every column's catalog facts must
// map to the expected ColumnType.
//
// Values are read through node-pg with every type parser replaced by the
// identity, which yields exactly the text the type's output function writes,
// as COPY and pgoutput carry it. `col::text` would not do: bool::text is
// 'true', not 't', and inet::text always appends the mask.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineError } from '../../engine/src/errors.ts';
import {
  parseTextValue,
  timestampInfinity,
  timestampMinusInfinity,
} from '../../engine/src/model/parse-text.ts';
import {
  needsCatalogInfo,
  type PgTypeCatalogRow,
  pgColumnType,
  pgTypeCatalogQuery,
  pgTypeLookupFromRows,
} from '../../engine/src/model/pg-type-map.ts';
import type { ColumnType } from '../../engine/src/model/value-kind.ts';
import { postgres } from '../support/testenv.ts';

const suffix = randomBytes(4).toString('hex');
const table = `value_model_${suffix}`;
const moodType = `mood_${suffix}`;
const positiveIntType = `positive_int_${suffix}`;
const amountType = `amount_${suffix}`;

const sourceSessionSettings = [
  'SET DateStyle = ISO',
  "SET TimeZone = 'UTC'",
  'SET IntervalStyle = postgres',
  'SET extra_float_digits = 3',
  'SET bytea_output = hex',
];

const rowCount = 5;

/** PostgreSQL's own idea of a value, as JSON; `expected` turns it into the JS value parseTextValue must give. */
interface Oracle {
  readonly sql: (column: string) => string;
  readonly expected: (json: unknown) => unknown;
}

interface ColumnCase {
  readonly column: string;
  readonly sqlType: string;
  readonly type: ColumnType;
  /** SQL expressions, one per row from id 1; missing rows are NULL. */
  readonly values: readonly string[];
  readonly oracle?: Oracle;
  /** Values spelled out, per row, where no independent oracle exists or the exact form matters. */
  readonly expected?: readonly unknown[];
}

// --- oracles -----------------------------------------------------------------

const asJson: Oracle = { sql: (c) => `to_json(${c})`, expected: (json) => json };
const asText: Oracle = { sql: (c) => `to_json(${c}::text)`, expected: (json) => json };

function deepMap(value: unknown, leaf: (json: unknown) => unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => deepMap(item, leaf));
  return value === null ? null : leaf(value);
}

const bigintLeaf = (json: unknown): unknown => BigInt(String(json));
const numberLeaf = (json: unknown): unknown => (typeof json === 'string' ? Number(json) : json);

const epochMicrosSql = (c: string) =>
  `CASE WHEN isfinite(${c}) THEN to_json((extract(epoch FROM ${c}) * 1000000)::numeric(40, 0)::text) ELSE to_json(${c}::text) END`;
const epochMicrosLeaf = (json: unknown): unknown => {
  if (json === 'infinity') return timestampInfinity;
  if (json === '-infinity') return timestampMinusInfinity;
  return BigInt(String(json));
};

/** Year, month and day as PostgreSQL extracts them (year -44 is 44 BC), rendered as the model's ISO date. */
const dateFieldsSql = (c: string) =>
  `CASE WHEN isfinite(${c}) THEN json_build_array(extract(year FROM ${c})::int, extract(month FROM ${c})::int, extract(day FROM ${c})::int) ELSE to_json(${c}::text) END`;
const dateFieldsLeaf = (json: unknown): unknown => {
  if (!Array.isArray(json)) return json;
  const [year, month, day] = json as [number, number, number];
  const astronomical = year < 0 ? year + 1 : year;
  const yearDigits = String(Math.abs(astronomical)).padStart(4, '0');
  const two = (n: number) => String(n).padStart(2, '0');
  return `${astronomical < 0 ? '-' : ''}${yearDigits}-${two(month)}-${two(day)}`;
};

const intervalFieldsSql = (c: string) =>
  `json_build_object(
    'months', (extract(year FROM ${c}) * 12 + extract(month FROM ${c}))::int,
    'days', extract(day FROM ${c})::int,
    'microseconds', (extract(hour FROM ${c}) * 3600000000 + extract(minute FROM ${c}) * 60000000
      + extract(microseconds FROM ${c}))::numeric(40, 0)::text)`;
const intervalFieldsLeaf = (json: unknown): unknown => {
  const { months, days, microseconds } = json as { months: number; days: number; microseconds: string };
  return { months, days, microseconds: BigInt(microseconds) };
};

/** A one-dimensional array, element by element, through an element oracle. */
function perElement(elementSql: (e: string) => string, leaf: (json: unknown) => unknown): Oracle {
  return {
    sql: (c) =>
      `(SELECT coalesce(json_agg(CASE WHEN e IS NULL THEN NULL ELSE ${elementSql('e')} END ORDER BY ordinal), '[]')
        FROM unnest(${c}) WITH ORDINALITY AS elements(e, ordinal))`,
    expected: (json) => (json as unknown[]).map((element) => (element === null ? null : leaf(element))),
  };
}

// --- columns -------------------------------------------------------------------

const columns: readonly ColumnCase[] = [
  {
    column: 'c_int2',
    sqlType: 'int2',
    type: { kind: 'int16' },
    values: ['32767', '-32768', '0'],
    oracle: asJson,
  },
  {
    column: 'c_int4',
    sqlType: 'int4',
    type: { kind: 'int32' },
    values: ['2147483647', '-2147483648', '0'],
    oracle: asJson,
  },
  {
    column: 'c_int8',
    sqlType: 'int8',
    type: { kind: 'int64' },
    values: ['9223372036854775807', '-9223372036854775808', '9007199254740993'],
    oracle: { sql: (c) => `to_json(${c}::text)`, expected: bigintLeaf },
    expected: [9_223_372_036_854_775_807n, -9_223_372_036_854_775_808n, 9_007_199_254_740_993n],
  },
  {
    column: 'c_oid',
    sqlType: 'oid',
    type: { kind: 'int64' },
    values: ['4294967295', '0'],
    expected: [4_294_967_295n, 0n],
  },
  {
    column: 'c_float4',
    sqlType: 'float4',
    type: { kind: 'float32' },
    values: ["'NaN'", "'-Infinity'", '0.1', '3.4028235e38', "'-0'"],
    oracle: { sql: (c) => `to_json(${c})`, expected: numberLeaf },
  },
  {
    column: 'c_float8',
    sqlType: 'float8',
    type: { kind: 'float64' },
    values: ["'NaN'", "'Infinity'", "'-0'", '1.5e300', '5e-324'],
    oracle: { sql: (c) => `to_json(${c})`, expected: numberLeaf },
    expected: [Number.NaN, Number.POSITIVE_INFINITY, -0, 1.5e300, 5e-324],
  },
  {
    column: 'c_numeric',
    sqlType: 'numeric',
    type: { kind: 'numeric' },
    values: [
      "'123456789012345678901234567890123456789012.123456789'",
      "'NaN'",
      "'Infinity'",
      "'-Infinity'",
      "'-0.00000000000000000001'",
    ],
    oracle: asText,
    expected: [
      '123456789012345678901234567890123456789012.123456789',
      'NaN',
      'Infinity',
      '-Infinity',
      '-0.00000000000000000001',
    ],
  },
  {
    column: 'c_numeric_10_2',
    sqlType: 'numeric(10,2)',
    type: { kind: 'numeric', precision: 10, scale: 2 },
    values: ['12345678.91', '-0.5'],
    expected: ['12345678.91', '-0.50'],
  },
  {
    column: 'c_numeric_neg_scale',
    sqlType: 'numeric(5,-2)',
    type: { kind: 'numeric', precision: 5, scale: -2 },
    values: ['1234567'],
    expected: ['1234600'],
  },
  { column: 'c_bool', sqlType: 'bool', type: { kind: 'boolean' }, values: ['true', 'false'], oracle: asJson },
  {
    column: 'c_text',
    sqlType: 'text',
    type: { kind: 'string' },
    values: [`E'tab\\there\\nnew line'`, `'quote " and \\ backslash'`, "''", "'NULL'", "'🎉 ünïcödé'"],
    oracle: asJson,
  },
  {
    column: 'c_varchar',
    sqlType: 'varchar(20)',
    type: { kind: 'string' },
    values: ["'abc'"],
    oracle: asJson,
  },
  {
    column: 'c_bpchar',
    sqlType: 'char(5)',
    type: { kind: 'string' },
    values: ["'ab'"],
    expected: ['ab   '],
  },
  { column: 'c_name', sqlType: 'name', type: { kind: 'string' }, values: ["'some_name'"], oracle: asText },
  { column: 'c_char', sqlType: '"char"', type: { kind: 'string' }, values: ["'x'"], oracle: asText },
  {
    column: 'c_bytea',
    sqlType: 'bytea',
    type: { kind: 'bytes' },
    values: [`'\\x'`, `'\\x00ff'`, "decode('deadbeef', 'hex')"],
    oracle: {
      sql: (c) => `to_json(encode(${c}, 'hex'))`,
      expected: (json) => Buffer.from(String(json), 'hex'),
    },
  },
  {
    column: 'c_uuid',
    sqlType: 'uuid',
    type: { kind: 'uuid' },
    values: ["'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'"],
    oracle: asJson,
    expected: ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'],
  },
  {
    column: 'c_json',
    sqlType: 'json',
    type: { kind: 'json' },
    values: [`'{"big": 123456789012345678901234567890, "a": [1, 2.50]}'`, "'null'"],
    expected: ['{"big": 123456789012345678901234567890, "a": [1, 2.50]}', 'null'],
  },
  {
    column: 'c_jsonb',
    sqlType: 'jsonb',
    type: { kind: 'json' },
    values: [`'{"big": 123456789012345678901234567890, "a": [1, 2.50]}'`],
    expected: ['{"a": [1, 2.50], "big": 123456789012345678901234567890}'],
  },
  {
    column: 'c_date',
    sqlType: 'date',
    type: { kind: 'date' },
    values: ["'2024-02-29'", "'0044-03-15 BC'", "'4714-11-24 BC'", "'infinity'", "'5874897-12-31'"],
    oracle: { sql: dateFieldsSql, expected: dateFieldsLeaf },
    expected: ['2024-02-29', '-0043-03-15', '-4713-11-24', 'infinity', '5874897-12-31'],
  },
  {
    column: 'c_date_minus_infinity',
    sqlType: 'date',
    type: { kind: 'date' },
    values: ["'-infinity'", "'0001-01-01 BC'"],
    oracle: { sql: dateFieldsSql, expected: dateFieldsLeaf },
    expected: ['-infinity', '0000-01-01'],
  },
  {
    column: 'c_time',
    sqlType: 'time',
    type: { kind: 'time' },
    values: ["'00:00:00'", "'23:59:59.999999'", "'24:00:00'", "'12:34:56.5'"],
    oracle: {
      sql: (c) => `to_json((extract(epoch FROM ${c}) * 1000000)::numeric(40, 0)::text)`,
      expected: bigintLeaf,
    },
  },
  {
    column: 'c_timetz',
    sqlType: 'timetz',
    type: { kind: 'timetz' },
    values: ["'04:05:06.789+05:30'", "'00:00:00+00'"],
    oracle: asText,
  },
  {
    column: 'c_timestamp',
    sqlType: 'timestamp',
    type: { kind: 'timestamp' },
    values: [
      "'2024-02-29 12:34:56.789012'",
      "'0044-03-15 12:00:00.5 BC'",
      "'infinity'",
      "'4714-11-24 00:00:00 BC'",
      "'294246-12-31 23:59:59.999999'",
    ],
    oracle: { sql: epochMicrosSql, expected: epochMicrosLeaf },
  },
  {
    column: 'c_timestamp_fractions',
    sqlType: 'timestamp',
    type: { kind: 'timestamp' },
    values: [
      "'1969-12-31 23:59:59.999999'",
      "'2024-01-01 00:00:00.1'",
      "'-infinity'",
      "'2024-01-01 00:00:00.00001'",
      "'1999-12-31 23:59:59.12345'",
    ],
    oracle: { sql: epochMicrosSql, expected: epochMicrosLeaf },
  },
  {
    column: 'c_timestamptz',
    sqlType: 'timestamptz',
    type: { kind: 'timestamptz' },
    values: [
      "'2024-01-01 05:30:00+05:30'",
      "'0044-03-15 12:00:00+00 BC'",
      "'infinity'",
      "'2000-01-01 00:00:00.000001+00'",
      "'-infinity'",
    ],
    oracle: { sql: epochMicrosSql, expected: epochMicrosLeaf },
  },
  {
    column: 'c_interval',
    sqlType: 'interval',
    type: { kind: 'interval' },
    values: [
      "'1 year 2 mons 3 days 04:05:06.789'",
      "'-1 days +02:03:00'",
      "'-1.5 seconds'",
      "'0'",
      "'178956970 years 7 mons 2147483647 days 2562047788:00:54.775807'",
    ],
    oracle: { sql: intervalFieldsSql, expected: intervalFieldsLeaf },
  },
  {
    column: 'c_interval_negative',
    sqlType: 'interval',
    type: { kind: 'interval' },
    values: [
      "'-1 year -2 mons +3 days -04:05:06'",
      "'-178956970 years -2147483647 days -2562047788:00:54.775807'",
    ],
    oracle: { sql: intervalFieldsSql, expected: intervalFieldsLeaf },
  },
  {
    column: 'c_inet',
    sqlType: 'inet',
    type: { kind: 'inet' },
    values: ["'192.168.1.5'", "'::1'", "'10.1.2.3/8'", "'::ffff:1.2.3.4'"],
    expected: ['192.168.1.5', '::1', '10.1.2.3/8', '::ffff:1.2.3.4'],
  },
  {
    column: 'c_cidr',
    sqlType: 'cidr',
    type: { kind: 'cidr' },
    values: ["'192.168.1.0/24'", "'2001:db8::/32'"],
    oracle: asText,
  },
  {
    column: 'c_macaddr',
    sqlType: 'macaddr',
    type: { kind: 'macaddr' },
    values: ["'08-00-2B-01-02-03'"],
    expected: ['08:00:2b:01:02:03'],
  },
  {
    column: 'c_macaddr8',
    sqlType: 'macaddr8',
    type: { kind: 'macaddr' },
    values: ["'08:00:2b:01:02:03:04:05'"],
    oracle: asText,
  },
  {
    column: 'c_money',
    sqlType: 'money',
    type: { kind: 'money' },
    values: ['12.5', '-1234.56'],
    oracle: asText,
  },
  { column: 'c_bit', sqlType: 'bit(4)', type: { kind: 'bit' }, values: ["B'1010'"], oracle: asText },
  { column: 'c_varbit', sqlType: 'varbit', type: { kind: 'bit' }, values: ["B''", "B'1'"], oracle: asText },
  {
    column: 'c_xml',
    sqlType: 'xml',
    type: { kind: 'xml' },
    values: [`'<a b="c">d &amp; e</a>'`],
    oracle: asText,
  },
  {
    column: 'c_point',
    sqlType: 'point',
    type: { kind: 'geometry', name: 'point' },
    values: ["'(1,2)'", "'(-1.5,1e300)'"],
    oracle: asText,
  },
  {
    column: 'c_line',
    sqlType: 'line',
    type: { kind: 'geometry', name: 'line' },
    values: ["'{1,-1,0}'"],
    oracle: asText,
  },
  {
    column: 'c_lseg',
    sqlType: 'lseg',
    type: { kind: 'geometry', name: 'lseg' },
    values: ["'[(0,0),(1,1)]'"],
    oracle: asText,
  },
  {
    column: 'c_box',
    sqlType: 'box',
    type: { kind: 'geometry', name: 'box' },
    values: ["'(1,1),(0,0)'"],
    oracle: asText,
  },
  {
    column: 'c_path',
    sqlType: 'path',
    type: { kind: 'geometry', name: 'path' },
    values: ["'[(0,0),(1,1),(2,0)]'"],
    oracle: asText,
  },
  {
    column: 'c_polygon',
    sqlType: 'polygon',
    type: { kind: 'geometry', name: 'polygon' },
    values: ["'((0,0),(1,1),(1,0))'"],
    oracle: asText,
  },
  {
    column: 'c_circle',
    sqlType: 'circle',
    type: { kind: 'geometry', name: 'circle' },
    values: ["'<(0,0),1.5>'"],
    oracle: asText,
  },
  {
    column: 'c_enum',
    sqlType: moodType,
    type: { kind: 'enum', name: moodType },
    values: ["'happy'", "'very sad'", "'NULL'"],
    oracle: asJson,
  },
  {
    column: 'c_domain',
    sqlType: positiveIntType,
    type: { kind: 'int32' },
    values: ['42', '2147483647'],
    oracle: asJson,
  },
  {
    column: 'c_amount',
    sqlType: amountType,
    type: { kind: 'numeric', precision: 10, scale: 2 },
    values: ['12.3'],
    expected: ['12.30'],
  },
  {
    column: 'c_hstore',
    sqlType: 'hstore',
    type: { kind: 'hstore' },
    values: [
      `'"a"=>"1", "b"=>NULL, "c\\"q"=>"x\\\\y", ""=>"", "n"=>"NULL", "k, =>"=>" v "'`,
      "''",
      `hstore('__proto__', 'ü')`,
    ],
    oracle: { sql: (c) => `hstore_to_json(${c})`, expected: (json) => json },
  },
  {
    column: 'c_tsvector',
    sqlType: 'tsvector',
    type: { kind: 'unknown_text', name: 'tsvector' },
    values: ["'a fat cat'"],
    oracle: asText,
  },
  {
    column: 'c_int4range',
    sqlType: 'int4range',
    type: { kind: 'unknown_text', name: 'int4range' },
    values: ["'[1,10)'", "'empty'"],
    oracle: asText,
  },
  {
    column: 'c_int4_array',
    sqlType: 'int4[]',
    type: { kind: 'array', element: { kind: 'int32' } },
    values: ["'{1,2,NULL}'", "'{}'", "'{{1,2},{3,4}}'", "'[0:2]={7,8,9}'", "'{{{1},{NULL}}}'"],
    oracle: asJson,
  },
  {
    column: 'c_int8_array',
    sqlType: 'int8[]',
    type: { kind: 'array', element: { kind: 'int64' } },
    values: ["'{9223372036854775807,-9223372036854775808,NULL}'", "'{{1,2},{3,4}}'"],
    oracle: { sql: (c) => `to_json(${c}::text[])`, expected: (json) => deepMap(json, bigintLeaf) },
  },
  {
    column: 'c_text_array',
    sqlType: 'text[]',
    type: { kind: 'array', element: { kind: 'string' } },
    values: [
      `ARRAY['a b', NULL, 'NULL', 'null', 'x\\y', 'q"', '', ' ', '{,}', 'é', E'tab\\t']`,
      `'{{"a,b","c\\\\"},{NULL,"}"}}'`,
    ],
    oracle: asJson,
  },
  {
    column: 'c_numeric_array',
    sqlType: 'numeric(12,4)[]',
    type: { kind: 'array', element: { kind: 'numeric', precision: 12, scale: 4 } },
    values: ["'{1.5,NaN,NULL,-12345678.1234}'"],
    oracle: { sql: (c) => `to_json(${c}::text[])`, expected: (json) => json },
    expected: [['1.5000', 'NaN', null, '-12345678.1234']],
  },
  {
    column: 'c_bool_array',
    sqlType: 'bool[]',
    type: { kind: 'array', element: { kind: 'boolean' } },
    values: ["'{t,f,NULL}'"],
    oracle: asJson,
  },
  {
    column: 'c_float8_array',
    sqlType: 'float8[]',
    type: { kind: 'array', element: { kind: 'float64' } },
    values: ["ARRAY['NaN', 'Infinity', '-Infinity', 1.5e-10, NULL, 0.1]::float8[]"],
    oracle: { sql: (c) => `to_json(${c})`, expected: (json) => deepMap(json, numberLeaf) },
  },
  {
    column: 'c_uuid_array',
    sqlType: 'uuid[]',
    type: { kind: 'array', element: { kind: 'uuid' } },
    values: ["'{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11,NULL}'"],
    oracle: asJson,
  },
  {
    column: 'c_timestamptz_array',
    sqlType: 'timestamptz[]',
    type: { kind: 'array', element: { kind: 'timestamptz' } },
    values: [
      "ARRAY['2024-01-01 00:00:00.123456+00', 'infinity', NULL, '0044-03-15 12:00:00+00 BC', '-infinity']::timestamptz[]",
    ],
    oracle: perElement(epochMicrosSql, epochMicrosLeaf),
  },
  {
    column: 'c_date_array',
    sqlType: 'date[]',
    type: { kind: 'array', element: { kind: 'date' } },
    values: ["ARRAY['2024-01-01', '0044-03-15 BC', 'infinity', NULL]::date[]"],
    oracle: perElement(dateFieldsSql, dateFieldsLeaf),
  },
  {
    column: 'c_jsonb_array',
    sqlType: 'jsonb[]',
    type: { kind: 'array', element: { kind: 'json' } },
    values: [`ARRAY['{"a": 1}', 'null', '"NULL"', '[1, "x,y"]', NULL]::jsonb[]`],
    oracle: { sql: (c) => `to_json(${c}::text[])`, expected: (json) => json },
  },
  {
    column: 'c_bytea_array',
    sqlType: 'bytea[]',
    type: { kind: 'array', element: { kind: 'bytes' } },
    values: [`ARRAY['\\x0102'::bytea, NULL, '\\x']`],
    oracle: perElement(
      (e) => `to_json(encode(${e}, 'hex'))`,
      (json) => Buffer.from(String(json), 'hex'),
    ),
  },
  {
    column: 'c_enum_array',
    sqlType: `${moodType}[]`,
    type: { kind: 'array', element: { kind: 'enum', name: moodType } },
    values: [`'{happy,"very sad",NULL,"NULL"}'`],
    oracle: asJson,
  },
  {
    column: 'c_domain_array',
    sqlType: `${positiveIntType}[]`,
    type: { kind: 'array', element: { kind: 'int32' } },
    values: ["'{1,2}'"],
    oracle: asJson,
  },
  {
    column: 'c_hstore_array',
    sqlType: 'hstore[]',
    type: { kind: 'array', element: { kind: 'hstore' } },
    values: [`ARRAY['"a"=>"b", "c"=>NULL'::hstore, NULL, '', '"q\\"k"=>"v\\\\"']`],
    oracle: perElement(
      (e) => `hstore_to_json(${e})`,
      (json) => json,
    ),
  },
  {
    column: 'c_interval_array',
    sqlType: 'interval[]',
    type: { kind: 'array', element: { kind: 'interval' } },
    values: ["ARRAY['1 day', '-00:00:01.5', NULL, '-1 mons +00:00:01']::interval[]"],
    oracle: perElement(intervalFieldsSql, intervalFieldsLeaf),
  },
  {
    column: 'c_varchar_array',
    sqlType: 'varchar(10)[]',
    type: { kind: 'array', element: { kind: 'string' } },
    values: ["ARRAY['x', 'y z']"],
    oracle: asJson,
  },
  {
    column: 'c_point_array',
    sqlType: 'point[]',
    type: { kind: 'array', element: { kind: 'geometry', name: 'point' } },
    values: ["ARRAY['(1,2)'::point, '(3.5,-4)']"],
    oracle: { sql: (c) => `to_json(${c}::text[])`, expected: (json) => json },
  },
  {
    column: 'c_box_array',
    sqlType: 'box[]',
    type: { kind: 'unknown_text', name: '_box' },
    values: ["ARRAY['(1,1),(0,0)'::box, '(3,3),(2,2)']"],
    expected: ['{(1,1),(0,0);(3,3),(2,2)}'],
  },
];

describe('typed value model on PostgreSQL 15', () => {
  // Every type's text exactly as its output function writes it.
  const identity = (text: string): string => text;
  const client = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    database: postgres.database,
    ...postgres.superuser,
    types: { getTypeParser: () => identity },
  });
  const columnTypes = new Map<string, ColumnType>();

  beforeAll(async () => {
    await client.connect();
    for (const setting of sourceSessionSettings) await client.query(setting);
    await client.query('CREATE EXTENSION IF NOT EXISTS hstore');
    await client.query(`CREATE TYPE ${moodType} AS ENUM ('happy', 'very sad', 'NULL')`);
    await client.query(`CREATE DOMAIN ${positiveIntType} AS int4 CHECK (VALUE > 0)`);
    await client.query(`CREATE DOMAIN ${amountType} AS numeric(10,2)`);
    const definitions = columns.map(({ column, sqlType }) => `${column} ${sqlType}`);
    await client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, ${definitions.join(', ')})`);
    for (let row = 0; row < rowCount + 1; row += 1) {
      // The last row is all NULL: the parser never sees it, but the catalog path must.
      const values = columns.map(({ values }) => values[row] ?? 'NULL');
      await client.query(
        `INSERT INTO ${table} (id, ${columns.map(({ column }) => column).join(', ')}) VALUES (${row + 1}, ${values.join(', ')})`,
      );
    }

    const attributes = await client.query<{ attname: string; atttypid: string; atttypmod: string }>(
      `SELECT attname, atttypid, atttypmod FROM pg_attribute
       WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
      [table],
    );
    const unknownOids = attributes.rows.map((row) => Number(row.atttypid)).filter(needsCatalogInfo);
    const catalogRows = await client.query<PgTypeCatalogRow>(pgTypeCatalogQuery, [unknownOids]);
    const catalog = pgTypeLookupFromRows(catalogRows.rows);
    for (const row of attributes.rows) {
      columnTypes.set(row.attname, pgColumnType(Number(row.atttypid), Number(row.atttypmod), catalog));
    }
  });

  afterAll(async () => {
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.query(`DROP DOMAIN IF EXISTS ${positiveIntType}, ${amountType}`);
    await client.query(`DROP TYPE IF EXISTS ${moodType}`);
    await client.end();
  });

  it('reads the session settings the model assumes', async () => {
    const settings = await client.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings
       WHERE name IN ('DateStyle', 'TimeZone', 'IntervalStyle', 'extra_float_digits', 'bytea_output')`,
    );
    expect(Object.fromEntries(settings.rows.map((row) => [row.name, row.setting]))).toEqual({
      DateStyle: 'ISO, MDY',
      TimeZone: 'UTC',
      IntervalStyle: 'postgres',
      extra_float_digits: '3',
      bytea_output: 'hex',
    });
  });

  it('maps every column type from its OID, modifier and the catalog query', () => {
    expect(columnTypes.get('id')).toEqual({ kind: 'int32' });
    for (const { column, type } of columns) expect(columnTypes.get(column), column).toEqual(type);
  });

  it('fetches catalog rows for enums, domains, hstore and their arrays, following elements and bases', async () => {
    const oids = await client.query<{ name: string; oid: string }>(
      `SELECT t.typname AS name, t.oid FROM pg_type t
       WHERE t.typname IN ($1, $2, $3) OR t.oid = 'hstore'::regtype OR t.oid = 'hstore[]'::regtype`,
      [`_${moodType}`, `_${positiveIntType}`, amountType],
    );
    const byName = new Map(oids.rows.map((row) => [row.name, Number(row.oid)]));
    const enumArrayOid = byName.get(`_${moodType}`) ?? 0;
    const domainArrayOid = byName.get(`_${positiveIntType}`) ?? 0;
    const catalog = pgTypeLookupFromRows(
      (
        await client.query<PgTypeCatalogRow>(pgTypeCatalogQuery, [
          [enumArrayOid, domainArrayOid, 999_999_999],
        ])
      ).rows,
    );
    // The arrays, their element types, and the domain's base type int4.
    expect([...catalog.values()].map((info) => info.typname).sort()).toEqual(
      [`_${moodType}`, `_${positiveIntType}`, moodType, positiveIntType, 'int4'].sort(),
    );
    expect(catalog.get(enumArrayOid)).toMatchObject({ typtype: 'b', typcategory: 'A' });
    expect(pgColumnType(enumArrayOid, -1, catalog)).toEqual({
      kind: 'array',
      element: { kind: 'enum', name: moodType },
    });
    expect(pgColumnType(domainArrayOid, -1, catalog)).toEqual({ kind: 'array', element: { kind: 'int32' } });
  });

  it.each(columns.map((column) => [column.column, column] as const))(
    'parses %s as PostgreSQL computes it',
    async (_name, { column, oracle, expected }) => {
      const type = columnTypes.get(column);
      if (type === undefined) throw new Error(`no column type for ${column}`);
      const result = await client.query<{ id: string; raw: string | null; oracle: string | null }>(
        `SELECT id, ${column} AS raw, ${oracle === undefined ? 'NULL::json' : oracle.sql(column)} AS oracle
         FROM ${table} ORDER BY id`,
      );
      expect(result.rows).toHaveLength(rowCount + 1);
      let checked = 0;
      for (const [index, row] of result.rows.entries()) {
        if (row.raw === null) continue;
        const parsed = parseTextValue(type, row.raw);
        if (oracle !== undefined) {
          expect(row.oracle, `${column} row ${row.id} oracle`).not.toBeNull();
          expect(parsed, `${column} row ${row.id}`).toEqual(
            oracle.expected(JSON.parse(row.oracle ?? 'null')),
          );
        }
        if (expected !== undefined && index < expected.length) {
          expect(parsed, `${column} row ${row.id}`).toEqual(expected[index]);
        }
        checked += 1;
      }
      expect(checked).toBe(columns.find((candidate) => candidate.column === column)?.values.length);
    },
  );

  it('keeps -0 and NaN of float8 exactly', async () => {
    const result = await client.query<{ raw: string }>(
      `SELECT c_float8 AS raw FROM ${table} WHERE id IN (1, 3) ORDER BY id`,
    );
    const [nan, negativeZero] = result.rows.map((row) => parseTextValue({ kind: 'float64' }, row.raw));
    expect(nan).toBeNaN();
    expect(Object.is(negativeZero, -0)).toBe(true);
  });

  it('reads hstore keys such as __proto__ as data', async () => {
    const result = await client.query<{ raw: string }>(`SELECT c_hstore AS raw FROM ${table} WHERE id = 3`);
    const value = parseTextValue({ kind: 'hstore' }, result.rows[0]?.raw ?? '');
    expect(Object.getPrototypeOf(value)).toBeNull();
    expect(Object.entries(value)).toEqual([['__proto__', 'ü']]);
  });

  it('refuses a finite timestamp beyond int64 microseconds with a decode error', async () => {
    const result = await client.query<{ raw: string }>(
      `SELECT '294276-12-31 23:59:59.999999'::timestamptz AS raw`,
    );
    const raw = result.rows[0]?.raw ?? '';
    expect(raw).toBe('294276-12-31 23:59:59.999999+00');
    expect(() => parseTextValue({ kind: 'timestamptz' }, raw)).toThrow(EngineError);
    expect(() => parseTextValue({ kind: 'timestamptz' }, raw)).toThrow(/^cannot decode timestamptz/);
  });

  it('subtracts the UTC offsets other time zones write, seconds included', async () => {
    await client.query('BEGIN');
    try {
      for (const zone of ['Asia/Kolkata', 'America/St_Johns', 'Europe/Amsterdam', 'Pacific/Chatham']) {
        await client.query(`SET LOCAL TimeZone = '${zone}'`);
        const result = await client.query<{ raw: string; micros: string }>(
          `SELECT instant AS raw, (extract(epoch FROM instant) * 1000000)::numeric(40, 0)::text AS micros
           FROM unnest(ARRAY['2024-07-01 12:00:00.5+00', '1900-01-01 00:00:00+00', '1937-06-30 23:59:59+00',
             '0044-03-15 12:00:00+00 BC']::timestamptz[]) AS instants(instant)`,
        );
        for (const row of result.rows) {
          expect(parseTextValue({ kind: 'timestamptz' }, row.raw), `${zone} ${row.raw}`).toBe(
            BigInt(row.micros),
          );
        }
      }
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('rejects text written under other session settings', async () => {
    await client.query('BEGIN');
    try {
      await client.query("SET LOCAL DateStyle = 'SQL, DMY'");
      await client.query("SET LOCAL IntervalStyle = 'iso_8601'");
      await client.query("SET LOCAL bytea_output = 'escape'");
      const result = await client.query<{ ts: string; iv: string; bytes: string }>(
        `SELECT c_timestamp AS ts, c_interval AS iv, c_bytea AS bytes FROM ${table} WHERE id = 2`,
      );
      const row = result.rows[0];
      if (row === undefined) throw new Error('row 2 is missing');
      for (const [type, text] of [
        [{ kind: 'timestamp' }, row.ts],
        [{ kind: 'interval' }, row.iv],
        [{ kind: 'bytes' }, row.bytes],
      ] as const) {
        expect(() => parseTextValue(type, text)).toThrow(EngineError);
      }
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
