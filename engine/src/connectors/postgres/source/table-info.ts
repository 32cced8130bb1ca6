// What the engine needs to know about a source table: its columns in attribute
// order, their types, the key that identifies a row, and its replica identity.
import type pg from 'pg';
import { EngineError } from '../../../errors.ts';
import { formatTableName, type TableName } from '../../../resources/mirror.ts';
import type { PartitionLeaf, PartitionLeaves, ReplicaIdentity, SourceTableInfo } from '../../source.ts';
import { quoteTable } from '../driver/sql.ts';

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
 * The leaf partitions of those of `tables` that are partitioned (Source.partitionLeaves).
 * pg_partition_tree lists every level; the partitioned ones in between hold
 * no rows and foreign ones none of the source's, so only ordinary tables are
 * leaves here. A partitioned table without partitions is there with none.
 */
export async function partitionLeavesOf(
  client: pg.Client,
  tables: readonly TableName[],
): Promise<PartitionLeaves> {
  const byTable = new Map<string, PartitionLeaf[]>();
  if (tables.length > 0) {
    const result = await client.query<{
      root: number;
      oid: string | null;
      schema: string | null;
      table: string | null;
      file_node: string | null;
      class_xmin: string | null;
      attach_xmin: string | null;
    }>(
      `SELECT t.n::int4 AS root, l.oid::int8 AS oid, l.schema, l.table, l.file_node::int8 AS file_node,
              l.class_xmin, l.attach_xmin
       FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(schema, name, n)
       JOIN pg_class r ON r.oid = to_regclass(quote_ident(t.schema) || '.' || quote_ident(t.name))
       LEFT JOIN LATERAL (
         SELECT c.oid, n.nspname AS schema, c.relname AS table, c.relfilenode AS file_node,
                c.xmin::text AS class_xmin, i.xmin::text AS attach_xmin
         FROM pg_partition_tree(r.oid) AS p
         JOIN pg_class c ON c.oid = p.relid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_inherits i ON i.inhrelid = c.oid
         WHERE p.isleaf AND p.relid <> r.oid AND c.relkind = 'r'
       ) AS l ON true
       WHERE r.relkind = 'p'
       ORDER BY t.n, l.oid`,
      [tables.map((table) => table.schema), tables.map((table) => table.table)],
    );
    for (const row of result.rows) {
      const table = tables[row.root - 1];
      if (!table) continue;
      const name = formatTableName(table);
      const leaves = byTable.get(name) ?? [];
      byTable.set(name, leaves);
      if (row.oid === null || row.schema === null || row.table === null) continue;
      leaves.push({
        oid: Number(row.oid),
        name: { schema: row.schema, table: row.table },
        fileNode: Number(row.file_node),
        classXmin: Number(row.class_xmin),
        attachXmin: Number(row.attach_xmin),
      });
    }
  }
  // Read after the leaves: every catalog change they show committed before it.
  const position = await client.query<{ wal_lsn: string }>(
    `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END
             - '0/0'::pg_lsn)::text AS wal_lsn`,
  );
  return { byTable, walLsn: BigInt(position.rows[0]?.wal_lsn ?? '0') };
}

/**
 * Whether a leaf holds a row written no later than the transaction that made
 * it a partition (Source.rowsBeforeAttach). age() orders transaction ids
 * around their wrap-around: the older, the greater. A row written in that
 * same transaction counts (it may have been written before the attach).
 */
export async function leafRowsBeforeAttach(client: pg.Client, leaf: PartitionLeaf): Promise<boolean> {
  const result = await client.query<{ found: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ONLY ${quoteTable(leaf.name)} WHERE age(xmin) >= age($1::text::xid)) AS found`,
    [String(leaf.attachXmin)],
  );
  return result.rows[0]?.found === true;
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
