// What the applier may acknowledge to the source, and when. The rule that
// makes the mirror lossless: the slot moves only to positions whose changes
// of the mirror are all durable at the destination (docs/engine.md, "Batches
// and acknowledgement"). Two kinds of position qualify:
// - the end of a batch's last complete commit, once the batch is durable
//   (BatchWriter calls `durable`);
// - a position at rest: a commit or keepalive with nothing of the mirror
//   buffered before it and no transaction open (the server's position on a
//   quiet mirror, so it does not hold back WAL other tables produce). While a
//   batch is in flight such a position may still have changes of the mirror
//   before it in that batch, so it waits for the batch.
// Never auto-acknowledge on receipt.

/**
 * `direct`: no batch in flight, a position at rest is acknowledged at once.
 * `afterWrite`: a batch is in flight; `deferred` is the furthest position at
 * rest seen since it started (0 when none), acknowledged once it is durable.
 * A write that fails leaves the state at `afterWrite` for good: nothing more
 * is acknowledged, and the next run starts from the destination's checkpoint.
 */
type AcknowledgementState =
  | { readonly kind: 'direct' }
  | { readonly kind: 'afterWrite'; readonly deferred: bigint };

const direct: AcknowledgementState = { kind: 'direct' };
const nothingDeferred: AcknowledgementState = { kind: 'afterWrite', deferred: 0n };

export class Acknowledgements {
  /** Reports everything before a position as durable (ChangeStream.acknowledge); positions only grow there. */
  readonly #acknowledge: (lsn: bigint) => void;
  #state: AcknowledgementState = direct;

  constructor(acknowledge: (lsn: bigint) => void) {
    this.#acknowledge = acknowledge;
  }

  /**
   * A position at rest: no transaction is open and nothing of the mirror is
   * buffered before it. Acknowledged now, or when the batch in flight is durable.
   */
  atRest(lsn: bigint): void {
    const state = this.#state;
    if (state.kind === 'direct') this.#acknowledge(lsn);
    else if (lsn > state.deferred) this.#state = { kind: 'afterWrite', deferred: lsn };
  }

  /** A batch went in flight (at most one is: BatchWriter). */
  writeStarted(): void {
    this.#state = nothingDeferred;
  }

  /**
   * The batch in flight is durable: acknowledges the end of its last complete
   * commit, then the furthest position at rest that waited for it.
   */
  durable(batchEndLsn: bigint): void {
    const state = this.#state;
    this.#acknowledge(batchEndLsn);
    if (state.kind === 'afterWrite' && state.deferred > 0n) this.#acknowledge(state.deferred);
    this.#state = direct;
  }
}
