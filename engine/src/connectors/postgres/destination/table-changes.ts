// One table's changes of a batch as the PostgreSQL destination holds them from
// the moment they are decoded (Destination.changeBuffer), in the three parts
// it applies in order (destination.ts, #applyTable):
//
// 1. a truncate, when the batch has one: what came before it is dropped;
// 2. the rows inserted before any other change, as whole COPY lines for the
//    table itself (copy-rows.ts), when new rows may be COPYed there;
// 3. every change after those, folded per key into stage lines
//    (staged-changes.ts).
//
// Applying the parts one after the other leaves what applying every change in
// order would: part 3 meets the rows of part 2 at the destination, where an
// update that did not resend a TOASTed value keeps the value just inserted.

import { CopyTextRows } from '../../copy-rows.ts';
import type { ChangeBuffer, DestinationTable, RowChange } from '../../records.ts';
import { StagedChanges } from './staged-changes.ts';

export class PostgresTableChanges implements ChangeBuffer {
  readonly #table: DestinationTable;
  readonly #copiesNewRows: boolean;
  #truncated = false;
  #newRows: CopyTextRows | undefined;
  #staged: StagedChanges | undefined;

  /** `copiesNewRows`: leading inserts may be COPYed into the table itself (part 2); else they are staged. */
  constructor(table: DestinationTable, copiesNewRows: boolean) {
    this.#table = table;
    this.#copiesNewRows = copiesNewRows;
  }

  add(change: RowChange): number {
    if (change.kind === 'truncate') {
      this.#truncated = true;
      this.#newRows = undefined;
      this.#staged = undefined;
      return 0;
    }
    if (change.kind === 'insert' && this.#copiesNewRows && !this.#staged) {
      this.#newRows ??= new CopyTextRows(this.#table);
      return this.#newRows.add(change.newRow);
    }
    this.#staged ??= new StagedChanges(this.#table);
    return this.#staged.add(change);
  }

  /** The batch truncates the table before its rows below. */
  get truncated(): boolean {
    return this.#truncated;
  }

  /** New rows to COPY into the table, if any. */
  get newRows(): CopyTextRows | undefined {
    return this.#newRows;
  }

  /** Upserts and deletes to apply from a stage after the new rows, if any. */
  get staged(): StagedChanges | undefined {
    return this.#staged;
  }
}
