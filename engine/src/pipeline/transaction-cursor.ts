// Where the applier is inside the current source transaction, and which of its
// changes the destination holds already. A transaction larger than a batch is
// made durable in steps: each batch that ends inside it records the position
// of its last change with the checkpoint (records.ts, TransactionPosition).
// After a restart the slot sends that transaction again from its first change
// (it can only be acknowledged at commits); this cursor recognises the changes
// up to the recorded position so the applier skips them, and the mirror goes
// on from where it was instead of from the transaction's start.
//
// A position is (commit LSN, change LSN, rank among the changes at that LSN):
// the walsender decodes a transaction the same way every time and sends its
// changes in WAL order, each with the LSN of its record; one record can carry
// many rows (a COPY's multi-insert), hence the rank. See docs/engine.md,
// "Transactions larger than a batch".
import type { TransactionPosition } from '../connectors/records.ts';

export class TransactionCursor {
  /** The position the destination holds, until the transaction it names is over. */
  #resume: TransactionPosition | undefined;
  #commitLsn = 0n;
  #changeLsn = 0n;
  #changeRank = 0;
  #skipping = false;

  constructor(resume: TransactionPosition | undefined) {
    this.#resume = resume;
  }

  /**
   * A transaction starts; `commitLsn` is its commit's LSN (pgoutput's final
   * LSN). Returns true when it is the transaction the destination holds part of.
   */
  begin(commitLsn: bigint): boolean {
    this.#commitLsn = commitLsn;
    this.#changeLsn = 0n;
    this.#changeRank = 0;
    this.#skipping = this.#resume !== undefined && this.#resume.commitLsn === commitLsn;
    return this.#skipping;
  }

  /**
   * The transaction's next change, at `lsn`. Returns true when the destination
   * holds it already. Every change message counts, applied or not, so the
   * ranks match those of the run that recorded the position.
   */
  next(lsn: bigint): boolean {
    if (lsn === this.#changeLsn) {
      this.#changeRank++;
    } else {
      this.#changeLsn = lsn;
      this.#changeRank = 1;
    }
    if (!this.#skipping) return false;
    const resume = this.#resume;
    if (
      resume &&
      (lsn < resume.changeLsn || (lsn === resume.changeLsn && this.#changeRank <= resume.changeRank))
    ) {
      return true;
    }
    // Past the recorded position: the rest of the transaction is new.
    this.#skipping = false;
    this.#resume = undefined;
    return false;
  }

  /** The transaction ended: a recorded position inside it is of no more use. */
  end(): void {
    if (this.#resume?.commitLsn === this.#commitLsn) this.#resume = undefined;
    this.#skipping = false;
  }

  /** The position of the change `next` was last called for. */
  get position(): TransactionPosition {
    return { commitLsn: this.#commitLsn, changeLsn: this.#changeLsn, changeRank: this.#changeRank };
  }
}
