// A new row's default Kafka message (key and value JSON) written straight
// from the bytes the source sent, for a table whose every column has a rule
// here: an insert's TupleData (changes.ts, TupleData) or a snapshot's COPY
// text line. The values are copied into the held chunk as they are, quoted
// and escaped where JSON needs it (COPY's escapes turned into JSON's), with no
// string made per value. The text is the same, byte for byte, as
// message-format.ts writes from the decoded values (unit test); a value a rule
// does not take as it is (a timestamp of another shape, `NaN`, text past
// ASCII, a COPY escape in octal) is decoded and written through
// message-format.ts's cellJson, which also names bad values.
//
// An insert of the benchmark's table, from its pgoutput message to its held
// message, took 2.5–2.8 µs of CPU through decoded values and 0.9–1.1 µs this
// way; a snapshot row 2.0 and 0.73–0.80 µs (docs/benchmarks.md, "Kafka
// messages written from the source's bytes").

import { EngineError } from '../../errors.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import { type TupleData, tupleCellEnd, tupleCellKind, tupleCellsStart } from '../changes.ts';
import { copyRowWidthError, parseCopyTextLine } from '../copy-text.ts';
import type { SourceTransaction } from '../records.ts';
import {
  binaryValue,
  cellJson,
  type NewRowKind,
  newRowValueHead,
  type TableFormat,
} from './message-format.ts';

/** How a column's text becomes its JSON. */
const rule = {
  /** A JSON string of the text as it is (text kinds, bigint). */
  quoted: 0,
  /** A JSON number, the text of a canonical int2 or int4 in range. */
  int16: 1,
  int32: 2,
  /** A JSON string of a plain decimal's text. */
  numeric: 3,
  /** ISO 8601 of the usual `YYYY-MM-DD HH:MM:SS[.ffffff]` (timestamp) and with `+00` (timestamptz). */
  timestamp: 4,
  timestamptz: 5,
  /** `t` and `f` as true and false. */
  boolean: 6,
} as const;

/** The rule of each kind that has one besides the verbatim text kinds (all quoted). */
const ruleOfKind: Partial<Record<ColumnType['kind'], number>> = {
  // Its text is its rendering, and JSON carries it as a string (message-format.ts).
  int64: rule.quoted,
  int16: rule.int16,
  int32: rule.int32,
  numeric: rule.numeric,
  timestamp: rule.timestamp,
  timestamptz: rule.timestamptz,
  boolean: rule.boolean,
};

/** What a table's new rows are written with; tables with a column of another kind are written from decoded values. */
interface Plan {
  readonly format: TableFormat;
  readonly rules: Uint8Array;
  /** Per column, `"name":` (message-format.ts, memberNames) as bytes; the first without the comma before it. */
  readonly members: readonly Buffer[];
  /** Per key column in key order, its position in the row (-1: not replicated) and `"name":`. */
  readonly keyIndexes: readonly number[];
  readonly keyMembers: readonly Buffer[];
  /** The bytes of the JSON around the cells, the heads aside: member names, braces, separators, the tail. */
  readonly fixedBytes: number;
}

const plans = new WeakMap<TableFormat, Plan | null>();

function planOf(format: TableFormat): Plan | null {
  let plan = plans.get(format);
  if (plan === undefined) {
    plan = makePlan(format);
    plans.set(format, plan);
  }
  return plan;
}

function makePlan(format: TableFormat): Plan | null {
  const rules = new Uint8Array(format.types.length);
  for (let index = 0; index < format.types.length; index++) {
    const kind = (format.types[index] as TableFormat['types'][number]).kind;
    const columnRule = format.isVerbatim[index] ? rule.quoted : ruleOfKind[kind];
    if (columnRule === undefined) return null;
    rules[index] = columnRule;
  }
  const members = format.memberNames.map((name, index) => Buffer.from(index === 0 ? name : `,${name}`));
  const keyMembers = format.table.keyColumns.map((name, position) =>
    Buffer.from(`${position === 0 ? '' : ','}${JSON.stringify(name)}:`),
  );
  const namesBytes = (names: readonly Buffer[]) => names.reduce((sum, name) => sum + name.length, 0);
  // `}` after the members, the tail, and the key's braces; the names of
  // unchanged columns are bounded by the member names.
  const fixedBytes =
    2 * namesBytes(members) + namesBytes(keyMembers) + unchangedTail.length + 3 + 2 + format.types.length;
  return { format, rules, members, keyIndexes: format.keyIndexes, keyMembers, fixedBytes };
}

const unchangedTail = Buffer.from('},"unchanged_columns":');
const nullBytes = Buffer.from('null');
const trueBytes = Buffer.from('true');
const falseBytes = Buffer.from('false');
/** What escaping makes of a text byte at most (`\u001f`); other rules write less. */
const mostBytesPerByte = 6;

/** Where a value of the row being written is, as `#kinds` holds it. */
const cell = {
  null: tupleCellKind.null,
  unchangedToast: tupleCellKind.unchangedToast,
  /** Text as PostgreSQL outputs it (TupleData). */
  text: tupleCellKind.text,
  binary: tupleCellKind.binary,
  /** Text with COPY's backslash escapes (a COPY text field). */
  copyText: 0x63,
} as const;

/**
 * Writes the default messages of a table's new rows from the source's bytes,
 * or is not made for a table with a column of a kind it has no rule for
 * (`RowJson.for` gives undefined). Each row is taken (`takeTuple`,
 * `takeCopyLine`), then its key and value are written.
 */
export class RowJson {
  readonly #plan: Plan;
  #headOf: SourceTransaction | null | undefined;
  #headKind: NewRowKind | undefined;
  #head: Buffer = Buffer.alloc(0);
  /** Per value of the row taken: its kind (`cell`), and its bytes' start and end in `#source`. */
  #kinds = new Uint8Array(64);
  #starts = new Int32Array(64);
  #ends = new Int32Array(64);
  #source: Buffer = Buffer.alloc(0);
  #count = 0;

  private constructor(plan: Plan) {
    this.#plan = plan;
  }

  /** Whether the table's new rows are written from bytes: every column has a rule. */
  static writes(format: TableFormat): boolean {
    return planOf(format) !== null;
  }

  static for(format: TableFormat): RowJson | undefined {
    const plan = planOf(format);
    return plan === null ? undefined : new RowJson(plan);
  }

  get columnCount(): number {
    return this.#plan.rules.length;
  }

  /**
   * Takes the new row of an insert, or of an update without an old key, its
   * cells the table's columns in order, for the writes that follow; returns
   * the most bytes its key and value take together.
   */
  takeTuple(kind: 'insert' | 'update', tuple: TupleData, transaction: SourceTransaction): number {
    this.#headFor(kind, transaction);
    const count = tuple.cellCount;
    this.#reserve(count);
    // Its bytes were checked when it was copied out of its message.
    const bytes = tuple.bytes;
    for (let index = 0, at = tupleCellsStart; index < count; index++) {
      const end = tupleCellEnd(bytes, at);
      this.#kinds[index] = bytes[at] as number;
      // A text or binary value's bytes, after the kind byte and Int32 length.
      this.#starts[index] = at + 5;
      this.#ends[index] = end;
      at = end;
    }
    this.#source = bytes;
    this.#count = count;
    return this.#mostBytes(bytes.length);
  }

  /**
   * Takes a snapshot row, the COPY text line `block[start, end)` (without its
   * newline), for the writes that follow; returns the most bytes its key and
   * value take together. A line of another field count than the table's
   * columns fails as copy-text.ts's reading fails.
   */
  takeCopyLine(block: Buffer, start: number, end: number): number {
    this.#headFor('snapshot', null);
    const width = this.#plan.rules.length;
    this.#reserve(width);
    let fields = 0;
    let fieldStart = start;
    for (let read = start; read <= end; read++) {
      if (read < end && block[read] !== tab) continue;
      if (fields < width) {
        const isNull =
          read - fieldStart === 2 && block[fieldStart] === backslash && block[fieldStart + 1] === capitalN;
        this.#kinds[fields] = isNull ? cell.null : cell.copyText;
        this.#starts[fields] = fieldStart;
        this.#ends[fields] = read;
      }
      fields++;
      fieldStart = read + 1;
    }
    if (fields !== width) throw copyRowWidthError(this.#plan.format.table, fields);
    this.#source = block;
    this.#count = width;
    return this.#mostBytes(end - start + 1);
  }

  get hasKey(): boolean {
    return this.#plan.keyIndexes.length > 0;
  }

  /** Writes the key JSON (message-format.ts, keyJson) at `at`; returns where it ends. */
  writeKey(target: Buffer, at: number): number {
    const plan = this.#plan;
    let write = at;
    target[write++] = 0x7b; // {
    for (let position = 0; position < plan.keyIndexes.length; position++) {
      write = copyBytes(plan.keyMembers[position] as Buffer, target, write);
      const index = plan.keyIndexes[position] as number;
      const kind = index < 0 ? cell.null : this.#kinds[index];
      if (kind === cell.null || kind === cell.unchangedToast) write = copyBytes(nullBytes, target, write);
      else if (kind === cell.binary) throw binaryValue(plan.format);
      else write = this.#writeValue(index, target, write);
    }
    target[write++] = 0x7d; // }
    return write;
  }

  /** Writes the value JSON (message-format.ts, RenderedRecord's json) at `at`; returns where it ends. */
  writeValue(target: Buffer, at: number): number {
    const plan = this.#plan;
    let write = copyBytes(this.#head, target, at);
    let unchanged: string[] | undefined;
    let first = true;
    for (let index = 0; index < this.#count; index++) {
      const kind = this.#kinds[index];
      if (kind === cell.unchangedToast) {
        unchanged ??= [];
        unchanged.push((plan.format.table.columns[index] as { name: string }).name);
        continue;
      }
      if (kind === cell.binary) throw binaryValue(plan.format);
      // The first member written goes without its comma (the first column's has none).
      write = copyBytes(plan.members[index] as Buffer, target, write, first && index > 0 ? 1 : 0);
      first = false;
      if (kind === cell.null) write = copyBytes(nullBytes, target, write);
      else write = this.#writeValue(index, target, write);
    }
    write = copyBytes(unchangedTail, target, write);
    if (unchanged === undefined) {
      target[write++] = 0x5b; // [
      target[write++] = 0x5d; // ]
    } else {
      write = writeString(JSON.stringify(unchanged), target, write);
    }
    target[write++] = 0x7d; // }
    return write;
  }

  #headFor(kind: NewRowKind, transaction: SourceTransaction | null): void {
    if (this.#headOf !== transaction || this.#headKind !== kind) {
      this.#head = Buffer.from(newRowValueHead(this.#plan.format, kind, transaction));
      this.#headOf = transaction;
      this.#headKind = kind;
    }
  }

  #reserve(count: number): void {
    if (count > this.#kinds.length) {
      this.#kinds = new Uint8Array(count);
      this.#starts = new Int32Array(count);
      this.#ends = new Int32Array(count);
    }
  }

  /** The most bytes a row of `sourceBytes` takes: its value bytes appear twice at most (key columns). */
  #mostBytes(sourceBytes: number): number {
    return this.#head.length + this.#plan.fixedBytes + 2 * mostBytesPerByte * sourceBytes;
  }

  /** Writes the JSON of non-null value `index` at `at`; returns where it ends. */
  #writeValue(index: number, target: Buffer, at: number): number {
    const source = this.#source;
    const start = this.#starts[index] as number;
    const end = this.#ends[index] as number;
    const copyText = this.#kinds[index] === cell.copyText;
    let written = -1;
    switch (this.#plan.rules[index]) {
      case rule.quoted:
        written = copyText
          ? writeQuotedCopyText(source, start, end, target, at)
          : writeQuotedAscii(source, start, end, target, at);
        break;
      // The other rules' usual text has no backslash, so a COPY field is taken as it is or not at all.
      case rule.int16:
        if (isCanonicalInteger(source, start, end, 0x7fff))
          written = copyRange(source, start, end, target, at);
        break;
      case rule.int32:
        if (isCanonicalInteger(source, start, end, 0x7fff_ffff))
          written = copyRange(source, start, end, target, at);
        break;
      case rule.numeric:
        if (isPlainDecimal(source, start, end)) written = writeQuotedAscii(source, start, end, target, at);
        break;
      case rule.timestamp:
        written = writeUsualTimestamp(source, start, end, false, target, at);
        break;
      case rule.timestamptz:
        written = writeUsualTimestamp(source, start, end, true, target, at);
        break;
      case rule.boolean:
        if (end - start === 1 && source[start] === 0x74) written = copyBytes(trueBytes, target, at);
        else if (end - start === 1 && source[start] === 0x66) written = copyBytes(falseBytes, target, at);
        break;
    }
    if (written >= 0) return written;
    // Not taken as it is: the decoded value's own JSON (or its error).
    const text = source.toString('utf8', start, end);
    const value = copyText ? (parseCopyTextLine(text)[0] as string) : text;
    return writeString(cellJson(this.#plan.format, index, value), target, at);
  }
}

/** A JSON text written as UTF-8; the chunk was sized for it, and running out of it is a defect. */
function writeString(json: string, target: Buffer, at: number): number {
  if (Buffer.byteLength(json) > target.length - at) {
    throw new EngineError('internal', 'a Kafka message outgrew the bytes held for it');
  }
  return at + target.write(json, at);
}

/** Copies `bytes` (from `from` on) to `at`; a short one byte by byte, which beats a native call. */
function copyBytes(bytes: Buffer, target: Buffer, at: number, from = 0): number {
  return copyRange(bytes, from, bytes.length, target, at);
}

function copyRange(source: Buffer, start: number, end: number, target: Buffer, at: number): number {
  if (end - start > 32) return at + source.copy(target, at, start, end);
  let write = at;
  for (let read = start; read < end; read++) target[write++] = source[read] as number;
  return write;
}

const quote = 0x22;
const zero = 0x30;
const backslash = 0x5c;
const tab = 0x09;
const capitalN = 0x4e;
const hexDigits = Buffer.from('0123456789abcdef');
/** JSON's short escapes (JSON.stringify writes these, `\u00xx` for the other controls). */
const shortEscapes: Readonly<Record<number, number>> = {
  8: 0x62, // \b
  9: 0x74, // \t
  10: 0x6e, // \n
  12: 0x66, // \f
  13: 0x72, // \r
  34: 0x22, // \"
  92: 0x5c, // \\
};

/**
 * `source[start, end)` as a JSON string at `at`, escaped as JSON.stringify
 * escapes; returns where it ends, or -1 at a byte past ASCII (then the cell is
 * decoded, as its bytes may not be valid UTF-8).
 */
function writeQuotedAscii(source: Buffer, start: number, end: number, target: Buffer, at: number): number {
  let write = at;
  target[write++] = quote;
  for (let read = start; read < end; read++) {
    const byte = source[read] as number;
    if (byte >= 0x20 && byte !== quote && byte !== backslash) {
      if (byte >= 0x80) return -1;
      target[write++] = byte;
      continue;
    }
    write = writeJsonEscape(byte, target, write);
  }
  target[write++] = quote;
  return write;
}

/** The JSON escape letter of each COPY escape letter JSON has too (`\v` has none: `\u000b`). */
const jsonLetterOfCopyLetter = new Uint8Array(256);
for (const letter of 'bfnrt\\') jsonLetterOfCopyLetter[letter.charCodeAt(0)] = letter.charCodeAt(0);
const letterV = 0x76;

/**
 * A COPY text field `source[start, end)` as a JSON string at `at`: COPY's
 * escapes turned into JSON's, the rest as writeQuotedAscii writes it; returns
 * where it ends, or -1 at a byte past ASCII or an escape in octal or hex (then
 * the field is decoded).
 */
function writeQuotedCopyText(source: Buffer, start: number, end: number, target: Buffer, at: number): number {
  let write = at;
  target[write++] = quote;
  for (let read = start; read < end; read++) {
    const byte = source[read] as number;
    if (byte === backslash) {
      if (read + 1 >= end) return -1;
      const letter = source[++read] as number;
      const jsonLetter = jsonLetterOfCopyLetter[letter] as number;
      if (jsonLetter !== 0) {
        target[write++] = backslash;
        target[write++] = jsonLetter;
      } else if (letter === letterV) write = writeUnicodeEscape(0x0b, target, write);
      else return -1;
      continue;
    }
    if (byte >= 0x20 && byte !== quote) {
      if (byte >= 0x80) return -1;
      target[write++] = byte;
    } else write = writeJsonEscape(byte, target, write);
  }
  target[write++] = quote;
  return write;
}

/** `byte`, a control or the quote or backslash, as JSON.stringify escapes it. */
function writeJsonEscape(byte: number, target: Buffer, at: number): number {
  const short = shortEscapes[byte];
  if (short === undefined) return writeUnicodeEscape(byte, target, at);
  target[at] = backslash;
  target[at + 1] = short;
  return at + 2;
}

function writeUnicodeEscape(byte: number, target: Buffer, at: number): number {
  target[at] = backslash;
  target[at + 1] = 0x75; // u
  target[at + 2] = zero;
  target[at + 3] = zero;
  target[at + 4] = hexDigits[byte >> 4] as number;
  target[at + 5] = hexDigits[byte & 0xf] as number;
  return at + 6;
}

const minus = 0x2d;
const isDigit = (byte: number | undefined) => byte !== undefined && byte >= 0x30 && byte <= 0x39;

/** Whether the text is `0` or `-?[1-9]\d{0,9}` within ±limit (−limit−1 too): cellJson's test for int2 and int4. */
function isCanonicalInteger(source: Buffer, start: number, end: number, limit: number): boolean {
  const negative = source[start] === minus;
  const first = negative ? start + 1 : start;
  const digits = end - first;
  if (digits < 1 || digits > 10) return false;
  if (source[first] === zero && (digits > 1 || negative)) return false;
  let value = 0;
  for (let read = first; read < end; read++) {
    const byte = source[read];
    if (!isDigit(byte)) return false;
    value = value * 10 + ((byte as number) - zero);
  }
  return value <= limit + (negative ? 1 : 0);
}

/** Whether the text is `-?\d+(\.\d+)?`, numeric_out's form of a finite value. */
function isPlainDecimal(source: Buffer, start: number, end: number): boolean {
  let read = source[start] === minus ? start + 1 : start;
  const integerStart = read;
  while (read < end && isDigit(source[read])) read++;
  if (read === integerStart) return false;
  if (read === end) return true;
  if (source[read] !== 0x2e) return false; // .
  const fractionStart = ++read;
  while (read < end && isDigit(source[read])) read++;
  return read === end && read > fractionStart;
}

/**
 * A usual timestamp's text (`YYYY-MM-DD HH:MM:SS`, a fraction, `+00` for
 * timestamptz only) written as ISO 8601 with `T`, the fraction's trailing
 * zeros dropped and `Z`: message-format.ts's usualTimestamp. Returns -1 for
 * any other shape.
 */
function writeUsualTimestamp(
  source: Buffer,
  start: number,
  end: number,
  withZone: boolean,
  target: Buffer,
  at: number,
): number {
  // `YYYY-MM-DD HH:MM:SS` is 19 bytes.
  if (end - start < 19) return -1;
  for (let offset = 0; offset < 19; offset++) {
    const byte = source[start + offset] as number;
    const expected = timestampShape[offset] as number;
    if (expected === anyDigit ? !isDigit(byte) : byte !== expected) return -1;
  }
  let read = start + 19;
  // The fraction up to its last non-zero digit; a fraction of zeros only is not the usual shape.
  let fractionEnd = read;
  if (source[read] === 0x2e) {
    read++;
    while (read < end && isDigit(source[read])) {
      if (source[read] !== zero) fractionEnd = read + 1;
      read++;
    }
    if (fractionEnd === start + 19) return -1;
  }
  const zoned =
    end - read === 3 && source[read] === 0x2b && source[read + 1] === zero && source[read + 2] === zero;
  if (zoned !== withZone || (!zoned && read !== end)) return -1;
  let write = at;
  target[write++] = quote;
  write = copyRange(source, start, start + 10, target, write);
  target[write++] = 0x54; // T
  write = copyRange(source, start + 11, fractionEnd, target, write);
  if (withZone) target[write++] = 0x5a; // Z
  target[write++] = quote;
  return write;
}

const anyDigit = -1;
const timestampShape = [
  ...[anyDigit, anyDigit, anyDigit, anyDigit, minus, anyDigit, anyDigit, minus, anyDigit, anyDigit],
  ...[0x20, anyDigit, anyDigit, 0x3a, anyDigit, anyDigit, 0x3a, anyDigit, anyDigit],
];
