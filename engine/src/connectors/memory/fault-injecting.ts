// Wraps a destination (a real connector, or the in-memory one) and makes chosen
// calls fail, to test failure paths: a destination down mid-run, one that made
// a batch durable and then lost the reply, one that refuses the first write of
// a phase, and one that never answers.
import type { Readable } from 'node:stream';
import { EngineError } from '../../errors.ts';
import type { Destination, DestinationTableState } from '../destination.ts';
import type { ChangeBatch, ChangeBuffer, Checkpoint, DestinationTable, TableAlteration } from '../records.ts';

/** The calls a fault can be injected into: one per pipeline phase that writes. */
export type FaultedCall = 'setupTables' | 'writeSnapshotPartition' | 'syncBatch';

export class FaultInjectingDestination<Held extends ChangeBuffer = ChangeBuffer>
  implements Destination<Held>
{
  readonly #inner: Destination<Held>;
  #failingSyncs = 0;
  #failingReplies = 0;
  #setupFault: EngineError | undefined;
  readonly #failing = new Map<FaultedCall, number>();
  readonly #holding = new Map<FaultedCall, number>();
  /** Releases each held call: it goes on to the inner destination. */
  #heldCalls: (() => void)[] = [];
  failedSyncCount = 0;
  syncedBatchIds: bigint[] = [];
  /** How many calls are held right now (waiting for `releaseHeld`). */
  heldCount = 0;
  constructor(inner: Destination<Held>) {
    this.#inner = inner;
  }

  /** The inner destination's, so batches reach it in the form it takes them. */
  changeBuffer(table: DestinationTable): Held {
    return this.#inner.changeBuffer(table);
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

  /**
   * The next `count` calls of `call` throw at once, before touching the inner
   * destination: a snapshot write then never reads its COPY stream, as a
   * destination that cannot open its batch file or its connection would.
   */
  failNext(call: FaultedCall, count: number): void {
    this.#failing.set(call, count);
  }

  /**
   * The next `count` calls of `call` never answer until `releaseHeld()`: a
   * destination that accepted the request and went silent (a snapshot write
   * reads nothing meanwhile).
   */
  holdNext(call: FaultedCall, count: number): void {
    this.#holding.set(call, count);
  }

  /** Lets every held call go on to the inner destination. */
  releaseHeld(): void {
    this.#holding.clear();
    const held = this.#heldCalls;
    this.#heldCalls = [];
    for (const release of held) release();
  }

  get failuresLeft(): number {
    return this.#failingSyncs;
  }

  /** Throws or holds as injected for `call`; resolves when the call may go on. */
  async #fault(call: FaultedCall): Promise<void> {
    const failing = this.#failing.get(call) ?? 0;
    if (failing > 0) {
      this.#failing.set(call, failing - 1);
      throw new EngineError('destination_write', `destination: injected failure of ${call}`);
    }
    const holding = this.#holding.get(call) ?? 0;
    if (holding > 0) {
      this.#holding.set(call, holding - 1);
      this.heldCount++;
      await new Promise<void>((resolve) => this.#heldCalls.push(resolve));
      this.heldCount--;
    }
  }

  async syncBatch(batch: ChangeBatch<Held>): Promise<void> {
    if (this.#failingSyncs > 0) {
      this.#failingSyncs--;
      this.failedSyncCount++;
      throw new EngineError('destination_write', 'destination: injected outage');
    }
    await this.#fault('syncBatch');
    await this.#inner.syncBatch(batch);
    if (this.#failingReplies > 0) {
      this.#failingReplies--;
      this.failedSyncCount++;
      throw new EngineError('connection', 'destination: injected loss of the reply');
    }
    this.syncedBatchIds.push(batch.batchId);
  }

  async setupTables(tables: readonly DestinationTable[]): Promise<void> {
    if (this.#setupFault) throw this.#setupFault;
    await this.#fault('setupTables');
    return this.#inner.setupTables(tables);
  }

  async writeSnapshotPartition(table: DestinationTable, copyText: Readable): Promise<number> {
    await this.#fault('writeSnapshotPartition');
    return this.#inner.writeSnapshotPartition(table, copyText);
  }

  check(): Promise<{ version: string }> {
    return this.#inner.check();
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
  tableStates(tables: readonly DestinationTable[]): Promise<DestinationTableState[]> {
    return this.#inner.tableStates(tables);
  }
  truncateTables(tables: readonly DestinationTable[]): Promise<void> {
    return this.#inner.truncateTables(tables);
  }
  readCheckpoint(mirror: string): Promise<Checkpoint | undefined> {
    return this.#inner.readCheckpoint(mirror);
  }
  refuseAlteration(alteration: TableAlteration): Promise<string | undefined> {
    return this.#inner.refuseAlteration(alteration);
  }
  alterColumns(alteration: TableAlteration): Promise<void> {
    return this.#inner.alterColumns(alteration);
  }
  removeCheckpoint(mirror: string): Promise<void> {
    return this.#inner.removeCheckpoint(mirror);
  }
}
