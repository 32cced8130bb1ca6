// kill -9 the engine process at random points under continuous writes, ten
// times, then let it catch up: source and destination must be equal row by row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { startLedgerWriter } from '../support/ledger-writer.ts';
import { createHarness, type Harness } from '../support/mirror-harness.ts';

const kills = 10;

/** A seeded generator so a failing run can be reproduced from its logged seed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

async function checksum(harness: Harness, side: 'source' | 'destination'): Promise<string> {
  const result = await harness[side].client.query<{ sum: string | null; n: number }>(
    `SELECT md5(string_agg(row_to_json(t)::text, ',' ORDER BY id)) AS sum, count(*)::int AS n FROM ledger t`,
  );
  return `${result.rows[0]?.n}:${result.rows[0]?.sum}`;
}

describe('crash safety', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('crash');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it(`loses and duplicates nothing across ${kills} kill -9s under continuous writes`, async () => {
    const seed = Date.now() % 100_000;
    const next = random(seed);
    console.info(`crash test seed ${seed}`);
    const { source } = harness;
    await source.client.query(
      `CREATE TABLE ledger (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(14,2) NOT NULL, note text)`,
    );
    await source.client.query(
      `INSERT INTO ledger SELECT g, g % 50, g * 0.01, 'seed ' || g FROM generate_series(1, 20000) g`,
    );
    const mirror = `crash-${randomSuffix()}`;
    const configPath = writeEngineConfig(harness, {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [
        { source: { schema: 'public', table: 'ledger' }, destination: { schema: 'public', table: 'ledger' } },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      maxBatchSize: 300,
      snapshotNumRowsPerPartition: 4000,
    });

    const writer = startLedgerWriter(source.client, { firstId: 20_001, random: next });

    for (let kill = 0; kill < kills; kill++) {
      const engine = startEngine(mirror, configPath);
      await new Promise((resolve) => setTimeout(resolve, 300 + Math.floor(next() * 2200)));
      engine.kill('SIGKILL');
      await exited(engine);
    }
    let nextId = await writer.stop();

    const engine = startEngine(mirror, configPath);
    try {
      await waitFor(
        async () => (await checksum(harness, 'source')) === (await checksum(harness, 'destination')),
        120_000,
        'destination to catch up',
      );
      expect(await checksum(harness, 'destination')).toBe(await checksum(harness, 'source'));
      // On a slow machine every kill may land before the initial load finished,
      // and the last run then loads everything: one more change must go by CDC.
      await source.client.query(`INSERT INTO ledger VALUES ($1, 0, 0, 'after the crashes')`, [nextId++]);
      await waitFor(
        async () => (await checksum(harness, 'source')) === (await checksum(harness, 'destination')),
        60_000,
        'the change after the crashes',
      );
      await waitFor(
        async () =>
          (await harness.catalog.listBatches(mirror, { limit: 0, ascending: true, finishedOnly: true }))
            .batches.length > 0,
        30_000,
        'a finished CDC batch',
      );
    } finally {
      engine.kill('SIGTERM');
      expect(await exited(engine)).toBe(0);
    }
    const runtime = await harness.catalog.getRuntime(mirror);
    expect(runtime?.phase).toBe('running');
  });

  it('starts an interrupted initial load over cleanly after kill -9', async () => {
    const { source } = harness;
    await source.client.query(`CREATE TABLE big_load (id int PRIMARY KEY, v text)`);
    await source.client.query(
      `INSERT INTO big_load SELECT g, repeat('x', 200) FROM generate_series(1, 300000) g`,
    );
    await source.client.query(`ANALYZE big_load`);
    const mirror = `reload-${randomSuffix()}`;
    const configPath = writeEngineConfig(harness, {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [
        {
          source: { schema: 'public', table: 'big_load' },
          destination: { schema: 'public', table: 'big_load' },
        },
      ],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      snapshotNumRowsPerPartition: 10_000,
      snapshotMaxParallelWorkers: 1,
    });
    const first = startEngine(mirror, configPath);
    await waitFor(
      async () => {
        const progress = await harness.catalog.listSnapshotProgress(mirror);
        return (progress[0]?.partitionsCompleted ?? 0) >= 2;
      },
      60_000,
      'a few partitions',
    );
    first.kill('SIGKILL');
    await exited(first);
    const progress = await harness.catalog.listSnapshotProgress(mirror);
    expect(progress[0]?.partitionsCompleted).toBeLessThan(progress[0]?.partitionsTotal ?? 0);

    const second = startEngine(mirror, configPath);
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
        120_000,
        'the load to finish',
      );
      await source.client.query(`UPDATE big_load SET v = 'changed' WHERE id % 1000 = 0`);
      const sum = async (side: 'source' | 'destination') =>
        (
          await harness[side].client.query<{ s: string }>(
            `SELECT count(*) || ':' || md5(string_agg(v, ',' ORDER BY id)) AS s FROM big_load`,
          )
        ).rows[0]?.s;
      await waitFor(async () => (await sum('source')) === (await sum('destination')), 60_000, 'equality');
      expect(await sum('destination')).toBe(await sum('source'));
      const logs = await harness.catalog.listLogs({ mirror, levels: ['WARN'], offset: 0, limit: 10 });
      expect(logs.entries.some((entry) => entry.message.includes('initial load was interrupted'))).toBe(true);
    } finally {
      second.kill('SIGTERM');
      expect(await exited(second)).toBe(0);
    }
  });
});
