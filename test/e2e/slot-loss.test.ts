// A slot invalidated while its mirror is stopped or paused
// (max_slot_wal_keep_size exceeded) is reported as lost, with the resync remedy,
// and not retried: a resume fails the mirror within seconds instead of looping.
// The server is the test's own: invalidating slots needs a setting and WAL churn
// the shared test server must not get.
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type ControlPlane, startControlPlane } from '../../api-server/src/index.ts';
import type { Catalog } from '../../engine/src/catalog/catalog.ts';
import { classifyPgError } from '../../engine/src/connectors/classify/index.ts';
import { checkPeer } from '../../engine/src/connectors/peer-check.ts';
import { checkMirrorSource, findMissingTables } from '../../engine/src/connectors/postgres/source/inspect.ts';
import { ReplicationStream } from '../../engine/src/connectors/postgres/source/replication-stream.ts';
import { defaultPublicationName, defaultSlotName } from '../../engine/src/connectors/postgres/source/slot.ts';
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

/**
 * Writes more WAL than max_slot_wal_keep_size, in several segments, then
 * checkpoints, until the slot's WAL is gone (wal_status lost).
 */
async function loseSlot(source: pg.Client, table: string, slotName: string): Promise<void> {
  for (let round = 0; round < 4; round++) {
    await source.query(
      `INSERT INTO ${table} SELECT g, repeat('x', 500) FROM generate_series(1000 + $1::int * 5000, 999 + ($1::int + 1) * 5000) g`,
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
}

/** Log entries written for the mirror (a folded entry counts each time it was written). */
async function logWrites(catalog: Catalog, mirror: string): Promise<number> {
  const { entries } = await catalog.listLogs({ mirror, offset: 0, limit: 1_000 });
  return entries.reduce((writes, entry) => writes + entry.repeatCount, 0);
}

/**
 * Fails when the mirror writes more than `most` log entries during `windowMs`:
 * a bounded poll that ends successfully once the window is over.
 */
async function expectQuietLogs(catalog: Catalog, mirror: string, most: number, windowMs: number) {
  const before = await logWrites(catalog, mirror);
  const until = Date.now() + windowMs;
  let written = 0;
  await waitFor(
    async () => {
      written = (await logWrites(catalog, mirror)) - before;
      if (written > most) throw new Error(`${written} log entries written in under ${windowMs} ms`);
      return Date.now() >= until;
    },
    windowMs + 10_000,
    'a quiet log',
  );
  expect(written).toBeLessThanOrEqual(most);
}

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

    // Stopped: write more WAL than max_slot_wal_keep_size.
    const slotName = defaultSlotName(spec.name, await harness.catalog.installationId());
    await loseSlot(source, 'events', slotName);

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

  describe('resumed through the API of standalone mode', () => {
    let controlPlane: ControlPlane;
    let app: FastifyInstance;
    const suffix = randomSuffix();
    const mirror = `resumed-${suffix}`;
    const post = async (url: string, body: unknown) => {
      const response = await app.inject({ method: 'POST', url, payload: body as object });
      return { status: response.statusCode, body: response.json() as Record<string, unknown> };
    };
    const status = async () => (await post('/api/v1/mirrors/status', { flowJobName: mirror })).body;
    const reaches = (flowState: string) =>
      waitFor(async () => (await status()).currentFlowState === flowState, 60_000, `${mirror} ${flowState}`);
    const stateChange = (requestedFlowState: string) =>
      post('/api/v1/mirrors/state_change', { flowJobName: mirror, requestedFlowState });

    beforeAll(async () => {
      const logger = pino({ level: process.env.TRIBUTARY_TEST_LOG ?? 'silent' });
      controlPlane = await startControlPlane({
        dataDir: 'memory://',
        logger,
        retryBackoffMs: { initial: 200, max: 1_000 },
      });
      app = buildApp({
        store: controlPlane.store,
        catalog: controlPlane.catalog,
        checkPeer: (peer) => checkPeer(peer, 5_000),
        findMissingTables,
        checkMirrorSource,
        scriptsEnabled: false,
        auth: { mode: 'disabled' },
        logger,
        ...(controlPlane.engineMetrics ? { engineMetrics: controlPlane.engineMetrics.registry } : {}),
      });
      await app.ready();
    }, 60_000);

    afterAll(async () => {
      await app?.close();
      await controlPlane?.close();
    });

    it('fails a mirror resumed from paused onto a lost slot, with the resync remedy, and stays quiet; a retry fails again', async () => {
      await source.query(`CREATE TABLE resumed (id int PRIMARY KEY, body text)`);
      await source.query(`INSERT INTO resumed SELECT g, 'row ' || g FROM generate_series(1, 100) g`);
      for (const [name, config] of [
        [`src-${suffix}`, server.config],
        [`dst-${suffix}`, harness.destination.config],
      ] as const) {
        const created = await post('/api/v1/peers/create', {
          peer: { name, type: 3, relational_config: { ...config } },
        });
        expect(created.status, JSON.stringify(created.body)).toBe(200);
      }
      const created = await post('/api/v1/flows/cdc/create', {
        connection_configs: {
          flow_job_name: mirror,
          source_name: `src-${suffix}`,
          destination_name: `dst-${suffix}`,
          table_mappings: [
            { source_table_identifier: 'public.resumed', destination_table_identifier: 'public.resumed' },
          ],
          do_initial_snapshot: true,
          idle_timeout_seconds: 1,
        },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      await reaches('STATUS_RUNNING');
      await waitFor(
        async () =>
          (await harness.destination.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM resumed`))
            .rows[0]?.n === 100,
        60_000,
        'initial load',
      );

      expect((await stateChange('STATUS_PAUSED')).body).toEqual({ ok: true, errorMessage: '' });
      await reaches('STATUS_PAUSED');
      const slotName = defaultSlotName(mirror, await controlPlane.catalog.installationId());
      await loseSlot(source, 'resumed', slotName);

      expect((await stateChange('STATUS_RUNNING')).body).toEqual({ ok: true, errorMessage: '' });
      await reaches('STATUS_FAILED').catch(async (error: unknown) => {
        throw new Error(`not failed: ${JSON.stringify(await status())}`, { cause: error });
      });
      const failed = await status();
      expect(failed.errorMessage).toContain(slotName);
      expect(failed.errorMessage).toContain(errorPolicy.slot_invalidated.remedy);
      // Failed for good: no engine runs, nothing is retried, the log holds still.
      await expectQuietLogs(controlPlane.catalog, mirror, 1, 5_000);
      expect(await controlPlane.store.getMirror(mirror)).toBeDefined();
      const metrics = await (await app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toContain(`tributary_mirror_phase{mirror="${mirror}",phase="STATUS_FAILED"} 1`);
      expect(metrics).toMatch(
        new RegExp(
          `tributary_engine_run_failures_total\\{mirror="${mirror}",kind="slot_invalidated",retrying="false"\\} [1-9]`,
        ),
      );
      const page = await app.inject({ method: 'GET', url: `/mirrors/${mirror}` });
      expect(page.body).toContain('State: <span class="state">failed</span>');
      expect(page.body).toContain('resync: drop the mirror');

      // A retry of the failed mirror meets the same lost slot: failed again, once.
      const errorsBefore = await controlPlane.catalog.listLogs({
        mirror,
        levels: ['ERROR'],
        offset: 0,
        limit: 10,
      });
      const errorWritesBefore = errorsBefore.entries.reduce((sum, entry) => sum + entry.repeatCount, 0);
      expect((await stateChange('STATUS_RUNNING')).body).toEqual({ ok: true, errorMessage: '' });
      await waitFor(
        async () => {
          const { entries } = await controlPlane.catalog.listLogs({
            mirror,
            levels: ['ERROR'],
            offset: 0,
            limit: 10,
          });
          return entries.reduce((sum, entry) => sum + entry.repeatCount, 0) > errorWritesBefore;
        },
        30_000,
        'the retry to meet the lost slot',
      );
      await reaches('STATUS_FAILED');
      expect((await status()).errorMessage).toContain(errorPolicy.slot_invalidated.remedy);
      await expectQuietLogs(controlPlane.catalog, mirror, 1, 5_000);

      expect((await stateChange('STATUS_TERMINATING')).status).toBe(200);
      await reaches('STATUS_TERMINATED');
    }, 240_000);
  });
});
