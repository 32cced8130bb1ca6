// Writes the batches a BatchBuilder fills to the destination, in order, one
// at a time: the one batch in flight is written while the next is built, and a
// batch is handed over only once the one before it is durable. It numbers the
// batches (one more than the last, starting after the checkpoint's), records
// each in the catalog as it opens and once it is durable (with the rows it
// applied to each table, in the same statement), and then tells the
// acknowledgements (acknowledgements.ts) that its last complete commit may be
// acknowledged. A write that fails stays the batch in flight: every later
// wait for it throws its error, nothing more is written or acknowledged, and
// the mirror's next run starts from the destination's checkpoint.
import type { BatchBackfill, Catalog, TableApplied } from '../catalog/catalog.ts';
import type { Destination } from '../connectors/destination.ts';
import type { ChangeBatch, DestinationTable, TableSwap } from '../connectors/records.ts';
import type { PipelineMetrics } from '../observability/engine-metrics.ts';
import type { Acknowledgements } from './acknowledgements.ts';
import type { BatchBuilder } from './batch-builder.ts';
import type { ProgressListener } from './context.ts';

/**
 * The online backfills' progress rides with the batches (pipeline/backfill/):
 * taken as a batch is cut, recorded on its catalog record before the
 * destination writes it (so the record of the destination's checkpoint batch
 * always holds it), and reported durable after.
 */
export interface BatchBackfillHooks {
  /** The progress as of the batch being cut; undefined when no table loads. */
  progress(): BatchBackfill | undefined;
  /** Records it on the batch's record (Catalog.recordBatchBackfill). */
  record(batchId: bigint, progress: BatchBackfill): Promise<void>;
  /** The batch recorded with `progress` is durable. */
  durable(progress: BatchBackfill): Promise<void>;
  /**
   * The resyncs `progress` completes, whose shadows replace their live tables
   * in the batch that records it (ChangeBatch.swaps); each is given once, and
   * its changes stop going to the shadow from then on.
   */
  swaps(progress: BatchBackfill): readonly TableSwap[];
}

export interface BatchWriterOptions {
  readonly mirror: string;
  readonly destination: Pick<Destination, 'syncBatch'>;
  /** Where batches are recorded as they start and finish. */
  readonly batches: Pick<Catalog, 'startBatch' | 'finishBatch'>;
  /** The batch being built; the writer takes it when it is cut. */
  readonly builder: BatchBuilder;
  readonly acknowledgements: Acknowledgements;
  /** The id of the last batch the destination holds (its checkpoint's). */
  readonly lastBatchId: bigint;
  readonly metrics?: PipelineMetrics | undefined;
  readonly progress?: ProgressListener | undefined;
  readonly backfill?: BatchBackfillHooks | undefined;
  /** Runs a destination write as a step watched for stalls (MirrorContext.watchdog). */
  readonly watch?: (<T>(step: string, work: () => Promise<T>) => Promise<T>) | undefined;
  readonly onBatchSynced?:
    | ((batch: { batchId: bigint; rowCount: number; endLsn: bigint }) => void)
    | undefined;
}

export class BatchWriter {
  readonly #options: BatchWriterOptions;
  readonly #builder: BatchBuilder;
  /** The last batch made durable (or the checkpoint's). */
  #lastBatchId: bigint;
  /** The id of the batch being built: the last one handed out, ahead of #lastBatchId while one is in flight. */
  #openBatchId: bigint;
  /** The batch being written, if any: resolves once it is durable and acknowledged. */
  #inFlight: Promise<void> | undefined;

  constructor(options: BatchWriterOptions) {
    this.#options = options;
    this.#builder = options.builder;
    this.#lastBatchId = options.lastBatchId;
    this.#openBatchId = options.lastBatchId;
  }

  /** The id of the last batch made durable (or of the checkpoint's). */
  get lastBatchId(): bigint {
    return this.#lastBatchId;
  }

  /**
   * The write of the batch in flight, if any: resolves once it is durable and
   * acknowledged, rejects with the destination's error.
   */
  get writing(): Promise<void> | undefined {
    return this.#inFlight;
  }

  /**
   * Called after the builder took a change: records the batch it opened, and
   * cuts it when it is full. Returns a promise only then (most changes need no wait).
   */
  added(opened: boolean, lsn: bigint): Promise<void> | undefined {
    if (!opened && !this.#builder.isFull) return undefined;
    return this.#afterAdd(opened, lsn);
  }

  /**
   * Called after the builder took the rows of a backfill chunk, all of them
   * (`opened`: the first opened the batch): records the batch it opened, then
   * cuts it when full. A chunk is never split between batches: the backfill's
   * progress recorded with a batch moves past the whole chunk at once.
   */
  async addedChunk(opened: boolean, lsn: bigint): Promise<void> {
    await this.#afterAdd(opened, lsn);
  }

  /**
   * Hands what is buffered, if anything, to the destination, after the batch
   * in flight is durable; returns once the new batch is being written.
   */
  async cut(): Promise<void> {
    const builder = this.#builder;
    if (builder.isEmpty) return;
    await this.#inFlight;
    const recordedEndLsn = builder.recordedEndLsn;
    const taken = builder.take(this.#options.mirror, this.#openBatchId);
    const applied = builder.takeApplied();
    const backfill = this.#options.backfill?.progress();
    const swaps = backfill ? (this.#options.backfill?.swaps(backfill) ?? []) : [];
    const batch = swaps.length > 0 ? { ...taken, swaps } : taken;
    this.#options.acknowledgements.writeStarted();
    const write = this.#write(batch, recordedEndLsn, applied, backfill);
    this.#inFlight = write;
    // Observed by whoever awaits it next (cut, flush, or the caller's race);
    // this handler only keeps an unobserved failure from being reported as unhandled.
    write.catch(() => {});
  }

  /** Syncs what is buffered and waits until every batch is durable and acknowledged. */
  async flush(): Promise<void> {
    await this.cut();
    await this.#inFlight;
  }

  /**
   * With nothing buffered: records `progress` on the last durable batch once
   * the batch in flight is durable, and reports it durable. The backfill's
   * progress moved without a row to write (a chunk that held none), and the
   * destination is as of the stream's position already. Throws a failed write's error.
   */
  async recordAtRest(progress: BatchBackfill): Promise<void> {
    const hooks = this.#options.backfill;
    if (!hooks) return;
    await this.#inFlight;
    const swaps = hooks.swaps(progress);
    if (swaps.length > 0) {
      // A resync completes with nothing to write: a batch of its swaps alone
      // carries them, with the checkpoint, at the position at rest.
      this.#openBatchId += 1n;
      const endLsn = this.#builder.lastCompleteCommitLsn;
      await this.#options.batches.startBatch(this.#options.mirror, {
        batchId: this.#openBatchId,
        startTime: new Date(),
        startLsn: endLsn,
      });
      this.#options.acknowledgements.writeStarted();
      const write = this.#write(
        { mirror: this.#options.mirror, batchId: this.#openBatchId, endLsn, tables: [], rowCount: 0, swaps },
        endLsn,
        [],
        progress,
      );
      this.#inFlight = write;
      await write;
      return;
    }
    if (this.#lastBatchId > 0n) await hooks.record(this.#lastBatchId, progress);
    await hooks.durable(progress);
  }

  /** Waits for the batch in flight to finish, successfully or not; never throws. */
  async settle(): Promise<void> {
    await this.#inFlight?.catch(() => {});
  }

  /**
   * Before `table`'s shape changes: the changes buffered for it go to the
   * destination under the old shape, and no batch is left in flight when
   * this resolves (a table must not change under a write, and a table held
   * at its change has every earlier change durable).
   */
  async beforeSchemaChange(table: DestinationTable): Promise<void> {
    if (this.#builder.hasChangesFor(table)) await this.cut();
    await this.#inFlight;
  }

  async #afterAdd(opened: boolean, lsn: bigint): Promise<void> {
    if (opened) {
      this.#openBatchId += 1n;
      await this.#options.batches.startBatch(this.#options.mirror, {
        batchId: this.#openBatchId,
        startTime: new Date(),
        startLsn: lsn,
      });
    }
    if (this.#builder.isFull) await this.cut();
  }

  async #write(
    batch: ChangeBatch,
    recordedEndLsn: bigint,
    applied: readonly TableApplied[],
    backfill: BatchBackfill | undefined,
  ): Promise<void> {
    const { mirror, destination, batches, watch } = this.#options;
    const started = performance.now();
    if (backfill) await this.#options.backfill?.record(batch.batchId, backfill);
    const sync = () => destination.syncBatch(batch);
    await (watch ? watch(`CDC: destination: sync batch ${batch.batchId}`, sync) : sync());
    this.#options.metrics?.batchSynced(mirror, batch.rowCount, (performance.now() - started) / 1000);
    this.#lastBatchId = batch.batchId;
    await batches.finishBatch(mirror, {
      batchId: batch.batchId,
      endTime: new Date(),
      rowCount: BigInt(batch.rowCount),
      endLsn: recordedEndLsn,
      // Each table's rows and last position: counted in the statement that
      // finishes the batch, once it is durable, never a write per change.
      tables: applied,
    });
    if (backfill) await this.#options.backfill?.durable(backfill);
    this.#options.progress?.durable();
    this.#options.acknowledgements.durable(batch.endLsn);
    this.#inFlight = undefined;
    this.#options.onBatchSynced?.({ batchId: batch.batchId, rowCount: batch.rowCount, endLsn: batch.endLsn });
  }
}
