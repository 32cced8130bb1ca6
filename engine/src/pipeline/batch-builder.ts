// Accumulates decoded changes into one batch until it is full (rows or bytes)
// or old enough, and remembers the last commit it holds completely: that commit's
// end LSN is what the slot may be acknowledged to once the batch is durable.
// A batch cut inside a transaction also carries the position of its last
// change in it, which the destination stores with the checkpoint. A table's
// changes go to the destination's own buffer (Destination.changeBuffer) when
// it offers one.
import type { TableApplied } from '../catalog/catalog.ts';
import type { WireTuple } from '../connectors/changes.ts';
import {
  type ChangeBatch,
  type ChangeBuffer,
  changeHeapBytes,
  type DestinationTable,
  type RowChange,
  type SourceTransaction,
  type TableChanges,
  type TransactionPosition,
} from '../connectors/records.ts';
import { TableTally } from './table-tally.ts';

export interface BatchLimits {
  readonly maxRows: number;
  readonly maxBytes: number;
}

/** One table's part of the batch: held by the destination, or kept here. */
interface TableEntry {
  readonly held: ChangeBuffer | undefined;
  readonly changes: RowChange[];
}

export class BatchBuilder {
  readonly #limits: BatchLimits;
  readonly #changeBuffer: ((table: DestinationTable) => ChangeBuffer) | undefined;
  #tables = new Map<DestinationTable, TableEntry>();
  #rowCount = 0;
  #byteSize = 0;
  #startedAt: number | null = null;
  #startLsn = 0n;
  #lastChangeLsn = 0n;
  #lastCompleteCommitLsn: bigint;
  /** The last change added, while its transaction has not committed. */
  #openPosition: TransactionPosition | undefined;
  /** A lower row limit for the current batch only (limitThisBatch). */
  #rowLimit: number | undefined;
  /** Rows of the batch per table and operation (takeApplied). */
  readonly #tally = new TableTally();

  /** `changeBuffer`: the destination's (Destination.changeBuffer), if it offers one. */
  constructor(
    limits: BatchLimits,
    durableLsn: bigint,
    changeBuffer?: (table: DestinationTable) => ChangeBuffer,
  ) {
    this.#limits = limits;
    this.#changeBuffer = changeBuffer;
    this.#lastCompleteCommitLsn = durableLsn;
  }

  get isEmpty(): boolean {
    return this.#rowCount === 0 && this.#tables.size === 0;
  }

  get isFull(): boolean {
    const maxRows = Math.min(this.#limits.maxRows, this.#rowLimit ?? Number.POSITIVE_INFINITY);
    return this.#rowCount >= maxRows || this.#byteSize >= this.#limits.maxBytes;
  }

  /** The batch being built (or the next one, when empty) is full at `rows` rows already. */
  limitThisBatch(rows: number): void {
    this.#rowLimit = rows;
  }

  get rowCount(): number {
    return this.#rowCount;
  }

  get startLsn(): bigint {
    return this.#startLsn;
  }

  /**
   * The batch's end as the catalog records it: the end of the last commit it
   * holds completely, or, when it ends inside a transaction that started in it,
   * the LSN of its last change. Never below `startLsn`.
   */
  get recordedEndLsn(): bigint {
    // bigint: Math.max does not apply.
    if (this.#lastChangeLsn > this.#lastCompleteCommitLsn) return this.#lastChangeLsn;
    return this.#lastCompleteCommitLsn;
  }

  /** Milliseconds since the first change of this batch arrived; 0 when empty. */
  ageMs(now: number): number {
    return this.#startedAt === null ? 0 : now - this.#startedAt;
  }

  hasChangesFor(table: DestinationTable): boolean {
    return this.#tables.has(table);
  }

  /**
   * Returns true when this change opened the batch. `position` places the
   * change inside its transaction; it is kept until that transaction commits.
   * `now` is the clock, read only when the change opens the batch: `Date.now`
   * costs 40–60 ns a call here, which showed when it was read for every change.
   */
  add(
    table: DestinationTable,
    change: RowChange,
    lsn: bigint,
    now: () => number,
    position?: TransactionPosition,
  ): boolean {
    const opened = this.#startIfEmpty(lsn, now);
    this.#hold(this.#entry(table), change);
    this.#added(lsn, position, change.kind !== 'truncate');
    if (change.kind !== 'truncate') this.#tally.count(table, change.kind, change.transaction);
    return opened;
  }

  /**
   * `add` of an insert, or of an update without an old image or
   * unchanged-TOAST cells, whose new row comes undecoded, its cells in the
   * table's column order: a destination buffer that can hold it so
   * (ChangeBuffer.addInsertTuple, addUpdateTuple) gets the bytes, any other
   * its decoded cells (an update's old key then is its new row's).
   */
  addTuple(
    kind: 'insert' | 'update',
    table: DestinationTable,
    transaction: SourceTransaction,
    tuple: WireTuple,
    lsn: bigint,
    now: () => number,
    position?: TransactionPosition,
  ): boolean {
    const opened = this.#startIfEmpty(lsn, now);
    const entry = this.#entry(table);
    const held = entry.held;
    const heldBytes =
      kind === 'insert'
        ? held?.addInsertTuple?.(tuple, transaction)
        : held?.addUpdateTuple?.(tuple, transaction);
    if (heldBytes !== undefined) this.#byteSize += heldBytes;
    else if (kind === 'insert') this.#hold(entry, { kind, transaction, newRow: tuple.cells() });
    else this.#hold(entry, { kind, transaction, oldKey: null, newRow: tuple.cells() });
    this.#added(lsn, position, true);
    this.#tally.count(table, kind, transaction);
    return opened;
  }

  /** Starts the batch at its first change; true when this change opens it. */
  #startIfEmpty(lsn: bigint, now: () => number): boolean {
    if (!this.isEmpty) return false;
    this.#startedAt = now();
    this.#startLsn = lsn;
    return true;
  }

  #hold(entry: TableEntry, change: RowChange): void {
    if (entry.held) {
      this.#byteSize += entry.held.add(change);
    } else {
      entry.changes.push(change);
      this.#byteSize += changeHeapBytes(change);
    }
  }

  #entry(table: DestinationTable): TableEntry {
    let entry = this.#tables.get(table);
    if (!entry) {
      entry = { held: this.#changeBuffer?.(table), changes: [] };
      this.#tables.set(table, entry);
    }
    return entry;
  }

  #added(lsn: bigint, position: TransactionPosition | undefined, isRow: boolean): void {
    if (lsn > this.#lastChangeLsn) this.#lastChangeLsn = lsn;
    this.#openPosition = position;
    if (isRow) this.#rowCount++;
  }

  /** A commit whose changes are all in this batch (or were in earlier ones). */
  commit(endLsn: bigint): void {
    if (endLsn > this.#lastCompleteCommitLsn) this.#lastCompleteCommitLsn = endLsn;
    this.#openPosition = undefined;
  }

  get lastCompleteCommitLsn(): bigint {
    return this.#lastCompleteCommitLsn;
  }

  /**
   * The rows of each table the last batch taken holds, by operation; call it
   * right after `take` (it starts the count over).
   */
  takeApplied(): TableApplied[] {
    return this.#tally.take();
  }

  /** Hands out the batch and starts an empty one. */
  take(mirror: string, batchId: bigint): ChangeBatch {
    const tables: TableChanges[] = [...this.#tables].map(([table, { held, changes }]) =>
      held ? { table, held, changes } : { table, changes },
    );
    const batch: ChangeBatch = {
      mirror,
      batchId,
      endLsn: this.#lastCompleteCommitLsn,
      ...(this.#openPosition ? { transactionPosition: this.#openPosition } : {}),
      tables,
      rowCount: this.#rowCount,
    };
    this.#tables = new Map();
    this.#rowCount = 0;
    this.#byteSize = 0;
    this.#startedAt = null;
    this.#lastChangeLsn = 0n;
    this.#openPosition = undefined;
    this.#rowLimit = undefined;
    return batch;
  }
}
