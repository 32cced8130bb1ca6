// A table's inserted rows of a batch, held as pgoutput's TupleData (changes.ts,
// WireTuple) back to back, for a destination that writes its own format from
// the source's text in one pass (clickhouse/table-changes.ts, then
// tab-separated.ts, writeTuples). A row that came undecoded is its bytes
// copied; a decoded row is written in the same form. The records are sealed
// into chunks of ~64 KiB outside V8's heap (copy-chunks.ts), so a batch of
// them costs the collector nothing; each record says how long it is (its cell
// count, then each cell's kind and length), so a chunk is read from its start.
//
// Holding COPY text lines instead (copy-rows.ts) made the ClickHouse
// destination escape every row into a line, then scan the line again for its
// tabs to write TabSeparated (docs/benchmarks.md).

import { tupleCellKind, type WireTuple } from './changes.ts';
import { CopyTextChunks } from './copy-chunks.ts';
import { binaryValueError } from './copy-lines.ts';
import {
  type DestinationTable,
  isUnchangedToast,
  type RowImage,
  type TupleCell,
  unchangedToast,
} from './records.ts';

export class TupleDataRows {
  readonly #table: DestinationTable;
  readonly #records = new CopyTextChunks();

  constructor(table: DestinationTable) {
    this.#table = table;
  }

  /** Holds one decoded row; returns the bytes its record took. */
  add(row: RowImage): number {
    // A UTF-16 code unit is at most 3 bytes of UTF-8.
    let maxBytes = 2;
    for (const cell of row) maxBytes += typeof cell === 'string' ? 5 + 3 * cell.length : 1;
    return this.#records.addWritten(maxBytes, (target, offset) => this.#writeRecord(row, target, offset));
  }

  /** Holds one row given undecoded, its cells in the table's column order; returns the bytes it took. */
  addTuple(tuple: WireTuple): number {
    const bytes = tuple.bytes;
    return this.#records.addWritten(bytes.length, (target, offset) => {
      target.set(bytes, offset);
      return offset + bytes.length;
    });
  }

  /** The records of every row held, in order, each chunk starting and ending on a record; may be read again. */
  chunks(): readonly Buffer[] {
    return this.#records.chunks();
  }

  /** Every row held, decoded, in order: for a table the destination does not write from the bytes. */
  rows(): RowImage[] {
    const rows: RowImage[] = [];
    for (const chunk of this.chunks()) {
      for (let at = 0; at < chunk.length; ) at = readRecord(this.#table, chunk, at, rows);
    }
    return rows;
  }

  #writeRecord(row: RowImage, target: Buffer, offset: number): number {
    let write = target.writeUInt16BE(row.length, offset);
    for (const cell of row) {
      if (typeof cell === 'string') {
        target[write] = tupleCellKind.text;
        const length = target.write(cell, write + 5, 'utf8');
        target.writeUInt32BE(length, write + 1);
        write += 5 + length;
      } else if (cell === null || isUnchangedToast(cell)) {
        target[write++] = cell === null ? tupleCellKind.null : tupleCellKind.unchangedToast;
      } else {
        throw binaryValueError(this.#table.destination);
      }
    }
    return write;
  }
}

/** Reads the record at `offset` into `rows`; returns where the next starts. */
function readRecord(table: DestinationTable, chunk: Buffer, offset: number, rows: RowImage[]): number {
  const cellCount = chunk.readUInt16BE(offset);
  let read = offset + 2;
  const cells: TupleCell[] = [];
  for (let cell = 0; cell < cellCount; cell++) {
    const kind = chunk[read++];
    if (kind === tupleCellKind.text) {
      const start = read + 4;
      read = start + chunk.readUInt32BE(read);
      cells.push(chunk.toString('utf8', start, read));
    } else if (kind === tupleCellKind.null || kind === tupleCellKind.unchangedToast) {
      cells.push(kind === tupleCellKind.null ? null : unchangedToast);
    } else {
      throw binaryValueError(table.destination);
    }
  }
  rows.push(cells);
  return read;
}
