// Wraps a destination (a real connector, or the in-memory one) and makes chosen
// calls fail, to test failure paths: a destination down mid-run, or one that
// made a batch durable and then lost the reply.
import type { Readable } from 'node:stream';
import { EngineError } from '../../errors.ts';
import type { Destination, DestinationTableState } from '../destination.ts';
import type { ChangeBatch, ChangeBuffer, Checkpoint, DestinationTable } from '../records.ts';

export class FaultInjectingDestination implements Destination {
  readonly #inner: Destination;
  #failingSyncs = 0;
  #failingReplies = 0;
  #setupFault: EngineError | undefined;
  failedSyncCount = 0;
  syncedBatchIds: bigint[] = [];
  /** The inner destination's, so batches reach it in the form it takes them. */
  readonly changeBuffer: ((table: DestinationTable) => ChangeBuffer) | undefined;

  constructor(inner: Destination) {
    this.#inner = inner;
    this.changeBuffer = inner.changeBuffer?.bind(inner);
  }

  /**
   * The next `count` syncBatch calls fail as if the destination were down
   * (Infinity: until called again; 0 ends the outage).
   */
  failNextSyncs(count: number): void {
    this.#failingSyncs = count;
  }

  /**
   * The next `count` syncBatch calls reach the destination, which makes the
   * batch durable, and then fail as if the connection dropped before the reply.
   */
  failNextRepliesAfterSync(count: number): void {
    this.#failingReplies = count;
  }

  /**
   * Every setupTables call fails with `fault` (the first step a start, a
   * resume or a retry reaches the destination with) until called with undefined.
   */
  failSetup(fault: EngineError | undefined): void {
    this.#setupFault = fault;
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
    if (this.#failingReplies > 0) {
      this.#failingReplies--;
      this.failedSyncCount++;
      throw new EngineError('connection', 'destination: injected loss of the reply');
    }
    this.syncedBatchIds.push(batch.batchId);
  }

  check(): Promise<{ version: string }> {
    return this.#inner.check();
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
  setupTables(tables: readonly DestinationTable[]): Promise<void> {
    if (this.#setupFault) return Promise.reject(this.#setupFault);
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
