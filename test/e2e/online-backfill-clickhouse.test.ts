// A table added to a running mirror into ClickHouse loads online (issue 39,
// point 2, for an analytics destination), through a real engine process: the
// existing table streams on while the added one is copied in chunks under
// writes to both (inserts, updates, key changes and deletes), with a kill -9
// of the engine during the load; both end equal to the source row by row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clickhouseEngines } from '../support/clickhouse-engines.ts';
import { ClickHouseScratch } from '../support/clickhouse-scratch.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';
import { seededIntegers } from '../support/seeded-random.ts';

const addedRows = 100_000;

describe('an added table loaded online into ClickHouse', () => {
  const engine = clickhouseEngines[0];
  if (!engine) throw new Error('no ClickHouse engine');
  const scratch = new ClickHouseScratch(engine, 'ob');
  const { database, config } = scratch;
  let harness: Harness;
  const sameRows = (table: string) => scratch.expectSameRows(harness.source.client, table);
  const stateOf = async (mirror: string, table: string) =>
    (await harness.catalog.listTables(mirror)).find((entry) => entry.sourceTable === table)?.state;

  beforeAll(async () => {
    harness = await createHarness('ob_ch');
    await scratch.create();
  });

  afterAll(async () => {
    await scratch.drop();
    await harness?.close();
  });

  it('streams the existing table while the added one loads under writes and a kill -9, and ends equal', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE existing (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO existing SELECT g, 'e' || g FROM generate_series(1, 200) g`);
    await source.client.query(`CREATE TABLE added (id int PRIMARY KEY, v text)`);
    await source.client.query(`INSERT INTO added SELECT g, 'a' || g FROM generate_series(1, ${addedRows}) g`);
    const mirror = `ob-ch-${randomSuffix()}`;
    const mappingOf = (table: string) => ({
      source: { schema: 'public', table },
      destination: { schema: database, table },
    });
    const spec = {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'analytics',
      tableMappings: [mappingOf('existing')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const peer = { name: 'analytics', kind: 'analytics' as const, config };
    let running = startEngine(mirror, writeEngineConfig(harness, spec, { destination: peer }));
    await sameRows('existing');
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
      30_000,
      'running',
    );
    const seed = Date.now() % 100_000;
    console.info(`online backfill into ClickHouse, seed ${seed}`);
    const next = seededIntegers(seed);
    let writing = true;
    let nextId = addedRows + 1;
    const writer = (async () => {
      while (writing) {
        const id = 1 + next(addedRows);
        await source.client.query('BEGIN');
        await source.client.query(`INSERT INTO added VALUES ($1, 'new')`, [nextId++]);
        await source.client.query(`UPDATE added SET v = v || '+' WHERE id = $1`, [id]);
        await source.client.query(`DELETE FROM added WHERE id = $1`, [1 + next(addedRows)]);
        // A key change both ways across the keyspace.
        await source.client.query(`UPDATE added SET id = -id WHERE id = $1`, [1 + next(addedRows)]);
        await source.client.query(`INSERT INTO existing VALUES ($1, 'during') ON CONFLICT DO NOTHING`, [
          1000 + nextId,
        ]);
        await source.client.query('COMMIT');
      }
    })();
    try {
      running.kill('SIGTERM');
      expect(await exited(running)).toBe(0);
      const withAdded = writeEngineConfig(
        harness,
        { ...spec, tableMappings: [mappingOf('existing'), mappingOf('added')] },
        { destination: peer },
      );
      // Killed twice while it loads, each time soon after the engine started.
      const statesAtKill: (string | undefined)[] = [];
      for (let round = 0; round < 2; round++) {
        running = startEngine(mirror, withAdded);
        await waitFor(
          async () => ['loading', 'streaming'].includes((await stateOf(mirror, 'public.added')) ?? ''),
          60_000,
          'loading',
        );
        await new Promise((resolve) => setTimeout(resolve, 200 + next(800)));
        statesAtKill.push(await stateOf(mirror, 'public.added'));
        running.kill('SIGKILL');
        await exited(running);
      }
      expect(statesAtKill).toContain('loading');
      running = startEngine(mirror, withAdded);
      await waitFor(
        async () => (await stateOf(mirror, 'public.added')) === 'streaming',
        300_000,
        'the added table loaded',
      );
    } finally {
      writing = false;
      await writer;
    }
    try {
      await sameRows('added');
      await sameRows('existing');
    } finally {
      running.kill('SIGTERM');
      await exited(running);
    }
  }, 600_000);
});
