// The one form of a row image (records.ts, Row) and its two ways of being
// held: over the source's TupleData bytes as they came (pgoutput's own rows,
// postgres/source/pgoutput.ts), or over cells already decoded (a row
// reordered to the table's columns, an old key, a row a script returned, a
// test's). Either answers both questions a destination asks: the cells
// decoded, and the TupleData bytes its encoder copies the text from. A
// destination has one encoder, over the bytes; decoded cells are written into
// TupleData once, when a destination asks for the bytes.
//
// TupleData is pgoutput's row format
// (https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html):
// an Int16 cell count, then per cell a kind byte (`n` null, `u` unchanged
// TOAST, `t` text, `b` binary), the last two followed by an Int32 length and
// the value's bytes.
import { type TupleData, tupleCellEnd, tupleCellKind, tupleCellsStart } from './changes.ts';
import {
  fillUnchanged,
  isUnchangedToast,
  type Row,
  type RowImage,
  type TupleCell,
  unchangedToast,
} from './records.ts';

// Measured on V8 (Node 24): a row's cell array costs about 16 bytes and each
// string cell about 24 bytes on top of its text; a Buffer view about 100.
const rowOverheadBytes = 16;
const cellOverheadBytes = 24;
const bufferViewBytes = 100;

/** A row over cells already decoded. */
export function rowOfCells(cells: RowImage): Row {
  return new CellsRow(cells);
}

/** `newer` with its unchanged-TOAST cells taken from `older`, an earlier image of the same row. */
export function filledRow(newer: Row, older: Row): Row {
  return newer.hasUnchangedToast() ? rowOfCells(fillUnchanged(newer.cells(), older.cells())) : newer;
}

class CellsRow implements Row {
  readonly #cells: RowImage;
  #tupleData: TupleData | undefined;

  constructor(cells: RowImage) {
    this.#cells = cells;
  }

  get width(): number {
    return this.#cells.length;
  }

  get fromSourceBytes(): boolean {
    return false;
  }

  cell(index: number): TupleCell {
    return this.#cells[index] ?? null;
  }

  cells(): RowImage {
    return this.#cells;
  }

  tupleData(): TupleData {
    this.#tupleData ??= writeTupleData(this.#cells);
    return this.#tupleData;
  }

  hasUnchangedToast(): boolean {
    return this.#cells.some(isUnchangedToast);
  }

  heapBytes(): number {
    return (
      cellsHeapBytes(this.#cells) + (this.#tupleData ? bufferViewBytes + this.#tupleData.bytes.length : 0)
    );
  }
}

/**
 * A row over TupleData bytes that are already checked to be well formed:
 * `decode` turns them into cells, once, when they are asked for. A single
 * cell is decoded alone, without the others (a key column, say).
 */
export class TupleDataRow implements Row {
  readonly bytes: Buffer;
  readonly cellCount: number;
  readonly #decode: (bytes: Buffer) => RowImage;
  #cells: RowImage | undefined;

  constructor(bytes: Buffer, cellCount: number, decode: (bytes: Buffer) => RowImage = decodeTupleData) {
    this.bytes = bytes;
    this.cellCount = cellCount;
    this.#decode = decode;
  }

  get width(): number {
    return this.cellCount;
  }

  get fromSourceBytes(): boolean {
    return true;
  }

  cell(index: number): TupleCell {
    if (this.#cells) return this.#cells[index] ?? null;
    if (index < 0 || index >= this.cellCount) return null;
    const bytes = this.bytes;
    let at = tupleCellsStart;
    for (let cell = 0; cell < index; cell++) at = tupleCellEnd(bytes, at);
    return decodeCell(bytes, at);
  }

  cells(): RowImage {
    this.#cells ??= this.#decode(this.bytes);
    return this.#cells;
  }

  tupleData(): TupleData {
    return this;
  }

  hasUnchangedToast(): boolean {
    const bytes = this.bytes;
    for (let cell = 0, at = tupleCellsStart; cell < this.cellCount; cell++, at = tupleCellEnd(bytes, at)) {
      if (bytes[at] === tupleCellKind.unchangedToast) return true;
    }
    return false;
  }

  heapBytes(): number {
    // Its cells, once decoded, are the source's own strings: counted as a decoded row's.
    return bufferViewBytes + (this.#cells ? cellsHeapBytes(this.#cells) : 0);
  }
}

/** About the heap bytes an array of decoded cells takes. */
function cellsHeapBytes(cells: RowImage): number {
  let size = rowOverheadBytes;
  for (const cell of cells) size += cellOverheadBytes + (typeof cell === 'string' ? cell.length : 0);
  return size;
}

/** The TupleData of decoded cells (a binary cell keeps its bytes under the `b` kind). */
export function writeTupleData(cells: RowImage): TupleData {
  const target = Buffer.allocUnsafe(tupleDataMaxBytes(cells));
  const end = writeTupleDataAt(cells, target, 0);
  return { bytes: target.subarray(0, end), cellCount: cells.length };
}

/** The most bytes the TupleData of `cells` takes: the room writeTupleDataAt needs. */
export function tupleDataMaxBytes(cells: RowImage): number {
  // A UTF-16 code unit is at most 3 bytes of UTF-8.
  let maxBytes = 2;
  for (const cell of cells) {
    maxBytes +=
      typeof cell === 'string' ? 5 + 3 * cell.length : cell instanceof Uint8Array ? 5 + cell.length : 1;
  }
  return maxBytes;
}

/** Writes the TupleData of `cells` at `offset` of `target` (room enough, see writeTupleData); returns its end. */
export function writeTupleDataAt(cells: RowImage, target: Buffer, offset: number): number {
  let write = target.writeUInt16BE(cells.length, offset);
  for (const cell of cells) {
    if (typeof cell === 'string') {
      target[write] = tupleCellKind.text;
      const length = target.write(cell, write + 5, 'utf8');
      target.writeUInt32BE(length, write + 1);
      write += 5 + length;
    } else if (cell === null || isUnchangedToast(cell)) {
      target[write++] = cell === null ? tupleCellKind.null : tupleCellKind.unchangedToast;
    } else {
      target[write] = tupleCellKind.binary;
      target.writeUInt32BE(cell.length, write + 1);
      target.set(cell, write + 5);
      write += 5 + cell.length;
    }
  }
  return write;
}

/** The cells of well-formed TupleData that starts at `offset`; returns them and where it ends. */
export function readTupleDataAt(bytes: Buffer, offset: number): { cells: TupleCell[]; end: number } {
  const cellCount = bytes.readUInt16BE(offset);
  const cells: TupleCell[] = new Array(cellCount);
  let at = offset + tupleCellsStart;
  for (let cell = 0; cell < cellCount; cell++) {
    cells[cell] = decodeCell(bytes, at);
    at = tupleCellEnd(bytes, at);
  }
  return { cells, end: at };
}

function decodeTupleData(bytes: Buffer): RowImage {
  return readTupleDataAt(bytes, 0).cells;
}

/** The cell whose kind byte is at `at`: text as a string, binary as a copy of its bytes. */
function decodeCell(bytes: Buffer, at: number): TupleCell {
  const kind = bytes[at];
  if (kind === tupleCellKind.null) return null;
  if (kind === tupleCellKind.unchangedToast) return unchangedToast;
  const start = at + 5;
  const end = start + bytes.readUInt32BE(at + 1);
  return kind === tupleCellKind.text
    ? bytes.toString('utf8', start, end)
    : Buffer.from(bytes.subarray(start, end));
}
