// One table's changes of a batch as the ClickHouse destination holds them from
// the moment they are decoded (Destination.changeBuffer), in two parts that
// apply.ts writes in order:
//
// 1. the rows inserted before any other change, as the source's TupleData
//    (tuple-rows.ts): written from those bytes by the table's one encoder
//    (row-writer.ts), each at the version of its own change, with no final
//    state made;
// 2. every change after those, as records, folded into final states at the
//    write (coalesce.ts).
//
// A change keeps its index among the table's changes in the batch whichever
// part holds it, so the versions written are those of applying every change in
// order, and a replayed batch writes them again. Part 2 meets the rows of part
// 1 at the destination, where an update that did not resend a TOASTed value
// reads the value just inserted. A truncate drops part 1, as applying it in
// order would have.
import { type ChangeBuffer, changeHeapBytes, type DestinationTable, type RowChange } from '../records.ts';
import { TupleDataRows } from '../tuple-rows.ts';

export class ClickHouseTableChanges implements ChangeBuffer {
  readonly #table: DestinationTable;
  #changeCount = 0;
  #newRows: TupleDataRows | undefined;
  #later: RowChange[] | undefined;
  #laterFirstIndex = 0;

  constructor(table: DestinationTable) {
    this.#table = table;
  }

  add(change: RowChange): number {
    const index = this.#changeCount++;
    if (change.kind === 'insert' && this.#later === undefined) {
      this.#newRows ??= new TupleDataRows(this.#table);
      return this.#newRows.add(change.newRow);
    }
    if (change.kind === 'truncate') {
      this.#newRows = undefined;
      this.#later = undefined;
    }
    if (this.#later === undefined) {
      this.#later = [];
      this.#laterFirstIndex = index;
    }
    this.#later.push(change);
    return changeHeapBytes(change);
  }

  /** The leading inserts as TupleData, the first at index 0; undefined when there are none. */
  get newRows(): TupleDataRows | undefined {
    return this.#newRows;
  }

  /** The changes after the leading inserts, and the index of the first among the table's changes. */
  get later(): { readonly changes: readonly RowChange[]; readonly firstIndex: number } | undefined {
    return this.#later && { changes: this.#later, firstIndex: this.#laterFirstIndex };
  }
}
