// Snowflake column types and values: the type the connector creates for a
// source column (from the engine's value model, model/value-kind.ts), how one
// PostgreSQL text value travels inside the changes table's VARIANT, and the SQL
// that turns it back into the column's type. Nothing goes through a JavaScript
// float: integers, numeric and timestamps travel as strings, bytea as hex.
import { EngineError } from '../../errors.ts';
import { civilFromDays, formatCivilDate } from '../../model/calendar.ts';
import {
  type ArrayValue,
  isArrayValue,
  parseTextValue,
  type ScalarValue,
  timestampInfinity,
  timestampMinusInfinity,
} from '../../model/parse-text.ts';
import { sourceColumnType } from '../../model/source-column-type.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import type { SourceColumn } from '../records.ts';

/** Snowflake's NUMBER holds at most 38 digits (https://docs.snowflake.com/en/sql-reference/data-types-numeric). */
export const maxNumberPrecision = 38;

export interface ColumnCodec {
  /** The type in CREATE TABLE / ADD COLUMN. */
  readonly sqlType: string;
  /**
   * The JSON text of a non-NULL value inside the changes row's `data` object,
   * or undefined when the value cannot be held (it is then written as NULL).
   */
  encode(text: string): string | undefined;
  /** SQL reading the value back from a VARIANT path expression, as `sqlType`. */
  read(path: string): string;
}

const asString = (text: string): string => JSON.stringify(text);
const castTo =
  (type: string) =>
  (path: string): string =>
    `${path}::${type}`;

function textCodec(sqlType = 'VARCHAR'): ColumnCodec {
  return { sqlType, encode: asString, read: castTo('VARCHAR') };
}

function numberCodec(precision: number, scale = 0): ColumnCodec {
  const type = `NUMBER(${precision},${scale})`;
  return { sqlType: type, encode: asString, read: castTo(type) };
}

const microsPerDay = 86_400_000_000n;

/** `YYYY-MM-DD HH:MM:SS.ffffff` of microseconds since the epoch; undefined for ±infinity and years Snowflake cannot hold. */
export function formatMicros(micros: bigint): string | undefined {
  if (micros === timestampInfinity || micros === timestampMinusInfinity) return undefined;
  let days = micros / microsPerDay;
  let rest = micros % microsPerDay;
  if (rest < 0n) {
    rest += microsPerDay;
    days -= 1n;
  }
  const date = civilFromDays(Number(days));
  // Snowflake's timestamps cover years 1 to 9999 as literals.
  if (date.year < 1 || date.year > 9999) return undefined;
  const seconds = rest / 1_000_000n;
  const fraction = String(rest % 1_000_000n).padStart(6, '0');
  const hh = String(seconds / 3600n).padStart(2, '0');
  const mm = String((seconds / 60n) % 60n).padStart(2, '0');
  const ss = String(seconds % 60n).padStart(2, '0');
  return `${formatCivilDate(date)} ${hh}:${mm}:${ss}.${fraction}`;
}

/** JSON of a parsed value, exact: bigints as bare digits (VARIANT keeps 38 digits), bytes as hex. */
function jsonOfValue(value: ScalarValue | ArrayValue | null): string {
  if (value === null) return 'null';
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number')
    return Number.isFinite(value) ? String(value) : JSON.stringify(String(value));
  if (typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (Buffer.isBuffer(value)) return JSON.stringify(value.toString('hex'));
  if (isArrayValue(value)) return `[${value.map((element) => jsonOfValue(element)).join(',')}]`;
  if ('months' in value && 'microseconds' in value) {
    return `{"months":${value.months},"days":${value.days},"microseconds":${value.microseconds}}`;
  }
  // hstore: string keys to strings or null
  return JSON.stringify(value);
}

function variantCodec(type: ColumnType): ColumnCodec {
  return {
    sqlType: 'VARIANT',
    encode: (text) => jsonOfValue(parseTextValue(type, text) as ScalarValue | ArrayValue),
    read: (path) => path,
  };
}

/** The codec of a value-model type. */
export function codecFor(type: ColumnType): ColumnCodec {
  switch (type.kind) {
    case 'int16':
      return numberCodec(5);
    case 'int32':
      return numberCodec(10);
    case 'int64':
      return numberCodec(19);
    case 'float32':
    case 'float64':
      // PostgreSQL's float text is the shortest exact one; 'NaN', 'Infinity' and
      // '-Infinity' are accepted by Snowflake's FLOAT cast.
      return { sqlType: 'FLOAT', encode: asString, read: castTo('FLOAT') };
    case 'numeric':
      // Unconstrained numeric holds up to 131072 digits before the point and NaN;
      // a NUMBER would reject or round them, VARCHAR keeps them exact.
      if (
        type.precision === undefined ||
        type.precision > maxNumberPrecision ||
        type.scale < 0 ||
        type.scale > type.precision
      ) {
        return textCodec();
      }
      return numberCodec(type.precision, type.scale);
    case 'boolean':
      return {
        sqlType: 'BOOLEAN',
        encode: (text) => (text === 't' ? 'true' : 'false'),
        read: castTo('BOOLEAN'),
      };
    case 'bytes':
      return {
        sqlType: 'BINARY',
        encode: (text) =>
          JSON.stringify(
            text.startsWith('\\x') ? text.slice(2) : parseTextValue({ kind: 'bytes' }, text).toString('hex'),
          ),
        read: (path) => `TO_BINARY(${path}::VARCHAR, 'HEX')`,
      };
    case 'json':
      return {
        sqlType: 'VARIANT',
        // The source's JSON text as is (numbers keep every digit). Whitespace
        // line breaks become spaces: outside strings they mean nothing, and JSON
        // strings cannot hold a raw one.
        encode: (text) => text.replace(/[\r\n]/g, ' '),
        read: (path) => path,
      };
    case 'date':
      return {
        sqlType: 'DATE',
        // 'infinity' and BC dates have no DATE value.
        encode: (text) => (/^\d{4}-\d\d-\d\d$/.test(text) ? asString(text) : undefined),
        read: castTo('DATE'),
      };
    case 'time':
      return { sqlType: 'TIME(6)', encode: asString, read: castTo('TIME(6)') };
    case 'timestamp':
      return {
        sqlType: 'TIMESTAMP_NTZ(6)',
        encode: (text) => {
          const formatted = formatMicros(parseTextValue({ kind: 'timestamp' }, text));
          return formatted === undefined ? undefined : asString(formatted);
        },
        read: castTo('TIMESTAMP_NTZ(6)'),
      };
    case 'timestamptz':
      return {
        sqlType: 'TIMESTAMP_TZ',
        // The instant in UTC: PostgreSQL keeps no offset, its text shows the session's.
        encode: (text) => {
          const formatted = formatMicros(parseTextValue({ kind: 'timestamptz' }, text));
          return formatted === undefined ? undefined : asString(`${formatted.replace(' ', 'T')}+00:00`);
        },
        read: castTo('TIMESTAMP_TZ'),
      };
    case 'interval':
    case 'hstore':
    case 'array':
      return variantCodec(type);
    case 'geometry':
    case 'uuid':
    case 'string':
    case 'timetz':
    case 'inet':
    case 'cidr':
    case 'macaddr':
    case 'money':
    case 'bit':
    case 'xml':
    case 'enum':
    case 'unknown_text':
      return textCodec();
  }
}

export function columnCodec(column: SourceColumn): ColumnCodec {
  try {
    return codecFor(sourceColumnType(column));
  } catch (error) {
    throw new EngineError('schema_mismatch', `column ${column.name} has a type Snowflake cannot hold`, {
      cause: error,
    });
  }
}
