// Faults that belong to one table. A destination that refuses one table's
// rows or shape says which table (EngineError.table, errors.ts `tableFault`);
// the run then stops that table alone (state `errored`, with the problem and
// the position its destination is at) and streams on from the destination's
// checkpoint without it, so the other tables go on and the slot keeps
// advancing. Nothing of the stopped table is applied from then on; it comes
// back by a load (docs/mirror-lifecycle.md, "A table's own fault").

import type { TableStatus } from '../catalog/catalog.ts';
import { moveTable } from '../catalog/table-states.ts';
import type { DestinationTable } from '../connectors/records.ts';
import { EngineError, isEngineError } from '../errors.ts';
import { formatTableName } from '../resources/mirror.ts';
import { type MirrorContext, mirrorLog } from './context.ts';
import { HeldSchemaChange } from './schema-evolution.ts';
import { reloadErroredTable } from './table-resync.ts';

/** The mapped, still running table `error` is a fault of, if it is one table's. */
export function faultedTable(
  error: unknown,
  tables: readonly DestinationTable[],
  stopped: ReadonlySet<string>,
): { readonly table: DestinationTable; readonly error: EngineError } | undefined {
  if (!isEngineError(error) || error.table === undefined || stopped.has(error.table)) return undefined;
  const table = tables.find((candidate) => formatTableName(candidate.source) === error.table);
  return table ? { table, error } : undefined;
}

/** What a person does about a held schema change (docs/engine.md, "Schema changes"). */
export const heldSchemaChangeRemedy =
  "accept it by resyncing the table (POST /api/v1/mirrors/tables/resync, or the Mirror's spec.resyncTables): its destination table takes the source's shape and is loaded again online; or remove the table from the mirror's table mappings; the mirror's other tables go on meanwhile";

/** What a person does about a stopped table: the fault's own remedy, then the way back. */
export function stoppedTableRemedy(error: EngineError): string {
  // A source table gone comes back by itself once it is there again (source-tables-watch.ts).
  if (error.kind === 'source_schema') {
    return "restore the source table or rename it back, and the table loads again by itself; or remove it from the mirror's table mappings; the mirror's other tables go on meanwhile";
  }
  return `${error.policy.remedy}; then resync the table (POST /api/v1/mirrors/tables/resync, or the Mirror's spec.resyncTables); the mirror's other tables go on meanwhile`;
}

/**
 * Stops `table` on `error`: `errored` from the destination's checkpoint on
 * (every change of it before that position is at the destination, none
 * after; the failed batch was not written), said once in the mirror's log.
 * The caller streams on without it.
 */
export async function stopTable(
  context: MirrorContext,
  table: DestinationTable,
  error: EngineError,
): Promise<void> {
  const { spec, catalog, destination } = context;
  const sourceTable = formatTableName(table.source);
  // Where its changes stop: the destination's last batch, or before any, the
  // position its load's rows are as of.
  const checkpoint = await destination.readCheckpoint(spec.name);
  const loadedAt = (await catalog.listSnapshotProgress(spec.name)).find(
    (entry) => entry.sourceTable === sourceTable,
  )?.cdcStartLsn;
  const behindLsn = checkpoint?.lsn ?? loadedAt ?? 0n;
  const held = error instanceof HeldSchemaChange;
  const remedy = held ? heldSchemaChangeRemedy : stoppedTableRemedy(error);
  await moveTable(
    catalog,
    spec.name,
    { sourceTable, destinationTable: formatTableName(table.destination) },
    held ? 'schemaChangeHeld' : 'tableFailed',
    { problem: { kind: error.kind, message: error.message, remedy }, behindLsn },
  );
  await mirrorLog(
    context,
    held ? 'WARN' : 'ERROR',
    held
      ? `table ${sourceTable} held: ${error.message}. ${remedy}`
      : `table ${sourceTable} stopped (${error.kind}): ${error.message}. ${remedy}`,
  );
  // A resync under way is given up with it: its shadow goes (a later resync loads the table anew).
  const shadows = destination.shadowTables;
  if (shadows) {
    await shadows.drop(shadows.shadowOf(table)).catch((failure: unknown) => {
      context.logger.warn({ err: failure }, 'could not drop the resync table of a stopped table');
    });
  }
}

/** Of `tables`, those whose destination table the mirror owns and the destination no longer has. */
async function droppedDestinations(
  context: MirrorContext,
  tables: readonly DestinationTable[],
): Promise<DestinationTable[]> {
  const owned = new Set(await context.catalog.listOwnedTables(context.spec.name));
  const candidates = tables.filter((table) => owned.has(formatTableName(table.destination)));
  if (candidates.length === 0) return [];
  const states = await context.destination.tableStates(candidates);
  return candidates.filter((_, index) => states[index] === 'absent');
}

/**
 * Whether a stopped table's fault is its destination table gone: dropped
 * under the mirror, which owns it. The cause can be checked and the mirror
 * can remove it (the mapping says the table is replicated), so the table
 * rejoins by itself: the steps start again, and rejoinDroppedDestinations
 * loads it from nothing into a table created anew.
 * A table the mirror does not own is left to a person (a resync request).
 */
export async function destinationTableDropped(
  context: MirrorContext,
  table: DestinationTable,
  error: EngineError,
): Promise<boolean> {
  if (error.kind !== 'schema_mismatch' || error instanceof HeldSchemaChange) return false;
  return (await droppedDestinations(context, [table])).length > 0;
}

/**
 * Loads a table again from nothing (table-resync.ts, reloadErroredTable),
 * stopping it first on `error` when it still runs (streaming, or loading).
 */
export async function reloadFromNothing(
  context: MirrorContext,
  table: DestinationTable,
  status: TableStatus | undefined,
  error: EngineError,
  why: string,
): Promise<void> {
  if (status?.state === 'streaming' || status?.state === 'loading') await stopTable(context, table, error);
  await reloadErroredTable(context, table, why);
}

/**
 * At a start: each table whose destination table the mirror owns and no
 * longer finds (dropped while no engine ran, or after its table stopped for
 * it) is loaded again from nothing, rather than streamed into an empty table
 * created in its place, which would miss every row before. Tables stopped
 * for another reason, held or not tracked yet are left as they are.
 */
export async function rejoinDroppedDestinations(
  context: MirrorContext,
  tables: readonly DestinationTable[],
  tracked: ReadonlyMap<string, TableStatus>,
): Promise<void> {
  const statusOf = (table: DestinationTable) => tracked.get(formatTableName(table.source));
  const candidates = tables.filter((table) => {
    const status = statusOf(table);
    if (status?.state === 'streaming') return true;
    return status?.state === 'errored' && status.problem?.kind === 'schema_mismatch';
  });
  for (const table of await droppedDestinations(context, candidates)) {
    const destinationTable = formatTableName(table.destination);
    await reloadFromNothing(
      context,
      table,
      statusOf(table),
      new EngineError('schema_mismatch', `destination table ${destinationTable} does not exist`, {
        table: formatTableName(table.source),
      }),
      `destination table ${destinationTable} was dropped under the mirror, which owns it: it is created again`,
    );
  }
}
