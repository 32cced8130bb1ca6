// The one encoder of a target table's column: a value's text, as PostgreSQL's
// output wrote it and given as bytes, into RowBinary for the column's
// ClickHouse type. Every write path uses it (row-writer.ts): a snapshot's COPY
// fields (their escapes undone first where a field has one), a batch's leading
// inserts and the final states of its later changes (from their TupleData),
// and the keys a batch looks its stored rows up by.
//
// The rules of every type mapping (which source kinds a type takes, widths,
// ranges, clamping, NaN, NULL and the errors) are writeValue's and its helpers'
// (row-binary.ts), over the value model (parse-text.ts). For the common pairs
// of source kind and type a reader below takes the bytes straight, without a
// string or a BigInt per value, and writes through those same helpers:
//
//   text, json, enum, xml → String      the bytes, after their length
//   bytea → String                      its hex text as the bytes
//   smallint, int, bigint → an integer  up to 15 digits
//   boolean → Bool or an integer        `t` and `f`
//   numeric → Decimal(P, S)             a plain number that fits, up to 15 digits
//   uuid → UUID                         the two halves
//   real, double precision → Float32, Float64
//                                       a plain number's text, to Number
//   date → Date, Date32                 `YYYY-MM-DD`
//   timestamp(tz) → DateTime64, DateTime, Int64
//                                       `YYYY-MM-DD HH:MM:SS[.f…][±HH]`
//
// Any text a reader does not find as it expects (NaN, infinity, BC, a longer
// number, another offset, anything malformed) goes through the value model,
// which also words the errors; column-encoder.test.ts checks the two ways
// agree value by value.
import { daysFromCivil } from '../../model/calendar.ts';
import { parseTextValue } from '../../model/parse-text.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import {
  type DateLimits,
  decimalWidth,
  integerRanges,
  mismatch,
  type RowBinaryWriter,
  unwrapLowCardinality,
  type ValueContext,
  valueContext,
  writable,
  writeDays,
  writeDefault,
  writeInteger,
  writeTimestamp,
  writeValue,
} from './row-binary.ts';
import type { ChType } from './types.ts';

export interface ColumnEncoder {
  /** A value's text: bytes [start, end) of `source`, UTF-8 as PostgreSQL's output wrote it, not escaped. */
  text(writer: RowBinaryWriter, source: Buffer, start: number, end: number): void;
  /** NULL: NULL in a Nullable column, the type's zero in any other. */
  null(writer: RowBinaryWriter): void;
}

/** Writes a value's text from bytes, or returns false having written nothing (each checks before it writes). */
type TextReader = (writer: RowBinaryWriter, source: Buffer, start: number, end: number) => boolean;

const zero = 48;
const minus = 45;
const plus = 43;
const dot = 46;
const colon = 58;
const space = 32;
const backslash = 92;
const lowerF = 102;
const lowerT = 116;
const lowerX = 120;
const lowerE = 101;
const capitalE = 69;

/** A hex digit's value, or -1. */
const hexValues = new Int8Array(256).fill(-1);
for (let digit = 0; digit < 16; digit++) {
  hexValues[digit.toString(16).charCodeAt(0)] = digit;
  hexValues[digit.toString(16).toUpperCase().charCodeAt(0)] = digit;
}

/** The integer at [start, end): an optional minus and 1 to 15 digits (exact as a double); else undefined. */
function smallInteger(source: Buffer, start: number, end: number): number | undefined {
  const negative = source[start] === minus;
  const digitsStart = negative ? start + 1 : start;
  if (end - digitsStart < 1 || end - digitsStart > 15) return undefined;
  let value = 0;
  for (let at = digitsStart; at < end; at++) {
    const digit = (source[at] as number) - zero;
    if (digit < 0 || digit > 9) return undefined;
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}

/** The two-digit number at `at`, or -1. */
function twoDigits(source: Buffer, at: number): number {
  const tens = (source[at] as number) - zero;
  const ones = (source[at + 1] as number) - zero;
  return tens >= 0 && tens <= 9 && ones >= 0 && ones <= 9 ? tens * 10 + ones : -1;
}

const monthLengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31] as const;

// The last date's day number: the rows of a load mostly share their day, and
// the calendar arithmetic cost as much as the rest of a timestamp.
let lastDateKey = -1;
let lastDays = 0;

/** Days since 1970-01-01 of `YYYY-MM-DD` at `start` (a valid date of years 1 to 9999), or undefined. */
function commonDays(source: Buffer, start: number): number | undefined {
  if (source[start + 4] !== minus || source[start + 7] !== minus) return undefined;
  const century = twoDigits(source, start);
  const yearInCentury = twoDigits(source, start + 2);
  const month = twoDigits(source, start + 5);
  const day = twoDigits(source, start + 8);
  if ((century | yearInCentury | month | day) < 0) return undefined;
  const year = century * 100 + yearInCentury;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const monthLength = month === 2 && leap ? 29 : monthLengths[month - 1];
  if (year === 0 || monthLength === undefined || day < 1 || day > monthLength) return undefined;
  const key = year * 10_000 + month * 100 + day;
  if (key !== lastDateKey) {
    lastDays = daysFromCivil(year, month, day);
    lastDateKey = key;
  }
  return lastDays;
}

/**
 * Microseconds since the epoch of a timestamp as PostgreSQL writes it with
 * DateStyle ISO (`YYYY-MM-DD HH:MM:SS[.f…]`, then `±HH` with a time zone);
 * undefined for any other text and where the microseconds are not a safe
 * integer (after mid-2255).
 */
function commonMicros(source: Buffer, start: number, end: number, withTimeZone: boolean): number | undefined {
  if (end - start < 19 || source[start + 10] !== space) return undefined;
  if (source[start + 13] !== colon || source[start + 16] !== colon) return undefined;
  const days = commonDays(source, start);
  const hour = twoDigits(source, start + 11);
  const minute = twoDigits(source, start + 14);
  const second = twoDigits(source, start + 17);
  if (days === undefined || (hour | minute | second) < 0 || hour > 23 || minute > 59 || second > 59)
    return undefined;
  let at = start + 19;
  let fraction = 0;
  if (source[at] === dot) {
    let scale = 100_000;
    for (at++; at < end && scale >= 1; at++, scale /= 10) {
      const digit = (source[at] as number) - zero;
      if (digit < 0 || digit > 9) break;
      fraction += digit * scale;
    }
    if (at === start + 20) return undefined;
  }
  let offset = 0;
  if (withTimeZone) {
    const sign = source[at];
    const hours = twoDigits(source, at + 1);
    if ((sign !== plus && sign !== minus) || hours < 0 || at + 3 !== end) return undefined;
    offset = (sign === minus ? -hours : hours) * 3600;
  } else if (at !== end) {
    return undefined;
  }
  const micros = (days * 86_400 + hour * 3600 + minute * 60 + second - offset) * 1_000_000 + fraction;
  return Number.isSafeInteger(micros) ? micros : undefined;
}

/** The source kinds' ranges, outside which the value model refuses an integer's text. */
const sourceIntegerRanges: Readonly<Record<string, readonly [number, number]>> = {
  int16: [-0x8000, 0x7fff],
  int32: [-0x8000_0000, 0x7fff_ffff],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/** The reader of `source` values into `target` (neither Nullable nor LowCardinality), if the pair has one. */
function textReader(source: ColumnType, target: ChType, context: ValueContext): TextReader | undefined {
  const kind = source.kind;
  if (target.name === 'String') {
    if (kind === 'string' || kind === 'json' || kind === 'enum' || kind === 'xml') {
      return (writer, bytes, start, end) => {
        writer.varint(end - start);
        writer.copy(bytes, start, end);
        return true;
      };
    }
    if (kind !== 'bytes') return undefined;
    // `\x` and pairs of hex digits.
    return (writer, bytes, start, end) => {
      if (bytes[start] !== backslash || bytes[start + 1] !== lowerX || (end - start) % 2 !== 0) return false;
      for (let at = start + 2; at < end; at++)
        if ((hexValues[bytes[at] as number] as number) < 0) return false;
      writer.varint((end - start - 2) / 2);
      for (let at = start + 2; at < end; at += 2) {
        writer.u8(
          ((hexValues[bytes[at] as number] as number) << 4) | (hexValues[bytes[at + 1] as number] as number),
        );
      }
      return true;
    };
  }
  if (kind === 'boolean' && integerRanges[target.name]) {
    return (writer, bytes, start, end) => {
      if (end - start !== 1 || (bytes[start] !== lowerT && bytes[start] !== lowerF)) return false;
      writeInteger(writer, target, bytes[start] === lowerT ? 1 : 0, context);
      return true;
    };
  }
  const range = sourceIntegerRanges[kind];
  const targetRange = integerRanges[target.name];
  if (range && targetRange) {
    // The source's range (outside it the value model refuses the text) and the column's (writeInteger refuses).
    const min = Math.max(range[0], Number(targetRange.min));
    const max = Math.min(range[1], Number(targetRange.max));
    const { width } = targetRange;
    return (writer, bytes, start, end) => {
      const value = smallInteger(bytes, start, end);
      if (value === undefined || value < min || value > max) return false;
      writer.safeInteger(value, width);
      return true;
    };
  }
  if (kind === 'numeric' && target.name === 'Decimal') {
    const { scale } = target;
    const integerDigits = target.precision - scale;
    const width = decimalWidth(target.precision);
    if (integerDigits + scale > 15) return undefined;
    return (writer, bytes, start, end) =>
      writeSmallDecimal(writer, bytes, start, end, integerDigits, scale, width);
  }
  if (kind === 'uuid' && target.name === 'UUID') return writeUuid;
  if (
    (kind === 'float64' || kind === 'float32') &&
    (target.name === 'Float64' || target.name === 'Float32')
  ) {
    const float32 = target.name === 'Float32';
    return (writer, bytes, start, end) => {
      if (!isPlainFloat(bytes, start, end)) return false;
      const value = Number(bytes.toString('latin1', start, end));
      if (float32) writer.float32(value);
      else writer.float64(value);
      return true;
    };
  }
  if (kind === 'date' && (target.name === 'Date' || target.name === 'Date32')) {
    return (writer, bytes, start, end) => {
      const days = end - start === 10 ? commonDays(bytes, start) : undefined;
      if (days === undefined) return false;
      writeDays(writer, target, days, context);
      return true;
    };
  }
  if (
    (kind === 'timestamp' || kind === 'timestamptz') &&
    (target.name === 'DateTime64' || target.name === 'DateTime' || target.name === 'Int64')
  ) {
    const withTimeZone = kind === 'timestamptz';
    return (writer, bytes, start, end) => {
      const micros = commonMicros(bytes, start, end, withTimeZone);
      if (micros === undefined) return false;
      writeTimestamp(writer, target, micros, context);
      return true;
    };
  }
  return undefined;
}

/**
 * A plain number (`-`, digits, `.` and digits) with at most `integerDigits`
 * and `scale` digits, as Decimal's scaled integer; false for anything else.
 * `integerDigits + scale` is at most 15: the integer is an exact double.
 */
function writeSmallDecimal(
  writer: RowBinaryWriter,
  bytes: Buffer,
  start: number,
  end: number,
  integerDigits: number,
  scale: number,
  width: number,
): boolean {
  let at = bytes[start] === minus ? start + 1 : start;
  const integerStart = at;
  let value = 0;
  for (; at < end; at++) {
    const digit = (bytes[at] as number) - zero;
    if (digit < 0 || digit > 9) break;
    value = value * 10 + digit;
  }
  if (at === integerStart || at - integerStart > integerDigits) return false;
  let fractionCount = 0;
  if (at < end) {
    if (bytes[at] !== dot) return false;
    for (at++; at < end; at++, fractionCount++) {
      const digit = (bytes[at] as number) - zero;
      if (digit < 0 || digit > 9 || fractionCount === scale) return false;
      value = value * 10 + digit;
    }
    if (fractionCount === 0) return false;
  }
  for (let pad = fractionCount; pad < scale; pad++) value *= 10;
  writer.safeInteger(integerStart > start ? -value : value, width);
  return true;
}

/** The digits from `at` on: where they end. */
function digitsEnd(bytes: Buffer, at: number, end: number): number {
  let next = at;
  while (next < end && (bytes[next] as number) - zero >= 0 && (bytes[next] as number) - zero <= 9) next++;
  return next;
}

/**
 * Whether [start, end) is a float's text as the value model takes it besides
 * NaN and ±Infinity (`-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?`, what float4out
 * and float8out write): then `Number` of it is the value.
 */
function isPlainFloat(bytes: Buffer, start: number, end: number): boolean {
  let at = bytes[start] === minus ? start + 1 : start;
  const integerEnd = digitsEnd(bytes, at, end);
  let fractionDigits = 0;
  at = integerEnd;
  if (bytes[at] === dot && at < end) {
    const fractionEnd = digitsEnd(bytes, at + 1, end);
    fractionDigits = fractionEnd - at - 1;
    at = fractionEnd;
  }
  if (integerEnd === (bytes[start] === minus ? start + 1 : start) && fractionDigits === 0) return false;
  if (at < end && (bytes[at] === lowerE || bytes[at] === capitalE)) {
    at++;
    if (at < end && (bytes[at] === plus || bytes[at] === minus)) at++;
    const exponentEnd = digitsEnd(bytes, at, end);
    if (exponentEnd === at) return false;
    at = exponentEnd;
  }
  return at === end;
}

/** A UUID's 16 bytes, as read: the halves are written reversed. */
const uuidBytes = new Uint8Array(16);

/** A UUID's text (`8-4-4-4-12` hex digits) as two little-endian halves, the high one first. */
function writeUuid(writer: RowBinaryWriter, bytes: Buffer, start: number, end: number): boolean {
  if (end - start !== 36) return false;
  const value = uuidBytes;
  let at = start;
  for (let index = 0; index < 16; index++) {
    if (index === 4 || index === 6 || index === 8 || index === 10) {
      if (bytes[at] !== minus) return false;
      at++;
    }
    const high = hexValues[bytes[at] as number] as number;
    const low = hexValues[bytes[at + 1] as number] as number;
    if ((high | low) < 0) return false;
    value[index] = (high << 4) | low;
    at += 2;
  }
  for (let index = 7; index >= 0; index--) writer.u8(value[index] as number);
  for (let index = 15; index >= 8; index--) writer.u8(value[index] as number);
  return true;
}

/**
 * The encoder of one column: source type `source`, ClickHouse type `target` as
 * the table has it. Throws schema_mismatch when the types cannot meet.
 */
export function columnEncoder(
  column: string,
  source: ColumnType,
  target: ChType,
  limits: DateLimits,
): ColumnEncoder {
  const base = unwrapLowCardinality(target);
  const nullable = base.name === 'Nullable';
  const inner = nullable ? unwrapLowCardinality(base.inner) : base;
  if (!writable(source, inner)) throw mismatch(column, source, target);
  const context = valueContext(column, limits);
  const reader = textReader(source, inner, context);
  return {
    text(writer, bytes, start, end) {
      if (reader) {
        if (!nullable) {
          if (reader(writer, bytes, start, end)) return;
        } else {
          const mark = writer.length;
          writer.u8(0);
          if (reader(writer, bytes, start, end)) return;
          writer.rewind(mark);
        }
      }
      const text = bytes.toString('utf8', start, end);
      writeValue(writer, base, parseTextValue(source, text), text, context);
    },
    null(writer) {
      writeDefault(writer, base);
    },
  };
}

/** Writes a decoded cell (PostgreSQL text or NULL) through a column's encoder. */
export function writeTextCell(writer: RowBinaryWriter, encoder: ColumnEncoder, cell: string | null): void {
  if (cell === null) {
    encoder.null(writer);
    return;
  }
  const bytes = Buffer.from(cell, 'utf8');
  encoder.text(writer, bytes, 0, bytes.length);
}
