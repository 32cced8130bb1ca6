// Turns table mappings and what the source says about each table into the
// destination tables the mirror writes.

import type { DestinationTable } from '../connectors/records.ts';
import type { PublishedTable, SourceTableInfo } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, type TableMapping, type TableName } from '../resources/mirror.ts';

export function destinationTable(mapping: TableMapping, info: SourceTableInfo): DestinationTable {
  const shown = formatTableName(mapping.source);
  const known = new Set(info.columns.map((column) => column.name));
  const unknown = mapping.exclude.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new EngineError('config', `excluded columns ${unknown.join(', ')} do not exist in ${shown}`);
  }
  const excluded = new Set(mapping.exclude);
  const excludedKeys = info.keyColumns.filter((name) => excluded.has(name));
  if (excludedKeys.length > 0) {
    throw new EngineError('config', `key columns ${excludedKeys.join(', ')} of ${shown} cannot be excluded`);
  }
  return {
    source: mapping.source,
    destination: mapping.destination,
    columns: info.columns.filter((column) => !excluded.has(column.name)),
    keyColumns: info.keyColumns,
  };
}

/**
 * A table as the mirror's own publication names it: its row filter, and the
 * replicated columns when some are excluded, so that on PostgreSQL 15+
 * excluded columns never leave the source. Not under REPLICA IDENTITY FULL:
 * a column list must then hold every column, or PostgreSQL refuses the
 * table's updates and deletes; its excluded columns are left out by the
 * engine, as on older servers.
 */
export function publishedTable(mapping: TableMapping, info: SourceTableInfo): PublishedTable {
  const table = destinationTable(mapping, info);
  const listsColumns = mapping.exclude.length > 0 && info.replicaIdentity !== 'full';
  return {
    name: mapping.source,
    ...(listsColumns ? { columns: table.columns.map((column) => column.name) } : {}),
    ...(mapping.rowFilter !== undefined ? { rowFilter: mapping.rowFilter } : {}),
  };
}

/** The row filter of a mapped source table, if it has one. */
export function rowFilterOf(mappings: readonly TableMapping[], source: TableName): string | undefined {
  return mappings.find(
    (mapping) => mapping.source.schema === source.schema && mapping.source.table === source.table,
  )?.rowFilter;
}
