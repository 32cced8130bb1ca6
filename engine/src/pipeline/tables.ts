// Turns table mappings and what the source says about each table into the
// destination tables the mirror writes.

import type { DestinationTable } from '../connectors/records.ts';
import type { SourceTableInfo } from '../connectors/source.ts';
import { EngineError } from '../errors.ts';
import { formatTableName, type TableMapping } from '../resources/mirror.ts';

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
