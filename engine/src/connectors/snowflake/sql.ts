// Snowflake identifiers and literals. Every name the connector writes is the
// source name upper-cased and double-quoted (docs/snowflake.md, "Names"): an
// unquoted `orders` in a user's query then finds the table `"ORDERS"`.
import type { TableName } from '../../resources/mirror.ts';

/** A double-quoted identifier: `"` doubles inside (https://docs.snowflake.com/en/sql-reference/identifiers-syntax). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The Snowflake name of a source name: upper-cased, as an unquoted identifier would resolve. */
export function snowflakeName(sourceName: string): string {
  return sourceName.toUpperCase();
}

/** The quoted Snowflake identifier of a source name. */
export function columnIdent(sourceName: string): string {
  return quoteIdent(snowflakeName(sourceName));
}

/** `"DATABASE"."SCHEMA"."TABLE"` for a destination table. */
export function tableIdent(database: string, table: TableName): string {
  return `${quoteIdent(database)}.${columnIdent(table.schema)}.${columnIdent(table.table)}`;
}

/**
 * A single-quoted string literal. Snowflake reads backslash escapes inside
 * string literals, so backslashes are doubled as well as quotes
 * (https://docs.snowflake.com/en/sql-reference/data-types-text#escape-sequences-in-single-quoted-string-constants).
 */
export function stringLiteral(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}
