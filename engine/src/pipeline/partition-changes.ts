// What the mirror does about a change of a partitioned table's rows that
// PostgreSQL did not publish (partition-watch.ts finds them), under the
// mirror's schema change policy: the set of a table's partitions is part of
// its shape (docs/engine.md, "Partitioned tables").
// - apply: the destination follows: the table is resynced online (loaded
//   beside the live one while it streams, then put in its place), so it ends
//   equal to the source; a table that cannot be resynced online is held.
// - hold: the table is held (its changes wait) until a resync accepts it.
// - ignore: the destination keeps what it has (a detached, dropped or
//   truncated partition's rows stay, as history; an attached table's rows
//   are not loaded), said in the log; the table streams on.
import { moveTable } from '../catalog/table-states.ts';
import type { DestinationTable } from '../connectors/records.ts';
import { formatTableName } from '../resources/mirror.ts';
import { keyOrderOf } from './backfill/key-order.ts';
import { type MirrorContext, mirrorLog } from './context.ts';
import type { PartitionChange, PartitionFinding, PartitionWatch } from './partition-watch.ts';
import { HeldSchemaChange } from './schema-evolution.ts';
import { reloadFromNothing } from './table-faults.ts';
import { finishResync } from './table-resync.ts';

const changeWords: Record<PartitionChange['kind'], string> = {
  truncated: 'was truncated (or rewritten: VACUUM FULL, CLUSTER)',
  detached: 'was detached or dropped',
  attached: 'was attached with rows it held before',
};

/** What happened to a table's partitions, in words. */
export function describePartitionChanges(finding: PartitionFinding): string {
  const said = finding.changes.map((change) => `partition ${change.leaf} ${changeWords[change.kind]}`);
  return `${said.join('; ')}: PostgreSQL does not publish this under the partitioned table ${finding.sourceTable}`;
}

/** What the mirror did: go on streaming, or start its steps again (a resync or a reload begins). */
export type PartitionAction = 'stream' | 'restart';

/**
 * Acts on one finding; throws the table's HeldSchemaChange to hold it (the
 * run stops the table and streams on without it, table-faults.ts). The
 * finding's leaves are recorded first in every case: a resync or reload
 * loads them as they are now, and a held or ignored change is not found again.
 */
export async function actOnPartitionChange(
  context: MirrorContext,
  watch: PartitionWatch,
  finding: PartitionFinding,
  table: DestinationTable,
): Promise<PartitionAction> {
  const { spec, catalog } = context;
  const { sourceTable } = finding;
  const what = describePartitionChanges(finding);
  await watch.accept(sourceTable, finding.leaves);
  const policy = spec.schemaChanges;
  if (policy === 'ignore') {
    await mirrorLog(
      context,
      'WARN',
      `${what}; under schemaChanges ignore the destination table keeps the rows it has (resync the table to bring it level with the source)`,
    );
    return 'stream';
  }
  const status = (await catalog.listTables(spec.name)).find((entry) => entry.sourceTable === sourceTable);
  const held = new HeldSchemaChange(sourceTable, what);
  if (policy === 'hold') throw held;
  const names = { sourceTable, destinationTable: formatTableName(table.destination) };
  if (status?.state === 'loading') {
    // Rows its load copied may be gone from the source: loaded again from nothing.
    await reloadFromNothing(context, table, status, held, `${what}, while the table was loading`);
    return 'restart';
  }
  const owned = new Set(await catalog.listOwnedTables(spec.name));
  const online = context.destination.shadowTables && keyOrderOf(table) && owned.has(names.destinationTable);
  if (!online) throw held;
  if (status?.state === 'resyncing') {
    await finishResync(context, table, 'WARN', `given up: ${what}; it starts again`);
  } else if (status?.state !== 'streaming') {
    return 'stream';
  }
  await moveTable(catalog, spec.name, names, 'resyncStarted');
  await mirrorLog(
    context,
    'INFO',
    `${what}; the table is resynced online so that its destination holds what the source holds: loaded beside the live table, which streams on, then put in its place`,
  );
  return 'restart';
}
