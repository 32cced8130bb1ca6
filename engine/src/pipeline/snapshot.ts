// The initial load: every mapped table copied under the slot's exported
// snapshot, `snapshotNumTablesInParallel` tables at a time and up to
// `snapshotMaxParallelWorkers` ctid partitions of a table at a time. A table
// whose rows the destination refuses stops alone (table-faults.ts); the
// others load on.

import { pipeline, type Readable, Transform } from 'node:stream';
import pMap from 'p-map';
import { moveTable } from '../catalog/table-states.ts';
import type { DestinationTable } from '../connectors/records.ts';
import type { SnapshotPartition, SnapshotReader } from '../connectors/source.ts';
import { EngineError, isEngineError, tableFault } from '../errors.ts';
import { formatTableName } from '../resources/mirror.ts';
import { type MirrorContext, mirrorLog, watched } from './context.ts';
import type { WatchedStep } from './progress-watchdog.ts';
import { stopTable } from './table-faults.ts';
import { rowFilterOf } from './tables.ts';

/**
 * Loads `tables` under `snapshotName`, which shows the database as of
 * `consistentPoint`: CDC then applies these tables' changes only from
 * transactions that committed at or after that point.
 */
export async function runSnapshot(
  context: MirrorContext,
  tables: readonly DestinationTable[],
  snapshot: { readonly name: string | null; readonly consistentPoint: bigint },
): Promise<void> {
  const { spec } = context;
  // Every table waits its turn (snapshotNumTablesInParallel at a time) as `pending`.
  for (const table of tables) await moveTable(context.catalog, spec.name, tableNames(table), 'loadQueued');
  await mirrorLog(context, 'INFO', `initial load of ${tables.length} table(s) started`);
  await pMap(tables, (table) => snapshotTable(context, table, snapshot), {
    concurrency: spec.snapshotNumTablesInParallel,
    signal: context.signal,
  });
  await mirrorLog(context, 'INFO', 'initial load finished');
}

async function snapshotTable(
  context: MirrorContext,
  table: DestinationTable,
  snapshot: { readonly name: string | null; readonly consistentPoint: bigint },
): Promise<void> {
  const snapshotName = snapshot.name;
  const { spec, catalog } = context;
  const sourceName = formatTableName(table.source);
  const ranges = await watched(context, `initial load: source: plan partitions of ${sourceName}`, () =>
    context.source.planPartitions(table.source, snapshotName, spec.snapshotNumRowsPerPartition),
  );
  await catalog.startSnapshotTable(spec.name, {
    sourceTable: sourceName,
    destinationTable: formatTableName(table.destination),
    partitionsTotal: ranges.length,
    cdcStartLsn: snapshot.consistentPoint,
  });
  await moveTable(catalog, spec.name, tableNames(table), 'loadStarted');

  // Each worker keeps one reader (one connection) and copies partitions until
  // none is left or one failed. The first failure closes every reader, which
  // ends the copies in flight (their COPY streams fail) instead of waiting for
  // them; every worker ends before the outcome counts, so nothing of a stopped
  // table is written after it stopped.
  const workerCount = Math.min(spec.snapshotMaxParallelWorkers, ranges.length);
  let next = 0;
  let failure: { readonly error: unknown } | undefined;
  const opened = new Set<SnapshotReader>();
  const close = async (reader: SnapshotReader) => {
    if (opened.delete(reader)) await reader.close().catch(() => {});
  };
  const worker = async () => {
    let reader: SnapshotReader | undefined;
    try {
      while (!failure && !context.signal.aborted && next < ranges.length) {
        const index = next++;
        const range = ranges[index] as SnapshotPartition;
        if (!reader) {
          reader = await watched(context, `initial load: source: open a reader of ${sourceName}`, () =>
            context.source.openSnapshotReader(snapshotName),
          );
          opened.add(reader);
        }
        await copyOnePartition(context, reader, table, range, `partition ${index + 1} of ${ranges.length}`);
      }
    } catch (error) {
      if (!failure) {
        failure = { error };
        await Promise.all([...opened].map(close));
      }
    } finally {
      if (reader) await close(reader);
    }
  };
  await Promise.all(Array.from({ length: workerCount }, worker));
  context.signal.throwIfAborted();
  if (failure) {
    // A value or shape the destination refuses for this table alone stops
    // it (half loaded: a resync loads it from nothing); anything else is the mirror's.
    const fault = isEngineError(failure.error) ? tableFault(failure.error, sourceName) : undefined;
    if (fault?.table === undefined) throw failure.error;
    await stopTable(context, table, loadFault(fault, sourceName));
    return;
  }
  await catalog.finishSnapshotTable(spec.name, sourceName);
  await moveTable(catalog, spec.name, tableNames(table), 'loadFinished');
  context.logger.info({ table: sourceName, partitions: ranges.length }, 'table loaded');
}

/** A fault met loading a table: its destination table holds part of its rows. */
function loadFault(fault: EngineError, sourceTable: string): EngineError {
  return new EngineError(
    fault.kind,
    `${fault.message} (during its initial load: the destination table holds part of its rows)`,
    { cause: fault, table: sourceTable },
  );
}

function tableNames(table: DestinationTable) {
  return { sourceTable: formatTableName(table.source), destinationTable: formatTableName(table.destination) };
}

async function copyOnePartition(
  context: MirrorContext,
  reader: SnapshotReader,
  table: DestinationTable,
  range: SnapshotPartition,
  partitionName: string,
): Promise<void> {
  const started = performance.now();
  // Watched as one step that moves with every chunk the destination reads.
  const step = context.watchdog?.begin(
    `initial load: destination: write ${formatTableName(table.source)} ${partitionName}`,
  );
  let rowCount: number;
  try {
    rowCount = await reader.copyPartition(
      table.source,
      table.columns.map((column) => column.name),
      range,
      (rows) => context.destination.writeSnapshotPartition(table, step ? movingWith(rows, step) : rows),
      rowFilterOf(context.spec.tableMappings, table.source),
    );
  } finally {
    step?.end();
  }
  context.metrics?.snapshotPartitionLoaded(context.spec.name, formatTableName(table.source), rowCount);
  await context.catalog.recordSnapshotPartition(
    context.spec.name,
    formatTableName(table.source),
    BigInt(rowCount),
    performance.now() - started,
  );
  context.progress?.durable();
}

/**
 * The same COPY text, telling `step` of each chunk read. Errors go both ways:
 * a failed COPY fails what the destination reads, and a destination that
 * stops reading destroys the COPY stream (the reader then drops its COPY).
 */
function movingWith(rows: Readable, step: WatchedStep): Readable {
  const moving = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      step.progressed();
      done(null, chunk);
    },
  });
  pipeline(rows, moving, () => {});
  return moving;
}
