// An initial load as TabSeparated: PostgreSQL's COPY text and ClickHouse's
// TabSeparated share their framing (a row per line, tab between fields, `\N`
// for NULL) and their backslash escapes, so most fields can go to the server
// as the source wrote them, without being parsed and encoded as RowBinary
// (which cost the engine several times the CPU of the whole pipe). A batch's
// new rows are written the same way from the text of the source's TupleData
// (tuple-rows.ts): there the fields come unescaped, each with its length, and
// are escaped as they are copied.
//
// A table is loaded this way only when every mapped column has a rule below;
// any other table (Float32; floats and dates on servers before 22.8, which
// read their text otherwise; Date; arrays; maps; time columns of other
// precisions or time zones) stays on RowBinary. Per column:
//   as-is       text kinds into String, uuid into UUID, integers into a signed
//               integer at least as wide: the field is copied.
//   bytes       bytea into String: its hex text written as the bytes, escaped.
//   boolean     boolean into Bool or an integer: `t` and `f` become 1 and 0.
//   (as-is)     floats and small integers into Float64, servers from 22.8.
//   date32      date into Date32, servers from 22.8: copied inside the range.
//   decimal     numeric into Decimal(P, S): a plain number with at most P − S
//               integer and S fraction digits is copied.
//   micros      a timestamp into Int64 (microseconds, servers without
//               DateTime64): parsed from the bytes and written as digits.
//   dateTime64  a timestamp into DateTime64(6, 'UTC') on servers from 22.8
//               (older ones read text times differently): copied without its
//               `+00` inside the server's range.
// Every other field (NaN, a timestamp out of range or infinite, a decimal
// with trailing zeros past the scale) is converted: encoded by the column's
// RowBinary encoder, read back and written as text. So both formats store
// the same values (the same clamping, the same NULL for NaN) and refuse the
// same values with the same errors. NULL goes to a Nullable column as `\N`
// and to any other as the type's zero, as RowBinary writes it.
import { EngineError } from '../../errors.ts';
import { civilFromDays, daysFromCivil, formatCivilDate } from '../../model/calendar.ts';
import type { ValueKind } from '../../model/value-kind.ts';
import { formatTableName } from '../../resources/mirror.ts';
import { tupleCellKind } from '../changes.ts';
import { binaryValueError } from '../copy-lines.ts';
import { type CopyTable, copyNull, copyRowWidthError } from '../copy-text.ts';
import { type CellEncoder, RowBinaryReader, RowBinaryWriter, unwrapLowCardinality } from './row-binary.ts';
import type { ServerCapabilities } from './server.ts';
import { decimalText, timeText } from './sql.ts';
import type { ChType } from './types.ts';

type FieldRule = 'as-is' | 'bytes' | 'decimal' | 'boolean' | 'date32' | 'micros' | 'dateTime64';

/** How one mapped column's fields are written. */
export interface ColumnPlan {
  readonly rule: FieldRule;
  /** The column's type without LowCardinality, Nullable kept: what the read-back value is read as. */
  readonly type: ChType;
  readonly nullable: boolean;
  /** Decimal(P, S): P − S and S. */
  readonly integerDigits: number;
  readonly scale: number;
  /** A timestamptz column: its text ends with `+00` (TimeZone UTC). */
  readonly withTimeZone: boolean;
  /** What a NULL becomes in a column that is not Nullable: RowBinary's zero of the type, as text. */
  readonly zeroText: string;
  /** The column's RowBinary encoder, for the fields that are converted. */
  readonly encoder: CellEncoder;
}

const tab = 9;
const newline = 10;
const backslash = 92;
const capitalN = 78;
const zero = 48;
const plus = 43;
const minus = 45;
const dot = 46;
const one = 49;
const lowerF = 102;
const lowerT = 116;
const lowerX = 120;

/** A hex digit's value, or -1: for bytea's `\\x…` text. */
const hexValues = new Int8Array(256).fill(-1);
for (let digit = 0; digit < 16; digit++) {
  hexValues[digit.toString(16).charCodeAt(0)] = digit;
  hexValues[digit.toString(16).toUpperCase().charCodeAt(0)] = digit;
}

/** The TabSeparated escape of a byte, where it needs one (ClickHouse reads these back). */
const byteEscapes: readonly (string | undefined)[] = Array.from(
  { length: 256 },
  (_, byte) =>
    ({ 0: '\\0', 8: '\\b', 9: '\\t', 10: '\\n', 11: '\\v', 12: '\\f', 13: '\\r', 92: '\\\\' })[byte],
);

function writeEscapedByte(out: RowBinaryWriter, byte: number): void {
  const escaped = byteEscapes[byte];
  if (escaped === undefined) out.u8(byte);
  else out.ascii(escaped);
}

/** Writes raw bytes as a TabSeparated String field. */
function writeEscapedBytes(out: RowBinaryWriter, bytes: Uint8Array): void {
  for (const byte of bytes) writeEscapedByte(out, byte);
}

/**
 * Writes bytea's hex text (`\x` and pairs of hex digits; as COPY writes it,
 * `escaped`, its backslash is doubled) at [start, end) as the bytes it stands
 * for; false, having written nothing, when the field is not that.
 */
function writeHexBytes(
  line: Buffer,
  start: number,
  end: number,
  out: RowBinaryWriter,
  escaped: boolean,
): boolean {
  const digitsStart = escaped ? start + 3 : start + 2;
  if (line[start] !== backslash || line[digitsStart - 1] !== lowerX) return false;
  if (escaped && line[start + 1] !== backslash) return false;
  if ((end - digitsStart) % 2 !== 0) return false;
  for (let at = digitsStart; at < end; at++) if ((hexValues[line[at] ?? 0] ?? -1) < 0) return false;
  for (let at = digitsStart; at < end; at += 2) {
    writeEscapedByte(out, ((hexValues[line[at] ?? 0] ?? 0) << 4) | (hexValues[line[at + 1] ?? 0] ?? 0));
  }
  return true;
}

const verbatimKinds: ReadonlySet<ValueKind> = new Set(['string', 'json', 'enum', 'xml']);
const integerWidths: Readonly<Partial<Record<ValueKind, number>>> = { int16: 2, int32: 4, int64: 8 };
const signedIntegerWidths: Readonly<Record<string, number>> = { Int16: 2, Int32: 4, Int64: 8 };

const floatKinds: ReadonlySet<ValueKind> = new Set(['float64', 'float32', 'int16', 'int32']);

/** The rule for a column of source kind `kind` and table type `target`; undefined when it has none. */
function columnRule(
  kind: ValueKind,
  target: ChType,
  capabilities: ServerCapabilities,
): { rule: FieldRule; zeroText: string } | undefined {
  switch (target.name) {
    case 'String':
      if (kind === 'bytes') return { rule: 'bytes', zeroText: '' };
      return verbatimKinds.has(kind) ? { rule: 'as-is', zeroText: '' } : undefined;
    case 'UUID':
      return kind === 'uuid'
        ? { rule: 'as-is', zeroText: '00000000-0000-0000-0000-000000000000' }
        : undefined;
    case 'Bool':
    case 'Int8':
    case 'UInt8':
    case 'UInt16':
    case 'UInt32':
    case 'UInt64':
      return kind === 'boolean' ? { rule: 'boolean', zeroText: '0' } : undefined;
    case 'Int16':
    case 'Int32':
    case 'Int64': {
      if (kind === 'boolean') return { rule: 'boolean', zeroText: '0' };
      const sourceWidth = integerWidths[kind];
      if (sourceWidth !== undefined && sourceWidth <= (signedIntegerWidths[target.name] ?? 0))
        return { rule: 'as-is', zeroText: '0' };
      if (target.name === 'Int64' && (kind === 'timestamp' || kind === 'timestamptz'))
        return { rule: 'micros', zeroText: '0' };
      return undefined;
    }
    case 'Decimal':
      return kind === 'numeric' ? { rule: 'decimal', zeroText: '0' } : undefined;
    case 'Float64':
      // Not Float32: a float4's text read straight into Float32 can round
      // otherwise than through a double, as RowBinary does.
      return floatKinds.has(kind) && capabilities.readsTextAsRowBinary
        ? { rule: 'as-is', zeroText: '0' }
        : undefined;
    case 'Date32':
      return kind === 'date' && capabilities.readsTextAsRowBinary
        ? { rule: 'date32', zeroText: '1970-01-01' }
        : undefined;
    case 'DateTime64':
      return (kind === 'timestamp' || kind === 'timestamptz') &&
        target.precision === 6 &&
        target.timezone === 'UTC' &&
        capabilities.readsTextAsRowBinary
        ? { rule: 'dateTime64', zeroText: '1970-01-01 00:00:00.000000' }
        : undefined;
    default:
      return undefined;
  }
}

/**
 * The settings of a TabSeparated load: every row is data, and a row the
 * server cannot parse fails the insert instead of being skipped, whatever
 * the server's or the user's profile says.
 */
export function tabSeparatedSettings(capabilities: ServerCapabilities): Record<string, string> {
  return {
    input_format_allow_errors_num: '0',
    input_format_allow_errors_ratio: '0',
    ...(capabilities.detectsTextHeader
      ? { input_format_tsv_detect_header: '0', input_format_tsv_skip_first_lines: '0' }
      : {}),
  };
}

/** One mapped column of a table: its source kind, its type in the table and its encoder. */
export interface PlannedColumn {
  readonly kind: ValueKind;
  readonly type: ChType;
  readonly encoder: CellEncoder;
}

/** The plan of every mapped column, or undefined when one of them has no rule (the table stays on RowBinary). */
export function tabSeparatedPlan(
  columns: readonly PlannedColumn[],
  capabilities: ServerCapabilities,
): ColumnPlan[] | undefined {
  const plans: ColumnPlan[] = [];
  for (const column of columns) {
    const type = unwrapLowCardinality(column.type);
    const nullable = type.name === 'Nullable';
    const inner = nullable ? unwrapLowCardinality(type.inner) : type;
    const found = columnRule(column.kind, inner, capabilities);
    if (!found) return undefined;
    plans.push({
      rule: found.rule,
      type,
      nullable,
      integerDigits: inner.name === 'Decimal' ? inner.precision - inner.scale : 0,
      scale: inner.name === 'Decimal' ? inner.scale : 0,
      withTimeZone: column.kind === 'timestamptz',
      zeroText: found.zeroText,
      encoder: column.encoder,
    });
  }
  return plans;
}

/** Whether bytes [start, end) are a plain number that Decimal(integerDigits + scale, scale) holds. */
function fitsDecimal(
  line: Buffer,
  start: number,
  end: number,
  integerDigits: number,
  scale: number,
): boolean {
  let at = line[start] === minus ? start + 1 : start;
  const integerStart = at;
  while (at < end && ((line[at] ?? 0) - zero) >>> 0 < 10) at++;
  const integerCount = at - integerStart;
  if (integerCount === 0 || integerCount > integerDigits) return false;
  if (at === end) return true;
  if (line[at] !== dot) return false;
  const fractionStart = ++at;
  while (at < end && ((line[at] ?? 0) - zero) >>> 0 < 10) at++;
  const fractionCount = at - fractionStart;
  return at === end && fractionCount > 0 && fractionCount <= scale;
}

/** The two-digit number at `at`, or NaN. */
function twoDigits(line: Buffer, at: number): number {
  const tens = (line[at] ?? 0) - zero;
  const ones = (line[at + 1] ?? 0) - zero;
  return tens >>> 0 < 10 && ones >>> 0 < 10 ? tens * 10 + ones : Number.NaN;
}

// The last date's day number: the rows of a load mostly share their day, and
// the calendar arithmetic cost as much as the rest of the timestamp.
let lastDateKey = -1;
let lastDays = 0;

function daysOf(year: number, month: number, day: number): number {
  const key = year * 10_000 + month * 100 + day;
  if (key !== lastDateKey) {
    lastDays = daysFromCivil(year, month, day);
    lastDateKey = key;
  }
  return lastDays;
}

/**
 * A common timestamp as PostgreSQL writes it with DateStyle ISO and TimeZone
 * UTC, `YYYY-MM-DD HH:MM:SS[.f…][+00]`: its microseconds since the epoch and
 * the length of its text before `+00`. Undefined for any other text (BC,
 * five-digit years, infinity, another offset) and where the microseconds are
 * not an exact number (after mid-2255): such fields are converted.
 */
function commonTimestamp(
  line: Buffer,
  start: number,
  end: number,
  withTimeZone: boolean,
): { micros: number; year: number; textLength: number } | undefined {
  const length = end - start;
  if (length < 19) return undefined;
  const year = twoDigits(line, start) * 100 + twoDigits(line, start + 2);
  const month = twoDigits(line, start + 5);
  const day = twoDigits(line, start + 8);
  const hour = twoDigits(line, start + 11);
  const minute = twoDigits(line, start + 14);
  const second = twoDigits(line, start + 17);
  if (
    line[start + 4] !== minus ||
    line[start + 7] !== minus ||
    line[start + 10] !== 32 ||
    line[start + 13] !== 58 ||
    line[start + 16] !== 58 ||
    Number.isNaN(year + month + day + hour + minute + second)
  ) {
    return undefined;
  }
  let at = start + 19;
  let fraction = 0;
  if (line[at] === dot) {
    let scale = 100_000;
    for (at++; at < end && ((line[at] ?? 0) - zero) >>> 0 < 10 && scale >= 1; at++, scale /= 10)
      fraction += ((line[at] ?? 0) - zero) * scale;
    if (at === start + 20) return undefined;
  }
  const textLength = at - start;
  if (withTimeZone) {
    if (end - at !== 3 || line[at] !== plus || line[at + 1] !== zero || line[at + 2] !== zero)
      return undefined;
  } else if (at !== end) {
    return undefined;
  }
  const seconds = daysOf(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
  const micros = seconds * 1_000_000 + fraction;
  return Number.isSafeInteger(micros) ? { micros, year, textLength } : undefined;
}

const maxSafeVersion = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The versions of a block's rows: none (an initial load), or `first` and each
 * next row the next one. A block holds at most a row a byte: when its last
 * version is a safe integer, versions are counted as numbers (`firstSafe`),
 * without a BigInt per row.
 */
class RowVersions {
  readonly first: bigint | undefined;
  readonly firstSafe: number | undefined;

  constructor(block: Buffer, first: bigint | undefined) {
    this.first = first;
    this.firstSafe =
      first !== undefined && first + BigInt(block.length) <= maxSafeVersion ? Number(first) : undefined;
  }
}

/**
 * Writes the rows of a table's COPY text, or of its TupleData, as TabSeparated, each followed by
 * the metadata columns: not soft-deleted, not deleted, and a version (0 for
 * an initial load; for a batch's new rows, each row its own).
 */
export class TabSeparatedRows {
  readonly #columns: readonly ColumnPlan[];
  readonly #table: CopyTable;
  /** The flags' fields and version 0, with the line end. */
  readonly #loadRowEnd: Buffer;
  /** The flags' fields and the tab before the version. */
  readonly #flagFields: Buffer;
  readonly #scratch = new RowBinaryWriter(256);
  /** Years strictly inside the server's Date32 and DateTime64 range: their text is stored as it is. */
  readonly #minYear: number;
  readonly #maxYear: number;

  /** `flagFields`: the text of the flag columns between the mapped ones and the version, in order. */
  constructor(
    table: CopyTable,
    columns: readonly ColumnPlan[],
    flagFields: readonly string[],
    capabilities: ServerCapabilities,
  ) {
    this.#table = table;
    this.#columns = columns;
    const flags = flagFields.map((field) => `\t${field}`).join('');
    this.#loadRowEnd = Buffer.from(`${flags}\t0\n`);
    this.#flagFields = Buffer.from(`${flags}\t`);
    const { minDay, maxDay } = capabilities.extendedDateRange;
    this.#minYear = civilFromDays(minDay).year + 1;
    this.#maxYear = civilFromDays(maxDay).year - 1;
  }

  /**
   * Writes every line of `block` (whole lines, each ending with a newline);
   * returns the row count. Rows get version 0, or, given `firstVersion`, that
   * version and each next row the next one.
   */
  writeLines(block: Buffer, out: RowBinaryWriter, firstVersion?: bigint): number {
    const versions = new RowVersions(block, firstVersion);
    let rowCount = 0;
    let lineStart = 0;
    while (lineStart < block.length) {
      const lineEnd = block.indexOf(newline, lineStart);
      this.#writeLine(block, lineStart, lineEnd, out);
      this.#writeRowEnd(out, versions, rowCount++);
      lineStart = lineEnd + 1;
    }
    return rowCount;
  }

  /**
   * Writes every row of `block`, pgoutput's TupleData records back to back
   * (tuple-rows.ts), each cell's text as PostgreSQL's output wrote it, not
   * escaped; returns the row count. Versions as `writeLines` gives them.
   */
  writeTuples(block: Buffer, out: RowBinaryWriter, firstVersion?: bigint): number {
    const versions = new RowVersions(block, firstVersion);
    let rowCount = 0;
    let recordStart = 0;
    while (recordStart < block.length) {
      recordStart = this.#writeTuple(block, recordStart, out);
      this.#writeRowEnd(out, versions, rowCount++);
    }
    return rowCount;
  }

  #writeRowEnd(out: RowBinaryWriter, versions: RowVersions, rowIndex: number): void {
    if (versions.first === undefined) {
      out.bytes(this.#loadRowEnd);
      return;
    }
    out.bytes(this.#flagFields);
    if (versions.firstSafe === undefined) out.ascii((versions.first + BigInt(rowIndex)).toString());
    else out.digits(versions.firstSafe + rowIndex);
    out.u8(newline);
  }

  #writeLine(line: Buffer, start: number, end: number, out: RowBinaryWriter): void {
    const columns = this.#columns;
    const last = columns.length - 1;
    // Bytes from `run` on are not written yet: unchanged fields go out together.
    let run = start;
    let fieldStart = start;
    for (let index = 0; index <= last; index++) {
      let fieldEnd = fieldStart;
      while (fieldEnd < end && line[fieldEnd] !== tab) fieldEnd++;
      if ((fieldEnd === end) !== (index === last)) throw this.#widthError(line, start, end);
      const column = columns[index] as ColumnPlan;
      if (
        fieldEnd - fieldStart === 2 &&
        line[fieldStart] === backslash &&
        line[fieldStart + 1] === capitalN
      ) {
        if (!column.nullable) {
          out.copy(line, run, fieldStart);
          out.ascii(column.zeroText);
          run = fieldEnd;
        }
      } else if (this.#writeField(column, line, fieldStart, fieldEnd, out, run, true)) {
        run = fieldEnd;
      }
      fieldStart = fieldEnd + 1;
    }
    out.copy(line, run, end);
  }

  /** Writes the TupleData record at `start` of `block` as a row's fields; returns where the record ends. */
  #writeTuple(block: Buffer, start: number, out: RowBinaryWriter): number {
    const columns = this.#columns;
    const cellCount = block.readUInt16BE(start);
    if (cellCount !== columns.length) throw copyRowWidthError(this.#table, cellCount);
    let read = start + 2;
    for (let index = 0; index < cellCount; index++) {
      if (index > 0) out.u8(tab);
      const column = columns[index] as ColumnPlan;
      const kind = block[read++];
      if (kind === tupleCellKind.text) {
        const fieldStart = read + 4;
        read = fieldStart + block.readUInt32BE(read);
        if (!this.#writeField(column, block, fieldStart, read, out, fieldStart, false)) {
          out.copyEscaped(block, fieldStart, read);
        }
      } else if (kind === tupleCellKind.null || kind === tupleCellKind.unchangedToast) {
        out.ascii(column.nullable ? copyNull : column.zeroText);
      } else {
        throw binaryValueError(this.#table.source);
      }
    }
    return read;
  }

  /**
   * Leaves the field [start, end), not NULL, as it is (false): in the run of
   * unchanged bytes that starts at `run`, or for the caller to write. Or
   * writes the run up to it, then what the field becomes (true). `escaped`:
   * the field is COPY text, with its escapes; else as PostgreSQL's output
   * wrote it.
   */
  #writeField(
    column: ColumnPlan,
    line: Buffer,
    start: number,
    end: number,
    out: RowBinaryWriter,
    run: number,
    escaped: boolean,
  ): boolean {
    switch (column.rule) {
      case 'as-is':
        return false;
      case 'bytes': {
        out.copy(line, run, start);
        if (writeHexBytes(line, start, end, out, escaped)) return true;
        const bytes = this.#converted(column, line, start, end, escaped);
        if (typeof bytes === 'string') out.ascii(bytes);
        else writeEscapedBytes(out, bytes);
        return true;
      }
      case 'decimal':
        if (fitsDecimal(line, start, end, column.integerDigits, column.scale)) return false;
        break;
      case 'boolean': {
        // `t` and `f`, as PostgreSQL writes them; Bool reads 1 and 0 as UInt8 does.
        if (end - start !== 1 || (line[start] !== lowerT && line[start] !== lowerF)) break;
        out.copy(line, run, start);
        out.u8(line[start] === lowerT ? one : zero);
        return true;
      }
      case 'date32': {
        // `YYYY-MM-DD` with a year strictly inside the server's range.
        const year =
          end - start === 10 ? twoDigits(line, start) * 100 + twoDigits(line, start + 2) : Number.NaN;
        if (year >= this.#minYear && year <= this.#maxYear) return false;
        break;
      }
      case 'micros': {
        const parsed = commonTimestamp(line, start, end, column.withTimeZone);
        if (!parsed) break;
        out.copy(line, run, start);
        out.digits(parsed.micros);
        return true;
      }
      case 'dateTime64': {
        const parsed = commonTimestamp(line, start, end, column.withTimeZone);
        if (!parsed || parsed.year < this.#minYear || parsed.year > this.#maxYear) break;
        // Without its `+00`: the column's time zone is UTC.
        out.copy(line, run, start + parsed.textLength);
        return true;
      }
    }
    out.copy(line, run, start);
    const converted = this.#converted(column, line, start, end, escaped);
    if (typeof converted === 'string') out.ascii(converted);
    else writeEscapedBytes(out, converted);
    return true;
  }

  /**
   * The field through the column's RowBinary encoder, read back: as text, or
   * as the bytes of a String, to be escaped.
   */
  #converted(
    column: ColumnPlan,
    line: Buffer,
    start: number,
    end: number,
    escaped: boolean,
  ): string | Buffer {
    // Numbers, times and bytea's text: ASCII, without escapes but bytea's doubled backslash in COPY text.
    const text = line.toString('latin1', start, end);
    column.encoder(this.#scratch, escaped && column.rule === 'bytes' ? text.replaceAll('\\\\', '\\') : text);
    const value = new RowBinaryReader(this.#scratch.take()).value(column.type);
    if (value === null) return '\\N';
    if (Buffer.isBuffer(value)) return value;
    if (typeof value === 'boolean') return value ? '1' : '0';
    if (column.rule === 'date32' && typeof value === 'number') return formatCivilDate(civilFromDays(value));
    if (typeof value !== 'bigint') {
      throw new EngineError(
        'internal',
        `a ${column.rule} field of ${formatTableName(this.#table.source)} read back as ${typeof value}`,
      );
    }
    if (column.rule === 'decimal') return decimalText(value, column.scale);
    if (column.rule === 'dateTime64') return timeText(value, 6);
    return value.toString();
  }

  #widthError(line: Buffer, start: number, end: number): EngineError {
    let fields = 1;
    for (let at = start; at < end; at++) if (line[at] === tab) fields++;
    return copyRowWidthError(this.#table, fields);
  }
}
