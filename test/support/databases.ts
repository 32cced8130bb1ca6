// Throw-away databases on the PostgreSQL test server, one set per suite.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import { type PostgresServer, postgres } from './testenv.ts';

export interface TestDatabase {
  readonly name: string;
  /** Superuser connection settings for the engine. */
  readonly config: RelationalConfig;
  /** An open superuser client for the test's own queries. */
  readonly client: pg.Client;
  drop(): Promise<void>;
}

export function randomSuffix(): string {
  return randomBytes(4).toString('hex');
}

/**
 * A pool over a test database that is dropped WITH (FORCE) once the test is
 * done: that termination (57P01) of a connection still closing is expected,
 * any other error of an idle or closing connection is not. pg-pool's end()
 * resolves once its connections are told to end, before their sockets close,
 * and re-emits an idle connection's error on the pool, where without a
 * listener it would be an uncaught exception; so both places get one.
 */
export function droppablePool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  const unlessTerminated = (error: Error & { code?: string }) => {
    if (error.code !== '57P01') throw error;
  };
  pool.on('error', unlessTerminated);
  pool.on('connect', (client) => client.on('error', unlessTerminated));
  return pool;
}

/** What connecting as the superuser needs of a server (the TLS test server has no more). */
export type SuperuserAccess = Pick<PostgresServer, 'host' | 'port' | 'superuser'>;

/** A superuser client of `database` on `server`, not connected. */
export function adminClient(server: SuperuserAccess, database: string): pg.Client {
  return new pg.Client({ host: server.host, port: server.port, database, ...server.superuser });
}

/** A database of its own on `server` (the shared test server unless given). */
export async function createTestDatabase(
  prefix: string,
  server: PostgresServer = postgres,
): Promise<TestDatabase> {
  const name = `${prefix}_${randomSuffix()}`;
  const admin = adminClient(server, 'postgres');
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const client = adminClient(server, name);
  await client.connect();
  await client.query('CREATE EXTENSION IF NOT EXISTS hstore');
  return {
    name,
    config: {
      host: server.host,
      port: server.port,
      user: server.superuser.user,
      password: server.superuser.password,
      database: name,
    },
    client,
    async drop() {
      await client.end().catch(() => {});
      await dropTestDatabase(server, name);
    },
  };
}

/** Polls `check` every 100 ms until it returns true; fails after `timeoutMs`. */
export async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
}

/** Every row of a table as JSON text, ordered by the given columns: for equality checks. */
export async function tableRows(client: pg.Client, table: string, orderBy: string): Promise<string[]> {
  const result = await client.query<{ row: string }>(
    `SELECT row_to_json(whole_row)::text AS row FROM ${table} whole_row ORDER BY ${orderBy}`,
  );
  return result.rows.map((row) => row.row);
}

/** Waits until `table` holds the same rows, ordered by `id`, in both databases. */
export function waitForSameRows(
  source: pg.Client,
  destination: pg.Client,
  table: string,
  timeoutMs = 60_000,
): Promise<void> {
  return waitFor(
    async () =>
      JSON.stringify(await tableRows(source, table, 'id')) ===
      JSON.stringify(await tableRows(destination, table, 'id')),
    timeoutMs,
    `${table} to match`,
  );
}

/** Every cell as `rowNumber.column=value` text: a failing comparison then names the cell. */
export async function tableCells(client: pg.Client, table: string, orderBy: string): Promise<string[]> {
  const result = await client.query<{ cell: string }>(
    `SELECT n || '.' || key || '=' || coalesce(value, 'NULL') AS cell
     FROM (SELECT row_number() OVER (ORDER BY ${orderBy}) AS n, row_to_json(whole_row) AS j FROM ${table} whole_row) r,
       json_each_text(r.j) ORDER BY n, key`,
  );
  return result.rows.map((row) => row.cell);
}

/**
 * Drops database `name` of `server` with its replication slots (a slot's
 * walsender is ended first), whoever still uses it.
 */
export async function dropTestDatabase(server: SuperuserAccess, name: string): Promise<void> {
  const cleanup = adminClient(server, 'postgres');
  await cleanup.connect();
  try {
    await cleanup.query(
      `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`,
      [name],
    );
    await waitFor(async () => {
      const active = await cleanup.query(
        `SELECT 1 FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`,
        [name],
      );
      return active.rowCount === 0;
    }, 10_000);
    await cleanup.query(
      `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`,
      [name],
    );
    await cleanup.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await cleanup.end();
  }
}
