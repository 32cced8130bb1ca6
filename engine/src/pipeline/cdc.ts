// The change data capture loop: read the slot, cut batches at max rows, at the
// memory budget or at the idle timeout (with `streaming`, also as soon as the
// stream has nothing more buffered at a transaction boundary), sync each to the
// destination while the next one is read, and only then acknowledge its last
// complete commit to the slot (change-applier.ts).
import { movePhase } from '../catalog/phases.ts';
import type { StreamEvent } from '../connectors/changes.ts';
import type { DestinationTable } from '../connectors/records.ts';
import { EngineError } from '../errors.ts';
import { ChangeApplier, describeBatch } from './change-applier.ts';
import { type MirrorContext, mirrorLog, watched } from './context.ts';
import { ReplicationDelay } from './replication-delay.ts';
import { StreamWait, type WaitOutcome } from './stream-wait.ts';

export interface CdcOptions {
  readonly slotName: string;
  readonly publicationName: string;
  /** Whether the mirror created the publication (else the user named it): what changes of unmapped tables mean. */
  readonly publicationCreatedByMirror: boolean;
  readonly tables: readonly DestinationTable[];
  /**
   * Per source table (`schema.table`): apply its changes only from transactions
   * committed at or after this LSN (its initial load holds the earlier ones).
   */
  readonly tableStartLsns?: ReadonlyMap<string, bigint>;
}

/** How often the engine may record a changed lag in the catalog. */
const lagReportMs = 2_000;

export async function runCdc(context: MirrorContext, options: CdcOptions): Promise<void> {
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
    partitionAncestors: (relationId) => source.partitionAncestors(relationId),
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
    metrics: context.metrics,
    progress: context.progress,
    watch: (step, work) => watched(context, step, work),
    onBatchSynced: (batch) => context.logger.debug(describeBatch(batch), 'batch synced'),
  });
  const idleTimeoutMs = spec.idleTimeoutSeconds * 1000;
  // With `streaming`, a batch that ends at a commit waits for no more than what
  // is already buffered: a zero wait loses the race to a read that is ready.
  const closesWhenDrained = () => spec.streaming && !applier.isEmpty && applier.atTransactionBoundary;

  const events = stream.events()[Symbol.asyncIterator]();
  const wait = new StreamWait(() => events.next(), signal);
  const nextEvents = (): Promise<WaitOutcome<IteratorResult<readonly StreamEvent[]>>> => {
    const waitMs = applier.isEmpty
      ? idleTimeoutMs
      : closesWhenDrained()
        ? 0
        : Math.max(0, idleTimeoutMs - applier.ageMs(Date.now()));
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
  await movePhase(catalog, spec.name, 'streamingStarted');
  await mirrorLog(context, 'INFO', `streaming changes from slot ${options.slotName}`);
  context.progress?.streaming();
  try {
    for (;;) {
      const next = await nextEvents();
      if (next === 'aborted') break;
      if (next === 'written') continue;
      if (next === 'timeout') {
        await flushOnTimeout();
        continue;
      }
      if (next.done) throw new EngineError('connection', 'source: replication stream ended unexpectedly');
      await applier.apply(next.value);
      context.metrics?.replicationPosition(spec.name, stream.serverWalEnd, stream.flushedLsn);
      await flushWhenIdle();
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
    await stream.close();
    // Releases the type lookup connection.
    await source.close();
    await events.return?.(undefined).catch(() => undefined);
  }
}
