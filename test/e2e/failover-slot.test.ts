// A mirror survives a primary failover through a failover slot (PostgreSQL 17+):
// a private primary and a physical standby that synchronizes slots, the mirror
// on the primary with failoverSlot, then the primary stops, the standby is
// promoted and the mirror, pointed at it, carries on without loss. Runs where the
// source is 17 or newer (the postgres-18 project); docs/postgres-versions.md.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultSlotName } from '../../engine/src/connectors/postgres/source/slot.ts';
import { randomSuffix, tableRows, waitFor } from '../support/databases.ts';
import {
  createHarness,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { type PrivatePostgres, startPrivatePostgres, startStandby } from '../support/private-postgres.ts';
import { sourcePostgres } from '../support/testenv.ts';

const standbySlot = 'failover_standby';

describe.runIf(sourcePostgres.major >= 17)('failover slot across a promotion', () => {
  let primary: PrivatePostgres;
  let standby: PrivatePostgres | undefined;
  let harness: Harness;

  beforeAll(async () => {
    [primary, harness] = await Promise.all([
      // No logical change leaves the primary before the standby has it.
      startPrivatePostgres({ settings: [`synchronized_standby_slots=${standbySlot}`] }),
      createHarness('failover'),
    ]);
    standby = await startStandby(primary, { slotName: standbySlot });
  }, 120_000);

  afterAll(async () => {
    await Promise.all([standby?.destroy(), primary?.destroy(), harness?.close()]);
  });

  it('resumes from the slot synchronized to the promoted standby, losing nothing', async () => {
    if (!standby) throw new Error('no standby');
    const onPrimary = await primary.connect();
    const onStandby = await standby.connect();
    let onNewPrimary: pg.Client | undefined;
    try {
      await onPrimary.query(`CREATE TABLE moves (id int PRIMARY KEY, v text)`);
      await onPrimary.query(`INSERT INTO moves SELECT g, 'before ' || g FROM generate_series(1, 100) g`);
      const spec: SpecInput = {
        name: `failover-${randomSuffix()}`,
        tableMappings: [mapping('moves')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
        failoverSlot: true,
      };
      const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
      const destinationCount = async () =>
        (await harness.destination.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM moves`))
          .rows[0]?.n;

      const first = startMirror(harness, spec, { source: primary.config });
      try {
        await waitFor(async () => (await destinationCount().catch(() => 0)) === 100, 60_000, 'initial load');
        await onPrimary.query(`INSERT INTO moves SELECT g, 'during ' || g FROM generate_series(101, 120) g`);
        await waitFor(async () => (await destinationCount()) === 120, 30_000, 'rows during');
        // The standby keeps a copy only once the slot needs nothing the standby
        // lacks: once the idle mirror has confirmed a snapshot of running
        // transactions logged after the last write. Ask it to sync until then.
        await waitFor(
          async () => {
            await onPrimary.query(`SELECT pg_log_standby_snapshot()`);
            await onStandby.query(`SELECT pg_sync_replication_slots()`);
            const synced = await onStandby.query<{ synced: boolean; temporary: boolean; failover: boolean }>(
              `SELECT synced, temporary, failover FROM pg_replication_slots WHERE slot_name = $1`,
              [slotName],
            );
            const row = synced.rows[0];
            return row?.synced === true && row.failover && !row.temporary;
          },
          60_000,
          'the slot synchronized to the standby',
        );
      } finally {
        expect(await first.stop()).toBe('stopped');
      }

      // Changes while the mirror is stopped, then the last slot position to the standby.
      await onPrimary.query(`INSERT INTO moves SELECT g, 'stopped ' || g FROM generate_series(1001, 1050) g`);
      await onPrimary.query(`UPDATE moves SET v = 'updated' WHERE id <= 10`);
      const primaryEnd = await onPrimary.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`);
      await waitFor(
        async () =>
          (
            await onStandby.query<{ caught_up: boolean }>(
              `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up`,
              [primaryEnd.rows[0]?.lsn],
            )
          ).rows[0]?.caught_up === true,
        30_000,
        'the standby caught up',
      );
      await onStandby.query(`SELECT pg_sync_replication_slots()`);

      // The primary fails; the standby takes over and takes writes.
      await onPrimary.end().catch(() => {});
      await primary.stop();
      await onStandby.end().catch(() => {});
      await standby.promote();
      onNewPrimary = await standby.connect();
      await onNewPrimary.query(
        `INSERT INTO moves SELECT g, 'after ' || g FROM generate_series(2001, 2050) g`,
      );
      await onNewPrimary.query(`DELETE FROM moves WHERE id BETWEEN 11 AND 20`);

      const second = startMirror(harness, spec, { source: standby.config });
      try {
        const expected = JSON.stringify(await tableRows(onNewPrimary, 'moves', 'id'));
        await waitFor(
          async () => JSON.stringify(await tableRows(harness.destination.client, 'moves', 'id')) === expected,
          60_000,
          'the destination to match the new primary',
        );
        expect(await tableRows(harness.destination.client, 'moves', 'id')).toEqual(
          await tableRows(onNewPrimary, 'moves', 'id'),
        );
        expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('running');
      } finally {
        expect(await second.stop()).toBe('stopped');
      }
    } finally {
      await onPrimary.end().catch(() => {});
      await onStandby.end().catch(() => {});
      await onNewPrimary?.end().catch(() => {});
    }
  }, 180_000);
});
