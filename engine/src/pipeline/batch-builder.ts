// Accumulates decoded changes into one batch until it is full (rows or bytes)
// or old enough, and remembers the last commit it holds completely: that commit's
// end LSN is what the slot may be acknowledged to once the batch is durable.
// A batch cut inside a transaction also carries the position of its last
// change in it, which the destination stores with the checkpoint. A table's
// changes go to the destination's own buffer (Destination.changeBuffer).
import type { TableApplied } from '../catalog/catalog.ts';
import type {
  ChangeBatch,
  ChangeBuffer,
  DestinationTable,
  RowChange,
  TableChanges,
  TransactionPosition,
} from '../connectors/records.ts';
import { TableTally } from './table-tally.ts';

export interface BatchLimits {
  readonly maxRows: number;
  readonly maxBytes: number;
}

export class BatchBuilder<Held extends ChangeBuffer = ChangeBuffer> {
  readonly #limits: BatchLimits;
  readonly #changeBuffer: (table: DestinationTable) => Held;
  #tables = new Map<DestinationTable, Held>();
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
  /** Tables whose changes are not counted as the table's own (a resync's shadow: its live table counts them). */
  readonly #uncounted = new Set<DestinationTable>();

  /** `changeBuffer`: the destination's (Destination.changeBuffer). */
  constructor(limits: BatchLimits, durableLsn: bigint, changeBuffer: (table: DestinationTable) => Held) {
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
    this.#byteSize += this.#held(table).add(change);
    this.#added(lsn, position, change.kind !== 'truncate');
    // Rows an online load read are not changes CDC applied (rowsApplied counts those).
    const counted =
      change.kind !== 'truncate' &&
      !(change.kind === 'insert' && change.loaded) &&
      (this.#uncounted.size === 0 || !this.#uncounted.has(table));
    if (counted) this.#tally.count(table, change.kind, change.transaction);
    return opened;
  }

  /** `table`'s changes are not counted in takeApplied (a resync's shadow). */
  doNotCount(table: DestinationTable): void {
    this.#uncounted.add(table);
  }

  /** Starts the batch at its first change; true when this change opens it. */
  #startIfEmpty(lsn: bigint, now: () => number): boolean {
    if (!this.isEmpty) return false;
    this.#startedAt = now();
    this.#startLsn = lsn;
    return true;
  }

  #held(table: DestinationTable): Held {
    let held = this.#tables.get(table);
    if (!held) {
      held = this.#changeBuffer(table);
      this.#tables.set(table, held);
    }
    return held;
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
  take(mirror: string, batchId: bigint): ChangeBatch<Held> {
    const tables: TableChanges<Held>[] = [...this.#tables].map(([table, held]) => ({ table, held }));
    const batch: ChangeBatch<Held> = {
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
