// The spec's requests to load tables again (`resyncTables`: a token per
// source table; a token the engine has not acted on is a new request). A
// table stopped on a fault of its own (`errored`) is loaded back: its load
// starts again from nothing, so at this start it is planned as an added table
// is (run-mirror.ts, reconcileMappedTables): emptied and loaded online while
// the others stream, or before streaming when its key cannot be ordered. A
// request for a table in any other state is said in the log and left: an
// online resync beside a live table (readers never seeing it empty) is to come.
import { moveTable } from '../catalog/table-states.ts';
import type { DestinationTable } from '../connectors/records.ts';
import { formatTableName } from '../resources/mirror.ts';
import { type MirrorContext, mirrorLog } from './context.ts';

/** Acts on each resync request of the spec not acted on yet; returns the tables to be loaded back. */
export async function actOnResyncRequests(
  context: MirrorContext,
  tables: readonly DestinationTable[],
): Promise<DestinationTable[]> {
  const { spec, catalog } = context;
  const requests = spec.resyncTables;
  if (Object.keys(requests).length === 0) return [];
  const statuses = new Map((await catalog.listTables(spec.name)).map((table) => [table.sourceTable, table]));
  const reloaded: DestinationTable[] = [];
  for (const table of tables) {
    const sourceTable = formatTableName(table.source);
    const token = requests[sourceTable];
    const status = statuses.get(sourceTable);
    if (token === undefined || !status || status.resyncToken === token) continue;
    if (status.state === 'errored') {
      const names = { sourceTable, destinationTable: formatTableName(table.destination) };
      // A load record of its own, begun now: the load starts from nothing.
      await catalog.startSnapshotTable(spec.name, { ...names, partitionsTotal: 0, cdcStartLsn: 0n });
      await moveTable(catalog, spec.name, names, 'loadQueued');
      await mirrorLog(
        context,
        'INFO',
        `resync of ${sourceTable} requested: it was stopped (${status.problem?.kind ?? 'errored'}); its destination table is emptied and loaded again`,
      );
      reloaded.push(table);
    } else {
      await mirrorLog(
        context,
        'WARN',
        `resync of ${sourceTable} requested while it is ${status.state}: only a table stopped on a fault of its own is loaded again for now; it goes on as it is`,
      );
    }
    await catalog.recordResyncToken(spec.name, sourceTable, token);
  }
  return reloaded;
}
