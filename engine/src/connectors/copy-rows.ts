// A table's inserted rows of a batch, held as COPY text (postgres/ and
// clickhouse/table-changes.ts): each row becomes its line as it
// is decoded, and the lines are sealed into UTF-8 chunks of ~64 KiB. A chunk's
// bytes live outside V8's heap, so a batch of them costs its collector nothing,
// where the same rows held as objects until the write were copied at every
// young-generation collection (docs/benchmarks.md, "The engine's CPU per change").

import { CopyTextChunks } from './copy-chunks.ts';
import { rowLine } from './copy-lines.ts';
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

  /** The COPY text of every row held, in order, each chunk ending on a line end; may be read again. */
  chunks(): readonly Buffer[] {
    return this.#text.chunks();
  }
}
