// Counts what one batch applies to each table, by operation, and the last
// transaction of each table it holds: the batch writer records them with the
// batch (Catalog.finishBatch) in the statement that finishes it, so counting
// costs no catalog round trip of its own. Numbers while the batch is built (a
// bigint add per change would show), bigints once it is taken.
import type { TableApplied } from '../catalog/catalog.ts';
import type { DestinationTable, SourceTransaction } from '../connectors/records.ts';
import { formatTableName } from '../resources/mirror.ts';

interface Counts {
  inserts: number;
  updates: number;
  deletes: number;
  last: SourceTransaction;
}

export class TableTally {
  #tables = new Map<DestinationTable, Counts>();
  /** The table of the last change: most runs of changes are of one table. */
  #lastTable: DestinationTable | undefined;
  #lastCounts: Counts | undefined;

  count(table: DestinationTable, kind: 'insert' | 'update' | 'delete', transaction: SourceTransaction): void {
    let counts = table === this.#lastTable ? this.#lastCounts : this.#tables.get(table);
    if (!counts) {
      counts = { inserts: 0, updates: 0, deletes: 0, last: transaction };
      this.#tables.set(table, counts);
    }
    this.#lastTable = table;
    this.#lastCounts = counts;
    if (kind === 'insert') counts.inserts++;
    else if (kind === 'update') counts.updates++;
    else counts.deletes++;
    counts.last = transaction;
  }

  /** What was counted since the last take, one entry per table; starts over. */
  take(): TableApplied[] {
    const applied = [...this.#tables].map(([table, counts]) => ({
      sourceTable: formatTableName(table.source),
      inserts: BigInt(counts.inserts),
      updates: BigInt(counts.updates),
      deletes: BigInt(counts.deletes),
      lastLsn: counts.last.commitLsn,
      lastCommitTimeMicros: counts.last.commitTimeMicros,
    }));
    this.#tables = new Map();
    this.#lastTable = undefined;
    this.#lastCounts = undefined;
    return applied;
  }
}
