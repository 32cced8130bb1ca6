// The source server crashes (immediate shutdown: no checkpoint, so the slot
// may come back at an older position) and restarts, twice, under continuous
// writes, with the engine running as its own process. Afterwards the
// destination must equal the source row by row: nothing lost, nothing applied
// twice.
import type { ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresCatalog } from '../../engine/src/catalog/postgres-catalog.ts';
import {
  createTestDatabase,
  droppablePool,
  randomSuffix,
  type TestDatabase,
  waitFor,
} from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { mapping } from '../support/mirror-harness.ts';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.ts';
import { destinationPostgres } from '../support/testenv.ts';

const checksumQuery = `SELECT count(*)::int AS n,
  md5(coalesce(string_agg(row_to_json(t)::text, ',' ORDER BY id), '')) AS sum FROM ledger t`;

async function checksum(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ n: number; sum: string }>(checksumQuery);
  return `${rows[0]?.n}:${rows[0]?.sum}`;
}

describe('source server crash and restart', () => {
  let server: PrivatePostgres;
  let destination: TestDatabase;
  let catalogDatabase: TestDatabase;
  let catalogPool: pg.Pool;
  let engine: ChildProcess | undefined;
  const mirror = `restart-${randomSuffix()}`;

  beforeAll(async () => {
    [server, destination, catalogDatabase] = await Promise.all([
      startPrivatePostgres(),
      createTestDatabase('restart_dst', destinationPostgres),
      createTestDatabase('restart_cat'),
    ]);
    catalogPool = droppablePool({ ...catalogDatabase.config, max: 2 });
    await new PostgresCatalog(catalogPool).migrate();
  });

  afterAll(async () => {
    if (engine) {
      engine.kill('SIGKILL');
      await exited(engine);
    }
    await catalogPool?.end();
    await Promise.all([server?.destroy(), destination?.drop(), catalogDatabase?.drop()]);
  });

  it('loses and repeats nothing across two crashes of the source under writes', async () => {
    const setup = await server.connect();
    await setup.query(
      `CREATE TABLE ledger (id int PRIMARY KEY, account int NOT NULL, amount numeric(12,2), note text)`,
    );
    await setup.query(
      `INSERT INTO ledger SELECT g, g % 40, g * 0.5, 'seed ' || g FROM generate_series(1, 5000) g`,
    );
    await setup.end();

    const configPath = writeEngineConfig(
      { source: { config: server.config }, destination, catalogDatabase },
      {
        name: mirror,
        sourcePeer: 'source',
        destinationPeer: 'destination',
        tableMappings: [mapping('ledger')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        maxBatchSize: 200,
      },
    );
    engine = startEngine(mirror, configPath);
    await waitFor(
      async () =>
        Number(
          (
            await destination.client
              .query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger`)
              .catch(() => ({ rows: [{ n: 0 }] }))
          ).rows[0]?.n,
        ) === 5000,
      60_000,
      'initial load',
    );

    // Transactions of inserts, updates and a delete, reconnecting after each crash.
    let writing = true;
    let committed = 0;
    let nextId = 5001;
    const writer = (async () => {
      let client: pg.Client | undefined;
      while (writing) {
        try {
          client ??= await server.connect();
          await client.query('BEGIN');
          for (let i = 0; i < 5; i++, nextId++) {
            await client.query(`INSERT INTO ledger VALUES ($1, $2, $3, 'cdc')`, [
              nextId,
              nextId % 40,
              nextId / 4,
            ]);
          }
          await client.query(`UPDATE ledger SET amount = amount + 1, note = 'updated' WHERE account = $1`, [
            nextId % 40,
          ]);
          await client.query(`DELETE FROM ledger WHERE id = $1`, [nextId - 3]);
          await client.query('COMMIT');
          committed++;
        } catch {
          // The server went away mid-transaction: whatever it kept is the truth.
          await client?.end().catch(() => {});
          client = undefined;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
      await client?.end().catch(() => {});
    })();

    for (let crash = 0; crash < 2; crash++) {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await server.crashAndRestart();
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    writing = false;
    await writer;
    expect(committed).toBeGreaterThan(20);

    const source = await server.connect();
    try {
      const expected = await checksum(source);
      await waitFor(
        async () => (await checksum(destination.client)) === expected,
        120_000,
        'destination to catch up',
      );
      // Row by row, so a difference names its rows.
      const { rows: sourceRows } = await source.query(`SELECT * FROM ledger ORDER BY id`);
      const { rows: destinationRows } = await destination.client.query(
        `SELECT id, account, amount, note FROM ledger ORDER BY id`,
      );
      expect(destinationRows).toEqual(sourceRows);
    } finally {
      await source.end();
    }
    const catalog = new PostgresCatalog(catalogPool);
    const warnings = await catalog.listLogs({ mirror, levels: ['WARN'], offset: 0, limit: 50 });
    // The engine saw the source go away and went on by itself: a fault it
    // retries is a warning, and nothing needed a person.
    expect(warnings.entries.some((entry) => entry.message.includes('retrying'))).toBe(true);
    const errors = await catalog.listLogs({ mirror, levels: ['ERROR'], offset: 0, limit: 50 });
    expect(errors.entries).toEqual([]);
    expect(engine.exitCode).toBeNull();
  });
});
