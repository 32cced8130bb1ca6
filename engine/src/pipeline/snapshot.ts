// The initial load: every mapped table copied under the slot's exported
// snapshot, `snapshotNumTablesInParallel` tables at a time and up to
// `snapshotMaxParallelWorkers` ctid partitions of a table at a time.
import pMap from 'p-map';
import type { DestinationTable } from '../connectors/records.ts';
import type { SnapshotPartition, SnapshotReader } from '../connectors/source.ts';
import { formatTableName } from '../resources/mirror.ts';
import { type MirrorContext, mirrorLog } from './context.ts';

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
  const ranges = await context.source.planPartitions(
    table.source,
    snapshotName,
    spec.snapshotNumRowsPerPartition,
  );
  await catalog.startSnapshotTable(spec.name, {
    sourceTable: sourceName,
    destinationTable: formatTableName(table.destination),
    partitionsTotal: ranges.length,
    cdcStartLsn: snapshot.consistentPoint,
  });

  // Each worker keeps one reader (one connection) and reuses it across partitions.
  const workerCount = Math.min(spec.snapshotMaxParallelWorkers, ranges.length);
  const idle: SnapshotReader[] = [];
  const opened: SnapshotReader[] = [];
  try {
    await pMap(
      ranges,
      async (range) => {
        let reader = idle.pop();
        if (!reader) {
          reader = await context.source.openSnapshotReader(snapshotName);
          opened.push(reader);
        }
        try {
          await copyOnePartition(context, reader, table, range);
        } finally {
          idle.push(reader);
        }
      },
      { concurrency: workerCount, signal: context.signal },
    );
  } finally {
    await Promise.all(opened.map((reader) => reader.close()));
  }
  await catalog.finishSnapshotTable(spec.name, sourceName);
  context.logger.info({ table: sourceName, partitions: ranges.length }, 'table loaded');
}

async function copyOnePartition(
  context: MirrorContext,
  reader: SnapshotReader,
  table: DestinationTable,
  range: SnapshotPartition,
): Promise<void> {
  const started = performance.now();
  const rowCount = await reader.copyPartition(
    table.source,
    table.columns.map((column) => column.name),
    range,
    (rows) => context.destination.writeSnapshotPartition(table, rows),
  );
  context.metrics?.snapshotPartitionLoaded(context.spec.name, formatTableName(table.source), rowCount);
  await context.catalog.recordSnapshotPartition(
    context.spec.name,
    formatTableName(table.source),
    BigInt(rowCount),
    performance.now() - started,
  );
  context.progress?.durable();
}
