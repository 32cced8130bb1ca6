// The servers of a run: the shared test PostgreSQL as the source (and for the
// catalogs), and the benchmark's own PostgreSQL (bench/sh/target-postgres.sh)
// as the PostgreSQL destination of both PostgreSQL's logical replication and
// Tributary.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { type PostgresServer, postgres, repoRoot } from '../../test/support/testenv.ts';

function benchPort(): number {
  const match = /^TESTENV_BENCH_PG_PORT=(\d+)$/m.exec(
    readFileSync(join(repoRoot, 'scripts', 'testenv', 'ports.env'), 'utf8'),
  );
  if (!match?.[1]) throw new Error('scripts/testenv/ports.env has no TESTENV_BENCH_PG_PORT');
  return Number(match[1]);
}

export const sourceServer = postgres;
export const targetServer: PostgresServer = Object.freeze({ ...postgres, port: benchPort() });

/** Starts the target server (idempotent). */
export function startTargetServer(): void {
  execFileSync(join(repoRoot, 'bench', 'sh', 'target-postgres.sh'), ['up'], { stdio: 'inherit' });
}

export const sourceDatabase = (prefix: string) => createTestDatabase(prefix, sourceServer);
export const targetDatabase = (prefix: string) => createTestDatabase(prefix, targetServer);

/** A libpq connection string to a source database, for a subscription. */
export function connectionString(database: TestDatabase): string {
  const { host, port, user, password, database: name } = database.config;
  return `host=${host} port=${port} user=${user} password=${password} dbname=${name}`;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${Math.random().toString(36).slice(2, 8)}`;
}
