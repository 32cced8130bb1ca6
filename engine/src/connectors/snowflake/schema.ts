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

/** The table's columns as Snowflake has them: COLUMN_NAME, DATA_TYPE. */
export function columnsSql(database: string, table: DestinationTable): string {
  return `SELECT COLUMN_NAME AS "COLUMN_NAME", DATA_TYPE AS "DATA_TYPE" FROM ${quoteIdent(database)}.INFORMATION_SCHEMA.COLUMNS
    WHERE TABLE_SCHEMA = ${stringLiteral(snowflakeName(table.destination.schema))}
      AND TABLE_NAME = ${stringLiteral(snowflakeName(table.destination.table))}`;
}

/**
 * Whether ALTER COLUMN … SET DATA TYPE takes a column from `before` to
 * `after` (https://docs.snowflake.com/en/sql-reference/sql/alter-table-column):
 * a NUMBER's precision may grow at the same scale, a VARCHAR's length may grow.
 */
export function canSetDataType(before: string, after: string): boolean {
  if (before === after) return true;
  const number = /^NUMBER\((\d+),(\d+)\)$/;
  const from = number.exec(before);
  const to = number.exec(after);
  if (from && to) return from[2] === to[2] && Number(to[1]) >= Number(from[1]);
  const varchar = /^VARCHAR(?:\((\d+)\))?$/;
  const fromText = varchar.exec(before);
  const toText = varchar.exec(after);
  if (fromText && toText)
    return toText[1] === undefined || Number(toText[1]) >= Number(fromText[1] ?? Infinity);
  return false;
}

export function tableExistsSql(database: string, table: DestinationTable): string {
  return `SELECT COUNT(*) AS "FOUND" FROM ${quoteIdent(database)}.INFORMATION_SCHEMA.TABLES
    WHERE TABLE_SCHEMA = ${stringLiteral(snowflakeName(table.destination.schema))}
      AND TABLE_NAME = ${stringLiteral(snowflakeName(table.destination.table))}`;
}

export function anyRowSql(database: string, table: DestinationTable): string {
  return `SELECT 1 AS "ONE" FROM ${tableIdent(database, table.destination)} LIMIT 1`;
}
