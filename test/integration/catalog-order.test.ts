// The catalog on both engines it runs on (PostgreSQL in cluster mode, PGlite in
// standalone): batches and logs come back in numeric id order past 100 rows, and
// a mirror created again under a dropped one's name starts clean.
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog, type SqlExecutor } from '../../engine/src/catalog/postgres-catalog.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

interface CatalogEngine {
  readonly sql: SqlExecutor;
  close(): Promise<void>;
}

const engines: Record<string, () => Promise<CatalogEngine>> = {
  postgresql: async () => {
    const database: TestDatabase = await createTestDatabase('catalog_order');
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

const batchCount = 150;
const logCount = 130;

describe.each(Object.keys(engines))('catalog order on %s', (engineName) => {
  let engine: CatalogEngine;
  let catalog: PostgresCatalog;

  beforeAll(async () => {
    const start = engines[engineName];
    if (!start) throw new Error(`no catalog engine ${engineName}`);
    engine = await start();
    catalog = new PostgresCatalog(engine.sql);
    await catalog.migrate();
    for (let id = 1n; id <= BigInt(batchCount); id++) {
      await catalog.startBatch('m', { batchId: id, startTime: new Date(), startLsn: id * 100n });
      await catalog.finishBatch('m', {
        batchId: id,
        endTime: new Date(),
        rowCount: 1n,
        endLsn: id * 100n + 50n,
      });
    }
    for (let index = 1; index <= logCount; index++) await catalog.appendLog('m', 'INFO', `entry ${index}`);
  }, 120_000);

  afterAll(async () => {
    await engine?.close();
  });

  const ids = (batches: readonly { batchId: bigint }[]) => batches.map((batch) => Number(batch.batchId));
  const range = (from: number, to: number) =>
    Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => (from <= to ? from + i : from - i));

  it('returns the newest batches first, by number', async () => {
    expect(await catalog.lastBatchId('m')).toBe(BigInt(batchCount));
    const newest = await catalog.listBatches('m', { limit: 12, ascending: false });
    expect(ids(newest.batches)).toEqual(range(batchCount, batchCount - 11));
    expect(newest.total).toBe(batchCount);
    const all = await catalog.listBatches('m', { limit: 0, ascending: true });
    expect(ids(all.batches)).toEqual(range(1, batchCount));
  });

  it('pages batches before and after an id by number', async () => {
    const before = await catalog.listBatches('m', { limit: 5, ascending: false, beforeId: 101n });
    expect(ids(before.batches)).toEqual([100, 99, 98, 97, 96]);
    const after = await catalog.listBatches('m', { limit: 5, ascending: true, afterId: 8n });
    expect(ids(after.batches)).toEqual([9, 10, 11, 12, 13]);
    const first = await catalog.listBatches('m', { limit: 1, ascending: false });
    expect(first.batches[0]).toMatchObject({ startLsn: 15000n, endLsn: 15050n });
  });

  it('pages logs newest first, by number', async () => {
    const page1 = await catalog.listLogs({ mirror: 'm', offset: 0, limit: 12 });
    expect(page1.total).toBe(logCount);
    expect(page1.entries.map((entry) => entry.message)).toEqual(
      range(logCount, logCount - 11).map((index) => `entry ${index}`),
    );
    const ids = page1.entries.map((entry) => entry.id);
    expect([...ids].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0))).toEqual(ids);
    const page11 = await catalog.listLogs({ mirror: 'm', offset: 120, limit: 12 });
    expect(page11.entries.map((entry) => entry.message)).toEqual(
      range(10, 1).map((index) => `entry ${index}`),
    );
  });

  it('starts a mirror created again under a dropped name clean, keeping the old logs readable', async () => {
    await catalog.transition('again', 'setup');
    await catalog.startBatch('again', { batchId: 1n, startTime: new Date(), startLsn: 10n });
    await catalog.appendLog('again', 'INFO', 'old mirror line');
    await catalog.transition('again', 'terminating');
    await catalog.transition('again', 'terminated');
    expect(await catalog.startNewIncarnation('again')).toBe(true);
    expect(await catalog.getRuntime('again')).toBeUndefined();
    expect(await catalog.lastBatchId('again')).toBe(0n);
    // Only a dropped mirror is forgotten.
    await catalog.transition('again', 'setup');
    expect(await catalog.startNewIncarnation('again')).toBe(false);
    expect((await catalog.getRuntime('again'))?.phase).toBe('setup');

    await catalog.appendLog('again', 'INFO', 'new mirror line');
    const current = await catalog.listLogs({ mirror: 'again', offset: 0, limit: 10 });
    expect(current.entries.map((entry) => entry.message)).toEqual(['new mirror line']);
    const old = await catalog.listLogs({ mirror: 'again', incarnation: 1, offset: 0, limit: 10 });
    expect(old.entries.map((entry) => [entry.message, entry.incarnation])).toEqual([['old mirror line', 1]]);
    const everything = await catalog.listLogs({ offset: 0, limit: 1000 });
    expect(everything.entries.filter((entry) => entry.mirror === 'again')).toHaveLength(2);
  });
});
