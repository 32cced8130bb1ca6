// Mirror logs stay bounded on both engines the catalog runs on (PostgreSQL in
// cluster mode, PGlite in standalone): identical consecutive entries fold into
// one with a count and the time of the last, and the oldest entries beyond the
// retention (a count per mirror name, an age) are dropped first.
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logRetentionFromEnvironment } from '../../engine/src/catalog/log-retention.ts';
import { PostgresCatalog, type SqlExecutor } from '../../engine/src/catalog/postgres-catalog.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/databases.ts';

interface CatalogEngine {
  readonly sql: SqlExecutor;
  close(): Promise<void>;
}

const engines: Record<string, () => Promise<CatalogEngine>> = {
  postgresql: async () => {
    const database: TestDatabase = await createTestDatabase('catalog_logs');
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

const maxEntries = 20;

describe.each(Object.keys(engines))('mirror logs on %s', (engineName) => {
  let engine: CatalogEngine;
  let catalog: PostgresCatalog;

  beforeAll(async () => {
    const start = engines[engineName];
    if (!start) throw new Error(`no catalog engine ${engineName}`);
    engine = await start();
    catalog = new PostgresCatalog(engine.sql, {
      logRetention: logRetentionFromEnvironment({
        TRIBUTARY_MIRROR_LOG_MAX_ENTRIES: String(maxEntries),
        TRIBUTARY_MIRROR_LOG_MAX_AGE_DAYS: '7',
      }),
    });
    await catalog.migrate();
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('folds identical consecutive entries into one with a count and the time of the last', async () => {
    const fault = 'source: replication slot s lost WAL it needed. resync: drop the mirror';
    await catalog.appendLog('folding', 'INFO', 'mirror resumed');
    await catalog.appendLog('folding', 'ERROR', fault);
    const first = (await catalog.listLogs({ mirror: 'folding', offset: 0, limit: 10 })).entries[0];
    // A later write has a later time (the clock moves by milliseconds).
    await waitFor(async () => Date.now() > (first?.timestampMs ?? 0), 5_000, 'the clock to move');
    for (let attempt = 0; attempt < 500; attempt++) await catalog.appendLog('folding', 'ERROR', fault);
    // The same text at another level, or after another entry, is an entry of its own.
    await catalog.appendLog('folding', 'WARN', fault);
    await catalog.appendLog('folding', 'ERROR', fault);

    const { entries, total } = await catalog.listLogs({ mirror: 'folding', offset: 0, limit: 10 });
    expect(total).toBe(4);
    expect(entries.map((entry) => [entry.level, entry.message, entry.repeatCount])).toEqual([
      ['ERROR', fault, 1],
      ['WARN', fault, 1],
      ['ERROR', fault, 501],
      ['INFO', 'mirror resumed', 1],
    ]);
    const folded = entries[2];
    expect(folded?.timestampMs).toBe(first?.timestampMs);
    expect(folded?.lastTimestampMs).toBeGreaterThan(folded?.timestampMs ?? Number.POSITIVE_INFINITY);
    expect(entries[0]?.lastTimestampMs).toBe(entries[0]?.timestampMs);
  });

  it('keeps at most the configured number of entries per mirror, dropping the oldest first', async () => {
    for (let index = 1; index <= 3 * maxEntries; index++) {
      await catalog.appendLog('bounded', 'INFO', `entry ${index}`);
    }
    await catalog.appendLog('other', 'INFO', 'another mirror keeps its own');
    const { entries, total } = await catalog.listLogs({ mirror: 'bounded', offset: 0, limit: 100 });
    expect(total).toBe(maxEntries);
    expect(entries[0]?.message).toBe(`entry ${3 * maxEntries}`);
    expect(entries.at(-1)?.message).toBe(`entry ${2 * maxEntries + 1}`);
    expect((await catalog.listLogs({ mirror: 'other', offset: 0, limit: 10 })).total).toBe(1);
  });

  it('drops entries last written before the age limit', async () => {
    // An entry written 8 days ago, as an engine that ran then would have.
    await engine.sql.query(
      `INSERT INTO tributary.logs (mirror, level, message, at_ms) VALUES ('aged', 'INFO', 'old', $1)`,
      [Date.now() - 8 * 86_400_000],
    );
    await catalog.appendLog('aged', 'INFO', 'new');
    const { entries } = await catalog.listLogs({ mirror: 'aged', offset: 0, limit: 10 });
    expect(entries.map((entry) => entry.message)).toEqual(['new']);
  });

  it('refuses a retention it cannot keep, naming the variable', () => {
    expect(() => logRetentionFromEnvironment({ TRIBUTARY_MIRROR_LOG_MAX_ENTRIES: 'many' })).toThrow(
      'TRIBUTARY_MIRROR_LOG_MAX_ENTRIES',
    );
    expect(logRetentionFromEnvironment({})).toEqual({ maxEntries: 10_000, maxAgeDays: 30 });
  });
});
