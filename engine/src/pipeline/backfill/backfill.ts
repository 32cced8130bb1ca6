// The online backfill of the tables added to a running mirror: one chunk read
// at a time, the tables taking turns, each chunk read only after the one
// before it entered the stream, so the copy never runs ahead of the stream by
// more than one chunk and one chunk's rows are all it holds in memory. The
// change applier asks it what to apply of each change of a loading table
// (`decide`) and, at every transaction boundary, whether a chunk is due
// (`due`); the batch writer records its progress with every batch (`progress`)
// and tells it which progress is durable (`durable`). Per-table rules are in
// table-backfill.ts; the algorithm and its why in docs/engine.md, "Tables
// added to a running mirror".
import type { DestinationTable, Row, RowChangeImages } from '../../connectors/records.ts';
import { formatTableName } from '../../resources/mirror.ts';
import type { KeyOrder } from './key-order.ts';
import { type BackfillProgress, type ChunkRequest, type ReadChunk, TableBackfill } from './table-backfill.ts';

/** Per load (its source table `schema.table`, or BackfillTable.key), its progress: what a batch records. */
export type BackfillRecord = Readonly<Record<string, BackfillProgress>>;

export interface BackfillTable {
  readonly table: DestinationTable;
  readonly order: KeyOrder;
  /** Where the table's copy resumes (the checkpoint batch's record, or from the start). */
  readonly progress: BackfillProgress;
  /** The load's name in the record: its source table unless given (a resync's shadow has its own). */
  readonly key?: string;
}

/** A load's name in a batch's record. */
export function backfillKey(table: Pick<BackfillTable, 'table' | 'key'>): string {
  return table.key ?? formatTableName(table.table.source);
}

export interface BackfillOptions {
  readonly tables: readonly BackfillTable[];
  /** Reads one chunk of a table (Source.openBackfillReader). Rejects with a classified error. */
  readonly readChunk: (table: DestinationTable, order: KeyOrder, request: ChunkRequest) => Promise<ReadChunk>;
  /** A chunk was read and waits for the stream to reach its high LSN: ask the source where it is. */
  readonly onChunkRead: () => void;
  /** Rows per chunk, before the byte bound adapts it. */
  readonly chunkRows: number;
  /** A chunk's rows above this many bytes halve the next chunk's rows (and below a quarter of it, double them back). */
  readonly chunkBytes: number;
}

/** A chunk that entered the stream: its rows, inserted at this point. */
export interface EmittedChunk {
  readonly table: DestinationTable;
  readonly rows: readonly Row[];
}

export class Backfill {
  readonly #options: BackfillOptions;
  readonly #tables = new Map<DestinationTable, TableBackfill>();
  /** Each table's name in the record (backfillKey). */
  readonly #keys = new Map<DestinationTable, string>();
  /** Tables whose load is done and whose last progress was recorded: dropped once durable. */
  readonly #finished = new Set<DestinationTable>();
  /** The table whose turn it is to be read. */
  #turn = 0;
  /** The table whose chunk is being read, if one is. */
  #reading: DestinationTable | undefined;
  #failure: unknown;
  #chunkRows: number;
  #stopped = false;

  constructor(options: BackfillOptions) {
    this.#options = options;
    this.#chunkRows = options.chunkRows;
    for (const entry of options.tables) {
      this.#tables.set(entry.table, new TableBackfill(entry.order, entry.progress));
      this.#keys.set(entry.table, backfillKey(entry));
    }
  }

  /** Whether the table is being loaded (its changes go through `decide`). */
  loads(table: DestinationTable): boolean {
    return this.#tables.has(table) && !this.#finished.has(table);
  }

  /** Whether any table is still loading. */
  get active(): boolean {
    return this.#tables.size > this.#finished.size;
  }

  /** A chunk was read and waits for a position at or past its high LSN. */
  get waitingForStream(): boolean {
    return this.#reading === undefined && [...this.#tables.values()].some((table) => table.waitingForStream);
  }

  /** What to apply of a change of a loading table (undefined: nothing, the backfill carries it). */
  decide(table: DestinationTable, change: RowChangeImages, xid: number): RowChangeImages | undefined {
    const backfill = this.#tables.get(table);
    if (!backfill || this.#finished.has(table)) return change;
    return backfill.decide(change, xid);
  }

  /** Starts reading the next chunk when none is in flight. Call after construction and after each emission. */
  start(): void {
    this.#throwFailure();
    if (this.#stopped || this.#reading || [...this.#tables.values()].some((t) => t.waitingForStream)) return;
    const entries = [...this.#tables].filter(
      ([table, backfill]) => !this.#finished.has(table) && !backfill.done,
    );
    if (entries.length === 0) return;
    const [table, backfill] = entries[this.#turn++ % entries.length] ?? [];
    if (!table || !backfill) return;
    const order = this.#options.tables.find((entry) => entry.table === table)?.order;
    const request = order ? backfill.nextRequest(this.#chunkRows) : undefined;
    if (!order || !request) return;
    this.#options
      .readChunk(table, order, request)
      .then(
        (chunk) => {
          this.#reading = undefined;
          if (this.#stopped) return;
          this.#adapt(chunk);
          backfill.chunkRead(chunk);
          this.#options.onChunkRead();
        },
        (error: unknown) => {
          this.#reading = undefined;
          backfill.chunkFailed();
          if (this.#stopped) return;
          this.#failure ??= error;
          this.#options.onChunkRead();
        },
      )
      .catch((error: unknown) => {
        this.#failure ??= error;
      });
    this.#reading = table;
  }

  /** Rows held in memory stay near the byte bound: the next chunk's size follows the last one's bytes. */
  #adapt(chunk: ReadChunk): void {
    if (chunk.rows.length === 0) return;
    let bytes = 0;
    for (const row of chunk.rows) bytes += row.heapBytes();
    const { chunkRows, chunkBytes } = this.#options;
    if (bytes > chunkBytes) this.#chunkRows = Math.max(100, Math.floor(this.#chunkRows / 2));
    else if (bytes < chunkBytes / 4) this.#chunkRows = Math.min(chunkRows, this.#chunkRows * 2);
  }

  #throwFailure(): void {
    if (this.#failure !== undefined) throw this.#failure;
  }

  /**
   * At a transaction boundary, the stream at `lsn`: the chunks due there, to
   * be inserted now, in order. Starts the next read. Throws a read's failure.
   */
  due(lsn: bigint): EmittedChunk[] {
    this.#throwFailure();
    const emitted: EmittedChunk[] = [];
    for (const [table, backfill] of this.#tables) {
      if (this.#finished.has(table) || !backfill.dueAt(lsn)) continue;
      emitted.push({ table, rows: backfill.emit() });
    }
    if (emitted.length > 0 || !this.#reading) this.start();
    return emitted;
  }

  /** The progress of every table still loading, or finished and not yet durable: recorded with the batch being cut. */
  progress(): BackfillRecord | undefined {
    if (this.#tables.size === 0) return undefined;
    const record: Record<string, BackfillProgress> = {};
    for (const [table, backfill] of this.#tables) {
      record[this.#keys.get(table) ?? formatTableName(table.source)] = backfill.takeProgress();
      if (backfill.done) this.#finished.add(table);
    }
    return record;
  }

  /**
   * A streamed change put a key into a table's pending keys that only a
   * record of the progress holds (TableBackfill.owesRecord): with nothing
   * buffered, the progress is recorded before the commit is acknowledged.
   */
  get owesRecord(): boolean {
    for (const backfill of this.#tables.values()) if (backfill.owesRecord) return true;
    return false;
  }

  /**
   * A batch recorded with `record` is durable: returns the tables whose load
   * that made complete (they stop being tracked), and the rows copied of each.
   */
  durable(record: BackfillRecord): { done: DestinationTable[]; rowsCopied: Map<DestinationTable, number> } {
    const done: DestinationTable[] = [];
    const rowsCopied = new Map<DestinationTable, number>();
    for (const [table] of this.#tables) {
      const progress = record[this.#keys.get(table) ?? formatTableName(table.source)];
      if (!progress) continue;
      rowsCopied.set(table, progress.rowsCopied);
      if (progress.rangeDone && progress.pending.length === 0) done.push(table);
    }
    for (const table of done) {
      this.#tables.delete(table);
      this.#finished.delete(table);
    }
    return { done, rowsCopied };
  }

  /** Tables whose load is done though no batch will carry it (nothing buffered): see takeIdleFinished. */
  finishedUnrecorded(): DestinationTable[] {
    return [...this.#tables]
      .filter(([table, backfill]) => backfill.done && !this.#finished.has(table))
      .map(([t]) => t);
  }

  /**
   * Stops reading: no chunk is asked for any more, and the result of a read
   * in flight is dropped. Not waited for: a read may wait on a lock of the
   * table; closing the reader's connection ends it.
   */
  stop(): void {
    this.#stopped = true;
  }
}
