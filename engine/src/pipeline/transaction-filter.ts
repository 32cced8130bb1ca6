// Which of the stream's changes the applier applies. After a restart the slot
// sends again what it was not acknowledged for, so the filter leaves out:
// - whole transactions that committed before the destination's checkpoint
//   (durable there already, replayed after a crash before the acknowledgement);
// - the changes the destination holds of the transaction a batch ended inside
//   (transaction-cursor.ts); its first change that the destination does not
//   hold is announced (`onResumed`), so that the first batch after it is small;
// - per source table, the changes of transactions that committed before its
//   initial load's consistent point (the load holds them).
// It follows begin and commit, and is asked once for every change message, in
// stream order: the cursor counts them all, applied or not.
import type { SourceMessage } from '../connectors/changes.ts';
import type { SourceTransaction, TransactionPosition } from '../connectors/records.ts';
import type { TrackedRelation } from './relations.ts';
import { TransactionCursor } from './transaction-cursor.ts';

/**
 * Where the stream is. Inside a transaction: `durable` (the destination holds
 * all of it), `resuming` (the one a batch ended inside, before its first change
 * the destination does not hold) or `applying`.
 */
export type TransactionState =
  | { readonly kind: 'between'; readonly transaction: SourceTransaction }
  | {
      readonly kind: 'durable' | 'resuming' | 'applying';
      readonly transaction: SourceTransaction;
    };

/** Changes outside a transaction have none (pgoutput sends none there). */
const between: TransactionState = {
  kind: 'between',
  transaction: { xid: 0, commitLsn: 0n, commitTimeMicros: 0n },
};

export interface TransactionFilterOptions {
  /** Transactions committed before this are durable at the destination (its checkpoint's LSN). */
  readonly durableLsn: bigint;
  /** How far into an open transaction the destination is (its checkpoint's position), if a batch ended inside one. */
  readonly resumeFrom: TransactionPosition | undefined;
  /** Per source table (`schema.table`): its changes apply only from transactions committed at or after this LSN. */
  readonly tableStartLsns: ReadonlyMap<string, bigint>;
  /** Called once, at the first change of the resumed transaction that the destination does not hold. */
  readonly onResumed: () => void;
}

export class TransactionFilter {
  readonly #options: TransactionFilterOptions;
  readonly #cursor: TransactionCursor;
  #state: TransactionState = between;

  constructor(options: TransactionFilterOptions) {
    this.#options = options;
    this.#cursor = new TransactionCursor(options.resumeFrom);
  }

  get state(): TransactionState {
    return this.#state;
  }

  /** The transaction the stream is in (a zero one between transactions). */
  get transaction(): SourceTransaction {
    return this.#state.transaction;
  }

  /** Between transactions: nothing of an open one has arrived. */
  get atBoundary(): boolean {
    return this.#state.kind === 'between';
  }

  /** The position of the last change `holds` was asked about, inside its transaction. */
  get position(): TransactionPosition {
    return this.#cursor.position;
  }

  /** A transaction begins; returns what the filter makes of it. */
  begin(message: SourceMessage & { tag: 'begin' }): TransactionState {
    const transaction: SourceTransaction = {
      xid: message.xid,
      commitLsn: message.finalLsn,
      commitTimeMicros: message.commitTimeMicros,
    };
    const holdsPart = this.#cursor.begin(message.finalLsn);
    const kind =
      message.finalLsn < this.#options.durableLsn ? 'durable' : holdsPart ? 'resuming' : 'applying';
    this.#state = { kind, transaction };
    return this.#state;
  }

  /**
   * Whether the destination holds the transaction's next change, at `lsn`,
   * already. Asked for every change message, in order, before anything else
   * is decided about it.
   */
  holds(lsn: bigint): boolean {
    if (this.#cursor.next(lsn)) return true;
    const state = this.#state;
    if (state.kind === 'resuming') {
      this.#state = { kind: 'applying', transaction: state.transaction };
      this.#options.onResumed();
    }
    return false;
  }

  /** Whether this transaction's changes to the table are applied (after `holds` said false). */
  applies(tracked: TrackedRelation): boolean {
    const state = this.#state;
    if (state.kind === 'durable') return false;
    const startLsn = this.#options.tableStartLsns.get(tracked.sourceName);
    return startLsn === undefined || state.transaction.commitLsn >= startLsn;
  }

  /** The transaction commits; returns whether its changes were applied (it was not durable already). */
  commit(): boolean {
    const applied = this.#state.kind !== 'durable';
    this.#state = between;
    this.#cursor.end();
    return applied;
  }
}
