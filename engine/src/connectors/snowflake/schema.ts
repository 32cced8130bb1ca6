// Target tables: created from the source columns with the types of types.ts,
// the key declared as PRIMARY KEY (Snowflake records it and does not enforce
// it), the mirror's soft-delete and synced-at columns appended.
import type { MirrorColumns } from '../destination.ts';
import type { DestinationTable, SourceColumn } from '../records.ts';
import { columnIdent, quoteIdent, snowflakeName, stringLiteral, tableIdent } from './sql.ts';
import { columnCodec } from './types.ts';

export function createSchemaSql(database: string, table: DestinationTable): string {
  return `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(database)}.${columnIdent(table.destination.schema)}`;
}

export function createTableSql(
  database: string,
  table: DestinationTable,
  mirrorColumns: MirrorColumns,
): string {
  const keys = new Set(table.keyColumns);
  const definitions = table.columns.map(
    (column) =>
      `${columnIdent(column.name)} ${columnCodec(column).sqlType}${keys.has(column.name) ? ' NOT NULL' : ''}`,
  );
  if (mirrorColumns.softDeleteColumn) {
    definitions.push(`${columnIdent(mirrorColumns.softDeleteColumn)} BOOLEAN NOT NULL DEFAULT FALSE`);
  }
  if (mirrorColumns.syncedAtColumn) {
    definitions.push(`${columnIdent(mirrorColumns.syncedAtColumn)} TIMESTAMP_TZ DEFAULT CURRENT_TIMESTAMP()`);
  }
  if (table.keyColumns.length > 0) {
    definitions.push(`PRIMARY KEY (${table.keyColumns.map(columnIdent).join(', ')})`);
  }
  return `CREATE TABLE IF NOT EXISTS ${tableIdent(database, table.destination)} (${definitions.join(', ')})`;
}

/** DDL: commits implicitly, so it runs before a batch's BEGIN, never inside. */
export function addColumnSql(database: string, table: DestinationTable, column: SourceColumn): string {
  return `ALTER TABLE ${tableIdent(database, table.destination)} ADD COLUMN IF NOT EXISTS ${columnIdent(column.name)} ${columnCodec(column).sqlType}`;
}

export function tableExistsSql(database: string, table: DestinationTable): string {
  return `SELECT COUNT(*) AS "FOUND" FROM ${quoteIdent(database)}.INFORMATION_SCHEMA.TABLES
    WHERE TABLE_SCHEMA = ${stringLiteral(snowflakeName(table.destination.schema))}
      AND TABLE_NAME = ${stringLiteral(snowflakeName(table.destination.table))}`;
}

export function anyRowSql(database: string, table: DestinationTable): string {
  return `SELECT 1 AS "ONE" FROM ${tableIdent(database, table.destination)} LIMIT 1`;
}
