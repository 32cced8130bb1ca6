// The default Kafka message of a change (docs/kafka.md): its key and value
// JSON, written as bytes. The one encoder of that message: every path goes
// through it (held-messages.ts for a mirror without a script, at decode time
// and for the initial load; script-records.ts for the default key and value a
// script's messages fall back on), for every kind of change.
//
// It writes from a row's TupleData (records.ts, Row.tupleData: the source's
// bytes as they came, or decoded cells written once as TupleData) or from a
// snapshot's COPY text line, whose fields are read by the same per-cell rules.
// A value whose text already is its JSON, or becomes it by a byte rewrite
// (text kinds quoted and escaped, COPY's escapes turned into JSON's, int2 and
// int4, bigint and numeric quoted, usual timestamps to ISO 8601, booleans), is
// copied into the target with no string made for it. Any other value (a kind
// with no byte rule, a timestamp of another shape, `NaN`, text past ASCII, a
// COPY escape in octal) is decoded and written by the one per-value rendering,
// message-format.ts's cellJson, which also names a bad value; a script's
// record document renders its values with the same rendering (renderText).
//
// An insert of the benchmark's table, from its pgoutput message to its held
// message, took 2.5–2.8 µs of CPU through decoded values and 0.9–1.1 µs this
// way; a snapshot row 2.0 and 0.73–0.80 µs (docs/benchmarks.md, "Kafka
// messages written from the source's bytes"; since every message goes through
// this encoder, "One encoder of the Kafka message").

import { EngineError } from '../../errors.ts';
import type { ColumnType } from '../../model/value-kind.ts';
import { tupleCellEnd, tupleCellKind, tupleCellsStart } from '../changes.ts';
import { copyRowWidthError, parseCopyTextLine } from '../copy-text.ts';
import type { Row, RowChange, SourceTransaction } from '../records.ts';
import { tupleDataMaxBytes, writeTupleDataAt } from '../rows.ts';
import {
  binaryValue,
  cellJson,
  isKeyOnly,
  type RecordKind,
  snapshotFieldsJson,
  type TableFormat,
  transactionFields,
} from './message-format.ts';

/** How a column's text becomes its JSON. */
const rule = {
  /** Decoded and rendered (cellJson): a kind with no byte rule. */
  rendered: 0,
  /** A JSON string of the text as it is (text kinds, bigint). */
  quoted: 1,
  /** A JSON number, the text of a canonical int2 or int4 in range. */
  int16: 2,
  int32: 3,
  /** A JSON string of a plain decimal's text. */
  numeric: 4,
  /** ISO 8601 of the usual `YYYY-MM-DD HH:MM:SS[.ffffff]` (timestamp) and with `+00` (timestamptz). */
  timestamp: 5,
  timestamptz: 6,
  /** `t` and `f` as true and false. */
  boolean: 7,
} as const;

/** The rule of each kind that has one besides the verbatim text kinds (all quoted); the others are rendered. */
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

/** How a table's messages are written. */
interface Plan {
  readonly format: TableFormat;
  readonly rules: Uint8Array;
  /** Per column, `"name":` (message-format.ts, memberNames) as bytes; the first without the comma before it. */
  readonly members: readonly Buffer[];
  /** Per key column in key order, its position in the row (-1: not replicated) and `"name":`. */
  readonly keyIndexes: readonly number[];
  readonly keyMembers: readonly Buffer[];
  /** The bytes of the JSON around the cells, the head aside: member names, braces, separators, the tail. */
  readonly fixedBytes: number;
}

const plans = new WeakMap<TableFormat, Plan>();

function planOf(format: TableFormat): Plan {
  let plan = plans.get(format);
  if (plan === undefined) {
    plan = makePlan(format);
    plans.set(format, plan);
  }
  return plan;
}

function makePlan(format: TableFormat): Plan {
  const rules = new Uint8Array(format.types.length);
  for (let index = 0; index < format.types.length; index++) {
    const kind = (format.types[index] as TableFormat['types'][number]).kind;
    rules[index] = format.isVerbatim[index] ? rule.quoted : (ruleOfKind[kind] ?? rule.rendered);
  }
  const members = format.memberNames.map((name, index) => Buffer.from(index === 0 ? name : `,${name}`));
  const keyMembers = format.table.keyColumns.map((name, position) =>
    Buffer.from(`${position === 0 ? '' : ','}${JSON.stringify(name)}:`),
  );
  const namesBytes = (names: readonly Buffer[]) => names.reduce((sum, name) => sum + name.length, 0);
  // The member names of the old and the new image, and the names of unchanged
  // columns (bounded by them); the key's; the braces, separators and the tail.
  const fixedBytes =
    3 * namesBytes(members) + namesBytes(keyMembers) + fixedTailBytes + 3 * format.types.length;
  return { format, rules, members, keyIndexes: format.keyIndexes, keyMembers, fixedBytes };
}

const nullBytes = Buffer.from('null');
const trueBytes = Buffer.from('true');
const falseBytes = Buffer.from('false');
const newMember = Buffer.from(',"new":');
const unchangedMember = Buffer.from(',"unchanged_columns":');
/** `null,"new":null,"unchanged_columns":[]}` and the braces of two images, with room to spare. */
const fixedTailBytes = 64;
/**
 * What escaping makes of a text byte at most (`\u001f`). The other rules
 * write less, and so does a value's rendering counted with its cell's
 * framing (an interval's shortest text, `1 day`, takes 10 bytes of TupleData
 * or 6 of a COPY line and renders in 41).
 */
const mostBytesPerByte = 6;

/** Where a value of the row being written is, as `Cells.kinds` holds it. */
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
 * One row image taken for writing: per column its kind (`cell`), and its
 * value's bytes' start and end in `source`, with no string made.
 */
class Cells {
  kinds = new Uint8Array(64);
  starts = new Int32Array(64);
  ends = new Int32Array(64);
  source: Buffer = Buffer.alloc(0);

  /** Decoded cells written as TupleData (rows.ts), reused from row to row. */
  #written: Buffer = Buffer.alloc(0);

  /**
   * Takes a row's TupleData as the table's `width` columns (a cell past its
   * end is null, as in a decoded image); returns its bytes. A row of decoded
   * cells is written as TupleData into this image's own bytes, reused, rather
   * than into a buffer the row keeps (Row.tupleData).
   */
  takeRow(row: Row, width: number): number {
    if (row.fromSourceBytes) {
      const tuple = row.tupleData();
      return this.#takeTuple(tuple.bytes, tuple.cellCount, tuple.bytes.length, width);
    }
    const cells = row.cells();
    const most = tupleDataMaxBytes(cells);
    if (this.#written.length < most) this.#written = Buffer.allocUnsafe(Math.max(most, 1024));
    const end = writeTupleDataAt(cells, this.#written, 0);
    return this.#takeTuple(this.#written, cells.length, end, width);
  }

  #takeTuple(bytes: Buffer, cellCount: number, byteCount: number, width: number): number {
    this.#reserve(width);
    // Its bytes were checked when they were copied out of their message, or written by rows.ts.
    const count = Math.min(cellCount, width);
    for (let index = 0, at = tupleCellsStart; index < count; index++) {
      const end = tupleCellEnd(bytes, at);
      this.kinds[index] = bytes[at] as number;
      // A text or binary value's bytes, after the kind byte and Int32 length.
      this.starts[index] = at + 5;
      this.ends[index] = end;
      at = end;
    }
    for (let index = count; index < width; index++) this.kinds[index] = cell.null;
    this.source = bytes;
    return byteCount;
  }

  /** Takes the COPY text line `block[start, end)` as `width` fields; returns how many it has. */
  takeCopyLine(block: Buffer, start: number, end: number, width: number): number {
    this.#reserve(width);
    let fields = 0;
    let fieldStart = start;
    for (let read = start; read <= end; read++) {
      if (read < end && block[read] !== tab) continue;
      if (fields < width) {
        const isNull =
          read - fieldStart === 2 && block[fieldStart] === backslash && block[fieldStart + 1] === capitalN;
        this.kinds[fields] = isNull ? cell.null : cell.copyText;
        this.starts[fields] = fieldStart;
        this.ends[fields] = read;
      }
      fields++;
      fieldStart = read + 1;
    }
    this.source = block;
    return fields;
  }

  /** Whether the cell at `index` has no value to write: NULL or unchanged TOAST. */
  isAbsent(index: number): boolean {
    const kind = this.kinds[index];
    return kind === cell.null || kind === cell.unchangedToast;
  }

  #reserve(count: number): void {
    if (count > this.kinds.length) {
      this.kinds = new Uint8Array(count);
      this.starts = new Int32Array(count);
      this.ends = new Int32Array(count);
    }
  }
}

/** Where keyText and valueText write before they decode: grown as a message needs. */
let scratch = Buffer.allocUnsafe(16 * 1024);

/**
 * Writes the default messages of a table's changes and snapshot rows. Each
 * is taken (`take`, `takeSnapshotRow`, `takeCopyLine`), then its key and
 * value are written (`writeKey`, `writeValue`, or as text: `keyText`,
 * `valueText`); a take replaces the one before. Not for concurrent use: a
 * take and its writes run without an await between them.
 */
export class MessageJson {
  readonly #plan: Plan;
  readonly #new = new Cells();
  readonly #old = new Cells();
  #hasNew = false;
  #hasOld = false;
  /** Whether the old image is written with its key columns only (isKeyOnly). */
  #oldKeyOnly = false;
  #most = 0;
  #headOf: SourceTransaction | null | undefined;
  #headKind: RecordKind | undefined;
  /** `{"kind":…,"source":…,"target":…,<the transaction's members>,"old":` of the last kind and transaction. */
  #head: Buffer = Buffer.alloc(0);
  /** `#head` and `null,"new":`: a new row's alone, written in one copy. */
  #newRowHead: Buffer = Buffer.alloc(0);
  #unchanged: string[] | undefined;

  private constructor(plan: Plan) {
    this.#plan = plan;
  }

  /** A writer of the table's messages, its own. */
  static for(format: TableFormat): MessageJson {
    return new MessageJson(planOf(format));
  }

  /** A writer of the table's messages shared by the callers that take and write at once (script-records.ts). */
  static of(format: TableFormat): MessageJson {
    let writer = sharedWriters.get(format);
    if (!writer) {
      writer = MessageJson.for(format);
      sharedWriters.set(format, writer);
    }
    return writer;
  }

  /** Takes a change for the writes that follow; returns the most bytes its key and value take together. */
  take(change: RowChange): number {
    const { transaction } = change;
    switch (change.kind) {
      case 'insert':
        // A row an online load read is the table's row, as the initial load's are.
        return change.loaded
          ? this.#take('snapshot', null, change.newRow, null)
          : this.#take('insert', transaction, change.newRow, null);
      case 'update':
        return this.#take('update', transaction, change.newRow, change.oldKey);
      case 'delete':
        return this.#take('delete', transaction, null, change.oldKey);
      case 'truncate':
        return this.#take('truncate', transaction, null, null);
    }
  }

  /** Takes a snapshot row, its cells the table's columns in order; returns as `take` does. */
  takeSnapshotRow(row: Row): number {
    return this.#take('snapshot', null, row, null);
  }

  /**
   * Takes a snapshot row, the COPY text line `block[start, end)` (without its
   * newline), its fields read by the same rules as a TupleData's cells;
   * returns as `take` does. A line of another field count than the table's
   * columns fails as copy-text.ts's reading fails.
   */
  takeCopyLine(block: Buffer, start: number, end: number): number {
    this.#headFor('snapshot', null);
    const width = this.#plan.rules.length;
    const fields = this.#new.takeCopyLine(block, start, end, width);
    if (fields !== width) throw copyRowWidthError(this.#plan.format.table, fields);
    this.#hasNew = true;
    this.#hasOld = false;
    this.#most = this.#mostBytes(end - start + 1);
    return this.#most;
  }

  #take(
    kind: RecordKind,
    transaction: SourceTransaction | null,
    newRow: Row | null,
    oldRow: Row | null,
  ): number {
    this.#headFor(kind, transaction);
    const width = this.#plan.rules.length;
    let sourceBytes = 0;
    this.#hasNew = newRow !== null;
    if (newRow !== null) sourceBytes += this.#new.takeRow(newRow, width);
    this.#hasOld = oldRow !== null;
    if (oldRow !== null) {
      const old = this.#old;
      sourceBytes += old.takeRow(oldRow, width);
      this.#oldKeyOnly = isKeyOnly(this.#plan.format, (index) => old.kinds[index] === cell.null);
    }
    this.#most = this.#mostBytes(sourceBytes);
    return this.#most;
  }

  /** Whether the message taken has a key: the table has one, and it is not a truncate's. */
  get hasKey(): boolean {
    return this.#plan.keyIndexes.length > 0 && (this.#hasNew || this.#hasOld);
  }

  /**
   * Writes the key JSON at `at` (only when `hasKey`): the key columns in key
   * order from the new image, a key column it lacks (NULL, unchanged TOAST)
   * from the old one; returns where it ends.
   */
  writeKey(target: Buffer, at: number): number {
    const plan = this.#plan;
    const image = this.#hasNew ? this.#new : this.#old;
    const fallback = this.#hasNew && this.#hasOld ? this.#old : null;
    let write = at;
    target[write++] = 0x7b; // {
    for (let position = 0; position < plan.keyIndexes.length; position++) {
      write = copyBytes(plan.keyMembers[position] as Buffer, target, write);
      const index = plan.keyIndexes[position] as number;
      const from = index >= 0 && image.isAbsent(index) && fallback !== null ? fallback : image;
      if (index < 0 || from.isAbsent(index)) write = copyBytes(nullBytes, target, write);
      else if (from.kinds[index] === cell.binary) throw binaryValue(plan.format);
      else write = this.#writeCell(from, index, target, write);
    }
    target[write++] = 0x7d; // }
    return write;
  }

  /** Writes the value JSON at `at` (JSON.stringify of the record document, in column order); returns where it ends. */
  writeValue(target: Buffer, at: number): number {
    let write: number;
    if (this.#hasOld) {
      write = copyBytes(this.#head, target, at);
      write = this.#writeImage(this.#old, this.#oldKeyOnly, false, target, write);
      write = copyBytes(newMember, target, write);
    } else {
      write = copyBytes(this.#newRowHead, target, at);
    }
    this.#unchanged = undefined;
    write = this.#hasNew
      ? this.#writeImage(this.#new, false, true, target, write)
      : copyBytes(nullBytes, target, write);
    write = copyBytes(unchangedMember, target, write);
    const unchanged = this.#unchanged as string[] | undefined;
    if (unchanged === undefined) {
      target[write++] = 0x5b; // [
      target[write++] = 0x5d; // ]
    } else {
      write = writeString(JSON.stringify(unchanged), target, write);
    }
    target[write++] = 0x7d; // }
    return write;
  }

  /** The key written as text, or null when the message taken has none. */
  keyText(): string | null {
    if (!this.hasKey) return null;
    const target = this.#scratch();
    return target.toString('utf8', 0, this.writeKey(target, 0));
  }

  /** The value written as text. */
  valueText(): string {
    const target = this.#scratch();
    return target.toString('utf8', 0, this.writeValue(target, 0));
  }

  #scratch(): Buffer {
    if (scratch.length < this.#most) scratch = Buffer.allocUnsafe(this.#most);
    return scratch;
  }

  #headFor(kind: RecordKind, transaction: SourceTransaction | null): void {
    if (this.#headOf !== transaction || this.#headKind !== kind) {
      const format = this.#plan.format;
      const transactionJson = transaction ? transactionFields(transaction).json : snapshotFieldsJson;
      const head = `{"kind":"${kind}"${format.tableJson}${transactionJson},"old":`;
      this.#head = Buffer.from(head);
      this.#newRowHead = Buffer.from(`${head}null,"new":`);
      this.#headOf = transaction;
      this.#headKind = kind;
    }
  }

  /** The most bytes a message of `sourceBytes` takes: its value bytes appear twice at most (key columns). */
  #mostBytes(sourceBytes: number): number {
    return this.#newRowHead.length + this.#plan.fixedBytes + 2 * mostBytesPerByte * sourceBytes;
  }

  /**
   * Writes an image as a JSON object in column order at `at`: with `keyOnly`
   * its key columns only; unchanged TOASTed columns are left out, and named
   * in `#unchanged` with `namesUnchanged`. Returns where it ends.
   */
  #writeImage(image: Cells, keyOnly: boolean, namesUnchanged: boolean, target: Buffer, at: number): number {
    const plan = this.#plan;
    const { isKey } = plan.format;
    let write = at;
    target[write++] = 0x7b; // {
    let first = true;
    for (let index = 0; index < plan.rules.length; index++) {
      if (keyOnly && !isKey[index]) continue;
      const kind = image.kinds[index];
      if (kind === cell.unchangedToast) {
        if (namesUnchanged) {
          this.#unchanged ??= [];
          this.#unchanged.push((plan.format.table.columns[index] as { name: string }).name);
        }
        continue;
      }
      if (kind === cell.binary) throw binaryValue(plan.format);
      // The first member written goes without its comma (the first column's has none).
      write = copyBytes(plan.members[index] as Buffer, target, write, first && index > 0 ? 1 : 0);
      first = false;
      if (kind === cell.null) write = copyBytes(nullBytes, target, write);
      else write = this.#writeCell(image, index, target, write);
    }
    target[write++] = 0x7d; // }
    return write;
  }

  /** Writes the JSON of non-null value `index` of `image` at `at`; returns where it ends. */
  #writeCell(image: Cells, index: number, target: Buffer, at: number): number {
    const source = image.source;
    const start = image.starts[index] as number;
    const end = image.ends[index] as number;
    const copyText = image.kinds[index] === cell.copyText;
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
    // Not taken as it is: the decoded value's rendering (or its error).
    const text = source.toString('utf8', start, end);
    const value = copyText ? (parseCopyTextLine(text)[0] as string) : text;
    return writeString(cellJson(this.#plan.format, index, value), target, at);
  }
}

const sharedWriters = new WeakMap<TableFormat, MessageJson>();

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
 * zeros dropped and `Z`, as renderText writes it (message-format.ts). Returns -1 for
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
