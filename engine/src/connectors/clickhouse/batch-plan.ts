// Folds one table's changes in a batch into the rows a ReplacingMergeTree
// needs: the final state of every key touched, each with the version of the
// change that produced it (see rowVersion), and the last truncate. Unchanged
// TOAST cells are filled from an earlier image of the row in the same batch;
// those still unchanged afterwards are left for the destination to fill from
// its current row.
import { EngineError } from '../../errors.ts';
import { rowKey } from '../coalesce.ts';
import { isUnchangedToast, type RowChange, type RowImage, type TupleCell } from '../records.ts';

/** Bits of the version that hold the change's index within its batch's table. */
export const versionIndexBits = 27n;
/** The largest batch a ClickHouse destination takes: indexes must stay below 2^27. */
export const maxChangesPerBatch = 100_000_000;

/**
 * The row version of the change at `index` (its position among the batch's
 * changes to one table) in batch `batchId`: increases with commit order, and a
 * change replayed after a crash gets a version at least as high as before
 * (docs/clickhouse.md, "Versions").
 */
export function rowVersion(batchId: bigint, index: number): bigint {
  if (index >= 2 ** Number(versionIndexBits)) {
    throw new EngineError('internal', `a batch holds more than 2^${versionIndexBits} changes to one table`);
  }
  return (batchId << versionIndexBits) + BigInt(index);
}

/** A row as the batch left it; unchanged cells still in it come from the destination row of `fillKey`. */
export interface RowState {
  readonly row: RowImage;
  /** A key image: the row's own key, or the old key when an update changed it. */
  readonly fillKey: RowImage;
}

export type FinalState =
  | ({ readonly op: 'upsert'; readonly index: number } & RowState)
  | {
      readonly op: 'delete';
      /** The key image (or the whole old row with REPLICA IDENTITY FULL). */
      readonly key: RowImage;
      /** The row as an earlier change of this batch left it, if one did. */
      readonly last: RowState | undefined;
      readonly index: number;
    };

export interface TablePlan {
  /** Index of the last truncate, when the batch truncates the table. */
  readonly truncateIndex: number | undefined;
  /** Final state per key (rowKey), after the last truncate. */
  readonly finals: ReadonlyMap<string, FinalState>;
}

function fillUnchanged(newer: RowImage, older: RowImage): RowImage {
  if (!newer.some(isUnchangedToast)) return newer;
  return newer.map((cell, index): TupleCell => (isUnchangedToast(cell) ? (older[index] ?? cell) : cell));
}

export function planTableChanges(changes: readonly RowChange[], keyIndexes: readonly number[]): TablePlan {
  let truncateIndex: number | undefined;
  const finals = new Map<string, FinalState>();
  const stateOf = (key: string): RowState | undefined => {
    const state = finals.get(key);
    return state?.op === 'upsert' ? state : state?.last;
  };
  /** `row` follows the row at `previousKey` (its own key, or the old one after a key change). */
  const upsert = (row: RowImage, index: number, previousKey: string, previousKeyImage: RowImage) => {
    const previous = stateOf(previousKey);
    finals.set(rowKey(row, keyIndexes), {
      op: 'upsert',
      row: previous ? fillUnchanged(row, previous.row) : row,
      fillKey: previous?.fillKey ?? previousKeyImage,
      index,
    });
  };
  const remove = (keyImage: RowImage, index: number) => {
    const key = rowKey(keyImage, keyIndexes);
    finals.set(key, { op: 'delete', key: keyImage, last: stateOf(key), index });
  };

  changes.forEach((change, index) => {
    switch (change.kind) {
      case 'truncate':
        truncateIndex = index;
        finals.clear();
        return;
      case 'insert':
        upsert(change.newRow, index, rowKey(change.newRow, keyIndexes), change.newRow);
        return;
      case 'update': {
        const newKey = rowKey(change.newRow, keyIndexes);
        const oldKey = change.oldKey ? rowKey(change.oldKey, keyIndexes) : newKey;
        if (change.oldKey && oldKey !== newKey) {
          upsert(change.newRow, index, oldKey, change.oldKey);
          remove(change.oldKey, index);
        } else {
          upsert(change.newRow, index, newKey, change.newRow);
        }
        return;
      }
      case 'delete':
        remove(change.oldKey, index);
        return;
    }
  });
  return { truncateIndex, finals };
}
