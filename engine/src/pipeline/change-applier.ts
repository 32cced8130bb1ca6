import type { SourceMessage, StreamEvent } from '../connectors/changes.ts';
import type { Destination } from '../connectors/destination.ts';
import type {
  Checkpoint,
  DestinationTable,
  RowChange,
  RowChangeImages,
  SourceTransaction,
  TableSwap,
} from '../connectors/records.ts';
import { EngineError } from '../errors.ts';
import { formatLsn } from '../model/lsn.ts';
import { formatTableName } from '../resources/mirror.ts';
import { Acknowledgements } from './acknowledgements.ts';
import type { Backfill, EmittedChunk } from './backfill/backfill.ts';
import { BatchBuilder, type BatchLimits } from './batch-builder.ts';
import { BatchWriter, type BatchWriterOptions } from './batch-writer.ts';
import { projectRow, type RelationTracker, type TrackedRelation, updatedRow } from './relations.ts';
import type { ReplicationDelay } from './replication-delay.ts';
import { SchemaEvolution, type SchemaEvolutionOptions } from './schema-evolution.ts';
import { TransactionFilter } from './transaction-filter.ts';

/**
 * After a restart inside a huge transaction, the first batch of its new
 * changes is cut at this many rows: reading past what the destination holds
 * takes a while, and a small first step is durable soon after, so even faults
 * that come again quickly leave the mirror further on each time.
 */
export const resumeStepRows = 10_000;

export interface ChangeApplierOptions
  extends Omit<BatchWriterOptions, 'destination' | 'builder' | 'acknowledgements' | 'lastBatchId'>,
    Omit<SchemaEvolutionOptions, 'destination' | 'beforeChange'> {
  readonly destination: Destination;
  /** Reports everything before a position as durable to the source (ChangeStream.acknowledge). */
  readonly acknowledge: (lsn: bigint) => void;
  readonly limits: BatchLimits;
  /** The destination's checkpoint: what is durable there already. */
  readonly checkpoint: Checkpoint;
  /**
   * Per source table (`schema.table`): apply its changes only from transactions
   * committed at or after this LSN (its initial load holds the earlier ones).
   */
  readonly tableStartLsns?: ReadonlyMap<string, bigint> | undefined;
  /** Told each transaction that begins and is not durable already (replication-delay.ts). */
  readonly replicationDelay?: ReplicationDelay | undefined;
  /**
   * The online backfill of tables added while the mirror streams: their
   * changes go through it, and its chunks enter the batch at transaction
   * boundaries (pipeline/backfill/). Its progress rides with the batches
   * through `backfill` (BatchWriterOptions).
   */
  readonly loading?: Backfill | undefined;
  /**
   * Source tables (`schema.table`) stopped on a fault of their own (state
   * `errored`, pipeline/table-faults.ts): their changes are not applied,
   * while the other tables' are; their status says so.
   */
  readonly stoppedTables?: ReadonlySet<string> | undefined;
  /**
   * Tables resynced online, by source table (`schema.table`): each change of
   * one is applied to the live table and, as `loading` decides for the
   * shadow, to the shadow, always in the same batch. An entry leaves once its
   * swap is in a batch (cdc.ts), and the live table alone takes the changes.
   */
  readonly resyncShadows?: ReadonlyMap<string, TableSwap> | undefined;
  /**
   * Told of each TRUNCATE of a mapped table applied, with its transaction:
   * what gave a partitioned table's partitions new storage (partition-watch.ts).
   */
  readonly truncated?: ((table: DestinationTable, xid: number) => void) | undefined;
}

export class ChangeApplier {
  readonly #options: ChangeApplierOptions;
  readonly #filter: TransactionFilter;
  readonly #schema: SchemaEvolution;
  /** The schema's relation tracker, read for every change. */
  readonly #relations: RelationTracker;
  readonly #builder: BatchBuilder;
  readonly #writer: BatchWriter;
  readonly #acknowledgements: Acknowledgements;
  readonly #loading: Backfill | undefined;
  readonly #stopped: ReadonlySet<string>;
  readonly #resyncs: ReadonlyMap<string, TableSwap>;
  /** Shadows written as their live table (ShadowTables.intoLive), to it. */
  readonly #intoLive: ReadonlyMap<DestinationTable, DestinationTable>;

  constructor(options: ChangeApplierOptions) {
    this.#options = options;
    this.#loading = options.loading;
    this.#stopped = options.stoppedTables ?? new Set();
    this.#resyncs = options.resyncShadows ?? new Map();
    const intoLive = options.destination.shadowTables?.intoLive === true;
    this.#intoLive = new Map(
      intoLive ? [...this.#resyncs.values()].map(({ live, shadow }) => [shadow, live] as const) : [],
    );
    const { checkpoint, destination } = options;
    this.#builder = new BatchBuilder(options.limits, checkpoint.lsn, (table) =>
      destination.changeBuffer(table),
    );
    for (const { shadow } of this.#resyncs.values()) this.#builder.doNotCount(shadow);
    this.#acknowledgements = new Acknowledgements(options.acknowledge);
    this.#writer = new BatchWriter({
      ...options,
      builder: this.#builder,
      acknowledgements: this.#acknowledgements,
      lastBatchId: checkpoint.batchId,
    });
    this.#filter = new TransactionFilter({
      durableLsn: checkpoint.lsn,
      resumeFrom: checkpoint.transactionPosition,
      tableStartLsns: options.tableStartLsns ?? new Map(),
      onResumed: () => this.#builder.limitThisBatch(Math.min(resumeStepRows, options.limits.maxRows)),
    });
    this.#schema = new SchemaEvolution({
      ...options,
      beforeChange: (table) => this.#writer.beforeSchemaChange(table),
      isLoading: (table) => this.#loading?.loads(table) === true,
    });
    this.#relations = this.#schema.relations;
  }

  /** Nothing is buffered. */
  get isEmpty(): boolean {
    return this.#builder.isEmpty;
  }

  /** How long the buffered batch has been open (0 when empty). */
  ageMs(now: number): number {
    return this.#builder.ageMs(now);
  }

  /** Between transactions: what is buffered ends at a commit. */
  get atTransactionBoundary(): boolean {
    return this.#filter.atBoundary;
  }

  /** The id of the last batch made durable (or of the checkpoint's). */
  get lastBatchId(): bigint {
    return this.#writer.lastBatchId;
  }

  /**
   * The write of the batch in flight, if any: resolves once it is durable and
   * acknowledged, rejects with the destination's error. A caller waiting for
   * source events races it, so a failed write stops the mirror at once.
   */
  get writing(): Promise<void> | undefined {
    return this.#writer.writing;
  }

  /** A backfill chunk was read and waits for the stream to reach its high LSN (ask the source where it is). */
  get backfillWaitsForStream(): boolean {
    return this.#loading?.waitingForStream ?? false;
  }

  /** Applies the events of one read, in order. Flushes when a batch is full. */
  async apply(events: readonly StreamEvent[]): Promise<void> {
    for (const event of events) {
      if (event.tag === 'keepalive') {
        if (this.#filter.atBoundary) {
          const emitting = this.#emitDue(event.walEnd);
          if (emitting) await emitting;
        }
        // Nothing open and nothing buffered: let the slot follow the server so an
        // idle mirror does not hold back WAL.
        if (this.#filter.atBoundary && this.#builder.isEmpty) this.#acknowledgements.atRest(event.walEnd);
        continue;
      }
      // Most changes need no wait (the batch neither opens nor fills): no promise is made for them.
      const waiting = this.#handle(event.message, event.walStart);
      if (waiting) await waiting;
    }
  }

  /**
   * Hands what is buffered, if anything, to the destination, after the batch
   * in flight is durable; returns once the new batch is being written.
   */
  cut(): Promise<void> {
    return this.#writer.cut();
  }

  /** Syncs what is buffered and waits until every batch is durable and acknowledged. */
  flush(): Promise<void> {
    return this.#writer.flush();
  }

  /** Waits for the batch in flight to finish, successfully or not; never throws. */
  settle(): Promise<void> {
    return this.#writer.settle();
  }

  /** The table when the filter lets this transaction's changes to it through. */
  #target(relationId: number): TrackedRelation | undefined {
    const tracked = this.#relations.tableOf(relationId);
    if (!tracked || (this.#stopped.size > 0 && this.#stopped.has(tracked.sourceName))) return undefined;
    return this.#filter.applies(tracked) ? tracked : undefined;
  }

  /** Buffers a change; returns a promise only when the batch opened (recorded in the catalog) or is full (cut). */
  #addChange(table: DestinationTable, change: RowChange, lsn: bigint): Promise<void> | undefined {
    const opened = this.#builder.add(table, change, lsn, Date.now, this.#filter.position);
    return this.#writer.added(opened, lsn);
  }

  async #addTruncates(
    relationIds: readonly number[],
    transaction: SourceTransaction,
    lsn: bigint,
  ): Promise<void> {
    for (const relationId of relationIds) {
      if (this.#target(relationId) && this.#schema.needsSettling(relationId))
        await this.#schema.settle(relationId, transaction.xid);
      const tracked = this.#target(relationId);
      if (!tracked) continue;
      this.#schema.checkTruncate(relationId, tracked);
      this.#options.truncated?.(tracked.table, transaction.xid);
      await this.#addStreamed(tracked.table, { kind: 'truncate' }, transaction, lsn);
    }
  }

  /**
   * Makes the table follow its relation's new shape (SchemaEvolution.settle),
   * then applies the change under it. The change passed the filter already:
   * it is handed on without asking the filter again.
   */
  async #settleThen(
    message: SourceMessage & { tag: 'insert' | 'update' | 'delete' },
    lsn: bigint,
  ): Promise<void> {
    await this.#schema.settle(message.relationId, this.#filter.transaction.xid);
    const tracked = this.#relations.tableOf(message.relationId);
    if (tracked) await this.#addRow(message, tracked, lsn);
  }

  /** A row change of a table whose changes this transaction applies, in the table's shape. */
  #addRow(
    message: SourceMessage & { tag: 'insert' | 'update' | 'delete' },
    tracked: TrackedRelation,
    lsn: bigint,
  ): Promise<void> | undefined {
    const transaction = this.#filter.transaction;
    switch (message.tag) {
      case 'insert':
        return this.#addStreamed(
          tracked.table,
          { kind: 'insert', newRow: projectRow(message.newTuple, tracked) },
          transaction,
          lsn,
        );
      case 'update': {
        const { oldKey, newRow } = updatedRow(message, tracked);
        return this.#addStreamed(tracked.table, { kind: 'update', oldKey, newRow }, transaction, lsn);
      }
      case 'delete': {
        const old = message.oldTuple ?? message.keyTuple;
        if (!old)
          throw new EngineError(
            'replica_identity',
            `delete without a key in ${formatTableName(tracked.table.source)}`,
          );
        return this.#addStreamed(
          tracked.table,
          { kind: 'delete', oldKey: projectRow(old, tracked) },
          transaction,
          lsn,
        );
      }
    }
  }

  /** Decides what the changes of relations not mapped by name are (SchemaEvolution.resolve), then handles the message. */
  async #resolveThen(
    message: SourceMessage & { tag: 'insert' | 'update' | 'delete' | 'truncate' },
    lsn: bigint,
  ): Promise<void> {
    await this.#schema.resolve(message.tag === 'truncate' ? message.relationIds : [message.relationId]);
    await this.#handle(message, lsn);
  }

  /** Handles one message; returns a promise when the caller must wait for it before the next. */
  #handle(message: SourceMessage, lsn: bigint): Promise<void> | undefined {
    const transaction = this.#filter.transaction;
    switch (message.tag) {
      case 'begin': {
        // A chunk due here enters before the transaction: it began after the chunk's high LSN.
        const emitting = this.#filter.atBoundary ? this.#emitDue(message.finalLsn) : undefined;
        return emitting ? emitting.then(() => this.#begin(message)) : this.#begin(message);
      }
      case 'commit':
        if (!this.#filter.commit()) return;
        this.#builder.commit(message.endLsn);
        // Nothing of ours is buffered: the commit can be acknowledged once the
        // batch in flight, if any, is durable (and the backfill's progress
        // recorded, when only a record holds what the transaction did).
        if (this.#builder.isEmpty) {
          if (this.#loading?.owesRecord) return this.#recordThenRest(message.endLsn);
          this.#acknowledgements.atRest(message.endLsn);
        }
        return this.#emitDue(message.endLsn);
      case 'relation':
        this.#schema.observe(message);
        return;
      case 'insert':
      case 'update':
      case 'delete': {
        if (this.#schema.needsResolving(message.relationId)) return this.#resolveThen(message, lsn);
        if (this.#filter.holds(lsn)) return;
        const tracked = this.#target(message.relationId);
        if (!tracked) return;
        if (this.#schema.needsSettling(message.relationId)) return this.#settleThen(message, lsn);
        return this.#addRow(message, tracked, lsn);
      }
      case 'truncate':
        if (message.relationIds.some((id) => this.#schema.needsResolving(id))) {
          return this.#resolveThen(message, lsn);
        }
        if (this.#filter.holds(lsn)) return;
        return this.#addTruncates(message.relationIds, transaction, lsn);
      case 'origin':
      case 'type':
      case 'message':
        return;
    }
  }

  #begin(message: SourceMessage & { tag: 'begin' }): Promise<void> | undefined {
    const { kind } = this.#filter.begin(message);
    if (kind !== 'durable') this.#options.replicationDelay?.begun(message.finalLsn, message.commitTimeMicros);
    if (kind === 'resuming') {
      return this.#options.log(
        'INFO',
        `resuming the transaction that commits at ${formatLsn(message.finalLsn)}: its changes up to ${formatLsn(this.#options.checkpoint.transactionPosition?.changeLsn ?? 0n)} are at the destination already and are skipped`,
      );
    }
    return undefined;
  }

  /** A streamed change of a table; a loading table's goes through the backfill first. */
  #addStreamed(
    table: DestinationTable,
    images: RowChangeImages,
    transaction: SourceTransaction,
    lsn: bigint,
  ): Promise<void> | undefined {
    const loading = this.#loading;
    const applied = loading?.loads(table) ? loading.decide(table, images, transaction.xid) : images;
    const resync = this.#resyncs.size > 0 ? this.#resyncs.get(formatTableName(table.source)) : undefined;
    if (!resync || !loading)
      return applied ? this.#addChange(table, { ...applied, transaction }, lsn) : undefined;
    // The live table and its shadow take the change in the same batch: the
    // batch is cut, if full, only after both. A shadow written as its live
    // table takes only its chunks' rows: the backfill still sees the change.
    const decided = loading.decide(resync.shadow, images, transaction.xid);
    const toShadow = this.#intoLive.has(resync.shadow) ? undefined : decided;
    let opened = false;
    const position = this.#filter.position;
    if (applied && this.#builder.add(table, { ...applied, transaction }, lsn, Date.now, position))
      opened = true;
    if (toShadow && this.#builder.add(resync.shadow, { ...toShadow, transaction }, lsn, Date.now, position))
      opened = true;
    return applied || toShadow ? this.#writer.added(opened, lsn) : undefined;
  }

  /**
   * At a transaction boundary, the stream at `lsn`: inserts the backfill
   * chunks due there. Returns a promise only when there were any (or a load
   * finished with nothing to write: its end is recorded on the last batch).
   */
  #emitDue(lsn: bigint): Promise<void> | undefined {
    const loading = this.#loading;
    if (!loading?.active) return undefined;
    const chunks = loading.due(lsn);
    if (chunks.length === 0) return undefined;
    return this.#insertChunks(chunks);
  }

  /** At a commit with nothing buffered: records the backfill's progress, then the commit is at rest. */
  async #recordThenRest(endLsn: bigint): Promise<void> {
    const progress = this.#loading?.progress();
    if (progress) await this.#writer.recordAtRest(progress);
    this.#acknowledgements.atRest(endLsn);
    await this.#emitDue(endLsn);
  }

  async #insertChunks(chunks: readonly EmittedChunk[]): Promise<void> {
    // Placed at the last commit the batch holds: the rows belong to no transaction.
    const lsn = this.#builder.lastCompleteCommitLsn;
    const transaction: SourceTransaction = {
      xid: 0,
      commitLsn: lsn,
      commitTimeMicros: BigInt(Date.now()) * 1000n,
    };
    for (const { table, rows } of chunks) {
      // A shadow written as its live table (ShadowTables.intoLive): its rows join the live one's, in order.
      const target = this.#intoLive.get(table) ?? table;
      let opened = false;
      // Taken whole, then the batch is cut if full: never in the middle of a chunk.
      for (const newRow of rows) {
        if (this.#builder.add(target, { kind: 'insert', transaction, newRow, loaded: true }, lsn, Date.now))
          opened = true;
      }
      if (rows.length > 0) await this.#writer.addedChunk(opened, lsn);
    }
    const loading = this.#loading;
    if (loading && this.#builder.isEmpty && loading.finishedUnrecorded().length > 0) {
      const progress = loading.progress();
      if (progress) await this.#writer.recordAtRest(progress);
    }
  }
}

/** For debug logs: a synced batch without row values. */
export function describeBatch(batch: { batchId: bigint; rowCount: number; endLsn: bigint }) {
  return { batchId: String(batch.batchId), rows: batch.rowCount, endLsn: formatLsn(batch.endLsn) };
}
