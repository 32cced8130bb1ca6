// The initial load: every mapped table copied under the slot's exported
// snapshot, `snapshotNumTablesInParallel` tables at a time and up to
// `snapshotMaxParallelWorkers` ctid partitions of a table at a time.
import pMap from 'p-map';
import { connectPostgres, type PgConnection } from '../connectors/postgres/connect.ts';
import {
  beginSnapshotTransaction,
  type CtidRange,
  copyPartition,
  planPartitions,
} from '../connectors/postgres/snapshot-reader.ts';
import type { DestinationTable } from '../connectors/records.ts';
import { EngineError } from '../errors.ts';
import { formatTableName } from '../resources/mirror.ts';
import { applicationName, type MirrorContext, mirrorLog } from './context.ts';

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
  const planner = await openSourceConnection(context);
  let ranges: CtidRange[];
  try {
    await beginSnapshotTransaction(planner.client, snapshotName);
    ranges = await planPartitions(planner.client, table.source, spec.snapshotNumRowsPerPartition);
  } finally {
    await planner.close();
  }
  await catalog.startSnapshotTable(spec.name, {
    sourceTable: sourceName,
    destinationTable: formatTableName(table.destination),
    partitionsTotal: ranges.length,
    cdcStartLsn: snapshot.consistentPoint,
  });

  // Each worker keeps one connection and reuses it across partitions.
  const workerCount = Math.min(spec.snapshotMaxParallelWorkers, ranges.length);
  const idle: PgConnection[] = [];
  const opened: PgConnection[] = [];
  try {
    await pMap(
      ranges,
      async (range) => {
        let connection = idle.pop();
        if (!connection) {
          connection = await openSourceConnection(context);
          opened.push(connection);
        }
        try {
          await copyOnePartition(context, connection, table, range, snapshotName);
        } finally {
          idle.push(connection);
        }
      },
      { concurrency: workerCount, signal: context.signal },
    );
  } finally {
    await Promise.all(opened.map((connection) => connection.close()));
  }
  await catalog.finishSnapshotTable(spec.name, sourceName);
  context.logger.info({ table: sourceName, partitions: ranges.length }, 'table loaded');
}

function openSourceConnection(context: MirrorContext): Promise<PgConnection> {
  return connectPostgres(context.source, { applicationName: applicationName(context.spec.name, 'snapshot') });
}

async function copyOnePartition(
  context: MirrorContext,
  connection: PgConnection,
  table: DestinationTable,
  range: CtidRange,
  snapshotName: string | null,
): Promise<void> {
  const started = performance.now();
  await beginSnapshotTransaction(connection.client, snapshotName);
  try {
    const rows = copyPartition(
      connection.client,
      table.source,
      table.columns.map((column) => column.name),
      range,
    );
    const rowCount = await context.destination.writeSnapshotPartition(table, rows);
    await connection.client.query('COMMIT');
    context.metrics?.snapshotPartitionLoaded(context.spec.name, formatTableName(table.source), rowCount);
    await context.catalog.recordSnapshotPartition(
      context.spec.name,
      formatTableName(table.source),
      BigInt(rowCount),
      performance.now() - started,
    );
    context.progress?.durable();
  } catch (error) {
    await connection.client.query('ROLLBACK').catch(() => {});
    if (error instanceof EngineError) throw error;
    throw new EngineError('internal', `initial load of ${formatTableName(table.source)} failed`, {
      cause: error,
    });
  }
}
