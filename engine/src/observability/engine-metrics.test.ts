import { describe, expect, it } from 'vitest';
import { EngineMetrics } from './engine-metrics.ts';

async function values(metrics: EngineMetrics, name: string) {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((entry) => entry.name === name);
  return metric?.values.map(({ labels, value }) => ({ labels, value })) ?? [];
}

describe('EngineMetrics', () => {
  it('reports the lag as server WAL end minus the acknowledged position, never below zero', async () => {
    const metrics = new EngineMetrics();
    metrics.replicationPosition('m', 5_000n, 3_000n);
    expect(await values(metrics, 'tributary_engine_replication_lag_bytes')).toEqual([
      { labels: { mirror: 'm' }, value: 2_000 },
    ]);
    // Acknowledged past what the last message said the server had (a keepalive was older).
    metrics.replicationPosition('m', 5_000n, 6_000n);
    expect(await values(metrics, 'tributary_engine_replication_lag_bytes')).toEqual([
      { labels: { mirror: 'm' }, value: 0 },
    ]);
  });

  it('leaves the server position and lag unset until the server has named one', async () => {
    const metrics = new EngineMetrics();
    metrics.replicationPosition('m', 0n, 1_000n);
    expect(await values(metrics, 'tributary_engine_server_wal_end_bytes')).toEqual([]);
    expect(await values(metrics, 'tributary_engine_replication_lag_bytes')).toEqual([]);
    expect(await values(metrics, 'tributary_engine_acknowledged_lsn_bytes')).toEqual([
      { labels: { mirror: 'm' }, value: 1_000 },
    ]);
  });

  it('counts failures by kind, apart from those that stop the mirror', async () => {
    const metrics = new EngineMetrics();
    metrics.runFailed('m', 'connection', true);
    metrics.runFailed('m', 'connection', true);
    metrics.runFailed('m', 'schema_mismatch', false);
    expect(await values(metrics, 'tributary_engine_run_failures_total')).toEqual(
      expect.arrayContaining([
        { labels: { mirror: 'm', kind: 'connection', retrying: 'true' }, value: 2 },
        { labels: { mirror: 'm', kind: 'schema_mismatch', retrying: 'false' }, value: 1 },
      ]),
    );
  });

  it('counts CDC rows and batches together with their write time', async () => {
    const metrics = new EngineMetrics();
    metrics.batchSynced('m', 40, 0.2);
    metrics.batchSynced('m', 60, 0.4);
    expect(await values(metrics, 'tributary_engine_cdc_rows_total')).toEqual([
      { labels: { mirror: 'm' }, value: 100 },
    ]);
    expect(await values(metrics, 'tributary_engine_cdc_batches_total')).toEqual([
      { labels: { mirror: 'm' }, value: 2 },
    ]);
    const histogram = await values(metrics, 'tributary_engine_batch_sync_seconds');
    expect(histogram).toEqual(expect.arrayContaining([{ labels: { mirror: 'm' }, value: 2 }]));
  });

  it('forgets every series of a dropped mirror and keeps the others', async () => {
    const metrics = new EngineMetrics();
    for (const mirror of ['gone', 'kept']) {
      metrics.batchSynced(mirror, 10, 0.1);
      metrics.snapshotPartitionLoaded(mirror, 'public.orders', 100);
      metrics.snapshotPartitionLoaded(mirror, 'public.items', 5);
      metrics.replicationPosition(mirror, 5_000n, 3_000n);
      metrics.runFailed(mirror, 'connection', true);
    }
    await metrics.forgetMirror('gone');
    const text = await metrics.registry.metrics();
    expect(text).not.toContain('mirror="gone"');
    for (const name of [
      'tributary_engine_cdc_rows_total',
      'tributary_engine_cdc_batches_total',
      'tributary_engine_batch_sync_seconds_count',
      'tributary_engine_snapshot_rows_total',
      'tributary_engine_server_wal_end_bytes',
      'tributary_engine_acknowledged_lsn_bytes',
      'tributary_engine_replication_lag_bytes',
      'tributary_engine_run_failures_total',
    ]) {
      expect(text).toMatch(new RegExp(`^${name}\\{[^}]*mirror="kept"`, 'm'));
    }
  });
});
