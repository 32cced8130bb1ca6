// What a person picking a mirror's tables needs to see of a PostgreSQL source
// (the API's source browsing additions, the console's mirror form): its
// schemas, the tables of a schema with what replicating each takes, the
// columns of a table. Reads only the catalog, as the peer's user sees it.
import type pg from 'pg';
import type { RelationalConfig } from '../../../resources/peer.ts';
import { connectPostgres } from '../driver/connect.ts';

/** A table as the mirror form shows it. */
export interface BrowsedTable {
  readonly name: string;
  /** Has what replication needs to tell rows apart: a primary key, a replica identity index, or REPLICA IDENTITY FULL. */
  readonly canMirror: boolean;
  readonly hasPrimaryKey: boolean;
  readonly replicaIdentity: 'default' | 'nothing' | 'full' | 'index';
  /** A partitioned table (its partitions' rows are its own; docs/engine.md "Partitioned tables"). */
  readonly partitioned: boolean;
  /** A partition of another table (mirrored through it, as a rule). */
  readonly partition: boolean;
  /** On-disk size with indexes and TOAST, of every partition for a partitioned table. */
  readonly sizeBytes: bigint;
}

/** A column as the mirror form shows it. */
export interface BrowsedColumn {
  readonly name: string;
  /** As PostgreSQL writes the type (format_type). */
  readonly type: string;
  /** Part of the key rows are told apart by (the primary key, else the replica identity index). */
  readonly isKey: boolean;
  /** A generated column: not replicated (PostgreSQL does not publish it). */
  readonly generated: boolean;
}

const identities: Record<string, BrowsedTable['replicaIdentity']> = {
  d: 'default',
  n: 'nothing',
  f: 'full',
  i: 'index',
};

async function withSource<T>(config: RelationalConfig, read: (client: pg.Client) => Promise<T>) {
  const connection = await connectPostgres(config, {
    applicationName: 'tributary:browse',
    connectTimeoutMs: 10_000,
  });
  try {
    return await read(connection.client);
  } finally {
    await connection.close();
  }
}

/** The schemas the peer's user may use, but the system's. */
export function browseSchemas(config: RelationalConfig): Promise<string[]> {
  return withSource(config, async (client) => {
    const result = await client.query<{ name: string }>(
      `SELECT nspname AS name FROM pg_namespace
       WHERE nspname NOT IN ('pg_catalog', 'information_schema')
         AND nspname NOT LIKE 'pg\\_toast%' AND nspname NOT LIKE 'pg\\_temp\\_%'
         AND has_schema_privilege(oid, 'USAGE')
       ORDER BY nspname`,
    );
    return result.rows.map((row) => row.name);
  });
}

/** The ordinary and partitioned tables of `schema` the peer's user may read; none for a schema that does not exist. */
export function browseTables(config: RelationalConfig, schema: string): Promise<BrowsedTable[]> {
  return withSource(config, async (client) => {
    const result = await client.query<{
      name: string;
      relkind: string;
      relreplident: string;
      relispartition: boolean;
      has_primary_key: boolean;
      has_identity_index: boolean;
      size_bytes: string;
    }>(
      `SELECT c.relname AS name, c.relkind, c.relreplident, c.relispartition,
              EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS has_primary_key,
              EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident) AS has_identity_index,
              (CASE WHEN c.relkind = 'p'
                    THEN (SELECT coalesce(sum(pg_total_relation_size(t.relid)), 0) FROM pg_partition_tree(c.oid) t)
                    ELSE pg_total_relation_size(c.oid) END)::text AS size_bytes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND has_table_privilege(c.oid, 'SELECT')
       ORDER BY c.relname`,
      [schema],
    );
    return result.rows.map((row) => {
      const replicaIdentity = identities[row.relreplident] ?? 'default';
      const keyed =
        (replicaIdentity === 'default' && row.has_primary_key) ||
        (replicaIdentity === 'index' && row.has_identity_index) ||
        replicaIdentity === 'full';
      return {
        name: row.name,
        canMirror: keyed,
        hasPrimaryKey: row.has_primary_key,
        replicaIdentity,
        partitioned: row.relkind === 'p',
        partition: row.relispartition,
        sizeBytes: BigInt(row.size_bytes),
      };
    });
  });
}

/** The columns of `schema.table` in their order; none for a table that does not exist or the user cannot see. */
export function browseColumns(
  config: RelationalConfig,
  schema: string,
  table: string,
): Promise<BrowsedColumn[]> {
  return withSource(config, async (client) => {
    const result = await client.query<{ name: string; type: string; is_key: boolean; generated: boolean }>(
      `WITH t AS (
         SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')
           AND has_table_privilege(c.oid, 'SELECT')),
       key AS (
         SELECT i.indkey FROM pg_index i JOIN t ON i.indrelid = t.oid
         WHERE i.indisprimary OR i.indisreplident
         ORDER BY i.indisprimary DESC LIMIT 1)
       SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
              coalesce(a.attnum = ANY ((SELECT indkey FROM key)::int2[]), false) AS is_key,
              a.attgenerated <> '' AS generated
       FROM pg_attribute a JOIN t ON a.attrelid = t.oid
       WHERE a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attnum`,
      [schema, table],
    );
    return result.rows.map((row) => ({
      name: row.name,
      type: row.type,
      isKey: row.is_key,
      generated: row.generated,
    }));
  });
}
