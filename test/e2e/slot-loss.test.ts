// A slot invalidated while its mirror is stopped (max_slot_wal_keep_size
// exceeded) is reported as lost, with the resync remedy, and not retried. The
// server is the test's own: invalidating slots needs a setting and WAL churn the
// shared test server must not get.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyPgError } from '../../engine/src/connectors/classify.ts';
import { ReplicationStream } from '../../engine/src/connectors/postgres/replication-stream.ts';
import { defaultPublicationName, defaultSlotName } from '../../engine/src/connectors/postgres/slot.ts';
import { errorPolicy } from '../../engine/src/errors.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import {
  createHarness,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.ts';

describe('lost replication slot', () => {
  let server: PrivatePostgres;
  let harness: Harness;
  let source: pg.Client;

  beforeAll(async () => {
    [server, harness] = await Promise.all([
      startPrivatePostgres({ settings: ['max_slot_wal_keep_size=1MB', 'wal_keep_size=0'] }),
      createHarness('slotloss'),
    ]);
    source = await server.connect();
  }, 120_000);

  afterAll(async () => {
    await source?.end().catch(() => {});
    await Promise.all([server?.destroy(), harness?.close()]);
  });

  it('fails the mirror with the resync remedy once the paused mirror slot is invalidated', async () => {
    await source.query(`CREATE TABLE events (id int PRIMARY KEY, body text)`);
    await source.query(`INSERT INTO events SELECT g, 'row ' || g FROM generate_series(1, 100) g`);
    const spec: SpecInput = {
      name: `slotloss-${randomSuffix()}`,
      tableMappings: [mapping('events')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const options = { source: server.config, supervisedBackoffMs: 200 };
    const countAtDestination = async () =>
      (await harness.destination.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM events`)).rows[0]
        ?.n;
    const first = startMirror(harness, spec, options);
    try {
      await waitFor(async () => (await countAtDestination()) === 100, 60_000, 'initial load');
      // Stopped before the load is recorded complete, the next start would load
      // again with a new slot instead of finding this one lost.
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.snapshotCompleted === true,
        30_000,
        'the load recorded complete',
      );
    } finally {
      await first.stop();
    }

    // Paused: write more WAL than max_slot_wal_keep_size, in several segments, then checkpoint.
    const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
    for (let round = 0; round < 4; round++) {
      await source.query(
        `INSERT INTO events SELECT g, repeat('x', 500) FROM generate_series(1000 + $1::int * 5000, 999 + ($1::int + 1) * 5000) g`,
        [round],
      );
      await source.query(`SELECT pg_switch_wal()`);
    }
    await source.query(`CHECKPOINT`);
    await waitFor(
      async () =>
        (
          await source.query<{ wal_status: string }>(
            `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`,
            [slotName],
          )
        ).rows[0]?.wal_status === 'lost',
      30_000,
      'slot invalidated',
    );

    // What the server answers to START_REPLICATION on the lost slot.
    const stream = await ReplicationStream.start(server.config, {
      slotName,
      publicationName: defaultPublicationName(spec.name, await harness.catalog.installationId()),
      startLsn: 0n,
      applicationName: 'slot-loss-test',
    });
    try {
      const failure = await stream
        .events()
        .next()
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      const classified = classifyPgError(failure, 'source: replication stream', 'connection');
      expect(classified.kind).toBe('slot_invalidated');
    } finally {
      await stream.close();
    }

    // The mirror resumes, finds the slot lost and stops for a person.
    const second = startMirror(harness, spec, options);
    try {
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'failed',
        60_000,
        'the mirror to fail',
      ).catch(async (error: unknown) => {
        const runtime = await harness.catalog.getRuntime(spec.name);
        throw new Error(`mirror did not fail: ${JSON.stringify(runtime)}`, { cause: error });
      });
      await expect(second.done).rejects.toThrow('mirror failed');
    } finally {
      await second.stop().catch(() => {});
    }
    const runtime = await harness.catalog.getRuntime(spec.name);
    expect(runtime?.phase).toBe('failed');
    expect(runtime?.errorMessage).toContain(slotName);
    expect(runtime?.errorMessage).toContain(errorPolicy.slot_invalidated.remedy);
    const logs = await harness.catalog.listLogs({
      mirror: spec.name,
      levels: ['ERROR'],
      offset: 0,
      limit: 10,
    });
    expect(logs.entries.map((entry) => entry.message)).toEqual([
      expect.stringContaining(errorPolicy.slot_invalidated.remedy),
    ]);
  }, 180_000);
});
