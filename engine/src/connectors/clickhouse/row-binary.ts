// ClickHouse's RowBinary format: values back to back, little-endian, no
// delimiters (https://clickhouse.com/docs/interfaces/formats/RowBinary).
//
//   integers, floats   fixed width, little-endian; Bool is one byte
//   Decimal(P, S)      the value times 10^S as a signed integer of 4, 8, 16 or 32
//                      bytes (P ≤ 9, 18, 38, 76)
//   String             LEB128 byte length, then the bytes
//   UUID               the high 64 bits then the low 64 bits, each little-endian
//   Date / Date32      days since 1970-01-01 as UInt16 / Int32
//   DateTime           seconds since the epoch, UInt32
//   DateTime64(p)      ticks of 10^-p seconds since the epoch, Int64
//   Nullable(T)        one byte, 1 for NULL (nothing follows) or 0 then T
//   Array(T)           LEB128 element count, then the elements
//   Map(K, V)          LEB128 entry count, then key, value, key, value…
//   LowCardinality(T)  as T
//
// The writer turns source values (PostgreSQL text, parsed by the value model)
// into these bytes: `writeValue` holds every type mapping's rule (widths,
// ranges, clamping, NaN, NULL), and column-encoder.ts gives each column one
// encoder over it. The reader reads the bytes back, to fill unchanged TOAST
// values from the destination's current rows and to write those rows' keys as
// SQL (sql.ts).

import { EngineError } from '../../errors.ts';
import { daysFromCivil } from '../../model/calendar.ts';
import { type ArrayValue, isArrayValue, isHstore, type ScalarValue } from '../../model/parse-text.ts';
import { type ColumnType, describeColumnType } from '../../model/value-kind.ts';
import { copyBytes } from '../copy-text.ts';
import { type ChType, formatChType } from './types.ts';

/** A growable byte buffer; `take` hands out what was written and starts over. */
export class RowBinaryWriter {
  #buffer: Buffer;
  #length = 0;

  constructor(initialBytes = 1 << 20) {
    this.#buffer = Buffer.allocUnsafe(initialBytes);
  }

  get length(): number {
    return this.#length;
  }

  #reserve(bytes: number): void {
    const needed = this.#length + bytes;
    if (needed <= this.#buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(needed, this.#buffer.length * 2));
    this.#buffer.copy(grown, 0, 0, this.#length);
    this.#buffer = grown;
  }

  /** The bytes written since the last take, copied out. */
  take(): Buffer {
    const taken = Buffer.from(this.#buffer.subarray(0, this.#length));
    this.#length = 0;
    return taken;
  }

  /** The bytes written after `start`, copied out, without resetting. */
  copyFrom(start: number): Buffer {
    return Buffer.from(this.#buffer.subarray(start, this.#length));
  }

  /** Drops what was written after `length` (a value the caller writes otherwise after all). */
  rewind(length: number): void {
    this.#length = Math.min(length, this.#length);
  }

  u8(value: number): void {
    this.#reserve(1);
    this.#buffer[this.#length++] = value;
  }

  bytes(value: Uint8Array): void {
    this.#reserve(value.length);
    this.#buffer.set(value, this.#length);
    this.#length += value.length;
  }

  /** Bytes [start, end) of `source`, as they are. */
  copy(source: Buffer, start: number, end: number): void {
    if (end <= start) return;
    this.#reserve(end - start);
    this.#length = copyBytes(source, start, end, this.#buffer, this.#length);
  }

  zeros(count: number): void {
    this.#reserve(count);
    this.#buffer.fill(0, this.#length, this.#length + count);
    this.#length += count;
  }

  varint(value: number): void {
    this.#reserve(10);
    let rest = value;
    while (rest >= 0x80) {
      this.#buffer[this.#length++] = (rest % 0x80) | 0x80;
      rest = Math.floor(rest / 0x80);
    }
    this.#buffer[this.#length++] = rest;
  }

  string(value: string): void {
    const byteLength = Buffer.byteLength(value, 'utf8');
    this.varint(byteLength);
    this.#reserve(byteLength);
    this.#length += this.#buffer.write(value, this.#length, 'utf8');
  }

  binary(value: Uint8Array): void {
    this.varint(value.length);
    this.bytes(value);
  }

  /**
   * A safe integer of 1, 2, 4 or 8 bytes; `value` must fit. Byte by byte:
   * Buffer's writeUInt32LE and the like check their arguments at a cost that
   * showed in a load's profile.
   */
  safeInteger(value: number, width: number): void {
    this.#reserve(width);
    const buffer = this.#buffer;
    const at = this.#length;
    this.#length += width;
    if (width <= 4) {
      for (let index = 0, rest = value | 0; index < width; index++, rest >>= 8)
        buffer[at + index] = rest & 0xff;
      return;
    }
    if (value >= 0 && value <= 0x7fff_ffff) {
      // The common case (ids, counts, times in seconds): no division.
      for (let index = 0, rest = value; index < 4; index++, rest >>= 8) buffer[at + index] = rest & 0xff;
      buffer[at + 4] = 0;
      buffer[at + 5] = 0;
      buffer[at + 6] = 0;
      buffer[at + 7] = 0;
      return;
    }
    // Two 32-bit words; floor keeps the two's complement high word.
    const high = Math.floor(value / 0x1_0000_0000);
    const low = value - high * 0x1_0000_0000;
    buffer[at] = low & 0xff;
    buffer[at + 1] = (low >>> 8) & 0xff;
    buffer[at + 2] = (low >>> 16) & 0xff;
    buffer[at + 3] = low >>> 24;
    buffer[at + 4] = high & 0xff;
    buffer[at + 5] = (high >> 8) & 0xff;
    buffer[at + 6] = (high >> 16) & 0xff;
    buffer[at + 7] = (high >> 24) & 0xff;
  }

  /** A signed or unsigned integer of 1, 2, 4, 8, 16 or 32 bytes; `value` must fit. */
  integer(value: bigint | number, width: number): void {
    if (typeof value === 'number' && width <= 8) {
      this.safeInteger(value, width);
      return;
    }
    this.#reserve(width);
    const at = this.#length;
    this.#length += width;
    if (width === 8) {
      const big = BigInt(value);
      if (big < 0n) this.#buffer.writeBigInt64LE(big, at);
      else this.#buffer.writeBigUInt64LE(big, at);
      return;
    }
    let rest = BigInt.asUintN(width * 8, BigInt(value));
    if (width < 8) {
      const small = Number(rest);
      for (let index = 0; index < width; index++) this.#buffer[at + index] = (small >>> (8 * index)) & 0xff;
      return;
    }
    for (let index = 0; index < width; index++) {
      this.#buffer[at + index] = Number(rest & 0xffn);
      rest >>= 8n;
    }
  }

  float32(value: number): void {
    floatView.setFloat32(0, value, true);
    this.#scratchBytes(4);
  }

  float64(value: number): void {
    // Through a DataView: Buffer's writeDoubleLE checks its arguments at a cost.
    floatView.setFloat64(0, value, true);
    this.#scratchBytes(8);
  }

  #scratchBytes(count: number): void {
    this.#reserve(count);
    for (let index = 0; index < count; index++) this.#buffer[this.#length++] = floatBytes[index] as number;
  }
}

const floatBytes = new Uint8Array(8);
const floatView = new DataView(floatBytes.buffer);

// --- ranges and widths ---------------------------------------------------------

export interface IntegerRange {
  readonly width: number;
  readonly min: bigint;
  readonly max: bigint;
}

/** The integer types, Bool among them, by name. */
export const integerRanges: Readonly<Record<string, IntegerRange | undefined>> = {
  Int8: { width: 1, min: -(2n ** 7n), max: 2n ** 7n - 1n },
  Int16: { width: 2, min: -(2n ** 15n), max: 2n ** 15n - 1n },
  Int32: { width: 4, min: -(2n ** 31n), max: 2n ** 31n - 1n },
  Int64: { width: 8, min: -(2n ** 63n), max: 2n ** 63n - 1n },
  UInt8: { width: 1, min: 0n, max: 2n ** 8n - 1n },
  UInt16: { width: 2, min: 0n, max: 2n ** 16n - 1n },
  UInt32: { width: 4, min: 0n, max: 2n ** 32n - 1n },
  UInt64: { width: 8, min: 0n, max: 2n ** 64n - 1n },
  Bool: { width: 1, min: 0n, max: 1n },
};

export function decimalWidth(precision: number): number {
  if (precision <= 9) return 4;
  if (precision <= 18) return 8;
  if (precision <= 38) return 16;
  return 32;
}

/** Byte width of a fixed-size type; undefined for variable-size ones. */
function fixedWidth(type: ChType): number | undefined {
  switch (type.name) {
    case 'Float32':
    case 'Date32':
    case 'DateTime':
      return 4;
    case 'Float64':
    case 'DateTime64':
      return 8;
    case 'Date':
      return 2;
    case 'UUID':
      return 16;
    case 'Decimal':
      return decimalWidth(type.precision);
    default:
      return integerRanges[type.name]?.width;
  }
}

/** Writes the type's zero value: NULL, 0, '', [] or {}. For NULL in a non-Nullable column. */
export function writeDefault(writer: RowBinaryWriter, type: ChType): void {
  switch (type.name) {
    case 'Nullable':
      writer.u8(1);
      return;
    case 'LowCardinality':
      writeDefault(writer, type.inner);
      return;
    case 'String':
    case 'Array':
    case 'Map':
      writer.varint(0);
      return;
    default:
      writer.zeros(fixedWidth(type) ?? 0);
  }
}

// --- the limits of dates and times -----------------------------------------------

/** Day ranges the server handles, for clamping; see ServerCapabilities.extendedDateRange. */
export interface DateLimits {
  readonly date32: { readonly minDay: number; readonly maxDay: number };
}

const microsPerDay = 86_400_000_000n;
const microsPerSecond = 1_000_000n;
const dateMaxDay = 0xffff;

export function floorDivide(dividend: bigint, divisor: bigint): bigint {
  const quotient = dividend / divisor;
  return dividend % divisor !== 0n && dividend < 0n !== divisor < 0n ? quotient - 1n : quotient;
}

function clamp(value: bigint, min: bigint, max: bigint): bigint {
  return value < min ? min : value > max ? max : value;
}

const datePattern = /^(-?\d+)-(\d{2})-(\d{2})$/;

/** Days since 1970-01-01 of a value-model date ('-0043-03-15', 'infinity', …), before clamping. */
export function dateDays(date: string): number {
  if (date === 'infinity') return Number.POSITIVE_INFINITY;
  if (date === '-infinity') return Number.NEGATIVE_INFINITY;
  const match = datePattern.exec(date);
  if (!match) throw new EngineError('decode', 'cannot decode date value');
  return daysFromCivil(Number(match[1]), Number(match[2]), Number(match[3]));
}

function clampDays(days: number, min: number, max: number): number {
  return days < min ? min : Math.min(days, max);
}

// --- writing source values -------------------------------------------------------

export function mismatch(column: string, source: ColumnType, target: ChType): EngineError {
  return new EngineError(
    'schema_mismatch',
    `column ${column}: a ${describeColumnType(source)} value cannot be written to ClickHouse ${formatChType(target)}`,
  );
}

export function unwrapLowCardinality(type: ChType): ChType {
  return type.name === 'LowCardinality' ? unwrapLowCardinality(type.inner) : type;
}

/** Whether values of `source` can be written to `target` (neither Nullable). */
export function writable(source: ColumnType, target: ChType): boolean {
  const kind = source.kind;
  switch (target.name) {
    case 'String':
      return true;
    case 'Int8':
    case 'Int16':
    case 'Int32':
    case 'Int64':
    case 'UInt8':
    case 'UInt16':
    case 'UInt32':
    case 'UInt64':
      return (
        kind === 'int16' ||
        kind === 'int32' ||
        kind === 'int64' ||
        kind === 'boolean' ||
        kind === 'time' ||
        (target.name === 'Int64' && (kind === 'timestamp' || kind === 'timestamptz'))
      );
    case 'Bool':
      return kind === 'boolean';
    case 'Float32':
    case 'Float64':
      return kind === 'float32' || kind === 'float64' || kind === 'int16' || kind === 'int32';
    case 'Decimal':
      return kind === 'numeric' || kind === 'int16' || kind === 'int32' || kind === 'int64';
    case 'UUID':
      return kind === 'uuid';
    case 'Date':
    case 'Date32':
      return kind === 'date';
    case 'DateTime':
    case 'DateTime64':
      return kind === 'timestamp' || kind === 'timestamptz';
    case 'Array': {
      if (source.kind !== 'array') return false;
      let element = unwrapLowCardinality(target.element);
      if (element.name === 'Nullable') element = unwrapLowCardinality(element.inner);
      // Nested arrays: the dimensions are checked value by value.
      while (element.name === 'Array') element = unwrapLowCardinality(element.element);
      if (element.name === 'Nullable') element = unwrapLowCardinality(element.inner);
      return writable(source.element, element);
    }
    case 'Map':
      return kind === 'hstore';
    default:
      return false;
  }
}

export interface ValueContext {
  readonly column: string;
  readonly limits: DateLimits;
  /** DateTime64's range in microseconds, from limits.date32. */
  readonly minMicros: bigint;
  readonly maxMicros: bigint;
  /** The same as numbers (both safe integers). */
  readonly minMicrosNumber: number;
  readonly maxMicrosNumber: number;
}

export function valueContext(column: string, limits: DateLimits): ValueContext {
  const minMicros = BigInt(limits.date32.minDay) * microsPerDay;
  const maxMicros = BigInt(limits.date32.maxDay + 1) * microsPerDay - 1n;
  return {
    column,
    limits,
    minMicros,
    maxMicros,
    minMicrosNumber: Number(minMicros),
    maxMicrosNumber: Number(maxMicros),
  };
}

function valueError(context: ValueContext, reason: string): EngineError {
  return new EngineError('schema_mismatch', `column ${context.column}: ${reason}`);
}

/** An integer into an integer type, refused outside its range. */
export function writeInteger(
  writer: RowBinaryWriter,
  type: ChType,
  value: bigint | number,
  context: ValueContext,
): void {
  const range = integerRanges[type.name];
  if (!range) throw valueError(context, `not an integer type`);
  // Numbers (int16, int32 values) are compared as numbers: no bigint per value.
  const outside =
    typeof value === 'number'
      ? value < Number(range.min) || value > Number(range.max)
      : value < range.min || value > range.max;
  if (outside) throw valueError(context, `value out of the range of ${formatChType(type)}`);
  writer.integer(value, range.width);
}

const numericTextPattern = /^(-?)(\d+)(?:\.(\d+))?$/;

function writeDecimal(
  writer: RowBinaryWriter,
  type: { readonly precision: number; readonly scale: number },
  value: string | number | bigint,
  context: ValueContext,
): void {
  const text = String(value);
  const match = numericTextPattern.exec(text);
  if (!match) throw valueError(context, `${text === 'NaN' ? 'NaN' : 'a value'} cannot be stored as Decimal`);
  const [, sign = '', integerDigits = '', fractionDigits = ''] = match;
  const kept = fractionDigits.length > type.scale ? fractionDigits.slice(0, type.scale) : fractionDigits;
  if (fractionDigits.length > type.scale && /[1-9]/.test(fractionDigits.slice(type.scale))) {
    throw valueError(context, `more fraction digits than Decimal(${type.precision}, ${type.scale}) holds`);
  }
  const digits = (integerDigits + kept.padEnd(type.scale, '0')).replace(/^0+(?=\d)/, '');
  if (digits.length > type.precision) {
    throw valueError(context, `value out of the range of Decimal(${type.precision}, ${type.scale})`);
  }
  const width = decimalWidth(type.precision);
  // Up to 15 digits are exact as a double: most decimals never become a bigint.
  if (digits.length <= 15) {
    const magnitude = Number(digits);
    writer.integer(sign === '-' ? -magnitude : magnitude, width);
    return;
  }
  const magnitude = BigInt(digits);
  writer.integer(sign === '-' ? -magnitude : magnitude, width);
}

function writeUuid(writer: RowBinaryWriter, uuid: string): void {
  const bytes = Buffer.from(uuid.replace(/-/g, ''), 'hex');
  // Each 64-bit half is a little-endian UInt64, the high half first.
  writer.bytes(bytes.subarray(0, 8).reverse());
  writer.bytes(bytes.subarray(8, 16).reverse());
}

/**
 * A timestamp (microseconds since the epoch) into Int64, DateTime or
 * DateTime64, clamped to what the type shows. A safe-integer number takes no
 * BigInt where the column is DateTime64(6) or Int64 and the value in range.
 */
export function writeTimestamp(
  writer: RowBinaryWriter,
  type: ChType,
  value: bigint | number,
  context: ValueContext,
): void {
  if (typeof value === 'number') {
    if (
      type.name === 'Int64' ||
      (type.name === 'DateTime64' &&
        type.precision === 6 &&
        value >= context.minMicrosNumber &&
        value <= context.maxMicrosNumber)
    ) {
      writer.safeInteger(value, 8);
      return;
    }
  }
  const micros = BigInt(value);
  if (type.name === 'Int64') {
    writer.integer(micros, 8);
    return;
  }
  if (type.name === 'DateTime') {
    const seconds = clamp(floorDivide(micros, microsPerSecond), 0n, 2n ** 32n - 1n);
    writer.integer(seconds, 4);
    return;
  }
  if (type.name !== 'DateTime64') throw valueError(context, 'not a time type');
  const clamped = clamp(micros, context.minMicros, context.maxMicros);
  const ticks =
    type.precision === 6
      ? clamped
      : type.precision < 6
        ? floorDivide(clamped, 10n ** BigInt(6 - type.precision))
        : clamped * 10n ** BigInt(type.precision - 6);
  writer.integer(ticks, 8);
}

/** Days since 1970-01-01 into Date or Date32, clamped to the type's range. */
export function writeDays(writer: RowBinaryWriter, type: ChType, days: number, context: ValueContext): void {
  if (type.name === 'Date') {
    writer.integer(clampDays(days, 0, dateMaxDay), 2);
  } else {
    const { minDay, maxDay } = context.limits.date32;
    writer.integer(clampDays(days, minDay, maxDay), 4);
  }
}

function arrayDepth(type: ChType): number {
  let depth = 0;
  for (let current = unwrapLowCardinality(type); current.name === 'Array'; ) {
    depth++;
    current = unwrapLowCardinality(current.element);
    if (current.name === 'Nullable') current = unwrapLowCardinality(current.inner);
  }
  return depth;
}

function valueDepth(value: ArrayValue): number {
  const first = value.find((item) => item !== null);
  return first !== undefined && first !== null && isArrayValue(first) ? 1 + valueDepth(first) : 1;
}

/** Writes one non-null value of the value model to `type`. `text` is its PostgreSQL text. */
export function writeValue(
  writer: RowBinaryWriter,
  type: ChType,
  value: ScalarValue | ArrayValue | null,
  text: string | undefined,
  context: ValueContext,
): void {
  if (value === null) {
    writeDefault(writer, type);
    return;
  }
  switch (type.name) {
    case 'Nullable':
      // Decimal has no NaN (numeric(p, s) allows it): NULL is the nearest a Nullable column holds.
      if (value === 'NaN' && unwrapLowCardinality(type.inner).name === 'Decimal') {
        writer.u8(1);
        return;
      }
      writer.u8(0);
      writeValue(writer, type.inner, value, text, context);
      return;
    case 'LowCardinality':
      writeValue(writer, type.inner, value, text, context);
      return;
    case 'String':
      if (Buffer.isBuffer(value)) writer.binary(value);
      else if (typeof value === 'string') writer.string(value);
      else if (text !== undefined) writer.string(text);
      else throw valueError(context, 'an array element of this type cannot be stored as String');
      return;
    case 'Bool':
    case 'Int8':
    case 'Int16':
    case 'Int32':
    case 'Int64':
    case 'UInt8':
    case 'UInt16':
    case 'UInt32':
    case 'UInt64':
      // A boolean in a wider integer column (a table made by hand) takes the column's width.
      if (typeof value === 'boolean') writeInteger(writer, type, value ? 1 : 0, context);
      else if (typeof value === 'number' || typeof value === 'bigint')
        writeInteger(writer, type, value, context);
      else throw valueError(context, `not an integer`);
      return;
    case 'Float32':
      writer.float32(Number(value));
      return;
    case 'Float64':
      writer.float64(Number(value));
      return;
    case 'Decimal':
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'bigint') {
        throw valueError(context, 'not a number');
      }
      writeDecimal(writer, type, value, context);
      return;
    case 'UUID':
      writeUuid(writer, String(value));
      return;
    case 'Date':
    case 'Date32':
      writeDays(writer, type, dateDays(String(value)), context);
      return;
    case 'DateTime':
    case 'DateTime64':
      if (typeof value !== 'bigint') throw valueError(context, 'not a timestamp');
      writeTimestamp(writer, type, value, context);
      return;
    case 'Array': {
      if (!isArrayValue(value)) throw valueError(context, 'not an array');
      if (value.length > 0 && valueDepth(value) !== arrayDepth(type)) {
        throw valueError(
          context,
          `a ${valueDepth(value)}-dimensional array cannot be stored in ${formatChType(type)}`,
        );
      }
      writer.varint(value.length);
      for (const item of value) writeValue(writer, type.element, item, undefined, context);
      return;
    }
    case 'Map': {
      if (!isHstore(value)) throw valueError(context, 'not a map');
      const entries = Object.entries(value);
      writer.varint(entries.length);
      for (const [key, entry] of entries) {
        writeValue(writer, type.key, key, key, context);
        writeValue(writer, type.value, entry, entry ?? undefined, context);
      }
      return;
    }
  }
}

// --- reading values back -----------------------------------------------------------

/** A value read from RowBinary, in the shape sqlLiteral (sql.ts) needs. */
export type ChValue =
  | null
  | bigint
  | number
  | boolean
  | string
  | Buffer
  | readonly ChValue[]
  | { readonly entries: readonly (readonly [ChValue, ChValue])[] };

/** Reads RowBinary values from one buffer. */
export class RowBinaryReader {
  readonly #buffer: Buffer;
  #offset = 0;

  constructor(buffer: Buffer) {
    this.#buffer = buffer;
  }

  get offset(): number {
    return this.#offset;
  }

  get atEnd(): boolean {
    return this.#offset >= this.#buffer.length;
  }

  #need(bytes: number): void {
    if (this.#offset + bytes > this.#buffer.length) {
      throw new EngineError('internal', 'ClickHouse RowBinary answer ended early');
    }
  }

  varint(): number {
    let value = 0;
    let multiplier = 1;
    for (;;) {
      this.#need(1);
      const byte = this.#buffer[this.#offset++] ?? 0;
      value += (byte & 0x7f) * multiplier;
      if (byte < 0x80) return value;
      multiplier *= 0x80;
    }
  }

  #take(bytes: number): Buffer {
    this.#need(bytes);
    const slice = this.#buffer.subarray(this.#offset, this.#offset + bytes);
    this.#offset += bytes;
    return slice;
  }

  #signed(bytes: number): bigint {
    const slice = this.#take(bytes);
    let value = 0n;
    for (let index = bytes - 1; index >= 0; index--) value = (value << 8n) | BigInt(slice[index] ?? 0);
    return BigInt.asIntN(bytes * 8, value);
  }

  #unsigned(bytes: number): bigint {
    return BigInt.asUintN(bytes * 8, this.#signed(bytes));
  }

  /** The raw bytes of one value of `type`. */
  rawValue(type: ChType): Buffer {
    const start = this.#offset;
    this.value(type);
    return this.#buffer.subarray(start, this.#offset);
  }

  value(type: ChType): ChValue {
    switch (type.name) {
      case 'Nullable':
        this.#need(1);
        return this.#buffer[this.#offset++] === 1 ? null : this.value(type.inner);
      case 'LowCardinality':
        return this.value(type.inner);
      case 'String':
        return this.#take(this.varint());
      case 'Bool':
        return this.#take(1)[0] === 1;
      case 'Int8':
      case 'Int16':
      case 'Int32':
      case 'Int64':
        return this.#signed(integerRanges[type.name]?.width ?? 8);
      case 'UInt8':
      case 'UInt16':
      case 'UInt32':
      case 'UInt64':
        return this.#unsigned(integerRanges[type.name]?.width ?? 8);
      case 'Float32':
        return this.#take(4).readFloatLE(0);
      case 'Float64':
        return this.#take(8).readDoubleLE(0);
      case 'Decimal':
        return this.#signed(decimalWidth(type.precision));
      case 'UUID': {
        const bytes = Buffer.concat(
          [this.#take(8), this.#take(8)].map((half) => Buffer.from(half).reverse()),
        );
        const hex = bytes.toString('hex');
        return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
      }
      case 'Date':
        return Number(this.#unsigned(2));
      case 'Date32':
        return Number(this.#signed(4));
      case 'DateTime':
        return this.#unsigned(4);
      case 'DateTime64':
        return this.#signed(8);
      case 'Array': {
        const count = this.varint();
        const items: ChValue[] = [];
        for (let index = 0; index < count; index++) items.push(this.value(type.element));
        return items;
      }
      case 'Map': {
        const count = this.varint();
        const entries: (readonly [ChValue, ChValue])[] = [];
        for (let index = 0; index < count; index++)
          entries.push([this.value(type.key), this.value(type.value)]);
        return { entries };
      }
    }
  }
}
