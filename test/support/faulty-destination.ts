// Wraps a real destination and makes chosen calls fail, to test failure paths
// (destination down mid-run) against real servers.
import type { Readable } from 'node:stream';
import type { Destination, DestinationTableState } from '../../engine/src/connectors/destination.ts';
import type { ChangeBatch, Checkpoint, DestinationTable } from '../../engine/src/connectors/records.ts';
import { EngineError } from '../../engine/src/errors.ts';

export class FaultInjectingDestination implements Destination {
  readonly #inner: Destination;
  #failingSyncs = 0;
  failedSyncCount = 0;
  syncedBatchIds: bigint[] = [];

  constructor(inner: Destination) {
    this.#inner = inner;
  }

  /**
   * The next `count` syncBatch calls fail as if the destination were down
   * (Infinity: until called again; 0 ends the outage).
   */
  failNextSyncs(count: number): void {
    this.#failingSyncs = count;
  }

  get failuresLeft(): number {
    return this.#failingSyncs;
  }

  async syncBatch(batch: ChangeBatch): Promise<void> {
    if (this.#failingSyncs > 0) {
      this.#failingSyncs--;
      this.failedSyncCount++;
      throw new EngineError('destination_write', 'destination: injected outage');
    }
    await this.#inner.syncBatch(batch);
    this.syncedBatchIds.push(batch.batchId);
  }

  check(): Promise<{ version: string }> {
    return this.#inner.check();
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
  setupTables(tables: readonly DestinationTable[]): Promise<void> {
    return this.#inner.setupTables(tables);
  }
  tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return this.#inner.tableStates(tables);
  }
  truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    return this.#inner.truncateTables(tables);
  }
  writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    return this.#inner.writeSnapshotPartition(table, copyText);
  }
  readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    return this.#inner.readCheckpoint(mirror);
  }
  addColumns(table: DestinationTable, columns: DestinationTable['columns']): Promise<void> {
    return this.#inner.addColumns(table, columns);
  }
  removeCheckpoint(mirror: string): Promise<void> {
    return this.#inner.removeCheckpoint(mirror);
  }
}
