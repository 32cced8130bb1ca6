// The change data capture loop: read the slot, cut batches at max rows, at the
// memory budget or at the idle timeout (with `streaming`, also as soon as the
// stream has nothing more buffered at a transaction boundary), sync each to the
// destination while the next one is read, and only then acknowledge its last
// complete commit to the slot (change-applier.ts).

import type { BatchBackfill, TableShape } from '../catalog/catalog.ts';
import { movePhase } from '../catalog/phases.ts';
import { moveTable } from '../catalog/table-states.ts';
import type { StreamEvent } from '../connectors/changes.ts';
import type { ShadowTables } from '../connectors/destination.ts';
import type { DestinationTable, TableSwap } from '../connectors/records.ts';
import type { BackfillReader } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, type TableName } from '../resources/mirror.ts';
import { Backfill, type BackfillTable } from './backfill/backfill.ts';
import { isByteOrdered, type KeyOrder } from './backfill/key-order.ts';
import { type BackfillProgress, freshProgress } from './backfill/table-backfill.ts';
import type { BatchBackfillHooks } from './batch-writer.ts';
import { ChangeApplier, describeBatch } from './change-applier.ts';
import { type MirrorContext, mirrorLog, watched } from './context.ts';
import { Heartbeats } from './heartbeats.ts';
import { actOnPartitionChange } from './partition-changes.ts';
import { PartitionWatch } from './partition-watch.ts';
import { ReplicationDelay } from './replication-delay.ts';
import { type EngineFilteredTable, RowFilterStage } from './row-filter.ts';
import { type SourceNames, tellRenames } from './source-names.ts';
import { SourceTablesWatch } from './source-tables-watch.ts';
import { StreamWait, type WaitOutcome } from './stream-wait.ts';
import { finishResync, type ResyncLoad, resyncKey } from './table-resync.ts';
import { rowFilterOf } from './tables.ts';

export interface CdcOptions {
  readonly slotName: string;
  readonly publicationName: string;
  /** Whether the mirror created the publication (else the user named it): what changes of unmapped tables mean. */
  readonly publicationCreatedByMirror: boolean;
  readonly tables: readonly DestinationTable[];
  /** The shape each table's destination follows, by source table (table-shapes.ts). */
  readonly shapes?: ReadonlyMap<string, TableShape> | undefined;
  /**
   * Per source table (`schema.table`): apply its changes only from transactions
   * committed at or after this LSN (its initial load holds the earlier ones).
   */
  readonly tableStartLsns?: ReadonlyMap<string, bigint>;
  /** Added tables loaded online while streaming (pipeline/backfill/). */
  readonly backfills?: readonly OnlineLoad[];
  /** Source tables stopped on a fault of their own: their changes are not applied (table-faults.ts). */
  readonly stoppedTables?: ReadonlySet<string>;
  /** Tables resynced online: loaded into a shadow beside the live table, which then takes its place (table-resync.ts). */
  readonly resyncs?: readonly ResyncLoad[];
  /** Tables stopped because the source no longer has them: looked for, to rejoin (source-tables-watch.ts). */
  readonly goneTables?: readonly TableName[];
  /** Tables whose row filter the engine applies, the publication not doing it (pipeline/row-filter.ts). */
  readonly rowFilters?: readonly EngineFilteredTable[];
  /** The mapped tables' names at the source now: a rename the stream settles is learnt there (source-names.ts). */
  readonly sourceNames?: SourceNames | undefined;
}

/**
 * How a stream ended without a fault: stopped (a pause, a shutdown), or to
 * start again because a table is to be loaded (a table stopped for its
 * missing source is back; a partitioned table's unpublished change is
 * resynced or reloaded, partition-changes.ts).
 */
export type CdcOutcome = 'stopped' | 'rejoin';

/** An added table to load online while the mirror streams. */
export interface OnlineLoad {
  readonly table: DestinationTable;
  readonly order: KeyOrder;
  /** When this load of the table began (BackfillTableProgress.since). */
  readonly since: number;
}

/**
 * Rows per backfill chunk, and the bytes of rows above which the next chunk is
 * smaller. A chunk's rows are one batch's write that the existing tables'
 * next batch waits for: smaller chunks keep their latency closer to what it
 * is without a load, at the cost of more chunk reads (docs/engine.md).
 */
export const backfillChunkRows = 1000;
export const backfillChunkBytes = 8 * 1024 * 1024;

/** While a read chunk waits for the stream's position, the source is asked for it this often. */
const positionRequestMs = 200;
/** How often the engine may record a changed lag in the catalog. */
const lagReportMs = 2_000;

export async function runCdc(context: MirrorContext, options: CdcOptions): Promise<CdcOutcome> {
  const { spec, destination, catalog, signal, source } = context;
  const checkpoint = await watched(context, 'CDC: destination: read the checkpoint', () =>
    destination.readCheckpoint(spec.name),
  );
  const durableLsn = checkpoint?.lsn ?? 0n;
  const lastBatchId = checkpoint?.batchId ?? 0n;
  // Batches recorded in the catalog but never made durable are replayed under new ids.
  await catalog.discardBatchesAfter(spec.name, lastBatchId);

  const stream = await watched(context, 'CDC: source: start replication', () =>
    source.openStream({
      slotName: options.slotName,
      publicationName: options.publicationName,
      startLsn: durableLsn,
      // The changes of an interrupted transaction the destination holds: the
      // source need not even decode them (the applier skips them regardless).
      skipBefore: checkpoint?.transactionPosition,
    }),
  );
  const online = await prepareOnlineLoads(
    context,
    options.backfills ?? [],
    options.resyncs ?? [],
    lastBatchId,
  );
  let reader: BackfillReader | undefined;
  const loading =
    online.tables.length > 0
      ? new Backfill({
          tables: online.tables,
          chunkRows: backfillChunkRows,
          chunkBytes: backfillChunkBytes,
          onChunkRead: () => stream.requestPosition(),
          readChunk: async (table, order, request) => {
            reader ??= await source.openBackfillReader();
            return watched(context, `CDC: source: backfill ${formatTableName(table.source)}`, () =>
              (reader as BackfillReader).readChunk({
                table: table.source,
                columns: table.columns.map((column) => column.name),
                key: order.indexes.map((index, position) => ({
                  name: table.columns[index]?.name ?? '',
                  typeName: table.columns[index]?.typeName ?? 'text',
                  byteOrdered: isByteOrdered(order.columns[position] ?? 'bytes'),
                })),
                after: request.after,
                limit: request.limit,
                pendingKeys: request.pendingKeys,
                rowFilter: rowFilterOf(spec.tableMappings, table.source),
              }),
            );
          },
        })
      : undefined;
  const stopped = options.stoppedTables ?? new Set<string>();
  const streamed = options.tables.filter((table) => !stopped.has(formatTableName(table.source)));
  const partitions = new PartitionWatch({
    source,
    catalog,
    mirror: spec.name,
    tables: streamed.map((table) => table.source),
  });
  // Lag in seconds: how long the oldest transaction not yet durable has waited since its commit.
  const delay = new ReplicationDelay();
  const applier = new ChangeApplier({
    mirror: spec.name,
    destination,
    batches: catalog,
    acknowledge: (lsn) => {
      stream.acknowledge(lsn);
      delay.acknowledged(lsn);
    },
    replicationDelay: delay,
    typeNames: (columns) => source.typeNames(columns),
    liveColumns: (relationId, xid) => source.liveColumns(relationId, xid),
    partitionAncestors: (relationId) => source.partitionAncestors(relationId),
    renamed: (mapped, current) => options.sourceNames?.learn(mapped, current),
    truncated: (table, xid) => partitions.truncated(formatTableName(table.source), xid),
    schemaChanges: spec.schemaChanges,
    shapes: options.shapes,
    recordShape: (sourceTable, shape) => catalog.recordTableShape(spec.name, sourceTable, shape),
    publication: { name: options.publicationName, createdByMirror: options.publicationCreatedByMirror },
    log: (level, message) => mirrorLog(context, level, message),
    tableMappings: spec.tableMappings,
    tables: options.tables,
    // One batch is written while the next fills: the budget covers both.
    limits: { maxRows: spec.maxBatchSize, maxBytes: Math.floor(context.batchMemoryBudgetBytes / 2) },
    checkpoint: {
      lsn: durableLsn,
      batchId: lastBatchId,
      transactionPosition: checkpoint?.transactionPosition,
    },
    tableStartLsns: options.tableStartLsns,
    stoppedTables: options.stoppedTables,
    resyncShadows: online.resyncing,
    loading,
    backfill: loading ? backfillHooks(context, loading, online) : undefined,
    metrics: context.metrics,
    progress: context.progress,
    watch: (step, work) => watched(context, step, work),
    onBatchSynced: (batch) => context.logger.debug(describeBatch(batch), 'batch synced'),
  });
  const idleTimeoutMs = spec.idleTimeoutSeconds * 1000;
  // With `streaming`, a batch that ends at a commit waits for no more than what
  // is already buffered: a zero wait loses the race to a read that is ready.
  const closesWhenDrained = () => spec.streaming && !applier.isEmpty && applier.atTransactionBoundary;

  const rowFilter =
    options.rowFilters && options.rowFilters.length > 0
      ? new RowFilterStage(source, options.rowFilters)
      : undefined;
  const events = stream.events()[Symbol.asyncIterator]();
  const wait = new StreamWait(() => events.next(), signal);
  const nextEvents = (): Promise<WaitOutcome<IteratorResult<readonly StreamEvent[]>>> => {
    const batchWaitMs = applier.isEmpty
      ? idleTimeoutMs
      : closesWhenDrained()
        ? 0
        : Math.max(0, idleTimeoutMs - applier.ageMs(Date.now()));
    const waitMs = applier.backfillWaitsForStream ? Math.min(batchWaitMs, positionRequestMs) : batchWaitMs;
    // The end of a write wakes the loop: a failed one stops it at once, not at the next batch.
    return wait.next(waitMs, applier.writing);
  };
  const flushWhenIdle = async () => {
    if (!applier.isEmpty && applier.ageMs(Date.now()) >= idleTimeoutMs) await applier.cut();
  };
  /** Nothing arrived within the wait: the idle timeout passed, or (streaming) the stream is drained. */
  const flushOnTimeout = async () => {
    if (closesWhenDrained()) await applier.cut();
    else await flushWhenIdle();
  };

  context.metrics?.replicationDelay(spec.name, (nowMs) => delay.secondsAt(nowMs));
  // The catalog learns where the delay counts from when that changes, at most
  // every lagReportMs: status, console and `kubectl get mirrors` read it there.
  let reportedLagSince: number | null | undefined;
  const reportLag = async () => {
    const since = delay.pendingSince?.getTime() ?? null;
    if (since === reportedLagSince) return;
    reportedLagSince = since;
    await catalog.setLagSince(spec.name, since === null ? null : new Date(since));
  };
  const lagReports = setInterval(() => {
    reportLag().catch((error: unknown) =>
      context.logger.debug({ err: error }, 'cannot record the lag in the catalog'),
    );
  }, lagReportMs);
  lagReports.unref();
  const tablesWatch = new SourceTablesWatch(
    source,
    streamed.map((table) => table.source),
    options.goneTables ?? [],
  );
  /** A look at the source tables when due: a gone table's fault is thrown; true to start again for one back. */
  const watchTables = async (): Promise<boolean> => {
    const outcome = await tablesWatch.check(Date.now(), stream.flushedLsn);
    if (outcome?.kind === 'stop') throw outcome.error;
    if (outcome?.kind !== 'rejoin') return false;
    await mirrorLog(
      context,
      'INFO',
      `source table ${outcome.sourceTable} exists again: the mirror starts again to load it`,
    );
    return true;
  };
  /** A look at the partitioned tables when due (partition-watch.ts): true to start again for a resync or reload. */
  const watchPartitions = async (): Promise<boolean> => {
    const findings = await partitions.check(Date.now(), stream.flushedLsn);
    let restart = false;
    for (const finding of findings ?? []) {
      const table = streamed.find((candidate) => formatTableName(candidate.source) === finding.sourceTable);
      if (table && (await actOnPartitionChange(context, partitions, finding, table)) === 'restart')
        restart = true;
    }
    return restart;
  };
  const heartbeats = new Heartbeats({
    intervalMs: spec.heartbeatIntervalSeconds * 1000,
    emit: () => source.emitHeartbeat(),
    log: (level, message) => mirrorLog(context, level, message),
    counted: (written) => context.metrics?.heartbeat(spec.name, written),
  });
  let outcome: CdcOutcome = 'stopped';
  await movePhase(catalog, spec.name, 'streamingStarted');
  await mirrorLog(context, 'INFO', `streaming changes from slot ${options.slotName}`);
  context.progress?.streaming();
  try {
    // Before an online load reads: a table first watched now is recorded as it is.
    await watched(context, 'CDC: source: look up the partitions of the mapped tables', () =>
      partitions.start(),
    );
    loading?.start();
    heartbeats.start();
    for (;;) {
      const next = await nextEvents();
      if (next === 'aborted') break;
      if (next === 'written') continue;
      if (next === 'timeout') {
        if (applier.backfillWaitsForStream) stream.requestPosition();
        await flushOnTimeout();
      } else {
        if (next.done) throw new EngineError('connection', 'source: replication stream ended unexpectedly');
        await applier.apply(rowFilter ? await rowFilter.apply(next.value) : next.value);
        context.metrics?.replicationPosition(spec.name, stream.serverWalEnd, stream.flushedLsn);
        await flushWhenIdle();
      }
      if ((await watchTables()) || (await watchPartitions())) {
        outcome = 'rejoin';
        break;
      }
      if (options.sourceNames) await tellRenames(context, options.sourceNames);
    }
    // Pause or shutdown: make what is buffered durable, so nothing is redone.
    await applier.flush();
  } finally {
    // No stream, no figure: a stopped engine does not report a delay it cannot see.
    context.metrics?.replicationDelay(spec.name, undefined);
    clearInterval(lagReports);
    await reportLag().catch(() => undefined);
    // A batch still being written after a failure: let it end before the
    // stream and the destination close under it (it is acknowledged if durable).
    await applier.settle();
    loading?.stop();
    await heartbeats.stop();
    await reader?.close();
    await stream.close();
    // Releases the type lookup connection.
    await source.close();
    await events.return?.(undefined).catch(() => undefined);
  }
  return outcome;
}

/**
 * Where each online load resumes: from the progress recorded with the
 * destination's checkpoint batch when it is of this load, else from the
 * start, its destination table emptied first (the mirror owns it: run-mirror
 * claimed it). A load the checkpoint says is complete finishes now.
 */
async function prepareOnlineLoads(
  context: MirrorContext,
  loads: readonly OnlineLoad[],
  resyncs: readonly ResyncLoad[],
  checkpointBatchId: bigint,
): Promise<OnlineLoads> {
  const tables: BackfillTable[] = [];
  const rowsCopied = new Map<DestinationTable, number>();
  const resyncing = new Map<string, TableSwap>();
  if (loads.length === 0 && resyncs.length === 0) return { tables, rowsCopied, resyncing };
  const { spec, catalog } = context;
  const record =
    checkpointBatchId > 0n ? await catalog.batchBackfill(spec.name, checkpointBatchId) : undefined;
  for (const resync of resyncs) {
    const key = resyncKey(resync.live);
    const stored = record?.[key];
    const progress: BackfillProgress =
      stored && stored.since === resync.since ? stored : freshProgress(resync.since);
    if (progress.rangeDone && progress.pending.length === 0) {
      // Recorded done on the checkpoint batch: the swap committed with it.
      await finishResync(context, resync.live);
      continue;
    }
    if (progress === stored) {
      await mirrorLog(
        context,
        'INFO',
        `resuming the resync of ${formatTableName(resync.live.source)} after ${progress.rowsCopied} row(s)`,
      );
    } else {
      await watched(context, 'CDC: destination: create the resync table', () =>
        (context.destination.shadowTables as ShadowTables).create(resync.live, resync.shadow),
      );
    }
    tables.push({ table: resync.shadow, order: resync.order, progress, key });
    resyncing.set(formatTableName(resync.live.source), { live: resync.live, shadow: resync.shadow });
  }
  const fresh: DestinationTable[] = [];
  for (const load of loads) {
    const stored = record?.[formatTableName(load.table.source)];
    const progress: BackfillProgress =
      stored && stored.since === load.since ? stored : freshProgress(load.since);
    if (progress !== stored) fresh.push(load.table);
    if (progress.rangeDone && progress.pending.length === 0) {
      await finishOnlineLoad(context, load.table, progress.rowsCopied);
      continue;
    }
    rowsCopied.set(load.table, progress.rowsCopied);
    tables.push({ table: load.table, order: load.order, progress });
    if (progress === stored) {
      await mirrorLog(
        context,
        'INFO',
        `resuming the online load of ${formatTableName(load.table.source)} after ${progress.rowsCopied} row(s)`,
      );
    }
  }
  if (fresh.length > 0) {
    await watched(context, 'CDC: destination: empty added tables', () =>
      context.destination.truncateTables(fresh),
    );
  }
  return { tables, rowsCopied, resyncing };
}

/** The loads a run carries on: the backfill's tables, rows copied of each added table, and the resyncs by source table. */
interface OnlineLoads {
  readonly tables: BackfillTable[];
  readonly rowsCopied: Map<DestinationTable, number>;
  /** Source table (`schema.table`) → its resync; an entry leaves once its swap is in a batch. */
  readonly resyncing: Map<string, TableSwap>;
}

/** The hooks that make the backfill's progress ride with the batches (batch-writer.ts). */
function backfillHooks(context: MirrorContext, loading: Backfill, online: OnlineLoads): BatchBackfillHooks {
  const { spec, catalog } = context;
  const { rowsCopied, resyncing } = online;
  const shadows = new Map([...resyncing.values()].map((swap) => [swap.shadow, swap.live]));
  return {
    progress: () => loading.progress(),
    record: (batchId, progress) => catalog.recordBatchBackfill(spec.name, batchId, progress),
    swaps: (progress: BatchBackfill) => {
      const swaps: TableSwap[] = [];
      for (const [sourceTable, swap] of resyncing) {
        const done = progress[resyncKey(swap.live)];
        if (!done?.rangeDone || done.pending.length > 0) continue;
        swaps.push(swap);
        // From here on its changes go to the live table alone, which the shadow becomes.
        resyncing.delete(sourceTable);
      }
      return swaps;
    },
    durable: async (progress: BatchBackfill) => {
      const durable = loading.durable(progress);
      for (const [table, rows] of durable.rowsCopied) {
        if (shadows.has(table)) continue;
        const before = rowsCopied.get(table) ?? 0;
        if (rows > before) {
          rowsCopied.set(table, rows);
          // For status only: kept off the batch's path, so the next batch is not held for it.
          catalog
            .recordSnapshotPartition(spec.name, formatTableName(table.source), BigInt(rows - before), 0)
            .catch((error: unknown) => context.logger.warn({ err: error }, 'could not record rows copied'));
        }
      }
      for (const table of durable.done) {
        const live = shadows.get(table);
        if (live) await finishResync(context, live);
        else await finishOnlineLoad(context, table, durable.rowsCopied.get(table) ?? 0);
      }
    },
  };
}

async function finishOnlineLoad(
  context: MirrorContext,
  table: DestinationTable,
  rows: number,
): Promise<void> {
  const { spec, catalog } = context;
  const sourceTable = formatTableName(table.source);
  await catalog.finishSnapshotTable(spec.name, sourceTable);
  await moveTable(
    catalog,
    spec.name,
    { sourceTable, destinationTable: formatTableName(table.destination) },
    'loadFinished',
  );
  await mirrorLog(
    context,
    'INFO',
    `loaded added table ${sourceTable} online (${rows} row(s)) while streaming`,
  );
}
