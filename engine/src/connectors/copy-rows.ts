// A table's inserted rows of a batch, held as COPY text
// (postgres/destination/table-changes.ts): each row's line is written from its
// TupleData as it is decoded (copy-lines.ts), and the lines are sealed into UTF-8 chunks of ~64 KiB. A chunk's
// bytes live outside V8's heap, so a batch of them costs its collector nothing,
// where the same rows held as objects until the write were copied at every
// young-generation collection (docs/benchmarks.md, "The engine's CPU per change").

import { CopyTextChunks } from './copy-chunks.ts';
import { tupleLineMaxBytes, writeTupleLine } from './copy-lines.ts';
import type { DestinationTable, Row } from './records.ts';

export class CopyTextRows {
  readonly #table: DestinationTable;
  readonly #text = new CopyTextChunks();

  constructor(table: DestinationTable) {
    this.#table = table;
  }

  /** Holds one row, its cells the table's columns in order; returns the bytes its line took. */
  add(row: Row): number {
    const tuple = row.tupleData();
    return this.#text.addWritten(tupleLineMaxBytes(tuple), (target, offset) =>
      writeTupleLine(this.#table, tuple, target, offset),
    );
  }

  /** The COPY text of every row held, in order, each chunk ending on a line end; may be read again. */
  chunks(): readonly Buffer[] {
    return this.#text.chunks();
  }
}
