// A destination held in memory, for engine tests of the pipeline's batching,
// skipping and acknowledgement without a server. It keeps the Destination
// contract (destination.ts) to the letter: "durable" means stored in this
// object, a batch and its checkpoint are stored together (synchronously, so
// nothing can observe one without the other), and a replayed batch whose id is
// at or below the checkpoint changes nothing. Rows are the final state per key,
// folded with coalesceChanges, the fold a PostgreSQL destination applies;
// unchanged-TOAST cells keep the stored value. Mirror columns (soft delete,
// synced-at) are not modelled.
import type { Readable } from 'node:stream';
import { EngineError } from '../../errors.ts';
import { formatTableName } from '../../resources/mirror.ts';
import { coalesceChanges, rowKey } from '../coalesce.ts';
import { copyTextRowBatches } from '../copy-text.ts';
import type { Destination, DestinationTableState } from '../destination.ts';
import {
  type ChangeBatch,
  ChangeList,
  type Checkpoint,
  type DestinationTable,
  fillUnchanged,
  keyIndexes,
  type RowImage,
  type SourceColumn,
  type TableAlteration,
} from '../records.ts';
import { rowOfCells } from '../rows.ts';

interface StoredTable {
  columns: SourceColumn[];
  readonly keyColumns: readonly string[];
  /** By rowKey of the key columns, in insertion order. */
  readonly rows: Map<string, RowImage>;
}

export class MemoryDestination implements Destination<ChangeList> {
  readonly #tables = new Map<string, StoredTable>();
  readonly #checkpoints = new Map<string, Checkpoint>();
  /** Ids of the batches applied (not those recognised as replays), in order. */
  readonly appliedBatchIds: bigint[] = [];
  /** Ids of batches that were replays of a durable one and changed nothing. */
  readonly replayedBatchIds: bigint[] = [];

  async check(): Promise<{ version: string }> {
    return { version: 'memory' };
  }

  changeBuffer(): ChangeList {
    return new ChangeList();
  }

  async close(): Promise<void> {}

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    for (const table of tables) {
      const name = formatTableName(table.destination);
      if (this.#tables.has(name)) continue;
      this.#tables.set(name, { columns: [...table.columns], keyColumns: table.keyColumns, rows: new Map() });
    }
  }

  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return tables.map((table) => {
      const stored = this.#tables.get(formatTableName(table.destination));
      if (!stored) return 'absent';
      return stored.rows.size > 0 ? 'populated' : 'empty';
    });
  }

  async truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    for (const table of tables) this.#stored(table).rows.clear();
  }

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    const stored = this.#stored(table);
    const keys = keyIndexes(table);
    let rowCount = 0;
    for await (const rows of copyTextRowBatches(copyText, table)) {
      for (const row of rows) {
        stored.rows.set(rowKey(rowOfCells(row), keys), this.#widen(stored, row));
        rowCount++;
      }
    }
    return rowCount;
  }

  async syncBatch(batch: ChangeBatch<ChangeList>): Promise<void> {
    const checkpoint = this.#checkpoints.get(batch.mirror);
    if (checkpoint && batch.batchId <= checkpoint.batchId) {
      this.replayedBatchIds.push(batch.batchId);
      return;
    }
    // Everything below runs without an await: the rows and the checkpoint
    // become durable together or not at all.
    const applied = batch.tables.map(({ table, held }) => ({
      stored: this.#stored(table),
      keys: keyIndexes(table),
      coalesced: coalesceChanges(held.changes, keyIndexes(table)),
    }));
    for (const { stored, keys, coalesced } of applied) {
      if (coalesced.truncated) stored.rows.clear();
      for (const key of coalesced.deletes) stored.rows.delete(rowKey(key, keys));
      for (const row of coalesced.upserts) {
        const key = rowKey(row, keys);
        const previous = stored.rows.get(key);
        const widened = this.#widen(stored, row.cells());
        stored.rows.set(key, previous ? fillUnchanged(widened, previous) : widened);
      }
    }
    this.#checkpoints.set(batch.mirror, {
      batchId: batch.batchId,
      lsn: batch.endLsn,
      transactionPosition: batch.transactionPosition,
    });
    this.appliedBatchIds.push(batch.batchId);
  }

  async readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    return this.#checkpoints.get(mirror);
  }

  async refuseAlteration(_alteration: TableAlteration): Promise<string | undefined> {
    return undefined;
  }

  async alterColumns({ before, changes }: TableAlteration): Promise<void> {
    const stored = this.#stored(before);
    for (const change of changes) {
      const index = (name: string) => stored.columns.findIndex((column) => column.name === name);
      switch (change.kind) {
        case 'add':
          if (index(change.column.name) < 0) stored.columns.push(change.column);
          break;
        case 'drop': {
          const at = index(change.name);
          if (at < 0) break;
          stored.columns.splice(at, 1);
          for (const [key, row] of stored.rows)
            stored.rows.set(
              key,
              row.filter((_, cell) => cell !== at),
            );
          break;
        }
        case 'rename': {
          const at = index(change.from);
          const column = stored.columns[at];
          if (column && index(change.to) < 0) stored.columns[at] = { ...column, name: change.to };
          break;
        }
        case 'retype': {
          const at = index(change.name);
          if (at >= 0) stored.columns[at] = change.after;
          break;
        }
      }
    }
  }

  async removeCheckpoint(mirror: string): Promise<void> {
    this.#checkpoints.delete(mirror);
  }

  /** The stored rows of a destination table (`schema.table`), in first-write order, null cells padded. */
  rows(destinationTable: string): RowImage[] {
    const stored = this.#tables.get(destinationTable);
    if (!stored) throw new EngineError('config', `memory destination: no table ${destinationTable}`);
    return [...stored.rows.values()].map((row) => this.#widen(stored, row));
  }

  /** The column names of a destination table as stored. */
  columns(destinationTable: string): string[] {
    return this.#tables.get(destinationTable)?.columns.map((column) => column.name) ?? [];
  }

  #stored(table: DestinationTable): StoredTable {
    const stored = this.#tables.get(formatTableName(table.destination));
    // As a server would: writing to a table that was never set up fails.
    if (!stored) {
      throw new EngineError(
        'schema_mismatch',
        `memory destination: table ${formatTableName(table.destination)} does not exist`,
      );
    }
    return stored;
  }

  /** A row padded with nulls to the stored columns (columns added after it was written). */
  #widen(stored: StoredTable, row: readonly RowImage[number][]): RowImage {
    if (row.length >= stored.columns.length) return row;
    return [...row, ...new Array<null>(stored.columns.length - row.length).fill(null)];
  }
}
