// An engine process's own /metrics: what it loaded and wrote, its batches, how
// far the slot trails the server, and the process's resources, as Prometheus
// scrapes them from an engine pod.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, freePort, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness, mapping } from '../support/mirror-harness.ts';

/** The value of one sample of the exposition text, or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const matches = Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`));
    if (matches) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('engine metrics', () => {
  let harness: Harness;
  let engine: ChildProcess | undefined;
  let port = 0;
  const mirror = `metrics-${randomSuffix()}`;
  const scrape = async () => {
    const response = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    return response.text();
  };

  beforeAll(async () => {
    harness = await createHarness('metrics');
    await harness.source.client.query(`CREATE TABLE readings (id int PRIMARY KEY, value text)`);
    await harness.source.client.query(
      `INSERT INTO readings SELECT g, 'v' || g FROM generate_series(1, 2500) g`,
    );
    const configPath = writeEngineConfig(harness, {
      name: mirror,
      sourcePeer: 'source',
      destinationPeer: 'destination',
      tableMappings: [mapping('readings')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
      maxBatchSize: 100,
    });
    port = await freePort();
    engine = startEngine(mirror, configPath, { metricsPort: port });
  });

  afterAll(async () => {
    if (engine) {
      engine.kill('SIGTERM');
      await exited(engine);
    }
    await harness?.close();
  });

  it('counts the initial load and CDC batches, and reports the slot position', async () => {
    const loaded = async () =>
      sample(await scrape().catch(() => ''), 'tributary_engine_snapshot_rows_total', {
        mirror,
        table: 'public.readings',
      });
    // Counted per partition as each commits: the total settles at the table's size.
    await waitFor(async () => (await loaded()) === 2500, 60_000, 'all 2500 loaded rows counted');

    await harness.source.client.query(
      `INSERT INTO readings SELECT g, 'cdc' FROM generate_series(2501, 2750) g`,
    );
    await waitFor(
      async () => sample(await scrape(), 'tributary_engine_cdc_rows_total', { mirror }) === 250,
      60_000,
      'CDC rows counted',
    );
    const text = await scrape();
    // 250 rows in batches of at most 100.
    expect(sample(text, 'tributary_engine_cdc_batches_total', { mirror })).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'tributary_engine_batch_sync_seconds_count', { mirror })).toBe(
      sample(text, 'tributary_engine_cdc_batches_total', { mirror }),
    );
    const acknowledged = sample(text, 'tributary_engine_acknowledged_lsn_bytes', { mirror }) ?? 0;
    const walEnd = sample(text, 'tributary_engine_server_wal_end_bytes', { mirror }) ?? 0;
    expect(acknowledged).toBeGreaterThan(0);
    expect(walEnd).toBeGreaterThanOrEqual(acknowledged);
    expect(sample(text, 'tributary_engine_replication_lag_bytes', { mirror })).toBe(walEnd - acknowledged);
    // The slot's own record agrees with what the engine says it acknowledged.
    const slot = await harness.source.client.query<{ confirmed: string }>(
      `SELECT (confirmed_flush_lsn - '0/0')::text AS confirmed FROM pg_replication_slots WHERE database = $1`,
      [harness.source.name],
    );
    expect(Number(slot.rows[0]?.confirmed)).toBeGreaterThanOrEqual(acknowledged);
    expect(sample(text, 'tributary_engine_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('reports the lag in seconds from commit times: 0 when caught up, growing while a write waits', async () => {
    const lag = async () => sample(await scrape(), 'tributary_engine_lag_seconds', { mirror });
    // Caught up after the rows above, and still 0 while idle (no batch for a while).
    await waitFor(async () => (await lag()) === 0, 30_000, 'lag 0 when caught up');
    // The destination table locked: the next batch cannot be written.
    const blocker = harness.destination.client;
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE readings IN ACCESS EXCLUSIVE MODE');
    try {
      await harness.source.client.query(`INSERT INTO readings VALUES (9001, 'held')`);
      await waitFor(async () => ((await lag()) ?? 0) >= 3, 30_000, 'lag of 3 s while the write waits');
      // The catalog (status, console, kubectl) counts from the held row's commit time.
      await waitFor(
        async () => (await harness.catalog.getRuntime(mirror))?.lagSince != null,
        10_000,
        'the lag recorded in the catalog',
      );
      const since = (await harness.catalog.getRuntime(mirror))?.lagSince;
      expect(Date.now() - (since?.getTime() ?? 0)).toBeGreaterThanOrEqual(3_000);
    } finally {
      await blocker.query('ROLLBACK');
    }
    await waitFor(async () => (await lag()) === 0, 60_000, 'lag back to 0 once the row is durable');
    await waitFor(
      async () => (await harness.catalog.getRuntime(mirror))?.lagSince === null,
      10_000,
      'caught up in the catalog',
    );
    const row = await harness.destination.client.query(`SELECT value FROM readings WHERE id = 9001`);
    expect(row.rows[0]?.value).toBe('held');
  });

  it('answers /healthz and nothing else', async () => {
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});
