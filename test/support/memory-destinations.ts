// In-memory destinations for the pipeline's unit tests
// (engine/src/connectors/memory/ holds the destination itself).
import { MemoryDestination } from '../../engine/src/connectors/memory/destination.ts';
import type { ChangeBatch, ChangeList, DestinationTable } from '../../engine/src/connectors/records.ts';

/** A MemoryDestination with these tables set up. */
export async function memoryDestinationOf(tables: readonly DestinationTable[]): Promise<MemoryDestination> {
  const destination = new MemoryDestination();
  await destination.setupTables(tables);
  return destination;
}

/**
 * A MemoryDestination whose batch writes wait until the test releases them,
 * one at a time: for tests of what the pipeline does while a batch is in flight.
 */
export class GatedDestination extends MemoryDestination {
  #gates: (() => void)[] = [];
  readonly writesStarted: bigint[] = [];

  override async syncBatch(batch: ChangeBatch<ChangeList>): Promise<void> {
    this.writesStarted.push(batch.batchId);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
    await super.syncBatch(batch);
  }

  /** Lets the oldest waiting write go on. */
  release(): void {
    const gate = this.#gates.shift();
    if (!gate) throw new Error('no write is waiting');
    gate();
  }
}
