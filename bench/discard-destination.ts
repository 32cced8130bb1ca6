// A destination that keeps nothing: it counts what it is given, so benchmarks
// measure the engine and the source, not a destination server.
import type { Readable } from 'node:stream';
import type { Destination, DestinationTableState } from '../engine/src/connectors/destination.ts';
import {
  type ChangeBatch,
  ChangeList,
  type Checkpoint,
  type DestinationTable,
  type TableAlteration,
} from '../engine/src/connectors/records.ts';

export class DiscardDestination implements Destination<ChangeList> {
  snapshotRowCount = 0;
  changeCount = 0;
  #checkpoint: Checkpoint | undefined;
  #onChange: ((changeCount: number) => void) | undefined;

  /** Called after every batch with the running count of changes. */
  onChanges(listener: (changeCount: number) => void): void {
    this.#onChange = listener;
  }

  async check(): Promise<{ version: string }> {
    return { version: 'discard' };
  }
  async close(): Promise<void> {}
  async setupTables(_tables: readonly DestinationTable[]): Promise<void> {}
  async tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return tables.map(() => 'absent');
  }
  async truncateTables(_tables: readonly DestinationTable[]): Promise<void> {}

  async writeSnapshotPartition(_table: DestinationTable, copyText: Readable): Promise<number> {
    let rows = 0;
    for await (const chunk of copyText) {
      const bytes = chunk as Buffer;
      for (let index = bytes.indexOf(10); index !== -1; index = bytes.indexOf(10, index + 1)) rows++;
    }
    this.snapshotRowCount += rows;
    return rows;
  }

  changeBuffer(): ChangeList {
    return new ChangeList();
  }

  async syncBatch(batch: ChangeBatch<ChangeList>): Promise<void> {
    this.changeCount += batch.rowCount;
    this.#checkpoint = { batchId: batch.batchId, lsn: batch.endLsn };
    this.#onChange?.(this.changeCount);
  }

  async readCheckpoint(_mirror: string): Promise<Checkpoint | undefined> {
    return this.#checkpoint;
  }
  async refuseAlteration(_alteration: TableAlteration): Promise<string | undefined> {
    return undefined;
  }
  async alterColumns(_alteration: TableAlteration): Promise<void> {}
  async removeCheckpoint(_mirror: string): Promise<void> {
    this.#checkpoint = undefined;
  }
}
