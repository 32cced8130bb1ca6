// What the engine needs to know about a source table: its columns in attribute
// order, their types, the key that identifies a row, and its replica identity.
import type pg from 'pg';
import { EngineError } from '../../../errors.ts';
import { formatTableName, type TableName } from '../../../resources/mirror.ts';
import type { ReplicaIdentity, SourceTableInfo } from '../../source.ts';

export type { ReplicaIdentity, SourceTableInfo } from '../../source.ts';

const replicaIdentityByCode: Record<string, ReplicaIdentity> = {
  d: 'default',
  n: 'nothing',
  f: 'full',
  i: 'index',
};

interface TableRow {
  oid: number;
  relreplident: string;
  relkind: string;
}

interface ColumnRow {
  attname: string;
  attnum: number;
  atttypid: number;
  atttypmod: number;
  type_name: string;
  base_type_name: string | null;
  attnotnull: boolean;
  attndims: number;
}

/**
 * The partitioned tables a relation is a partition of, its parent first;
 * empty for one that is no partition (pg_partition_ancestors lists the
 * relation itself first, then each parent up to the root).
 */
export async function partitionAncestors(client: pg.Client, oid: number): Promise<TableName[]> {
  const result = await client.query<{ schema: string; table: string }>(
    `SELECT n.nspname AS schema, c.relname AS table
     FROM pg_partition_ancestors($1::oid) WITH ORDINALITY AS a(relid, position)
     JOIN pg_class c ON c.oid = a.relid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE a.relid <> $1::oid ORDER BY a.position`,
    [oid],
  );
  return result.rows.map((row) => ({ schema: row.schema, table: row.table }));
}

/**
 * The names the tables with these OIDs have now (Source.tableNames): ordinary
 * and partitioned tables only, so an OID reused by another kind of relation
 * is not taken for a table.
 */
export async function tableNamesByOid(
  client: pg.Client,
  oids: readonly number[],
): Promise<Map<number, TableName>> {
  const result = await client.query<{ oid: number; schema: string; table: string }>(
    `SELECT c.oid::int8 AS oid, n.nspname AS schema, c.relname AS table
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = ANY($1::oid[]) AND c.relkind IN ('r', 'p')`,
    [oids],
  );
  return new Map(result.rows.map((row) => [Number(row.oid), { schema: row.schema, table: row.table }]));
}

/**
 * The replicated columns a relation has now (not dropped, not generated), by
 * attnum, in attnum order; empty when the relation is gone.
 */
export async function liveColumns(
  client: pg.Client,
  oid: number,
): Promise<{ readonly attnum: number; readonly name: string }[]> {
  const result = await client.query<{ attnum: number; attname: string }>(
    `SELECT a.attnum::int AS attnum, a.attname FROM pg_attribute a
     WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
     ORDER BY a.attnum`,
    [oid],
  );
  return result.rows.map((row) => ({ attnum: row.attnum, name: row.attname }));
}

/** Returns undefined when the table does not exist (or is not visible to the user). */
export async function readTableInfo(
  client: pg.Client,
  name: TableName,
): Promise<SourceTableInfo | undefined> {
  const table = await client.query<TableRow>(
    `SELECT c.oid::int AS oid, c.relreplident::text AS relreplident, c.relkind::text AS relkind
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
    [name.schema, name.table],
  );
  const tableRow = table.rows[0];
  if (!tableRow) return undefined;
  const columns = await client.query<ColumnRow>(
    `WITH RECURSIVE domains(start_oid, oid, typmod) AS (
       SELECT t.oid, t.typbasetype, t.typtypmod FROM pg_type t WHERE t.typtype = 'd'
       UNION ALL
       SELECT d.start_oid, t.typbasetype, t.typtypmod FROM domains d JOIN pg_type t ON t.oid = d.oid WHERE t.typtype = 'd')
     SELECT a.attname, a.attnum::int AS attnum, a.atttypid::int AS atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod) AS type_name,
       (SELECT format_type(d.oid, d.typmod) FROM domains d JOIN pg_type t ON t.oid = d.oid
        WHERE d.start_oid = a.atttypid AND t.typtype <> 'd') AS base_type_name,
       a.attnotnull, a.attndims::int AS attndims
     FROM pg_attribute a WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
     ORDER BY a.attnum`,
    [tableRow.oid],
  );
  // The primary key identifies rows; without one, the replica identity index.
  const key = await client.query<{ attname: string }>(
    `WITH chosen AS (
       SELECT indkey FROM pg_index WHERE indrelid = $1 AND (indisprimary OR indisreplident)
       ORDER BY indisprimary DESC LIMIT 1)
     SELECT a.attname FROM chosen
     JOIN LATERAL unnest(chosen.indkey) WITH ORDINALITY AS k(attnum, position) ON true
     JOIN pg_attribute a ON a.attrelid = $1 AND a.attnum = k.attnum
     ORDER BY k.position`,
    [tableRow.oid],
  );
  const ancestors = await partitionAncestors(client, tableRow.oid);
  const replicaIdentity = replicaIdentityByCode[tableRow.relreplident];
  if (!replicaIdentity) {
    throw new EngineError('source_setup', `${formatTableName(name)} has an unknown replica identity`);
  }
  return {
    name,
    oid: tableRow.oid,
    columns: columns.rows.map((row) => ({
      name: row.attname,
      typeOid: row.atttypid,
      typeModifier: row.atttypmod,
      typeName: row.type_name,
      ...(row.base_type_name ? { domainBaseTypeName: row.base_type_name } : {}),
      notNull: row.attnotnull,
      ...(row.attndims > 1 ? { arrayDimensions: row.attndims } : {}),
      attnum: row.attnum,
    })),
    keyColumns: key.rows.map((row) => row.attname),
    replicaIdentity,
    partitioned: tableRow.relkind === 'p',
    partitionOf: ancestors,
  };
}
