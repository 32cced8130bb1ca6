// The change data capture loop: read the slot, cut batches at max rows, at the
// memory budget or at the idle timeout, sync each to the destination, and only
// then acknowledge its last complete commit to the slot.
import { setTimeout as delay } from 'node:timers/promises';
import { connectPostgres, type PgConnection } from '../connectors/postgres/connect.ts';
import type { PgoutputMessage, RelationMessage } from '../connectors/postgres/pgoutput.ts';
import { ReplicationStream, type StreamEvent } from '../connectors/postgres/replication-stream.ts';
import type { DestinationTable, RowChange, SourceColumn, SourceTransaction } from '../connectors/records.ts';
import { EngineError } from '../errors.ts';
import { formatLsn } from '../model/lsn.ts';
import { formatTableName } from '../resources/mirror.ts';
import { BatchBuilder } from './batch-builder.ts';
import { applicationName, type MirrorContext, mirrorLog } from './context.ts';
import { fillFromOld, project, RelationTracker, type SchemaChange } from './relations.ts';

export interface CdcOptions {
  readonly slotName: string;
  readonly publicationName: string;
  readonly tables: readonly DestinationTable[];
  /**
   * Per source table (`schema.table`): apply its changes only from transactions
   * committed at or after this LSN (its initial load holds the earlier ones).
   */
  readonly tableStartLsns?: ReadonlyMap<string, bigint>;
}

type NextEvents = IteratorResult<readonly StreamEvent[]> | 'timeout' | 'aborted';

export async function runCdc(context: MirrorContext, options: CdcOptions): Promise<void> {
  const { spec, destination, catalog, signal } = context;
  const checkpoint = await destination.readCheckpoint(spec.name);
  const durableLsn = checkpoint?.lsn ?? 0n;
  let lastBatchId = checkpoint?.batchId ?? 0n;
  // Batches recorded in the catalog but never made durable are replayed under new ids.
  await catalog.discardBatchesAfter(spec.name, lastBatchId);

  const stream = await ReplicationStream.start(context.source, {
    slotName: options.slotName,
    publicationName: options.publicationName,
    startLsn: durableLsn,
    applicationName: applicationName(spec.name, 'cdc'),
  });
  const relations = new RelationTracker(spec.tableMappings, options.tables);
  const builder = new BatchBuilder(
    { maxRows: spec.maxBatchSize, maxBytes: context.batchMemoryBudgetBytes },
    durableLsn,
  );
  let typeLookup: PgConnection | undefined;
  const idleTimeoutMs = spec.idleTimeoutSeconds * 1000;
  let inTransaction = false;
  let skipTransaction = false;
  let transactionFinalLsn = 0n;
  let transaction: SourceTransaction = { xid: 0, commitLsn: 0n, commitTimeMicros: 0n };
  const tableStartLsns = options.tableStartLsns ?? new Map<string, bigint>();
  /** The table when this transaction's changes to it are to be applied. */
  const target = (relationId: number) => {
    const tracked = relations.tableOf(relationId);
    if (!tracked || skipTransaction) return undefined;
    const startLsn = tableStartLsns.get(formatTableName(tracked.table.source));
    return startLsn !== undefined && transactionFinalLsn < startLsn ? undefined : tracked;
  };
  let currentBatchId = 0n;

  const flush = async () => {
    if (builder.isEmpty) return;
    const recordedEndLsn = builder.recordedEndLsn;
    const batch = builder.take(spec.name, currentBatchId);
    const started = performance.now();
    await destination.syncBatch(batch);
    context.metrics?.batchSynced(spec.name, batch.rowCount, (performance.now() - started) / 1000);
    lastBatchId = batch.batchId;
    await catalog.finishBatch(spec.name, {
      batchId: batch.batchId,
      endTime: new Date(),
      rowCount: BigInt(batch.rowCount),
      endLsn: recordedEndLsn,
    });
    context.progress?.durable();
    stream.acknowledge(batch.endLsn);
    context.logger.debug(
      { batchId: String(batch.batchId), rows: batch.rowCount, endLsn: formatLsn(batch.endLsn) },
      'batch synced',
    );
  };

  const addChange = async (table: DestinationTable, change: RowChange, lsn: bigint) => {
    if (builder.add(table, change, lsn, Date.now())) {
      currentBatchId = lastBatchId + 1n;
      await catalog.startBatch(spec.name, { batchId: currentBatchId, startTime: new Date(), startLsn: lsn });
    }
    if (builder.isFull) await flush();
  };

  const applySchemaChange = async (change: SchemaChange, relation: RelationMessage) => {
    // The destination must see the batch written under the old shape first.
    if (builder.hasChangesFor(change.table)) await flush();
    const tableName = formatTableName(change.table.source);
    if (change.added.length > 0) {
      typeLookup ??= await connectPostgres(context.source, {
        applicationName: applicationName(spec.name, 'schema'),
      });
      const columns: SourceColumn[] = [];
      for (const added of change.added) {
        const result = await typeLookup.client.query<{ type_name: string }>(
          `SELECT format_type($1::oid, $2::int) AS type_name`,
          [added.typeOid, added.typeModifier],
        );
        columns.push({ ...added, typeName: result.rows[0]?.type_name ?? 'text', notNull: false });
      }
      await destination.addColumns(change.table, columns);
      relations.extend(change.table, columns, relation);
      await mirrorLog(
        context,
        'INFO',
        `added column(s) ${columns.map((c) => c.name).join(', ')} to ${tableName}`,
      );
    }
    if (change.dropped.length > 0) {
      await mirrorLog(
        context,
        'WARN',
        `column(s) ${change.dropped.join(', ')} of ${tableName} were dropped at the source; the destination keeps them and new rows get null`,
      );
    }
    if (change.retyped.length > 0) {
      await mirrorLog(
        context,
        'WARN',
        `column(s) ${change.retyped.join(', ')} of ${tableName} changed type at the source; the destination column type is unchanged`,
      );
    }
  };

  const handle = async (message: PgoutputMessage, lsn: bigint) => {
    switch (message.tag) {
      case 'begin':
        inTransaction = true;
        // Already durable at the destination: replayed after a crash before the ack.
        skipTransaction = message.finalLsn < durableLsn;
        transactionFinalLsn = message.finalLsn;
        transaction = {
          xid: message.xid,
          commitLsn: message.finalLsn,
          commitTimeMicros: message.commitTimeMicros,
        };
        return;
      case 'commit':
        inTransaction = false;
        if (skipTransaction) return;
        builder.commit(message.endLsn);
        // Nothing of ours is pending: the commit can be acknowledged right away.
        if (builder.isEmpty) stream.acknowledge(message.endLsn);
        return;
      case 'relation': {
        const change = relations.observe(message);
        if (change) await applySchemaChange(change, message);
        return;
      }
      case 'insert': {
        const tracked = target(message.relationId);
        if (!tracked) return;
        await addChange(
          tracked.table,
          { kind: 'insert', transaction, newRow: project(message.newTuple, tracked.projection) },
          lsn,
        );
        return;
      }
      case 'update': {
        const tracked = target(message.relationId);
        if (!tracked) return;
        const old = message.oldTuple ?? message.keyTuple;
        const oldRow = old ? project(old, tracked.projection) : null;
        const newRow = fillFromOld(
          project(message.newTuple, tracked.projection),
          message.oldTuple ? oldRow : null,
        );
        await addChange(tracked.table, { kind: 'update', transaction, oldKey: oldRow, newRow }, lsn);
        return;
      }
      case 'delete': {
        const tracked = target(message.relationId);
        if (!tracked) return;
        const old = message.oldTuple ?? message.keyTuple;
        if (!old)
          throw new EngineError(
            'replica_identity',
            `delete without a key in ${formatTableName(tracked.table.source)}`,
          );
        await addChange(
          tracked.table,
          { kind: 'delete', transaction, oldKey: project(old, tracked.projection) },
          lsn,
        );
        return;
      }
      case 'truncate':
        for (const relationId of message.relationIds) {
          const tracked = target(relationId);
          if (tracked) await addChange(tracked.table, { kind: 'truncate', transaction }, lsn);
        }
        return;
      case 'origin':
      case 'type':
      case 'message':
        return;
    }
  };

  const events = stream.events()[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<readonly StreamEvent[]>> | undefined;
  // Each wait gets its own timer and abort listener, both removed afterwards: a
  // long-lived promise in Promise.race would keep every event it ever raced.
  const nextEvents = async (): Promise<NextEvents> => {
    if (signal.aborted) return 'aborted';
    pending ??= events.next();
    const waitMs = builder.isEmpty ? idleTimeoutMs : Math.max(0, idleTimeoutMs - builder.ageMs(Date.now()));
    const waiting = new AbortController();
    try {
      const result = await Promise.race([
        pending,
        delay(waitMs, 'timeout' as const, { signal: waiting.signal }),
        new Promise<'aborted'>((resolve) => {
          signal.addEventListener('abort', () => resolve('aborted'), { once: true, signal: waiting.signal });
        }),
      ]);
      if (result !== 'timeout' && result !== 'aborted') pending = undefined;
      return result;
    } finally {
      waiting.abort();
    }
  };

  await catalog.transition(spec.name, 'running');
  await mirrorLog(context, 'INFO', `streaming changes from slot ${options.slotName}`);
  context.progress?.streaming();
  try {
    for (;;) {
      const next = await nextEvents();
      if (next === 'aborted') break;
      if (next === 'timeout') {
        if (!builder.isEmpty && builder.ageMs(Date.now()) >= idleTimeoutMs) await flush();
        continue;
      }
      if (next.done) throw new EngineError('connection', 'source: replication stream ended unexpectedly');
      for (const event of next.value) {
        if (event.tag === 'keepalive') {
          // Nothing open and nothing buffered: let the slot follow the server so an
          // idle mirror does not hold back WAL.
          if (!inTransaction && builder.isEmpty) stream.acknowledge(event.walEnd);
          continue;
        }
        await handle(event.message, event.walStart);
      }
      context.metrics?.replicationPosition(spec.name, stream.serverWalEnd, stream.flushedLsn);
      if (!builder.isEmpty && builder.ageMs(Date.now()) >= idleTimeoutMs) await flush();
    }
    // Pause or shutdown: make what is buffered durable, so nothing is redone.
    await flush();
  } finally {
    await stream.close();
    await typeLookup?.close();
    await events.return?.(undefined).catch(() => undefined);
  }
}
