// A table's inserted rows of a batch, held as COPY text (postgres/ and
// clickhouse/table-changes.ts): each row becomes its line as it
// is decoded (or, given undecoded, is written from the source's bytes), and
// the lines are sealed into UTF-8 chunks of ~64 KiB. A chunk's
// bytes live outside V8's heap, so a batch of them costs its collector nothing,
// where the same rows held as objects until the write were copied at every
// young-generation collection (docs/benchmarks.md, "The engine's CPU per change").

import type { WireTuple } from './changes.ts';
import { CopyTextChunks } from './copy-chunks.ts';
import { rowLine, tupleLineMaxBytes, writeTupleLine } from './copy-lines.ts';
import type { DestinationTable, RowImage } from './records.ts';

export class CopyTextRows {
  readonly #table: DestinationTable;
  readonly #text = new CopyTextChunks();

  constructor(table: DestinationTable) {
    this.#table = table;
  }

  /** Holds one row; returns the characters its line took. */
  add(row: RowImage): number {
    const line = rowLine(this.#table, row);
    this.#text.add(line);
    return line.length;
  }

  /**
   * Holds one row given undecoded, its cells in the table's column order:
   * its line is written from the tuple's bytes (no string per cell). Returns
   * the bytes the line took.
   */
  addTuple(tuple: WireTuple): number {
    return this.#text.addWritten(tupleLineMaxBytes(tuple), (target, offset) =>
      writeTupleLine(this.#table, tuple, target, offset),
    );
  }

  /** The COPY text of every row held, in order, each chunk ending on a line end; may be read again. */
  chunks(): readonly Buffer[] {
    return this.#text.chunks();
  }
}
