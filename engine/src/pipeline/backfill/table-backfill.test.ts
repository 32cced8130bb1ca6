import { describe, expect, it } from 'vitest';
import { type Row, type RowChangeImages, unchangedToast } from '../../connectors/records.ts';
import { rowOfCells } from '../../connectors/rows.ts';
import type { KeyOrder } from './key-order.ts';
import { freshProgress, type ReadChunk, TableBackfill } from './table-backfill.ts';

// Rows (id int, v text); the key is id.
const order: KeyOrder = { columns: ['integer'], indexes: [0] };
const row = (id: number, v: string | typeof unchangedToast = `v${id}`): Row => rowOfCells([String(id), v]);
const insert = (id: number): RowChangeImages => ({ kind: 'insert', newRow: row(id) });
const remove = (id: number): RowChangeImages => ({ kind: 'delete', oldKey: rowOfCells([String(id), null]) });
const update = (id: number, v = 'changed'): RowChangeImages => ({
  kind: 'update',
  oldKey: null,
  newRow: row(id, v),
});
const move = (from: number, to: number, v: string | typeof unchangedToast = 'moved'): RowChangeImages => ({
  kind: 'update',
  oldKey: rowOfCells([String(from), null]),
  newRow: row(to, v),
});
const ids = (rows: readonly Row[]) => rows.map((r) => Number(r.cell(0)));

/** A chunk read under a snapshot that sees every xid below 100, high at LSN 1000. */
function chunk(rowIds: number[], pending: number[] = [], snapshot = '100:100:'): ReadChunk {
  return {
    snapshot,
    rows: rowIds.map((id) => row(id)),
    pendingRows: pending.map((id) => row(id)),
    highLsn: 1000n,
  };
}

/** A backfill whose first chunk, rows 1–3 of a limit of 3, was emitted: F = 3. */
function afterFirstChunk(): TableBackfill {
  const backfill = new TableBackfill(order, freshProgress(1));
  backfill.nextRequest(3);
  backfill.chunkRead(chunk([1, 2, 3]));
  expect(ids(backfill.emit())).toEqual([1, 2, 3]);
  return backfill;
}

describe('table backfill', () => {
  it('skips every change before the first chunk, and applies keys at or below the frontier after it', () => {
    const backfill = new TableBackfill(order, freshProgress(1));
    expect(backfill.decide(insert(1), 50)).toBeUndefined();
    expect(backfill.nextRequest(3)).toEqual({ after: null, limit: 3, pendingKeys: [] });
    backfill.chunkRead(chunk([1, 2, 3]));
    expect(backfill.dueAt(999n)).toBe(false);
    expect(backfill.dueAt(1000n)).toBe(true);
    expect(ids(backfill.emit())).toEqual([1, 2, 3]);
    expect(backfill.decide(update(3), 200)).toEqual(update(3));
    expect(backfill.decide(update(4), 200)).toBeUndefined();
    expect(backfill.takeProgress().after).toEqual(['3']);
  });

  it('takes a key changed by a transaction the snapshot does not see out of the chunk, into the pending keys', () => {
    const backfill = afterFirstChunk();
    expect(backfill.nextRequest(3)).toEqual({ after: ['3'], limit: 3, pendingKeys: [] });
    // xid 150 commits after the chunk's snapshot (xmax 100): its update of 5 is not in the chunk.
    expect(backfill.decide(update(5), 150)).toBeUndefined();
    // xid 90 is visible: the chunk holds its change of 4.
    expect(backfill.decide(update(4), 90)).toBeUndefined();
    backfill.chunkRead(chunk([4, 5, 6]));
    expect(ids(backfill.emit())).toEqual([4, 6]);
    expect(backfill.takeProgress()).toMatchObject({ after: ['6'], pending: [['5']] });
    // A pending key is skipped until it is read again.
    expect(backfill.decide(update(5), 160)).toBeUndefined();
    expect(backfill.nextRequest(3)).toEqual({ after: ['6'], limit: 3, pendingKeys: [['5']] });
    backfill.chunkRead(chunk([7], [5], '200:200:'));
    expect(ids(backfill.emit())).toEqual([7, 5]);
    expect(backfill.takeProgress()).toMatchObject({ rangeDone: true, pending: [] });
    expect(backfill.done).toBe(true);
    expect(backfill.decide(update(5), 300)).toEqual(update(5));
  });

  it('keeps a key outside the chunk changed by an unseen transaction for the next chunk', () => {
    const backfill = afterFirstChunk();
    backfill.nextRequest(3);
    expect(backfill.decide(insert(9), 150)).toBeUndefined();
    backfill.chunkRead(chunk([4, 5, 6]));
    expect(ids(backfill.emit())).toEqual([4, 5, 6]);
    backfill.nextRequest(3);
    // The next chunk's snapshot does not see xid 150 either: 9 goes pending.
    backfill.chunkRead(chunk([7, 8, 9], [], '140:160:150'));
    expect(ids(backfill.emit())).toEqual([7, 8]);
    expect(backfill.takeProgress().pending).toEqual([['9']]);
  });

  it('forgets a pending key that the read again does not find (deleted meanwhile)', () => {
    const backfill = afterFirstChunk();
    backfill.nextRequest(3);
    backfill.decide(insert(5), 150);
    backfill.chunkRead(chunk([4, 5, 6]));
    backfill.emit();
    expect(backfill.decide(remove(5), 160)).toBeUndefined();
    backfill.nextRequest(3);
    backfill.chunkRead(chunk([7], [], '200:200:'));
    expect(ids(backfill.emit())).toEqual([7]);
    expect(backfill.done).toBe(true);
  });

  it('skips a delete of a key above the frontier and applies one at or below it', () => {
    const backfill = afterFirstChunk();
    expect(backfill.decide(remove(8), 200)).toBeUndefined();
    expect(backfill.decide(remove(2), 200)).toEqual(remove(2));
  });

  it('splits a key-changing update across the frontier into its sides', () => {
    const backfill = afterFirstChunk();
    // 2 → 8: the old key leaves the destination, the new one is the backfill's.
    expect(backfill.decide(move(2, 8), 200)).toEqual({ kind: 'delete', oldKey: rowOfCells(['2', null]) });
    // 9 → 1: the old row never reached the destination; the new one is inserted.
    expect(backfill.decide(move(9, 1), 200)).toEqual({ kind: 'insert', newRow: row(1, 'moved') });
    // Both sides applied, or both skipped.
    expect(backfill.decide(move(1, 3), 200)).toEqual(move(1, 3));
    expect(backfill.decide(move(7, 8), 200)).toBeUndefined();
  });

  it('reads a key again whose new row holds unchanged TOAST values the destination never had', () => {
    const backfill = afterFirstChunk();
    expect(backfill.owesRecord).toBe(false);
    expect(backfill.decide(move(9, 2, unchangedToast), 200)).toBeUndefined();
    // Only a record of P holds key 2 now (it is below the frontier): the stream owes one.
    expect(backfill.owesRecord).toBe(true);
    expect(backfill.takeProgress().pending).toEqual([['2']]);
    expect(backfill.owesRecord).toBe(false);
    expect(backfill.decide(update(2), 210)).toBeUndefined();
    // An unchanged-TOAST update above the frontier is skipped like any change there.
    expect(
      backfill.decide({ kind: 'update', oldKey: null, newRow: row(8, unchangedToast) }, 200),
    ).toBeUndefined();
    expect(backfill.nextRequest(3)?.pendingKeys).toEqual([['2']]);
  });

  it('drops a chunk read before a truncate it does not see, and reads it again', () => {
    const backfill = afterFirstChunk();
    backfill.nextRequest(3);
    expect(backfill.decide({ kind: 'truncate' }, 150)).toEqual({ kind: 'truncate' });
    backfill.chunkRead(chunk([4, 5, 6]));
    expect(backfill.emit()).toEqual([]);
    expect(backfill.takeProgress().after).toEqual(['3']);
    expect(backfill.nextRequest(3)).toEqual({ after: ['3'], limit: 3, pendingKeys: [] });
    backfill.chunkRead(chunk([4], [], '200:200:'));
    expect(ids(backfill.emit())).toEqual([4]);
    expect(backfill.done).toBe(true);
  });

  it('resumes from a recorded progress', () => {
    const backfill = new TableBackfill(order, {
      after: ['6'],
      rangeDone: false,
      pending: [['5']],
      rowsCopied: 5,
      since: 1,
    });
    expect(backfill.decide(update(4), 1)).toEqual(update(4));
    expect(backfill.decide(update(5), 1)).toBeUndefined();
    expect(backfill.nextRequest(10)).toEqual({ after: ['6'], limit: 10, pendingKeys: [['5']] });
  });
});
