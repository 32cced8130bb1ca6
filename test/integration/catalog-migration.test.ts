// The catalog migration as the operator, the api-server and engines run it on
// start: several processes at once on a fresh database, each with its own pool.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

describe('catalog migration', () => {
  let database: TestDatabase;
  const pools: pg.Pool[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('migrate');
  });

  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end()));
    await database?.drop();
  });

  it('succeeds for every one of several concurrent migrations of a fresh catalog', async () => {
    for (let index = 0; index < 4; index++) pools.push(new pg.Pool({ ...database.config, max: 2 }));
    const results = await Promise.allSettled(pools.map((pool) => new PostgresCatalog(pool).migrate()));
    expect(results.filter((result) => result.status === 'rejected')).toEqual([]);
    const { rows } = await database.client.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'tributary' ORDER BY 1`,
    );
    expect(rows.map((row) => row.table_name)).toEqual([
      'cdc_batches',
      'engine_problems',
      'installation',
      'logs',
      'mirror_runtime',
      'owned_tables',
      'snapshot_tables',
    ]);
    // Every process asking at once gets the one installation id, made once.
    const ids = await Promise.all(pools.map((pool) => new PostgresCatalog(pool).installationId()));
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    // And again, on a migrated catalog (every restart of every component does this).
    await new PostgresCatalog(pools[0] as pg.Pool).migrate();
    await new PostgresCatalog(pools[0] as pg.Pool).appendLog('m', 'INFO', 'after migration');
    // No session still holds the lock or an open transaction.
    const { rows: locks } = await database.client.query(
      `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(locks).toEqual([]);
  });
});
