// A target table's rows as RowBinary: the mapped columns, each through its
// column's one encoder (column-encoder.ts), then the soft-delete flag,
// is_deleted and the version (synced-at is the DEFAULT). Every write takes
// one of three inputs:
//
//   COPY text lines  a snapshot partition: each field as it stands in the
//                    line, or with its escapes undone where it has one
//   TupleData        a batch's leading inserts (tuple-rows.ts, records back
//                    to back) and the row of every final state
//                    (Row.tupleData), unchanged TOAST values filled from the
//                    stored row
//   stored rows      RowBinary read back from the table, each cell as it is
//
// No cell becomes a string on the way unless its column's encoder must parse
// it (column-encoder.ts).
import { EngineError } from '../../errors.ts';
import { tupleCellEnd, tupleCellKind } from '../changes.ts';
import { type CopyTable, copyRowWidthError } from '../copy-text.ts';
import type { Row } from '../records.ts';
import type { ColumnEncoder } from './column-encoder.ts';
import type { RowBinaryWriter } from './row-binary.ts';

export interface RowFlags {
  readonly softDeleted: boolean;
  readonly deleted: boolean;
  readonly version: bigint;
}

const tab = 9;
const newline = 10;
const backslash = 92;
const capitalN = 78;
const lowerX = 120;
const maxSafeVersion = BigInt(Number.MAX_SAFE_INTEGER);

/** The byte of each letter COPY text escapes with a backslash (`\n` …); others stand for themselves. */
const copyEscapedBytes = new Uint8Array(256).map((_, byte) => byte);
for (const [letter, byte] of Object.entries({ b: 8, f: 12, n: 10, r: 13, t: 9, v: 11 })) {
  copyEscapedBytes[letter.charCodeAt(0)] = byte;
}

/** A hex digit's value, or -1. */
function hexDigit(byte: number | undefined): number {
  if (byte === undefined) return -1;
  if (byte >= 48 && byte <= 57) return byte - 48;
  const lower = byte | 0x20;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}

/**
 * Writes the COPY text field [start, end) of `line` without its escapes at the
 * start of `target` (at least as long); returns its length. A backslash and
 * one to three octal digits, or `x` and one or two hex digits, is that byte;
 * before a letter of copyEscapedBytes, that byte; before any other, that one
 * (https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2).
 */
function unescapeCopyField(line: Buffer, start: number, end: number, target: Buffer): number {
  let write = 0;
  for (let read = start; read < end; read++) {
    const byte = line[read] as number;
    if (byte !== backslash || read + 1 === end) {
      target[write++] = byte;
      continue;
    }
    const next = line[++read] as number;
    if (next >= 48 && next <= 55) {
      let value = next - 48;
      for (let digits = 1; digits < 3 && read + 1 < end; digits++) {
        const octal = (line[read + 1] as number) - 48;
        if (octal < 0 || octal > 7) break;
        value = value * 8 + octal;
        read++;
      }
      target[write++] = value & 0xff;
    } else if (next === lowerX && hexDigit(line[read + 1]) >= 0 && read + 1 < end) {
      let value = hexDigit(line[++read]);
      if (read + 1 < end && hexDigit(line[read + 1]) >= 0) value = value * 16 + hexDigit(line[++read]);
      target[write++] = value;
    } else {
      target[write++] = copyEscapedBytes[next] as number;
    }
  }
  return write;
}

export class RowWriter {
  readonly #table: CopyTable;
  readonly #label: string;
  readonly #encoders: readonly ColumnEncoder[];
  readonly #softDelete: boolean;
  /** The flags of a snapshot row: not soft-deleted, not deleted, version 0. */
  readonly #loadFlags: Buffer;
  /** Whether the last TupleData written had an unchanged TOAST value without a cell to fill it. */
  #missedFill = false;
  /** Where the next backslash of the block being written is, or -1: fields before it have no escapes. */
  #nextBackslash = -1;
  /** A field's bytes with its escapes undone. */
  #unescaped = Buffer.allocUnsafe(4096);

  /** `label`: the target table's name, for errors. */
  constructor(table: CopyTable, label: string, encoders: readonly ColumnEncoder[], softDelete: boolean) {
    this.#table = table;
    this.#label = label;
    this.#encoders = encoders;
    this.#softDelete = softDelete;
    this.#loadFlags = Buffer.alloc((softDelete ? 2 : 1) + 8);
  }

  #flags(out: RowBinaryWriter, flags: RowFlags): void {
    if (this.#softDelete) out.u8(flags.softDeleted ? 1 : 0);
    out.u8(flags.deleted ? 1 : 0);
    out.integer(flags.version, 8);
  }

  /** Writes every line of `block` (whole lines, each ending with a newline) at version 0; returns the row count. */
  writeLines(block: Buffer, out: RowBinaryWriter): number {
    this.#nextBackslash = block.indexOf(backslash);
    let rowCount = 0;
    for (let lineStart = 0; lineStart < block.length; rowCount++) {
      const lineEnd = block.indexOf(newline, lineStart);
      this.#writeLine(block, lineStart, lineEnd, out);
      out.bytes(this.#loadFlags);
      lineStart = lineEnd + 1;
    }
    return rowCount;
  }

  #writeLine(line: Buffer, start: number, end: number, out: RowBinaryWriter): void {
    const encoders = this.#encoders;
    const last = encoders.length - 1;
    let fieldStart = start;
    for (let index = 0; index <= last; index++) {
      let fieldEnd = fieldStart;
      while (fieldEnd < end && line[fieldEnd] !== tab) fieldEnd++;
      if ((fieldEnd === end) !== (index === last)) throw this.#widthError(line, start, end);
      const encoder = encoders[index] as ColumnEncoder;
      // The next backslash of the block, found once for the fields before it: most blocks have few.
      if (this.#nextBackslash !== -1 && this.#nextBackslash < fieldStart) {
        this.#nextBackslash = line.indexOf(backslash, fieldStart);
      }
      if (this.#nextBackslash === -1 || this.#nextBackslash >= fieldEnd) {
        encoder.text(out, line, fieldStart, fieldEnd);
      } else if (fieldEnd - fieldStart === 2 && line[fieldStart + 1] === capitalN) {
        encoder.null(out);
      } else {
        if (this.#unescaped.length < fieldEnd - fieldStart) {
          this.#unescaped = Buffer.allocUnsafe(2 * (fieldEnd - fieldStart));
        }
        const length = unescapeCopyField(line, fieldStart, fieldEnd, this.#unescaped);
        encoder.text(out, this.#unescaped, 0, length);
      }
      fieldStart = fieldEnd + 1;
    }
  }

  #widthError(line: Buffer, start: number, end: number): EngineError {
    let fields = 1;
    for (let at = start; at < end; at++) if (line[at] === tab) fields++;
    return copyRowWidthError(this.#table, fields);
  }

  /**
   * Writes every TupleData record of `block` (tuple-rows.ts), the first at
   * version `firstVersion` and each next one at the next; returns the row count.
   */
  writeTuples(block: Buffer, out: RowBinaryWriter, firstVersion: bigint): number {
    // Versions as numbers while they are safe integers: no BigInt per row.
    const safe = firstVersion + BigInt(block.length) <= maxSafeVersion;
    const first = Number(firstVersion);
    let rowCount = 0;
    for (let at = 0; at < block.length; rowCount++) {
      if (block.readUInt16BE(at) !== this.#encoders.length) {
        throw copyRowWidthError(this.#table, block.readUInt16BE(at));
      }
      at = this.#writeTuple(block, at, undefined, out);
      if (this.#softDelete) out.u8(0);
      out.u8(0);
      out.integer(safe ? first + rowCount : firstVersion + BigInt(rowCount), 8);
    }
    return rowCount;
  }

  /**
   * Writes a row image with `flags`; an unchanged TOAST value takes the
   * stored row's cell from `fill`, else NULL. Returns whether one had none.
   */
  writeRow(out: RowBinaryWriter, row: Row, fill: readonly Buffer[] | undefined, flags: RowFlags): boolean {
    this.#writeTuple(row.tupleData().bytes, 0, fill, out);
    this.#flags(out, flags);
    return this.#missedFill;
  }

  /** Writes a stored row (RowBinary cells read back from the table) with `flags`. */
  writeStored(out: RowBinaryWriter, cells: readonly Buffer[], flags: RowFlags): void {
    for (const cell of cells) out.bytes(cell);
    this.#flags(out, flags);
  }

  /**
   * Writes the TupleData at `start` of `bytes` as the mapped columns, a cell
   * past its cell count as NULL (an unchanged TOAST value without a cell in
   * `fill` too: #missedFill says so); returns where it ends.
   */
  #writeTuple(
    bytes: Buffer,
    start: number,
    fill: readonly Buffer[] | undefined,
    out: RowBinaryWriter,
  ): number {
    const encoders = this.#encoders;
    const cellCount = bytes.readUInt16BE(start);
    let at = start + 2;
    this.#missedFill = false;
    for (let index = 0; index < encoders.length; index++) {
      const encoder = encoders[index] as ColumnEncoder;
      if (index >= cellCount) {
        encoder.null(out);
        continue;
      }
      const kind = bytes[at];
      if (kind === tupleCellKind.text) {
        const valueStart = at + 5;
        at = valueStart + bytes.readUInt32BE(at + 1);
        encoder.text(out, bytes, valueStart, at);
        continue;
      }
      at++;
      if (kind === tupleCellKind.null) {
        encoder.null(out);
      } else if (kind === tupleCellKind.unchangedToast) {
        const stored = fill?.[index];
        if (stored) out.bytes(stored);
        else {
          this.#missedFill = true;
          encoder.null(out);
        }
      } else {
        throw new EngineError('decode', `binary tuple value in ${this.#label}; text format expected`);
      }
    }
    for (let cell = encoders.length; cell < cellCount; cell++) at = tupleCellEnd(bytes, at);
    return at;
  }
}
