// A table's inserted rows of a batch, held as pgoutput's TupleData
// (changes.ts) back to back, for a destination that writes its own format from
// the source's text in one pass (clickhouse/table-changes.ts, then
// row-writer.ts, writeTuples). Each row is its TupleData copied
// (records.ts, Row.tupleData): the source's bytes, or its decoded cells
// written in that form once. The records are sealed
// into chunks of ~64 KiB outside V8's heap (copy-chunks.ts), so a batch of
// them costs the collector nothing; each record says how long it is (its cell
// count, then each cell's kind and length), so a chunk is read from its start.
//
// Holding COPY text lines instead (copy-rows.ts) made the ClickHouse
// destination escape every row into a line, then scan the line again for its
// tabs (docs/benchmarks.md).

import { tupleCellEnd, tupleCellKind, tupleCellsStart } from './changes.ts';
import { CopyTextChunks } from './copy-chunks.ts';
import { binaryValueError } from './copy-lines.ts';
import type { DestinationTable, Row } from './records.ts';
import { TupleDataRow } from './rows.ts';

export class TupleDataRows {
  readonly #table: DestinationTable;
  readonly #records = new CopyTextChunks();

  constructor(table: DestinationTable) {
    this.#table = table;
  }

  /** Holds one row, its cells the table's columns in order; returns the bytes its record took. */
  add(row: Row): number {
    const bytes = row.tupleData().bytes;
    return this.#records.addWritten(bytes.length, (target, offset) => {
      target.set(bytes, offset);
      return offset + bytes.length;
    });
  }

  /** The records of every row held, in order, each chunk starting and ending on a record; may be read again. */
  chunks(): readonly Buffer[] {
    return this.#records.chunks();
  }

  /** Every row held, in order, each a view over its record: for a table the destination does not write from the blocks. */
  rows(): Row[] {
    const rows: Row[] = [];
    for (const chunk of this.chunks()) {
      for (let at = 0; at < chunk.length; ) {
        const cellCount = chunk.readUInt16BE(at);
        let end = at + tupleCellsStart;
        for (let cell = 0; cell < cellCount; cell++) {
          if (chunk[end] === tupleCellKind.binary) throw binaryValueError(this.#table.destination);
          end = tupleCellEnd(chunk, end);
        }
        rows.push(new TupleDataRow(chunk.subarray(at, end), cellCount));
        at = end;
      }
    }
    return rows;
  }
}
