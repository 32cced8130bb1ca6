// Turns a source's change events into batches, syncs each to the destination,
// and only then acknowledges its last complete commit: the slot never moves past
// what the destination made durable. One batch is written while the next is
// decoded (at most one in flight, written in order), so the destination's work
// and the decoding overlap; acknowledgements follow the writes in order.
// Transactions the destination already holds (replayed after a crash before
// the acknowledgement), the changes it holds of a transaction a batch ended
// inside (transaction-cursor.ts) and, per table, the transactions older than
// its initial load are skipped. runCdc (cdc.ts) feeds it and decides when to
// cut an idle batch; this class waits only for the batch in flight.
import type { Catalog, LogLevel } from '../catalog/catalog.ts';
import {
  hasUnchangedToast,
  isWireTuple,
  type SourceMessage,
  type StreamEvent,
  tupleCells,
  type WireTuple,
} from '../connectors/changes.ts';
import type { Destination } from '../connectors/destination.ts';
import type {
  ChangeBatch,
  Checkpoint,
  DestinationTable,
  RowChange,
  SourceColumn,
  SourceTransaction,
} from '../connectors/records.ts';
import { EngineError } from '../errors.ts';
import { formatLsn } from '../model/lsn.ts';
import type { PipelineMetrics } from '../observability/engine-metrics.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';
import { BatchBuilder, type BatchLimits } from './batch-builder.ts';
import type { ProgressListener } from './context.ts';
import {
  fillFromOld,
  project,
  RelationTracker,
  type SchemaChange,
  type TrackedRelation,
} from './relations.ts';
import { TransactionCursor } from './transaction-cursor.ts';
import { followedPartitionTruncated, UnmappedRelations } from './unmapped-relations.ts';

/**
 * After a restart inside a huge transaction, the first batch of its new
 * changes is cut at this many rows: reading past what the destination holds
 * takes a while, and a small first step is durable soon after, so even faults
 * that come again quickly leave the mirror further on each time.
 */
export const resumeStepRows = 10_000;

export interface ChangeApplierOptions {
  readonly mirror: string;
  readonly destination: Destination;
  /** Where batches are recorded as they start and finish. */
  readonly batches: Pick<Catalog, 'startBatch' | 'finishBatch'>;
  /** Reports everything before a position as durable to the source (ChangeStream.acknowledge). */
  readonly acknowledge: (lsn: bigint) => void;
  /** Type names of columns a relation message adds (Source.typeNames). */
  readonly typeNames: (
    columns: readonly { readonly typeOid: number; readonly typeModifier: number }[],
  ) => Promise<string[]>;
  /** The partitioned tables a relation is a partition of, parent first (Source.partitionAncestors). */
  readonly partitionAncestors: (relationId: number) => Promise<readonly TableName[]>;
  /** The publication the stream reads, and whether the mirror created it (for what unmapped changes mean). */
  readonly publication: { readonly name: string; readonly createdByMirror: boolean };
  /** A mirror log line (no row values). */
  readonly log: (level: LogLevel, message: string) => Promise<void>;
  readonly tableMappings: readonly TableMapping[];
  readonly tables: readonly DestinationTable[];
  readonly limits: BatchLimits;
  /** The destination's checkpoint: what is durable there already. */
  readonly checkpoint: Checkpoint;
  /**
   * Per source table (`schema.table`): apply its changes only from transactions
   * committed at or after this LSN (its initial load holds the earlier ones).
   */
  readonly tableStartLsns?: ReadonlyMap<string, bigint> | undefined;
  readonly metrics?: PipelineMetrics | undefined;
  readonly progress?: ProgressListener | undefined;
  /** Runs a destination write as a step watched for stalls (MirrorContext.watchdog). */
  readonly watch?: (<T>(step: string, work: () => Promise<T>) => Promise<T>) | undefined;
  readonly onBatchSynced?:
    | ((batch: { batchId: bigint; rowCount: number; endLsn: bigint }) => void)
    | undefined;
}

export class ChangeApplier {
  readonly #options: ChangeApplierOptions;
  readonly #relations: RelationTracker;
  readonly #unmapped: UnmappedRelations;
  readonly #builder: BatchBuilder;
  readonly #tableStartLsns: ReadonlyMap<string, bigint>;
  readonly #cursor: TransactionCursor;
  /** Transactions committed before this are durable at the destination already. */
  readonly #durableLsn: bigint;
  /** The last batch made durable (or the checkpoint's). */
  #lastBatchId: bigint;
  /** The last batch id handed out: ahead of #lastBatchId while a batch is in flight. */
  #lastAssignedBatchId: bigint;
  #currentBatchId = 0n;
  /** The batch being written, if any: resolves once it is durable and acknowledged. */
  #inFlight: Promise<void> | undefined;
  /**
   * The furthest position that could have been acknowledged while a batch was
   * in flight (a commit or keepalive with nothing of ours buffered): everything
   * of ours before it is in that batch, so it is acknowledged once the batch is.
   */
  #deferredAcknowledgement = 0n;
  #inTransaction = false;
  #skipTransaction = false;
  /** In the transaction the checkpoint's position is inside, before its first new change. */
  #resuming = false;
  #transaction: SourceTransaction = { xid: 0, commitLsn: 0n, commitTimeMicros: 0n };

  constructor(options: ChangeApplierOptions) {
    this.#options = options;
    this.#relations = new RelationTracker(options.tableMappings, options.tables);
    this.#unmapped = new UnmappedRelations({
      relations: this.#relations,
      partitionAncestors: options.partitionAncestors,
      log: options.log,
      publication: options.publication,
    });
    this.#builder = new BatchBuilder(
      options.limits,
      options.checkpoint.lsn,
      options.destination.changeBuffer?.bind(options.destination),
    );
    this.#tableStartLsns = options.tableStartLsns ?? new Map();
    this.#durableLsn = options.checkpoint.lsn;
    this.#lastBatchId = options.checkpoint.batchId;
    this.#lastAssignedBatchId = options.checkpoint.batchId;
    this.#cursor = new TransactionCursor(options.checkpoint.transactionPosition);
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
    return !this.#inTransaction;
  }

  /** The id of the last batch made durable (or of the checkpoint's). */
  get lastBatchId(): bigint {
    return this.#lastBatchId;
  }

  /**
   * The write of the batch in flight, if any: resolves once it is durable and
   * acknowledged, rejects with the destination's error. A caller waiting for
   * source events races it, so a failed write stops the mirror at once.
   */
  get writing(): Promise<void> | undefined {
    return this.#inFlight;
  }

  /** Applies the events of one read, in order. Flushes when a batch is full. */
  async apply(events: readonly StreamEvent[]): Promise<void> {
    for (const event of events) {
      if (event.tag === 'keepalive') {
        // Nothing open and nothing buffered: let the slot follow the server so an
        // idle mirror does not hold back WAL.
        if (!this.#inTransaction && this.#builder.isEmpty) this.#acknowledgeWhenWritten(event.walEnd);
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
  async cut(): Promise<void> {
    const builder = this.#builder;
    if (builder.isEmpty) return;
    await this.#inFlight;
    const recordedEndLsn = builder.recordedEndLsn;
    const batch = builder.take(this.#options.mirror, this.#currentBatchId);
    const write = this.#write(batch, recordedEndLsn);
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

  /** Waits for the batch in flight to finish, successfully or not; never throws. */
  async settle(): Promise<void> {
    await this.#inFlight?.catch(() => {});
  }

  async #write(batch: ChangeBatch, recordedEndLsn: bigint): Promise<void> {
    const { mirror, destination, batches } = this.#options;
    const started = performance.now();
    const sync = () => destination.syncBatch(batch);
    const { watch } = this.#options;
    await (watch ? watch(`CDC: destination: sync batch ${batch.batchId}`, sync) : sync());
    this.#options.metrics?.batchSynced(mirror, batch.rowCount, (performance.now() - started) / 1000);
    this.#lastBatchId = batch.batchId;
    await batches.finishBatch(mirror, {
      batchId: batch.batchId,
      endTime: new Date(),
      rowCount: BigInt(batch.rowCount),
      endLsn: recordedEndLsn,
    });
    this.#options.progress?.durable();
    this.#options.acknowledge(batch.endLsn);
    if (this.#deferredAcknowledgement > 0n) this.#options.acknowledge(this.#deferredAcknowledgement);
    this.#deferredAcknowledgement = 0n;
    this.#inFlight = undefined;
    this.#options.onBatchSynced?.({ batchId: batch.batchId, rowCount: batch.rowCount, endLsn: batch.endLsn });
  }

  /** Acknowledges `lsn` now, or once the batch in flight is durable. Nothing of ours may be buffered. */
  #acknowledgeWhenWritten(lsn: bigint): void {
    if (this.#inFlight === undefined) this.#options.acknowledge(lsn);
    else if (lsn > this.#deferredAcknowledgement) this.#deferredAcknowledgement = lsn;
  }

  /** Whether the destination holds this change of the transaction already (transaction-cursor.ts). */
  #isDurable(lsn: bigint): boolean {
    if (this.#cursor.next(lsn)) return true;
    if (this.#resuming) {
      this.#resuming = false;
      this.#builder.limitThisBatch(Math.min(resumeStepRows, this.#options.limits.maxRows));
    }
    return false;
  }

  /** The table when this transaction's changes to it are to be applied. */
  #target(relationId: number) {
    const tracked = this.#relations.tableOf(relationId);
    if (!tracked || this.#skipTransaction) return undefined;
    const startLsn = this.#tableStartLsns.get(tracked.sourceName);
    return startLsn !== undefined && this.#transaction.commitLsn < startLsn ? undefined : tracked;
  }

  /** Buffers a change; returns a promise only when the batch opened (recorded in the catalog) or is full (cut). */
  #addChange(table: DestinationTable, change: RowChange, lsn: bigint): Promise<void> | undefined {
    const opened = this.#builder.add(table, change, lsn, Date.now, this.#cursor.position);
    return this.#afterAddIfNeeded(opened, lsn);
  }

  /** Adds an insert or update whose new row goes on undecoded (BatchBuilder.addTuple). */
  #addTuple(
    kind: 'insert' | 'update',
    tracked: TrackedRelation,
    transaction: SourceTransaction,
    tuple: WireTuple,
    lsn: bigint,
  ): Promise<void> | undefined {
    const opened = this.#builder.addTuple(
      kind,
      tracked.table,
      transaction,
      tuple,
      lsn,
      Date.now,
      this.#cursor.position,
    );
    return this.#afterAddIfNeeded(opened, lsn);
  }

  #afterAddIfNeeded(opened: boolean, lsn: bigint): Promise<void> | undefined {
    if (!opened && !this.#builder.isFull) return undefined;
    return this.#afterAdd(opened, lsn);
  }

  async #afterAdd(opened: boolean, lsn: bigint): Promise<void> {
    if (opened) {
      this.#lastAssignedBatchId += 1n;
      this.#currentBatchId = this.#lastAssignedBatchId;
      await this.#options.batches.startBatch(this.#options.mirror, {
        batchId: this.#currentBatchId,
        startTime: new Date(),
        startLsn: lsn,
      });
    }
    if (this.#builder.isFull) await this.cut();
  }

  async #applySchemaChange(change: SchemaChange, relation: SourceMessage & { tag: 'relation' }) {
    // The destination must see the batch written under the old shape first,
    // and no batch may be in flight while its tables change.
    if (this.#builder.hasChangesFor(change.table)) await this.cut();
    if (change.added.length > 0) await this.#inFlight;
    const { log } = this.#options;
    const tableName = formatTableName(change.table.source);
    if (change.added.length > 0) {
      const typeNames = await this.#options.typeNames(change.added);
      const columns: SourceColumn[] = change.added.map((added, index) => ({
        ...added,
        typeName: typeNames[index] ?? 'text',
        notNull: false,
      }));
      await this.#options.destination.addColumns(change.table, columns);
      this.#relations.extend(change.table, columns, relation);
      await log('INFO', `added column(s) ${columns.map((c) => c.name).join(', ')} to ${tableName}`);
    }
    if (change.dropped.length > 0) {
      await log(
        'WARN',
        `column(s) ${change.dropped.join(', ')} of ${tableName} were dropped at the source; the destination keeps them and new rows get null`,
      );
    }
    if (change.retyped.length > 0) {
      await log(
        'WARN',
        `column(s) ${change.retyped.join(', ')} of ${tableName} changed type at the source; the destination column type is unchanged`,
      );
    }
  }

  async #addTruncates(
    relationIds: readonly number[],
    transaction: SourceTransaction,
    lsn: bigint,
  ): Promise<void> {
    for (const relationId of relationIds) {
      const tracked = this.#target(relationId);
      if (!tracked) continue;
      if (this.#relations.isFollowedPartition(relationId)) {
        throw followedPartitionTruncated(
          this.#unmapped.nameOf(relationId),
          tracked.sourceName,
          this.#options.publication.name,
        );
      }
      await this.#addChange(tracked.table, { kind: 'truncate', transaction }, lsn);
    }
  }

  /**
   * Decides what the changes of relations not mapped by name are (followed as
   * a partition of a mapped table, or skipped), then handles the message.
   */
  async #resolveThen(
    message: SourceMessage & { tag: 'insert' | 'update' | 'delete' | 'truncate' },
    lsn: bigint,
  ): Promise<void> {
    const relationIds = message.tag === 'truncate' ? message.relationIds : [message.relationId];
    for (const relationId of relationIds) {
      if (!this.#unmapped.needsResolving(relationId)) continue;
      const resolution = await this.#unmapped.resolve(relationId);
      if (resolution.followed && resolution.schemaChange) {
        await this.#applySchemaChange(resolution.schemaChange, resolution.relation);
      }
    }
    await this.#handle(message, lsn);
  }

  /** Handles one message; returns a promise when the caller must wait for it before the next. */
  #handle(message: SourceMessage, lsn: bigint): Promise<void> | undefined {
    const transaction = this.#transaction;
    switch (message.tag) {
      case 'begin':
        this.#inTransaction = true;
        // Already durable at the destination: replayed after a crash before the ack.
        this.#skipTransaction = message.finalLsn < this.#durableLsn;
        this.#transaction = {
          xid: message.xid,
          commitLsn: message.finalLsn,
          commitTimeMicros: message.commitTimeMicros,
        };
        this.#resuming = this.#cursor.begin(message.finalLsn) && !this.#skipTransaction;
        if (this.#resuming) {
          return this.#options.log(
            'INFO',
            `resuming the transaction that commits at ${formatLsn(message.finalLsn)}: its changes up to ${formatLsn(this.#options.checkpoint.transactionPosition?.changeLsn ?? 0n)} are at the destination already and are skipped`,
          );
        }
        return undefined;
      case 'commit':
        this.#inTransaction = false;
        this.#resuming = false;
        this.#cursor.end();
        if (this.#skipTransaction) return;
        this.#builder.commit(message.endLsn);
        // Nothing of ours is buffered: the commit can be acknowledged once the
        // batch in flight, if any, is durable.
        if (this.#builder.isEmpty) this.#acknowledgeWhenWritten(message.endLsn);
        return;
      case 'relation': {
        if (!this.#relations.maps(message)) {
          this.#unmapped.announce(message);
          return undefined;
        }
        const change = this.#relations.observe(message);
        return change ? this.#applySchemaChange(change, message) : undefined;
      }
      case 'insert': {
        if (this.#unmapped.needsResolving(message.relationId)) return this.#resolveThen(message, lsn);
        if (this.#isDurable(lsn)) return;
        const tracked = this.#target(message.relationId);
        if (!tracked) return;
        const tuple = message.newTuple;
        // A tuple whose cells are the table's columns in order may reach the
        // destination undecoded; any other is decoded and reordered.
        if (isWireTuple(tuple) && tracked.keepsTupleOrder && tuple.cellCount === tracked.projection.length) {
          return this.#addTuple('insert', tracked, transaction, tuple, lsn);
        }
        return this.#addChange(
          tracked.table,
          { kind: 'insert', transaction, newRow: project(tupleCells(tuple), tracked) },
          lsn,
        );
      }
      case 'update': {
        if (this.#unmapped.needsResolving(message.relationId)) return this.#resolveThen(message, lsn);
        if (this.#isDurable(lsn)) return;
        const tracked = this.#target(message.relationId);
        if (!tracked) return;
        const tuple = message.newTuple;
        // Without an old image, a new row whose cells are the table's columns
        // in order and all sent may reach the destination undecoded.
        if (
          isWireTuple(tuple) &&
          tracked.keepsTupleOrder &&
          tuple.cellCount === tracked.projection.length &&
          !hasUnchangedToast(tuple)
        ) {
          return this.#addTuple('update', tracked, transaction, tuple, lsn);
        }
        const old = message.oldTuple ?? message.keyTuple;
        const oldRow = old ? project(old, tracked) : null;
        const newRow = fillFromOld(project(tupleCells(tuple), tracked), message.oldTuple ? oldRow : null);
        return this.#addChange(tracked.table, { kind: 'update', transaction, oldKey: oldRow, newRow }, lsn);
      }
      case 'delete': {
        if (this.#unmapped.needsResolving(message.relationId)) return this.#resolveThen(message, lsn);
        if (this.#isDurable(lsn)) return;
        const tracked = this.#target(message.relationId);
        if (!tracked) return;
        const old = message.oldTuple ?? message.keyTuple;
        if (!old)
          throw new EngineError(
            'replica_identity',
            `delete without a key in ${formatTableName(tracked.table.source)}`,
          );
        return this.#addChange(
          tracked.table,
          { kind: 'delete', transaction, oldKey: project(old, tracked) },
          lsn,
        );
      }
      case 'truncate':
        if (message.relationIds.some((id) => this.#unmapped.needsResolving(id))) {
          return this.#resolveThen(message, lsn);
        }
        if (this.#isDurable(lsn)) return;
        return this.#addTruncates(message.relationIds, transaction, lsn);
      case 'origin':
      case 'type':
      case 'message':
        return;
    }
  }
}

/** For debug logs: a synced batch without row values. */
export function describeBatch(batch: { batchId: bigint; rowCount: number; endLsn: bigint }) {
  return { batchId: String(batch.batchId), rows: batch.rowCount, endLsn: formatLsn(batch.endLsn) };
}
