// Whether a streamed transaction is visible in an MVCC snapshot, for the
// online backfill: a chunk read under snapshot S holds exactly the effects of
// the transactions visible in S (docs/engine.md, "Tables added to a running
// mirror"). The snapshot comes as `pg_current_snapshot()` writes it
// (PostgreSQL 13+, https://www.postgresql.org/docs/current/functions-info.html#FUNCTIONS-PG-SNAPSHOT-PARTS):
// `xmin:xmax:xip,…` with 64-bit transaction ids; pgoutput's Begin carries the
// 32-bit xid. A transaction is visible iff it committed before the snapshot:
// xid < xmin, or xid < xmax and not in the in-progress list.
//
// The 32-bit xid is compared with the snapshot's ids reduced to 32 bits, as
// PostgreSQL's TransactionIdPrecedes does: by the sign of the 32-bit
// difference. That is exact while the ids are less than 2^31 apart, which
// holds for a transaction streamed while the snapshot's transactions could
// still be running (PostgreSQL itself stops assigning ids before they wrap
// that far).
import { EngineError } from '../../errors.ts';

export class SnapshotVisibility {
  readonly #xmin: number;
  readonly #xmax: number;
  readonly #inProgress: ReadonlySet<number>;

  /** `text`: a pg_snapshot's text form, e.g. `742:745:742,744`. */
  constructor(text: string) {
    const match = /^(\d+):(\d+):([\d,]*)$/.exec(text.trim());
    if (!match) throw new EngineError('decode', `source: a snapshot reads ${JSON.stringify(text)}`);
    this.#xmin = low32(match[1] ?? '0');
    this.#xmax = low32(match[2] ?? '0');
    const list = match[3] ?? '';
    this.#inProgress = new Set(list === '' ? [] : list.split(',').map(low32));
  }

  /** Whether the transaction of 32-bit id `xid` committed before the snapshot was taken. */
  visible(xid: number): boolean {
    const id = xid >>> 0;
    if (precedes(id, this.#xmin)) return true;
    return precedes(id, this.#xmax) && !this.#inProgress.has(id);
  }
}

function low32(text: string): number {
  return Number(BigInt(text) & 0xffff_ffffn);
}

/** TransactionIdPrecedes for normal ids: `a` is older than `b` modulo 2^32. */
function precedes(a: number, b: number): boolean {
  return ((a - b) | 0) < 0;
}
