// Change batches for tests that call a destination's syncBatch directly: each
// table's changes held by the destination's own buffer (Destination.changeBuffer),
// as the pipeline hands a batch over.
import type { Destination } from '../../engine/src/connectors/destination.ts';
import type {
  ChangeBatch,
  ChangeBuffer,
  DestinationTable,
  RowChange,
} from '../../engine/src/connectors/records.ts';

export interface TableChangeList {
  readonly table: DestinationTable;
  readonly changes: readonly RowChange[];
}

/** `batch` with `tables`' changes held by `destination`; rowCount counts the row changes unless given. */
export function heldBatch<Held extends ChangeBuffer>(
  destination: Pick<Destination<Held>, 'changeBuffer'>,
  batch: Omit<ChangeBatch, 'tables' | 'rowCount'> & { readonly rowCount?: number },
  tables: readonly TableChangeList[],
): ChangeBatch<Held> {
  let rowCount = 0;
  const held = tables.map(({ table, changes }) => {
    const buffer = destination.changeBuffer(table);
    for (const change of changes) {
      buffer.add(change);
      if (change.kind !== 'truncate') rowCount++;
    }
    return { table, held: buffer };
  });
  return { ...batch, rowCount: batch.rowCount ?? rowCount, tables: held };
}
