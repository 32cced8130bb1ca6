// ClickHouse column types: a small parser for the type names system.columns
// reports (the writer encodes by the table's real types, so a table created by
// an older release or by hand is written correctly), and the mapping from the
// engine's value model (system Q) to the types the connector creates.
import { EngineError } from '../../errors.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import type { ServerCapabilities } from './server.ts';

export type ChIntegerName = 'Int8' | 'Int16' | 'Int32' | 'Int64' | 'UInt8' | 'UInt16' | 'UInt32' | 'UInt64';

export type ChType =
  | { readonly name: ChIntegerName }
  | { readonly name: 'Float32' | 'Float64' | 'Bool' | 'String' | 'UUID' | 'Date' | 'Date32' }
  | { readonly name: 'Decimal'; readonly precision: number; readonly scale: number }
  | { readonly name: 'DateTime'; readonly timezone?: string }
  | { readonly name: 'DateTime64'; readonly precision: number; readonly timezone?: string }
  | { readonly name: 'Nullable'; readonly inner: ChType }
  | { readonly name: 'LowCardinality'; readonly inner: ChType }
  | { readonly name: 'Array'; readonly element: ChType }
  | { readonly name: 'Map'; readonly key: ChType; readonly value: ChType };

const integerNames: ReadonlySet<string> = new Set([
  'Int8',
  'Int16',
  'Int32',
  'Int64',
  'UInt8',
  'UInt16',
  'UInt32',
  'UInt64',
]);
const plainNames: ReadonlySet<string> = new Set([
  'Float32',
  'Float64',
  'Bool',
  'String',
  'UUID',
  'Date',
  'Date32',
]);

function unsupported(text: string): EngineError {
  return new EngineError('schema_mismatch', `ClickHouse type ${text} is not one the connector can write`);
}

/** Splits `a, b(c, d), 'e'` at top-level commas. */
function splitArguments(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let index = 0; index < text.length; index++) {
    const char = text[index];
    if (quoted) {
      if (char === '\\') index++;
      else if (char === "'") quoted = false;
    } else if (char === "'") quoted = true;
    else if (char === '(') depth++;
    else if (char === ')') depth--;
    else if (char === ',' && depth === 0) {
      parts.push(text.slice(start, index).trim());
      start = index + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts;
}

function unquote(text: string): string {
  return text.startsWith("'") && text.endsWith("'") ? text.slice(1, -1).replace(/\\(.)/g, '$1') : text;
}

/** Parses a type name as system.columns reports it, e.g. `Array(Nullable(Decimal(12, 2)))`. */
export function parseChType(text: string): ChType {
  const trimmed = text.trim();
  const open = trimmed.indexOf('(');
  const name = open === -1 ? trimmed : trimmed.slice(0, open);
  if (open !== -1 && !trimmed.endsWith(')')) throw unsupported(trimmed);
  const args = open === -1 ? [] : splitArguments(trimmed.slice(open + 1, -1));
  const [first = '', second = ''] = args;
  if (args.length === 0) {
    if (integerNames.has(name)) return { name: name as ChIntegerName };
    if (plainNames.has(name)) return { name: name as 'String' };
    if (name === 'DateTime') return { name: 'DateTime' };
  }
  switch (name) {
    case 'Nullable':
      return { name: 'Nullable', inner: parseChType(first) };
    case 'LowCardinality':
      return { name: 'LowCardinality', inner: parseChType(first) };
    case 'Array':
      return { name: 'Array', element: parseChType(first) };
    case 'Map':
      return { name: 'Map', key: parseChType(first), value: parseChType(second) };
    case 'Decimal':
      return { name: 'Decimal', precision: Number(first), scale: Number(second) };
    case 'Decimal32':
      return { name: 'Decimal', precision: 9, scale: Number(first) };
    case 'Decimal64':
      return { name: 'Decimal', precision: 18, scale: Number(first) };
    case 'Decimal128':
      return { name: 'Decimal', precision: 38, scale: Number(first) };
    case 'Decimal256':
      return { name: 'Decimal', precision: 76, scale: Number(first) };
    case 'DateTime':
      return { name: 'DateTime', timezone: unquote(first) };
    case 'DateTime64':
      return args.length > 1
        ? { name: 'DateTime64', precision: Number(first), timezone: unquote(second) }
        : { name: 'DateTime64', precision: Number(first) };
  }
  throw unsupported(trimmed);
}

function quoteTimezone(timezone: string): string {
  return `'${timezone.replace(/[\\']/g, (char) => `\\${char}`)}'`;
}

/** The type's name as written in DDL. */
export function formatChType(type: ChType): string {
  switch (type.name) {
    case 'Nullable':
    case 'LowCardinality':
      return `${type.name}(${formatChType(type.inner)})`;
    case 'Array':
      return `Array(${formatChType(type.element)})`;
    case 'Map':
      return `Map(${formatChType(type.key)}, ${formatChType(type.value)})`;
    case 'Decimal':
      return `Decimal(${type.precision}, ${type.scale})`;
    case 'DateTime':
      return type.timezone === undefined ? 'DateTime' : `DateTime(${quoteTimezone(type.timezone)})`;
    case 'DateTime64':
      return type.timezone === undefined
        ? `DateTime64(${type.precision})`
        : `DateTime64(${type.precision}, ${quoteTimezone(type.timezone)})`;
    default:
      return type.name;
  }
}

/** Array and Map cannot be Nullable in ClickHouse. */
export function canBeNullable(type: ChType): boolean {
  return type.name !== 'Array' && type.name !== 'Map' && type.name !== 'Nullable';
}

export { sourceColumnType } from '../../model/source-column-type.ts';

/** Microseconds-since-epoch storage for timestamps on servers without DateTime64. */
const epochMicros: ChType = { name: 'Int64' };

/** The non-Nullable ClickHouse type the connector creates for a value-model type. */
export function chTypeFor(type: ColumnType, capabilities: ServerCapabilities, dimensions = 1): ChType {
  if (type.kind === 'array') {
    let element = chTypeFor(type.element, capabilities);
    if (element.name === 'Array' || element.name === 'Map') return { name: 'String' };
    if (canBeNullable(element)) element = { name: 'Nullable', inner: element };
    let array: ChType = { name: 'Array', element };
    for (let depth = 1; depth < Math.max(1, dimensions); depth++) array = { name: 'Array', element: array };
    return array;
  }
  switch (type.kind) {
    case 'int16':
      return { name: 'Int16' };
    case 'int32':
      return { name: 'Int32' };
    case 'int64':
      return { name: 'Int64' };
    case 'float32':
      return { name: 'Float32' };
    case 'float64':
      return { name: 'Float64' };
    case 'numeric': {
      if (type.precision === undefined) return { name: 'String' };
      // numeric(5,-2) holds 7 integer digits; numeric(3,5) holds 5 fraction digits.
      const precision = type.scale < 0 ? type.precision - type.scale : Math.max(type.precision, type.scale);
      const scale = Math.max(type.scale, 0);
      if (precision < 1 || precision > capabilities.maxDecimalPrecision) return { name: 'String' };
      return { name: 'Decimal', precision, scale };
    }
    case 'boolean':
      return capabilities.bool ? { name: 'Bool' } : { name: 'UInt8' };
    case 'uuid':
      return { name: 'UUID' };
    case 'date':
      return capabilities.date32 ? { name: 'Date32' } : { name: 'Date' };
    case 'time':
      return { name: 'Int64' };
    case 'timestamp':
    case 'timestamptz':
      return capabilities.dateTime64 ? { name: 'DateTime64', precision: 6, timezone: 'UTC' } : epochMicros;
    case 'hstore':
      return capabilities.map
        ? { name: 'Map', key: { name: 'String' }, value: { name: 'Nullable', inner: { name: 'String' } } }
        : { name: 'String' };
    default:
      // string, bytes, json, timetz, interval, inet, cidr, macaddr, money, bit,
      // xml, geometry, enum, unknown_text: the exact text (bytes as raw bytes).
      return { name: 'String' };
  }
}

/** The type of the synced-at column: server time, microseconds where the server has them. */
export function syncedAtChType(capabilities: ServerCapabilities): ChType {
  return capabilities.dateTime64
    ? { name: 'DateTime64', precision: 6, timezone: 'UTC' }
    : { name: 'DateTime', timezone: 'UTC' };
}
