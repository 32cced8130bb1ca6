// A PostgreSQL destination's shadow tables, for an online resync: a table's
// resync loads into a table of the same name in a schema of the mirror's own
// (`_tributary_resync_<schema>`), created LIKE the live one INCLUDING ALL
// (columns, defaults, CHECK and NOT NULL constraints, the key and the other
// indexes, under the live table's own names since only the schema differs)
// with the privileges granted on the live one. The batch that completes the
// resync then drops the live table and moves the shadow into its schema, in
// the batch's transaction (`swapIn`): readers see the old table until that
// commits and the new one after, never neither. Not carried over: triggers,
// foreign keys, row-level security policies, and views on the live table
// (a view, or another table's foreign key to it, makes the drop fail: the
// table stops with the reason).
import type pg from 'pg';
import { classifyPgError } from '../../classify/index.ts';
import type { ShadowTables } from '../../destination.ts';
import type { DestinationTable, TableSwap } from '../../records.ts';
import { quoteIdent, quoteTable } from '../driver/sql.ts';

/** The schema holding the shadows of a schema's tables (at most 63 bytes, as PostgreSQL names are). */
export function shadowSchemaOf(schema: string): string {
  const name = `_tributary_resync_${schema}`;
  return Buffer.byteLength(name) <= 63 ? name : Buffer.from(name).subarray(0, 63).toString('utf8');
}

export class PostgresShadowTables implements ShadowTables {
  readonly intoLive = false;
  readonly #pool: () => Promise<pg.Pool>;

  constructor(pool: () => Promise<pg.Pool>) {
    this.#pool = pool;
  }

  shadowOf(live: DestinationTable): DestinationTable {
    return {
      ...live,
      destination: { schema: shadowSchemaOf(live.destination.schema), table: live.destination.table },
    };
  }

  async create(live: DestinationTable, shadow: DestinationTable): Promise<void> {
    const pool = await this.#pool();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(shadow.destination.schema)}`);
      await client.query(`DROP TABLE IF EXISTS ${quoteTable(shadow.destination)}`);
      await client.query(
        `CREATE TABLE ${quoteTable(shadow.destination)} (LIKE ${quoteTable(live.destination)} INCLUDING ALL)`,
      );
      // Whoever may read or write the live table may do so with its successor.
      const grants = await client.query<{ privilege: string; grantee: string; grantable: boolean }>(
        `SELECT a.privilege_type AS privilege, a.is_grantable AS grantable,
           CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee
         FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
         LEFT JOIN pg_roles r ON r.oid = a.grantee
         WHERE c.oid = $1::regclass AND a.grantee <> c.relowner`,
        [quoteTable(live.destination)],
      );
      for (const { privilege, grantee, grantable } of grants.rows) {
        await client.query(
          `GRANT ${privilege} ON ${quoteTable(shadow.destination)} TO ${grantee}${grantable ? ' WITH GRANT OPTION' : ''}`,
        );
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw classifyPgError(
        error,
        `destination: create the resync table of ${quoteTable(live.destination)}`,
        'destination_write',
        { privileges: `CREATE on the database (for schema ${shadow.destination.schema})` },
      );
    } finally {
      client.release();
    }
  }

  async drop(shadow: DestinationTable): Promise<void> {
    const pool = await this.#pool();
    try {
      await pool.query(`DROP TABLE IF EXISTS ${quoteTable(shadow.destination)}`);
    } catch (error) {
      throw classifyPgError(
        error,
        `destination: drop ${quoteTable(shadow.destination)}`,
        'destination_write',
      );
    }
  }
}

/** In the batch's transaction: the shadow takes the live table's place (the live one is dropped). */
export async function swapIn(client: pg.PoolClient, { live, shadow }: TableSwap): Promise<void> {
  await client.query(`DROP TABLE ${quoteTable(live.destination)}`);
  await client.query(
    `ALTER TABLE ${quoteTable(shadow.destination)} SET SCHEMA ${quoteIdent(live.destination.schema)}`,
  );
}
