// Folds one table's changes in a batch into the final state per row key, the
// one algorithm every destination uses: the last change of a key wins, a key
// change deletes the old key, and unchanged-TOAST cells are filled from an
// earlier image of the same row in the batch when one exists. `coalesceChanges`
// gives the upserts and deletes that leaves (the in-memory destination; the
// PostgreSQL destination folds the same way over the stage lines it holds, at
// the write, postgres/destination/staged-changes.ts, whose test holds the two to one result);
// the ClickHouse (for the changes after a batch's new rows) and Snowflake
// destinations take `finalStates` itself, for the
// index of each final change (its row version) and the image a delete removed.
// Kafka keeps every change and folds nothing.
import type { Row, RowChange, RowChangeImages, TupleCell } from './records.ts';
import { filledRow } from './rows.ts';

/** A row as the batch left it; unchanged cells still in it come from the destination row of `fillKey`. */
export interface RowState {
  readonly row: Row;
  /** A key image: the row's own key, or the old key when an update changed it. */
  readonly fillKey: Row;
}

export type FinalState =
  | ({ readonly op: 'upsert'; readonly index: number } & RowState)
  | {
      readonly op: 'delete';
      /** The key image (or the whole old row with REPLICA IDENTITY FULL). */
      readonly key: Row;
      /** The row as an earlier change of this batch left it, if one did. */
      readonly last: RowState | undefined;
      readonly index: number;
    };

export interface TableFinalStates {
  /** Index of the last truncate, when the batch truncates the table. */
  readonly truncateIndex: number | undefined;
  /** Final state per key (rowKey), after the last truncate, in the order keys were first touched. */
  readonly finals: ReadonlyMap<string, FinalState>;
}

export interface CoalescedChanges {
  /** A truncate happened; apply it before the rows below. */
  readonly truncated: boolean;
  /** In the order of the change that left each row. */
  readonly upserts: readonly Row[];
  /** Key images (key cells set, others possibly null) of rows to delete, in the order of their deletes. */
  readonly deletes: readonly Row[];
}

/**
 * A string that is equal for two rows exactly when their key cells are. A
 * one-column key (the usual case, met once or twice for every change) is its
 * own cell, with nothing built; null is NUL there, which a PostgreSQL text
 * value never holds.
 */
export function rowKey(row: Pick<Row, 'cell'>, keyIndexes: readonly number[]): string {
  if (keyIndexes.length === 1) {
    const cell: TupleCell = row.cell(keyIndexes[0] as number);
    return typeof cell === 'string' ? cell : '\u0000';
  }
  let key = '';
  for (const index of keyIndexes) {
    const cell = row.cell(index);
    // \u0001 marks null so that null and the empty string differ; \u0000 separates.
    key += `${typeof cell === 'string' ? cell : '\u0001'}\u0000`;
  }
  return key;
}

/** `index` in each final state is the position of the change that produced it in `changes`. */
export function finalStates(
  changes: readonly RowChangeImages[],
  keyIndexes: readonly number[],
): TableFinalStates {
  let truncateIndex: number | undefined;
  const finals = new Map<string, FinalState>();
  const stateOf = (key: string): RowState | undefined => {
    const state = finals.get(key);
    return state?.op === 'upsert' ? state : state?.last;
  };
  /** `row` (whose key is `key`) follows the row at `previousKey` (its own key, or the old one after a key change). */
  const upsert = (row: Row, key: string, index: number, previousKey: string, previousKeyImage: Row) => {
    const previous = stateOf(previousKey);
    finals.set(key, {
      op: 'upsert',
      row: previous ? filledRow(row, previous.row) : row,
      fillKey: previous?.fillKey ?? previousKeyImage,
      index,
    });
  };
  const remove = (keyImage: Row, index: number) => {
    const key = rowKey(keyImage, keyIndexes);
    finals.set(key, { op: 'delete', key: keyImage, last: stateOf(key), index });
  };

  for (let index = 0; index < changes.length; index++) {
    const change = changes[index] as RowChangeImages;
    switch (change.kind) {
      case 'truncate':
        truncateIndex = index;
        finals.clear();
        break;
      case 'insert': {
        const key = rowKey(change.newRow, keyIndexes);
        upsert(change.newRow, key, index, key, change.newRow);
        break;
      }
      case 'update': {
        const newKey = rowKey(change.newRow, keyIndexes);
        const oldKey = change.oldKey ? rowKey(change.oldKey, keyIndexes) : newKey;
        if (change.oldKey && oldKey !== newKey) {
          upsert(change.newRow, newKey, index, oldKey, change.oldKey);
          remove(change.oldKey, index);
        } else {
          upsert(change.newRow, newKey, index, newKey, change.newRow);
        }
        break;
      }
      case 'delete':
        remove(change.oldKey, index);
        break;
    }
  }
  return { truncateIndex, finals };
}

/** The final states as rows to upsert and keys to delete, each in the order of its last change. */
export function coalesceChanges(
  changes: readonly RowChange[],
  keyIndexes: readonly number[],
): CoalescedChanges {
  const { truncateIndex, finals } = finalStates(changes, keyIndexes);
  // One change leaves at most one upsert and one delete: slots by change index keep their order.
  const upsertAt: (Row | undefined)[] = new Array(changes.length);
  const deleteAt: (Row | undefined)[] = new Array(changes.length);
  for (const state of finals.values()) {
    if (state.op === 'upsert') upsertAt[state.index] = state.row;
    else deleteAt[state.index] = state.key;
  }
  return {
    truncated: truncateIndex !== undefined,
    upserts: upsertAt.filter((row) => row !== undefined),
    deletes: deleteAt.filter((row) => row !== undefined),
  };
}
