import { describe, expect, it } from 'vitest';
import { MetricsHistory } from './history.ts';

const metrics = (rows: Record<string, number>, lag: Record<string, number>) =>
  Object.entries(rows)
    .flatMap(([mirror, value]) => [
      `tributary_mirror_phase{mirror="${mirror}",phase="STATUS_RUNNING"} 1`,
      `tributary_mirror_rows_synced{mirror="${mirror}"} ${value}`,
      ...(lag[mirror] === undefined
        ? []
        : [`tributary_engine_replication_lag_bytes{mirror="${mirror}"} ${lag[mirror]}`]),
    ])
    .join('\n');

describe('MetricsHistory', () => {
  it('keeps lag and derives rows per second between samples, per mirror', async () => {
    const texts = [
      metrics({ a: 100, b: 5 }, { a: 800 }),
      metrics({ a: 400, b: 5 }, { a: 200 }),
      metrics({ a: 400 }, { a: 0 }),
    ];
    const history = new MetricsHistory(async () => texts.shift() ?? '', { intervalMs: 10_000 });
    await history.sample(1_000_000);
    await history.sample(1_010_000);
    expect(history.history('a')).toEqual({
      time: [1_000, 1_010],
      lagBytes: [800, 200],
      rowsPerSecond: [null, 30],
    });
    expect(history.history('b').rowsPerSecond).toEqual([null, 0]);
    // b is no longer listed (dropped): its history goes.
    await history.sample(1_020_000);
    expect(history.history('b')).toEqual({ time: [], lagBytes: [], rowsPerSecond: [] });
    expect(history.history('a').time).toEqual([1_000, 1_010, 1_020]);
  });

  it('keeps one hour', async () => {
    const history = new MetricsHistory(async () => metrics({ a: 1 }, {}), {
      intervalMs: 10_000,
      keepSeconds: 3_600,
    });
    for (let second = 0; second <= 7_200; second += 600) await history.sample(second * 1000);
    expect(history.history('a').time).toEqual([3_600, 4_200, 4_800, 5_400, 6_000, 6_600, 7_200]);
  });
});
