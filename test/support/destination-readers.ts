// What a destination holds of a table whose shape changes, read as the schema
// change suites compare it with the source (shaped-table.ts): ClickHouse's
// and Snowflake's columns (the mirror's own left out) and rows as text cells
// by id, and a Kafka topic folded by key as a consumer would, each
// schema_change message applied to the rows folded before it.
import type { ClickHouseClient } from '@clickhouse/client';
import type { Received } from '../integration/kafka-support.ts';
import type { SnowflakeAdmin } from './snowflake-peer.ts';

/** The rows a query reads, as JSON objects. */
export async function clickhouseRows<T>(client: ClickHouseClient, query: string): Promise<T[]> {
  return (await client.query({ query, format: 'JSONEachRow' })).json<T>();
}

/** The table's columns as `name type`, by name. */
export const clickhouseColumns = async (client: ClickHouseClient, database: string, table: string) =>
  (
    await clickhouseRows<{ column: string }>(
      client,
      `SELECT concat(name, ' ', type) AS column FROM system.columns
       WHERE database = '${database}' AND table = '${table}' AND NOT startsWith(name, '_tributary_') ORDER BY name`,
    )
  ).map((row) => row.column);

/**
 * The rows as readers see them (FINAL, deleted rows filtered), as text cells
 * by id. Each cell is named with a space, as no column is: ClickHouse resolves
 * a name to an alias of the same SELECT before the column.
 */
export const clickhouseCells = async (
  client: ClickHouseClient,
  database: string,
  table: string,
  columns: readonly string[],
) =>
  (
    await clickhouseRows<Record<string, string | null>>(
      client,
      `SELECT ${columns.map((column, index) => `toString(${column}) AS \`cell ${index}\``).join(', ')}
       FROM ${database}.${table} FINAL WHERE _tributary_is_deleted = 0 ORDER BY id`,
    )
  ).map((row) => columns.map((_, index) => row[`cell ${index}`] ?? null));

/** Where a Snowflake table is: its database, schema and name as the server spells them. */
export interface SnowflakeTable {
  readonly database: string;
  readonly schema: string;
  readonly table: string;
}

/** The table's columns as `NAME TYPE[(precision)]`, by name. */
export const snowflakeColumns = async (admin: SnowflakeAdmin, { database, schema, table }: SnowflakeTable) =>
  (
    await admin.rows(
      `SELECT COLUMN_NAME AS "NAME", DATA_TYPE AS "TYPE", NUMERIC_PRECISION AS "P"
       FROM "${database}".INFORMATION_SCHEMA.COLUMNS
       WHERE TABLE_SCHEMA = '${schema}' AND TABLE_NAME = '${table}' ORDER BY COLUMN_NAME`,
    )
  )
    .filter((row) => !String(row.NAME).startsWith('_TRIBUTARY'))
    .map((row) => `${row.NAME} ${row.TYPE}${row.P === null ? '' : `(${row.P})`}`);

/** The rows as text cells by id, one a column of `columns` (source names); cells named as no column is. */
export const snowflakeCells = async (
  admin: SnowflakeAdmin,
  { database, schema, table }: SnowflakeTable,
  columns: readonly string[],
) =>
  (
    await admin.rows(
      `SELECT ${columns.map((column, index) => `TO_VARCHAR("${column.toUpperCase()}") AS "CELL ${index}"`).join(', ')}
       FROM "${database}"."${schema}"."${table}" ORDER BY "ID"`,
    )
  ).map((row) => columns.map((_, index) => row[`CELL ${index}`] ?? null));

/** A topic's message with its value parsed (docs/kafka.md, "Messages"). */
export interface DecodedMessage {
  readonly message: Received;
  readonly value: {
    readonly kind: string;
    readonly new?: Record<string, unknown> | null;
    readonly changes?: readonly { readonly change: string; readonly column: string; readonly to?: string }[];
    /** A schema_change's columns: the shape of the messages after it. */
    readonly columns?: readonly { readonly name: string; readonly type: string }[];
  };
}

/**
 * The topic folded by key as a consumer does, each schema_change applied to
 * the rows of its partition folded so far (a row not written since keeps its
 * old image): the rows as text cells of the `columns` named, by id.
 */
export function foldTopic(
  decoded: readonly DecodedMessage[],
  columns: readonly string[],
): (string | null)[][] {
  const byPartition = new Map<number, Map<string, Record<string, unknown>>>();
  const ordered = [...decoded].sort(
    (x, y) => x.message.partition - y.message.partition || x.message.offset - y.message.offset,
  );
  for (const { message, value } of ordered) {
    const rows = byPartition.get(message.partition) ?? new Map<string, Record<string, unknown>>();
    byPartition.set(message.partition, rows);
    if (value.kind === 'schema_change') {
      for (const row of rows.values()) {
        for (const change of value.changes ?? []) {
          if (change.change === 'rename' && change.to && change.column in row) {
            row[change.to] = row[change.column];
            delete row[change.column];
          }
          if (change.change === 'drop') delete row[change.column];
          if (change.change === 'add' && !(change.column in row)) row[change.column] = null;
        }
      }
    } else if (value.kind === 'delete') rows.delete(String(message.key));
    else rows.set(String(message.key), { ...value.new });
  }
  const idAt = columns.indexOf('id');
  return [...byPartition.values()]
    .flatMap((rows) => [...rows.values()])
    .map((row) =>
      columns.map((name) => (row[name] === null || row[name] === undefined ? null : String(row[name]))),
    )
    .sort((x, y) => Number(x[idAt]) - Number(y[idAt]));
}
