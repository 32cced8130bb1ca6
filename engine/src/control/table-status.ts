// One table of a mirror as users see it: the `tables` of
// /api/v1/mirrors/status and the Mirror's `status.tables` share this shape
// (docs/api.md), in protojson's conventions: camelCase names, 64-bit integers
// as decimal strings, enum values by name, timestamps in RFC 3339 (UTC), a
// field without a value left out.
import { type TableStateName, type TableStatus, tableStateNames } from '../catalog/catalog.ts';

export interface TableStatusView {
  readonly sourceTableIdentifier: string;
  readonly destinationTableIdentifier: string;
  readonly state: TableStateName;
  readonly stateSince: string;
  readonly rowsApplied: { readonly inserts: string; readonly updates: string; readonly deletes: string };
  /** Commit LSN of the last transaction applied to the table, decimal; "0" before the first. */
  readonly lastAppliedLsn: string;
  /** Its commit time; absent before the first. */
  readonly lastCommitTime?: string;
  /** While errored or held. */
  readonly error?: { readonly kind: string; readonly message: string; readonly remedy: string };
  /** While errored or held: changes after this LSN are not applied to the table. */
  readonly behindLsn?: string;
}

export function tableStatusView(table: TableStatus): TableStatusView {
  return {
    sourceTableIdentifier: table.sourceTable,
    destinationTableIdentifier: table.destinationTable,
    state: tableStateNames[table.state],
    stateSince: table.stateSince.toISOString(),
    rowsApplied: {
      inserts: table.inserts.toString(),
      updates: table.updates.toString(),
      deletes: table.deletes.toString(),
    },
    lastAppliedLsn: table.lastLsn.toString(),
    ...(table.lastCommitTime ? { lastCommitTime: table.lastCommitTime.toISOString() } : {}),
    ...(table.problem
      ? { error: { kind: table.problem.kind, message: table.problem.message, remedy: table.problem.remedy } }
      : {}),
    ...(table.behindLsn !== null ? { behindLsn: table.behindLsn.toString() } : {}),
  };
}
