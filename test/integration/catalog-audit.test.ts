// The API's audit trail in the catalog, on both engines it runs on (PostgreSQL
// in cluster mode, PGlite in standalone): entries read back newest first, a
// page at a time and by user, and stay within the retention (a count, an age).
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewAuditEntry } from '../../engine/src/catalog/catalog.ts';
import { PostgresCatalog, type SqlExecutor } from '../../engine/src/catalog/postgres-catalog.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

interface CatalogEngine {
  readonly sql: SqlExecutor;
  close(): Promise<void>;
}

const engines: Record<string, () => Promise<CatalogEngine>> = {
  postgresql: async () => {
    const database: TestDatabase = await createTestDatabase('catalog_audit');
    const pool = new pg.Pool({ ...database.config, max: 2 });
    return {
      sql: pool,
      async close() {
        await pool.end();
        await database.drop();
      },
    };
  },
  pglite: async () => {
    const database = await PGlite.create('memory://');
    return { sql: database, close: () => database.close() };
  },
};

const entry = (overrides: Partial<NewAuditEntry> = {}): NewAuditEntry => ({
  at: new Date(),
  user: 'alice',
  role: 'operate',
  action: 'mirror.pause',
  route: 'POST /api/v1/mirrors/state_change',
  object: 'orders',
  detail: null,
  clientAddress: '203.0.113.7',
  status: 200,
  ...overrides,
});

describe.each(Object.keys(engines))('audit trail on %s', (engineName) => {
  let engine: CatalogEngine;

  beforeAll(async () => {
    const start = engines[engineName];
    if (!start) throw new Error(`no catalog engine ${engineName}`);
    engine = await start();
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('reads entries back newest first, whole, a page at a time and by user', async () => {
    const catalog = new PostgresCatalog(engine.sql);
    await catalog.migrate();
    const at = new Date('2026-03-01T12:00:00.123Z');
    await catalog.appendAudit(entry({ at, user: 'bob', role: 'read', status: 403, object: null }));
    await catalog.appendAudit(
      entry({
        action: 'mirror.resync_table',
        route: 'POST /api/v1/mirrors/tables/resync',
        detail: 'public.t',
      }),
    );
    await catalog.appendAudit(entry({ action: 'mirror.resume' }));

    const all = await catalog.listAudit({ offset: 0, limit: 10 });
    expect(all.total).toBe(3);
    expect(all.entries.map((item) => item.action)).toEqual([
      'mirror.resume',
      'mirror.resync_table',
      'mirror.pause',
    ]);
    const [newest, middle, oldest] = all.entries;
    expect((newest?.id ?? 0n) > (middle?.id ?? 0n)).toBe(true);
    expect(middle?.detail).toBe('public.t');
    expect(oldest).toEqual({
      id: oldest?.id,
      ...entry({ at, user: 'bob', role: 'read', status: 403, object: null }),
    });

    const second = await catalog.listAudit({ offset: 1, limit: 1 });
    expect(second).toEqual({ entries: [middle], total: 3 });
    expect(await catalog.listAudit({ offset: 0, limit: 0 })).toEqual({ entries: [], total: 3 });
    const bobs = await catalog.listAudit({ user: 'bob', offset: 0, limit: 10 });
    expect(bobs).toEqual({ entries: [oldest], total: 1 });
  });

  it('drops the oldest entries beyond the count, and entries older than the age', async () => {
    const catalog = new PostgresCatalog(engine.sql, { auditRetention: { maxEntries: 100, maxAgeDays: 30 } });
    await catalog.migrate();
    const dayMs = 86_400_000;
    await catalog.appendAudit(entry({ object: 'too-old', at: new Date(Date.now() - 31 * dayMs) }));
    await catalog.appendAudit(entry({ object: 'recent-enough', at: new Date(Date.now() - 29 * dayMs) }));
    let objects = (await catalog.listAudit({ offset: 0, limit: 1000 })).entries.map((item) => item.object);
    expect(objects).toContain('recent-enough');
    expect(objects).not.toContain('too-old');

    for (let index = 0; index < 120; index++) await catalog.appendAudit(entry({ object: `m${index}` }));
    const { entries, total } = await catalog.listAudit({ offset: 0, limit: 1000 });
    expect(total).toBe(100);
    objects = entries.map((item) => item.object);
    expect(objects[0]).toBe('m119');
    expect(objects.at(-1)).toBe('m20');
  });
});
