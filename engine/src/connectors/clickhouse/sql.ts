// ClickHouse SQL quoting and literals
// (https://clickhouse.com/docs/sql-reference/syntax#identifiers,
// https://clickhouse.com/docs/sql-reference/syntax#literals).
import { civilFromDays, formatCivilDate } from '../../model/calendar.ts';
import { type ChValue, floorDivide } from './row-binary.ts';
import { type ChType, formatChType } from './types.ts';

/** A backquoted identifier; backquotes and backslashes inside are escaped. */
export function quoteIdentifier(name: string): string {
  return `\`${name.replace(/[\\`]/g, (char) => `\\${char}`)}\``;
}

/**
 * A ClickHouse string literal of arbitrary bytes: quotes and backslashes
 * escaped, control characters and every byte above 0x7e written as \xHH, so
 * the literal is exact whatever the bytes are (UTF-8 or not).
 */
export function stringLiteral(value: Buffer | string): string {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  let literal = "'";
  for (const byte of bytes) {
    if (byte === 0x27) literal += "\\'";
    else if (byte === 0x5c) literal += '\\\\';
    else if (byte < 0x20 || byte > 0x7e) literal += `\\x${byte.toString(16).padStart(2, '0')}`;
    else literal += String.fromCharCode(byte);
  }
  return `${literal}'`;
}

/** A Decimal's stored integer (the value times 10^scale) as text. */
export function decimalText(raw: bigint, scale: number): string {
  const negative = raw < 0n;
  const digits = (negative ? -raw : raw).toString().padStart(scale + 1, '0');
  const text = scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  return negative ? `-${text}` : text;
}

/** DateTime64(precision) ticks since the epoch as text, `YYYY-MM-DD hh:mm:ss.f…`. */
export function timeText(ticks: bigint, precision: number): string {
  const perSecond = 10n ** BigInt(precision);
  const seconds = floorDivide(ticks, perSecond);
  const fraction = ticks - seconds * perSecond;
  const days = Number(floorDivide(seconds, 86_400n));
  const secondOfDay = Number(seconds - BigInt(days) * 86_400n);
  const clock = [Math.floor(secondOfDay / 3600), Math.floor(secondOfDay / 60) % 60, secondOfDay % 60]
    .map((part) => String(part).padStart(2, '0'))
    .join(':');
  const fractionText = precision > 0 ? `.${fraction.toString().padStart(precision, '0')}` : '';
  return `${formatCivilDate(civilFromDays(days))} ${clock}${fractionText}`;
}

/** The SQL literal of a value read with RowBinaryReader, typed so comparisons use the column's type. */
export function sqlLiteral(type: ChType, value: ChValue): string {
  if (value === null) return 'NULL';
  const cast = (text: string) => `CAST(${stringLiteral(text)} AS ${formatChType(type)})`;
  switch (type.name) {
    case 'Nullable':
      return sqlLiteral(type.inner, value);
    case 'LowCardinality':
      return sqlLiteral(type.inner, value);
    case 'String':
      return stringLiteral(value as Buffer);
    case 'Bool':
      return cast(value ? 'true' : 'false');
    case 'Int8':
    case 'Int16':
    case 'Int32':
    case 'Int64':
    case 'UInt8':
    case 'UInt16':
    case 'UInt32':
    case 'UInt64':
      return cast(String(value));
    case 'Float32':
    case 'Float64': {
      const number = value as number;
      return cast(
        Number.isNaN(number) ? 'nan' : Number.isFinite(number) ? String(number) : number > 0 ? 'inf' : '-inf',
      );
    }
    case 'Decimal':
      return cast(decimalText(value as bigint, type.scale));
    case 'UUID':
      return cast(value as string);
    case 'Date':
    case 'Date32':
      return cast(formatCivilDate(civilFromDays(value as number)));
    case 'DateTime':
      return cast(timeText(value as bigint, 0));
    case 'DateTime64':
      return cast(timeText(value as bigint, type.precision));
    case 'Array':
      return `[${(value as readonly ChValue[]).map((item) => sqlLiteral(type.element, item)).join(', ')}]`;
    case 'Map': {
      const { entries } = value as { readonly entries: readonly (readonly [ChValue, ChValue])[] };
      return `map(${entries.map(([key, entry]) => `${sqlLiteral(type.key, key)}, ${sqlLiteral(type.value, entry)}`).join(', ')})`;
    }
  }
}
