// Schema migrations that run once per version of their statement list. Every
// process migrates at start (the operator, api-server replicas, engines,
// standalone mode), and running every `CREATE … IF NOT EXISTS` each time costs
// a few hundred ms of a start: the digest of the list is recorded by the run
// that applied it, so an up-to-date schema costs one query.
//
// A different list (an upgrade, or an older process during a rolling upgrade)
// has a different digest and runs its statements, which stay idempotent.
import { createHash } from 'node:crypto';
import type { SqlExecutor, SqlQueries } from './postgres-catalog.ts';

export interface Migrations {
  /** The schema the statements create; it also holds the record of applied digests. */
  readonly schema: string;
  readonly statements: readonly string[];
  /**
   * A 64-bit advisory lock key that serialises concurrent runs on a server (two
   * concurrent `CREATE … IF NOT EXISTS` of one object can fail with a unique violation).
   */
  readonly lockKey: string;
}

export function migrationsDigest(statements: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify(statements)).digest('hex');
}

const undefinedTable = '42P01';
const invalidSchemaName = '3F000';

async function isApplied(sql: SqlQueries, schema: string, digest: string): Promise<boolean> {
  try {
    const { rows } = await sql.query(`SELECT 1 FROM "${schema}".applied_migrations WHERE digest = $1`, [
      digest,
    ]);
    return rows.length > 0;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === undefinedTable || code === invalidSchemaName) return false;
    throw error;
  }
}

async function apply(sql: SqlQueries, schema: string, statements: readonly string[], digest: string) {
  for (const statement of statements) await sql.query(statement);
  await sql.query(`CREATE TABLE IF NOT EXISTS "${schema}".applied_migrations (
     digest text PRIMARY KEY,
     applied_at timestamptz NOT NULL DEFAULT now())`);
  await sql.query(
    `INSERT INTO "${schema}".applied_migrations (digest) VALUES ($1) ON CONFLICT (digest) DO NOTHING`,
    [digest],
  );
}

/**
 * Applies `migrations` unless this exact list was applied before. With a pool
 * the statements run in one transaction under the advisory lock, so a second
 * caller waits and then finds everything in place, and a failure leaves nothing
 * half-made. An executor without `connect` is one connection already (the
 * embedded database of standalone mode, one process).
 * Returns whether statements ran.
 */
export async function migrate(sql: SqlExecutor, migrations: Migrations): Promise<boolean> {
  const { schema, statements, lockKey } = migrations;
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`migrations: unsafe schema name ${schema}`);
  const digest = migrationsDigest(statements);
  if (await isApplied(sql, schema, digest)) return false;
  if (!sql.connect) {
    await apply(sql, schema, statements, digest);
    return true;
  }
  const session = await sql.connect();
  try {
    await session.query('BEGIN');
    await session.query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey]);
    await apply(session, schema, statements, digest);
    await session.query('COMMIT');
    return true;
  } catch (error) {
    await session.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    session.release();
  }
}
