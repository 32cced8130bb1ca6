// The spec's requests to load tables again (`resyncTables`: a token per
// source table; a token the engine has not acted on is a new request).
// - A table stopped on a fault of its own (`errored`) is loaded back: its load
//   starts again from nothing, so at this start it is planned as an added
//   table is (run-mirror.ts, reconcileMappedTables): emptied and loaded online
//   while the others stream, or before streaming when its key cannot be ordered.
// - A streaming table is resynced online (`resyncing`): loaded into a shadow
//   table beside it (Destination.shadowTables) by the online backfill, while
//   every change of it goes to both in the same batches, and the batch that
//   completes the copy puts the shadow in the live table's place in the same
//   transaction as its checkpoint (ChangeBatch.swaps; cdc.ts; ClickHouse and
//   Snowflake name the swap as due with it and make it after). Readers of the live table
//   never see it empty or half loaded. It needs a destination with shadow
//   tables (PostgreSQL, ClickHouse, Snowflake, Kafka), a key the engine orders (backfill/key-order.ts),
//   and a destination table the mirror created; otherwise the request is said
//   in the log and left, as is one for a table in any other state.
import { moveTable } from '../catalog/table-states.ts';
import type { DestinationTable } from '../connectors/records.ts';
import { formatTableName } from '../resources/mirror.ts';
import { type KeyOrder, keyOrderOf } from './backfill/key-order.ts';
import { type MirrorContext, mirrorLog } from './context.ts';
import { recordLoadedPartitions } from './partition-watch.ts';

/** A streaming table's online resync: its shadow loads while both take its changes. */
export interface ResyncLoad {
  readonly live: DestinationTable;
  readonly shadow: DestinationTable;
  readonly order: KeyOrder;
  /** When this resync began (the table's `resyncing` state since). */
  readonly since: number;
}

/** A resync's name in a batch's backfill record, apart from the table's own load. */
export function resyncKey(live: DestinationTable): string {
  return `resync ${formatTableName(live.source)}`;
}

/**
 * The resync ends: the table streams on, said in the log (by default: its
 * swap is durable, the table streams on from its new rows).
 */
export async function finishResync(
  context: MirrorContext,
  live: DestinationTable,
  level: 'INFO' | 'WARN' = 'INFO',
  how = 'done online: its destination table was replaced by the one loaded beside it',
): Promise<void> {
  const sourceTable = formatTableName(live.source);
  await moveTable(
    context.catalog,
    context.spec.name,
    { sourceTable, destinationTable: formatTableName(live.destination) },
    'resyncFinished',
  );
  await mirrorLog(context, level, `resync of ${sourceTable} ${how}`);
}

/**
 * A table stopped on a fault of its own is loaded back: its load starts again
 * from nothing, so at this start it is planned as an added table is
 * (run-mirror.ts, reconcileMappedTables). `why` leads the log line.
 */
export async function reloadErroredTable(
  context: MirrorContext,
  table: DestinationTable,
  why: string,
): Promise<void> {
  const { spec, catalog } = context;
  const names = {
    sourceTable: formatTableName(table.source),
    destinationTable: formatTableName(table.destination),
  };
  // A load record of its own, begun now: the load starts from nothing.
  await recordLoadedPartitions(context, [table]);
  await catalog.startSnapshotTable(spec.name, { ...names, partitionsTotal: 0, cdcStartLsn: 0n });
  await moveTable(catalog, spec.name, names, 'loadQueued');
  await mirrorLog(context, 'INFO', `${why}; its destination table is emptied and loaded again`);
}

/** Acts on each resync request of the spec not acted on yet; returns the tables to be loaded back. */
export async function actOnResyncRequests(
  context: MirrorContext,
  tables: readonly DestinationTable[],
): Promise<DestinationTable[]> {
  const { spec, catalog } = context;
  const requests = spec.resyncTables;
  if (Object.keys(requests).length === 0) return [];
  const statuses = new Map((await catalog.listTables(spec.name)).map((table) => [table.sourceTable, table]));
  const owned = new Set(await catalog.listOwnedTables(spec.name));
  const reloaded: DestinationTable[] = [];
  for (const table of tables) {
    const sourceTable = formatTableName(table.source);
    const token = requests[sourceTable];
    const status = statuses.get(sourceTable);
    if (token === undefined || !status || status.resyncToken === token) continue;
    if (status.state === 'errored' || status.state === 'held') {
      await reloadErroredTable(
        context,
        table,
        status.state === 'held'
          ? `resync of ${sourceTable} requested: it accepts its held schema change`
          : `resync of ${sourceTable} requested: it was stopped (${status.problem?.kind ?? 'errored'})`,
      );
      reloaded.push(table);
    } else if (status.state === 'streaming') {
      const names = { sourceTable, destinationTable: formatTableName(table.destination) };
      const refusal = !context.destination.shadowTables
        ? 'this destination cannot load a table beside the live one'
        : !keyOrderOf(table)
          ? 'its key is not of a type the engine orders (int2, int4, int8, oid, uuid, text, varchar, bpchar, name)'
          : !owned.has(names.destinationTable)
            ? `destination table ${names.destinationTable} was not created by the mirror`
            : undefined;
      if (refusal) {
        await mirrorLog(context, 'WARN', `resync of ${sourceTable} requested, not started: ${refusal}`);
      } else {
        await recordLoadedPartitions(context, [table]);
        await moveTable(catalog, spec.name, names, 'resyncStarted');
        await mirrorLog(
          context,
          'INFO',
          `resync of ${sourceTable} started: loaded beside the live table, which streams on, then put in its place in one transaction`,
        );
      }
    } else {
      await mirrorLog(
        context,
        'WARN',
        `resync of ${sourceTable} requested while it is ${status.state}: only a streaming table or one stopped on a fault of its own is loaded again; it goes on as it is`,
      );
    }
    await catalog.recordResyncToken(spec.name, sourceTable, token);
  }
  return reloaded;
}

/**
 * The online resyncs to carry on at this start: every table `resyncing` (its
 * shadow is loaded from where the checkpoint batch's record says). One that
 * can no longer be (the destination or its key changed) is given up: it
 * streams on as it was, its shadow dropped.
 */
export async function plannedResyncs(
  context: MirrorContext,
  tables: readonly DestinationTable[],
): Promise<ResyncLoad[]> {
  const { spec, catalog, destination } = context;
  const resyncing = new Map(
    (await catalog.listTables(spec.name))
      .filter((table) => table.state === 'resyncing')
      .map((table) => [table.sourceTable, table]),
  );
  const loads: ResyncLoad[] = [];
  for (const live of tables) {
    const sourceTable = formatTableName(live.source);
    const status = resyncing.get(sourceTable);
    if (!status) continue;
    const order = keyOrderOf(live);
    const shadows = destination.shadowTables;
    if (!order || !shadows) {
      await finishResync(context, live, 'WARN', 'given up: it can no longer be loaded beside the live table');
      continue;
    }
    loads.push({ live, shadow: shadows.shadowOf(live), order, since: status.stateSince.getTime() });
  }
  return loads;
}
