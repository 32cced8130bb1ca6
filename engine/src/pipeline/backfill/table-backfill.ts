// One added table's online backfill: where its copy is (the frontier F and
// the pending keys P), what becomes of each streamed change of it, and when
// the chunk in flight may enter the stream. No I/O: backfill.ts reads the
// chunks and the change applier asks this.
//
// The contract (docs/engine.md, "Tables added to a running mirror", has the
// why):
// - A change to a key K ≤ F not in P is applied as usual; to K > F or K in P
//   it is skipped (`decide` returns undefined) and remembered as a touch
//   (xid, K): the chunk that covers K later, read under a later snapshot,
//   carries its effect. A key-changing update is decided per side: the old
//   key applied and the new skipped is a delete of the old key; the old
//   skipped and the new applied is an insert of the new row (the old row was
//   never at the destination), unless the new row holds unchanged-TOAST
//   values, which only the source has: then the new key joins P and is read
//   again. Such a key is at or below F, where no chunk of the range reads it:
//   until a record of P holds it, the commit of its transaction must not be
//   acknowledged (`owesRecord`). A truncate is applied, and voids a chunk read
//   before it.
// - The chunk in flight covers (F, hi] (hi = +∞ when the range is
//   exhausted) and the pending keys it read again. It is due once the stream
//   is at or past its `highLsn` (a transaction boundary); every transaction
//   visible in its snapshot committed before that, so all of them were seen.
// - On emission, a touch of a transaction not visible in the chunk's snapshot
//   takes its key out of the chunk's rows and into P (its change was skipped
//   and the chunk does not hold it); touches of such transactions outside the
//   chunk are kept for the next chunk's snapshot. Then F := hi, and P loses
//   the keys the chunk read again and found clean.
// - The load is done when the range is exhausted and P is empty.
import type { BackfillTableProgress } from '../../catalog/catalog.ts';
import type { Row, RowChangeImages } from '../../connectors/records.ts';
import { compareKeys, type KeyOrder, KeySet, type KeyValue, keyOfRow } from './key-order.ts';
import { SnapshotVisibility } from './snapshot-visibility.ts';

/** What is durable of a table's backfill (F, P), recorded with each batch (catalog.ts). */
export type BackfillProgress = BackfillTableProgress;

/** The progress of a load that begins (at `since`, BackfillTableProgress). */
export function freshProgress(since: number): BackfillProgress {
  return { after: null, rangeDone: false, pending: [], rowsCopied: 0, since };
}

/** What the next chunk reads. */
export interface ChunkRequest {
  /** Rows with a key above this (all when null), in key order. */
  readonly after: KeyValue | null;
  /** At most this many of them. */
  readonly limit: number;
  /** Keys of P read again with the chunk. */
  readonly pendingKeys: readonly KeyValue[];
}

/** A chunk as the source read it, in one transaction. */
export interface ReadChunk {
  /** The transaction's snapshot, as pg_current_snapshot() writes it. */
  readonly snapshot: string;
  /** The rows of the range, in key order; fewer than the limit when the range is exhausted. */
  readonly rows: readonly Row[];
  /** The rows of the pending keys it found. */
  readonly pendingRows: readonly Row[];
  /** A WAL position at or after every commit the snapshot sees. */
  readonly highLsn: bigint;
}

/** A streamed change of a skipped key, by its transaction; `all` for a truncate. */
interface Touch {
  readonly xid: number;
  readonly key: KeyValue | 'all';
}

interface InFlight {
  readonly request: ChunkRequest;
  readonly pendingRead: KeySet;
  chunk?: ReadChunk;
}

/** Keys of P read again per chunk, at most. */
export const maxPendingPerChunk = 1000;

export class TableBackfill {
  readonly #order: KeyOrder;
  #frontier: KeyValue | null;
  #rangeDone: boolean;
  readonly #pending = new KeySet();
  #rowsCopied: number;
  readonly #since: number;
  #inFlight: InFlight | undefined;
  #touches: Touch[] = [];
  /** A key at or below F joined P since the progress was last taken (`owesRecord`). */
  #owesRecord = false;

  constructor(order: KeyOrder, progress: BackfillProgress) {
    this.#order = order;
    this.#frontier = progress.after;
    this.#rangeDone = progress.rangeDone;
    for (const key of progress.pending) this.#pending.add(key);
    this.#rowsCopied = progress.rowsCopied;
    this.#since = progress.since;
  }

  /** Every row is copied: the table's changes are all applied from now on. */
  get done(): boolean {
    return this.#rangeDone && this.#pending.size === 0 && this.#inFlight === undefined;
  }

  /**
   * A key only P holds (at or below F) joined it since the progress was last
   * taken: the stream must not be acknowledged past the change until a
   * record of the progress is durable (else a restart after it forgets the key).
   */
  get owesRecord(): boolean {
    return this.#owesRecord;
  }

  /** The progress, as a batch records it; taking it settles `owesRecord`. */
  takeProgress(): BackfillProgress {
    this.#owesRecord = false;
    return {
      after: this.#frontier,
      rangeDone: this.#rangeDone,
      pending: this.#pending.values(),
      rowsCopied: this.#rowsCopied,
      since: this.#since,
    };
  }

  /** A chunk was asked for and not emitted yet. */
  get reading(): boolean {
    return this.#inFlight !== undefined;
  }

  /** A chunk was read and waits for the stream to reach its high LSN. */
  get waitingForStream(): boolean {
    return this.#inFlight?.chunk !== undefined;
  }

  /** Whether a change to `key` is applied now (else the backfill carries it). */
  applies(key: KeyValue): boolean {
    if (this.#pending.has(key)) return false;
    if (this.#rangeDone) return true;
    return this.#frontier !== null && compareKeys(this.#order, key, this.#frontier) <= 0;
  }

  /** What to apply of a streamed change of the table (undefined: nothing). */
  decide(change: RowChangeImages, xid: number): RowChangeImages | undefined {
    switch (change.kind) {
      case 'truncate':
        this.#touches.push({ xid, key: 'all' });
        return change;
      case 'insert':
        return this.#keyed(keyOfRow(change.newRow, this.#order), xid) ? change : undefined;
      case 'delete':
        return this.#keyed(keyOfRow(change.oldKey, this.#order), xid) ? change : undefined;
      case 'update':
        return this.#update(change, xid);
    }
  }

  #update(change: RowChangeImages & { kind: 'update' }, xid: number): RowChangeImages | undefined {
    const newKey = keyOfRow(change.newRow, this.#order);
    const oldKey = change.oldKey ? keyOfRow(change.oldKey, this.#order) : newKey;
    if (!newKey || !oldKey || compareKeys(this.#order, oldKey, newKey) === 0) {
      return this.#keyed(newKey, xid) ? change : undefined;
    }
    const oldApplies = this.#keyed(oldKey, xid);
    const newApplies = this.#keyed(newKey, xid);
    if (oldApplies && newApplies) return change;
    if (oldApplies && change.oldKey) return { kind: 'delete', oldKey: change.oldKey };
    if (!newApplies) return undefined;
    // The old row never reached the destination, so the new one is inserted;
    // values it did not resend (unchanged TOAST) are only at the source.
    if (change.newRow.hasUnchangedToast()) {
      this.#pending.add(newKey);
      this.#owesRecord = true;
      this.#touches.push({ xid, key: newKey });
      return undefined;
    }
    return { kind: 'insert', newRow: change.newRow };
  }

  /** Whether a change to `key` applies; a skipped one is remembered as a touch. */
  #keyed(key: KeyValue | undefined, xid: number): boolean {
    if (!key || this.applies(key)) return true;
    this.#touches.push({ xid, key });
    return false;
  }

  /** The next chunk to read, when none is in flight and the load is not done. */
  nextRequest(limit: number): ChunkRequest | undefined {
    if (this.#inFlight || this.done) return undefined;
    const pendingKeys = this.#pending.values().slice(0, maxPendingPerChunk);
    const request: ChunkRequest = {
      after: this.#rangeDone ? null : this.#frontier,
      limit: this.#rangeDone ? 0 : limit,
      pendingKeys,
    };
    const pendingRead = new KeySet();
    for (const key of pendingKeys) pendingRead.add(key);
    this.#inFlight = { request, pendingRead };
    return request;
  }

  /** The chunk asked for was read. */
  chunkRead(chunk: ReadChunk): void {
    if (!this.#inFlight) throw new Error('table backfill: a chunk arrived that was not asked for');
    this.#inFlight.chunk = chunk;
  }

  /** The read of the chunk failed: it will be asked for again. */
  chunkFailed(): void {
    this.#inFlight = undefined;
  }

  /** Whether the chunk read is due at stream position `lsn` (a transaction boundary). */
  dueAt(lsn: bigint): boolean {
    const chunk = this.#inFlight?.chunk;
    return chunk !== undefined && lsn >= chunk.highLsn;
  }

  /**
   * Takes the chunk read (dueAt said so) into the stream: returns the rows to
   * insert at this point, and moves F and P.
   */
  emit(): Row[] {
    const inFlight = this.#inFlight;
    const chunk = inFlight?.chunk;
    if (!inFlight || !chunk) throw new Error('table backfill: no chunk to emit');
    this.#inFlight = undefined;
    const visibility = new SnapshotVisibility(chunk.snapshot);
    const { request, pendingRead } = inFlight;
    const exhausted = chunk.rows.length < request.limit;
    const last = chunk.rows.at(-1);
    const high = exhausted || !last ? null : (keyOfRow(last, this.#order) ?? null);
    const covers = (key: KeyValue) =>
      pendingRead.has(key) ||
      (!this.#rangeDone &&
        (this.#frontier === null || compareKeys(this.#order, key, this.#frontier) > 0) &&
        (high === null || compareKeys(this.#order, key, high) <= 0));

    const dropped = new KeySet();
    const kept: Touch[] = [];
    let voided = false;
    for (const touch of this.#touches) {
      if (visibility.visible(touch.xid)) continue;
      if (touch.key === 'all') voided = true;
      else if (covers(touch.key)) {
        dropped.add(touch.key);
        continue;
      }
      kept.push(touch);
    }
    if (voided) {
      // A truncate the snapshot does not see: the chunk holds rows it removed. Read again.
      this.#touches = this.#touches.filter((touch) => !visibility.visible(touch.xid));
      return [];
    }
    this.#touches = kept;
    const rows: Row[] = [];
    for (const row of [...chunk.rows, ...chunk.pendingRows]) {
      const key = keyOfRow(row, this.#order);
      if (key && dropped.has(key)) continue;
      rows.push(row);
    }
    for (const key of pendingRead.values()) this.#pending.delete(key);
    for (const key of dropped.values()) this.#pending.add(key);
    if (request.limit > 0) {
      if (high === null) this.#rangeDone = true;
      else this.#frontier = high;
    }
    this.#rowsCopied += rows.length;
    return rows;
  }
}
