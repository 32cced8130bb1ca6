// The catalog migration as the operator, the api-server and engines run it on
// start: several processes at once on a fresh database, each with its own pool.

import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, migrationsDigest } from '../../engine/src/catalog/migrations.ts';
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
      'applied_migrations',
      'audit_log',
      'cdc_batches',
      'engine_problems',
      'installation',
      'logs',
      'mirror_runtime',
      'mirror_tables',
      'owned_tables',
      'partition_leaves',
      'slot_health',
      'snapshot_tables',
      'table_shapes',
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

  it('runs a list of statements once, and a changed list again, on a server and embedded', async () => {
    const pool = new pg.Pool({ ...database.config, max: 2 });
    pools.push(pool);
    const embedded = new PGlite();
    try {
      for (const [sql, read] of [
        [pool, (text: string) => pool.query(text)],
        [embedded, (text: string) => embedded.query(text)],
      ] as const) {
        const first = ['CREATE SCHEMA IF NOT EXISTS once', 'CREATE TABLE IF NOT EXISTS once.t (id int)'];
        const migrations = { schema: 'once', statements: first, lockKey: '1' };
        expect(await migrate(sql, migrations)).toBe(true);
        // Applied: nothing runs again (the insert would show it in a changed list only).
        expect(await migrate(sql, migrations)).toBe(false);
        const second = [...first, 'INSERT INTO once.t VALUES (1)'];
        expect(await migrate(sql, { ...migrations, statements: second })).toBe(true);
        expect(await migrate(sql, { ...migrations, statements: second })).toBe(false);
        expect((await read('SELECT id FROM once.t')).rows).toEqual([{ id: 1 }]);
        expect(
          (await read('SELECT digest FROM once.applied_migrations ORDER BY applied_at, digest')).rows,
        ).toHaveLength(2);
        expect(
          (await read(`SELECT 1 FROM once.applied_migrations WHERE digest = '${migrationsDigest(second)}'`))
            .rows,
        ).toHaveLength(1);
      }
    } finally {
      await embedded.close();
    }
  });
});
