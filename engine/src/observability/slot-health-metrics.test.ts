import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { SlotHealth } from '../catalog/catalog.ts';
import { SlotHealthMetrics } from './slot-health-metrics.ts';

const checkedAt = new Date('2026-01-01T00:00:10Z');
const healthy: SlotHealth = {
  slotName: 's',
  checkedAt,
  healthy: true,
  reason: 'Healthy',
  message: 'ok',
  reading: {
    active: false,
    walStatus: 'reserved',
    retainedWalBytes: 3_000n,
    unconfirmedBytes: 2_000n,
    safeWalSizeBytes: 9_000n,
    invalidationReason: null,
    conflicting: null,
  },
};

const series = async (registry: Registry) =>
  (await registry.metrics())
    .split('\n')
    .filter((line) => line.startsWith('tributary_mirror_slot_'))
    .sort();

describe('SlotHealthMetrics', () => {
  it('labels every series with the mirror and the namespace', async () => {
    const registry = new Registry();
    const metrics = new SlotHealthMetrics({ registry, namespace: 'prod' });
    metrics.slotHealth('orders', healthy);
    expect(await series(registry)).toEqual([
      'tributary_mirror_slot_active{mirror="orders",namespace="prod"} 0',
      'tributary_mirror_slot_healthy{mirror="orders",namespace="prod",reason="Healthy"} 1',
      'tributary_mirror_slot_last_read_timestamp_seconds{mirror="orders",namespace="prod"} 1767225610',
      'tributary_mirror_slot_retained_wal_bytes{mirror="orders",namespace="prod"} 3000',
      'tributary_mirror_slot_safe_wal_size_bytes{mirror="orders",namespace="prod"} 9000',
      'tributary_mirror_slot_unconfirmed_bytes{mirror="orders",namespace="prod"} 2000',
      'tributary_mirror_slot_wal_status{mirror="orders",namespace="prod",wal_status="reserved"} 1',
    ]);
  });

  it('keeps one series per state label, and no stale values once the source cannot be read', async () => {
    const registry = new Registry();
    const metrics = new SlotHealthMetrics({ registry });
    metrics.slotHealth('orders', healthy);
    const reading = healthy.reading;
    if (!reading) throw new Error('reading expected');
    metrics.slotHealth('orders', {
      ...healthy,
      healthy: false,
      reason: 'WalAtRisk',
      reading: { ...reading, walStatus: 'unreserved', safeWalSizeBytes: null },
    });
    let now = await series(registry);
    expect(now).toContain('tributary_mirror_slot_healthy{mirror="orders",reason="WalAtRisk"} 0');
    expect(now).toContain('tributary_mirror_slot_wal_status{mirror="orders",wal_status="unreserved"} 1');
    expect(now.filter((line) => line.includes('reason="Healthy"') || line.includes('"reserved"'))).toEqual(
      [],
    );
    expect(now.some((line) => line.startsWith('tributary_mirror_slot_safe_wal_size_bytes'))).toBe(false);

    metrics.slotHealth('orders', {
      ...healthy,
      checkedAt: new Date('2026-01-01T00:01:00Z'),
      healthy: null,
      reason: 'SourceUnreachable',
      reading: null,
    });
    now = await series(registry);
    // Only when it was last read remains, so its age can be alerted on.
    expect(now).toEqual(['tributary_mirror_slot_last_read_timestamp_seconds{mirror="orders"} 1767225610']);
    metrics.forgetSlot('orders');
    expect(await series(registry)).toEqual([]);
  });
});
