// Folds one table's changes in a batch into the final state per row key: the
// last change wins, a key change deletes the old key, and unchanged-TOAST cells
// are filled from an earlier image of the same row in the batch when one exists.
// Destinations that apply batches as upserts and deletes (PostgreSQL) use it;
// those that keep every version (Kafka, ClickHouse) do not.
import { isUnchangedToast, type RowChange, type RowImage, type TupleCell } from './records.ts';

export interface CoalescedChanges {
  /** A truncate happened; apply it before the rows below. */
  readonly truncated: boolean;
  readonly upserts: readonly RowImage[];
  /** Key images (key cells set, others possibly null) of rows to delete. */
  readonly deletes: readonly RowImage[];
}

type FinalState =
  | { readonly op: 'upsert'; readonly row: RowImage }
  | { readonly op: 'delete'; readonly key: RowImage };

export function rowKey(row: RowImage, keyIndexes: readonly number[]): string {
  let key = '';
  for (const index of keyIndexes) {
    const cell = row[index];
    // \u0001 marks null so that null and the empty string differ; \u0000 separates.
    key += `${typeof cell === 'string' ? cell : '\u0001'}\u0000`;
  }
  return key;
}

function fillUnchanged(newer: RowImage, older: RowImage): RowImage {
  if (!newer.some(isUnchangedToast)) return newer;
  return newer.map((cell, index): TupleCell => (isUnchangedToast(cell) ? (older[index] ?? cell) : cell));
}

export function coalesceChanges(
  changes: readonly RowChange[],
  keyIndexes: readonly number[],
): CoalescedChanges {
  let truncated = false;
  const finalByKey = new Map<string, FinalState>();
  const upsert = (row: RowImage) => {
    const key = rowKey(row, keyIndexes);
    const previous = finalByKey.get(key);
    const merged = previous?.op === 'upsert' ? fillUnchanged(row, previous.row) : row;
    // Deleting and re-inserting keeps Map order equal to the last change's order.
    finalByKey.delete(key);
    finalByKey.set(key, { op: 'upsert', row: merged });
  };
  const remove = (keyImage: RowImage) => {
    const key = rowKey(keyImage, keyIndexes);
    finalByKey.delete(key);
    finalByKey.set(key, { op: 'delete', key: keyImage });
  };

  for (const change of changes) {
    switch (change.kind) {
      case 'truncate':
        truncated = true;
        finalByKey.clear();
        break;
      case 'insert':
        upsert(change.newRow);
        break;
      case 'update':
        if (change.oldKey && rowKey(change.oldKey, keyIndexes) !== rowKey(change.newRow, keyIndexes)) {
          remove(change.oldKey);
        }
        upsert(change.newRow);
        break;
      case 'delete':
        remove(change.oldKey);
        break;
    }
  }

  const upserts: RowImage[] = [];
  const deletes: RowImage[] = [];
  for (const state of finalByKey.values()) {
    if (state.op === 'upsert') upserts.push(state.row);
    else deletes.push(state.key);
  }
  return { truncated, upserts, deletes };
}
