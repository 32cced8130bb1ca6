// The PostgreSQL source under conditions: SSH tunnel, bad set-ups, an idle
// mirror beside a busy database, a huge transaction, a destination outage.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultInjectingDestination } from '../../engine/src/connectors/memory/fault-injecting.ts';
import { connectPostgres } from '../../engine/src/connectors/postgres/driver/connect.ts';
import { defaultSlotName } from '../../engine/src/connectors/postgres/source/slot.ts';
import { validateSource } from '../../engine/src/connectors/postgres/source/validate-source.ts';
import { EngineError } from '../../engine/src/errors.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';

import {
  createHarness,
  dropMirror,
  expectSameRows,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { postgres, sourcePostgres, ssh } from '../support/testenv.ts';

async function slotLag(harness: Harness, slotName: string): Promise<bigint> {
  const result = await harness.source.client.query<{ lag: string }>(
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint::text AS lag
     FROM pg_replication_slots WHERE slot_name = $1`,
    [slotName],
  );
  return BigInt(result.rows[0]?.lag ?? '-1');
}

describe('PostgreSQL source', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('src');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('replicates through an SSH tunnel (snapshot and CDC)', async () => {
    await harness.source.client.query(`CREATE TABLE tunnelled (id int PRIMARY KEY, v text)`);
    await harness.source.client.query(
      `INSERT INTO tunnelled SELECT g, 'v' || g FROM generate_series(1, 500) g`,
    );
    const spec: SpecInput = {
      name: `ssh-${randomSuffix()}`,
      tableMappings: [mapping('tunnelled')],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec, {
      source: {
        ...harness.source.config,
        sshConfig: {
          host: ssh.host,
          port: ssh.port,
          user: ssh.user,
          privateKey: readFileSync(ssh.privateKeyPath, 'utf8'),
        },
      },
    });
    await expectSameRows(harness, 'tunnelled', { timeoutMs: 60_000 });
    // Changes made now are replicated whether or not CDC has started yet (the slot
    // predates the snapshot), so no wait on the phase here: once the update
    // arrived, CDC is running.
    await harness.source.client.query(`UPDATE tunnelled SET v = 'changed' WHERE id <= 10`);
    await expectSameRows(harness, 'tunnelled', { timeoutMs: 60_000 });
    expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('running');
    // The replication session's client end is a socket held by sshd: the
    // engine reached PostgreSQL through the tunnel, not directly.
    const sessions = await harness.source.client.query<{ client_port: number }>(
      `SELECT client_port FROM pg_stat_activity WHERE application_name = $1`,
      [`tributary:${spec.name}:cdc`],
    );
    const clientPort = sessions.rows[0]?.client_port;
    expect(clientPort).toBeGreaterThan(0);
    const owner = execFileSync('ss', ['-Htnp', 'state', 'established', `( sport = :${clientPort} )`], {
      encoding: 'utf8',
    });
    expect(owner).toContain('"sshd"');
    await mirror.stop();
    await dropMirror(harness, spec);
  });

  it('reports every set-up problem at once, each naming the fix', async () => {
    const { client } = harness.source;
    await client.query(`CREATE TABLE keyless (v text)`);
    await client.query(`CREATE TABLE private_table (id int PRIMARY KEY)`);
    await client.query(`CREATE TABLE unpublished (id int PRIMARY KEY)`);
    await client.query(`CREATE PUBLICATION partial_pub FOR TABLE private_table`);
    const role = `plain_${randomSuffix()}`;
    await client.query(`CREATE ROLE ${role} LOGIN PASSWORD 'plain-secret'`);
    try {
      const connection = await connectPostgres(
        { ...harness.source.config, user: role, password: 'plain-secret' },
        { applicationName: 'validation-test' },
      );
      try {
        const attempt = validateSource(connection.client, {
          tables: [
            { schema: 'public', table: 'missing' },
            { schema: 'public', table: 'keyless' },
            { schema: 'public', table: 'private_table' },
            { schema: 'public', table: 'unpublished' },
          ],
          publicationName: 'partial_pub',
        });
        const error = await attempt.then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(error).toBeInstanceOf(EngineError);
        const message = (error as EngineError).message;
        expect((error as EngineError).kind).toBe('source_setup');
        expect(message).toContain('lacks the REPLICATION attribute');
        expect(message).toContain('source table public.missing does not exist');
        expect(message).toContain('public.keyless has no primary key');
        expect(message).toContain('REPLICA IDENTITY FULL');
        expect(message).toContain('cannot SELECT from public.private_table');
        expect(message).toContain('publication partial_pub does not contain public.unpublished');
        expect(message).not.toContain('plain-secret');
      } finally {
        await connection.close();
      }
    } finally {
      await client.query(`DROP ROLE ${role}`);
    }
  });

  it('passes validation for a non-superuser with REPLICATION and SELECT', async () => {
    await harness.source.client.query(`CREATE TABLE granted (id int PRIMARY KEY)`);
    await harness.source.client.query(`GRANT SELECT ON granted TO ${postgres.replicator.user}`);
    const connection = await connectPostgres(
      { ...harness.source.config, ...postgres.replicator },
      { applicationName: 'validation-test' },
    );
    try {
      const validated = await validateSource(connection.client, {
        tables: [{ schema: 'public', table: 'granted' }],
      });
      expect(validated.tables[0]?.keyColumns).toEqual(['id']);
      expect(Number(validated.serverVersion.split('.')[0])).toBeGreaterThanOrEqual(12);
    } finally {
      await connection.close();
    }
  });

  it('marks the mirror failed with the remedy when the source is not ready', async () => {
    const spec: SpecInput = {
      name: `bad-${randomSuffix()}`,
      tableMappings: [mapping('does_not_exist')],
      doInitialSnapshot: true,
    };
    const mirror = startMirror(harness, spec, { supervisedBackoffMs: 100 });
    await expect(mirror.done).rejects.toThrow('mirror failed');
    const runtime = await harness.catalog.getRuntime(spec.name);
    expect(runtime?.phase).toBe('failed');
    expect(runtime?.errorMessage).toContain('source table public.does_not_exist does not exist');
    const logs = await harness.catalog.listLogs({
      mirror: spec.name,
      levels: ['ERROR'],
      offset: 0,
      limit: 10,
    });
    expect(logs.entries[0]?.message).toContain('fix the source database setting');
  });

  it('lets an idle mirror follow the server so it does not hold back WAL', async () => {
    const { client } = harness.source;
    await client.query(`CREATE TABLE quiet (id int PRIMARY KEY)`);
    await client.query(`CREATE TABLE busy (id int PRIMARY KEY, filler text)`);
    const spec: SpecInput = {
      name: `idle-${randomSuffix()}`,
      tableMappings: [mapping('quiet')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );
    // About 20 MB of WAL on a table the mirror does not replicate.
    for (let round = 0; round < 20; round++) {
      await client.query(
        `INSERT INTO busy SELECT g, repeat('x', 1000) FROM generate_series($1::int, $1::int + 999) g`,
        [round * 1000],
      );
    }
    const walWritten = await client.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`);
    expect(walWritten.rows[0]?.lsn).toBeDefined();
    await waitFor(
      async () =>
        (await slotLag(harness, defaultSlotName(spec.name, await harness.catalog.installationId()))) <
        1_000_000n,
      45_000,
      'the slot to follow',
    );
    expect(
      await slotLag(harness, defaultSlotName(spec.name, await harness.catalog.installationId())),
    ).toBeLessThan(1_000_000n);
    await mirror.stop();
    await dropMirror(harness, spec);
  });

  // The heap bound is the engine's own doing, the same on every source major:
  // run once, on the shared server (the longest test of the suite).
  it.skipIf(sourcePostgres !== postgres)(
    'syncs a single transaction of a million rows within a capped heap',
    async () => {
      const { client } = harness.source;
      await client.query(`CREATE TABLE huge (id int PRIMARY KEY, v text)`);
      const name = `huge-${randomSuffix()}`;
      const configPath = writeEngineConfig(harness, {
        name,
        sourcePeer: 'source',
        destinationPeer: 'destination',
        tableMappings: [mapping('huge')],
        doInitialSnapshot: false,
        idleTimeoutSeconds: 1,
      });
      // About 250 bytes of text per row: held at once, a million rows need far
      // more heap than the cap below; the batch byte budget must cut them up.
      const engine = startEngine(name, configPath, { nodeOptions: ['--max-old-space-size=256'] });
      try {
        await waitFor(
          async () => (await harness.catalog.getRuntime(name))?.phase === 'running',
          20_000,
          'running',
        );
        await client.query(
          `INSERT INTO huge SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 1000000) g`,
        );
        await waitFor(
          async () =>
            engine.exitCode !== null ||
            (await harness.destination.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM huge`))
              .rows[0]?.n === 1_000_000,
          240_000,
          'a million rows',
        );
        expect(engine.exitCode).toBeNull();
      } finally {
        engine.kill('SIGTERM');
        expect(await exited(engine)).toBe(0);
      }
      const { batches } = await harness.catalog.listBatches(name, { limit: 0, ascending: true });
      expect(batches.length).toBeGreaterThanOrEqual(3);
      expect(batches.reduce((rows, batch) => rows + batch.rowCount, 0n)).toBe(1_000_000n);
      const sample = await harness.destination.client.query(`SELECT v FROM huge WHERE id = 777777`);
      expect(sample.rows[0]).toEqual({
        v: (await client.query(`SELECT repeat(md5('777777'), 8) AS v`)).rows[0]?.v,
      });
      await dropMirror(harness, { name, tableMappings: [mapping('huge')], doInitialSnapshot: false });
    },
    300_000,
  );

  it('closes batches at the idle timeout even while changes keep coming', async () => {
    const { client } = harness.source;
    await client.query(`CREATE TABLE steady (id int PRIMARY KEY)`);
    const spec: SpecInput = {
      name: `steady-${randomSuffix()}`,
      tableMappings: [mapping('steady')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec);
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );
    // A commit every 50 ms for 4 s: the stream is never quiet for a whole second.
    const writesEnd = Date.now() + 4_000;
    let finishedBatchesWhileWriting = 0;
    for (let id = 1; Date.now() < writesEnd; id++) {
      await client.query(`INSERT INTO steady VALUES ($1)`, [id]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const { batches } = await harness.catalog.listBatches(spec.name, { limit: 0, ascending: true });
      finishedBatchesWhileWriting = batches.filter((batch) => batch.endTime !== null).length;
    }
    expect(finishedBatchesWhileWriting).toBeGreaterThanOrEqual(2);
    await expectSameRows(harness, 'steady', { timeoutMs: 60_000 });
    await mirror.stop();
    await dropMirror(harness, spec);
  });

  it('survives a destination outage: the slot does not move, and everything arrives after', async () => {
    const { client } = harness.source;
    await client.query(`CREATE TABLE outage (id int PRIMARY KEY, v int)`);
    const spec: SpecInput = {
      name: `outage-${randomSuffix()}`,
      tableMappings: [mapping('outage')],
      doInitialSnapshot: false,
      idleTimeoutSeconds: 1,
      maxBatchSize: 50,
    };
    let faulty: FaultInjectingDestination | undefined;
    const mirror = startMirror(harness, spec, {
      supervisedBackoffMs: 200,
      wrapDestination: (destination) => {
        faulty = new FaultInjectingDestination(destination);
        return faulty;
      },
    });
    await waitFor(
      async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
      10_000,
      'running',
    );
    await client.query(`INSERT INTO outage SELECT g, 0 FROM generate_series(1, 100) g`);
    await expectSameRows(harness, 'outage', { timeoutMs: 60_000 });

    const slot = defaultSlotName(spec.name, await harness.catalog.installationId());
    // Down until the slot has been looked at: a sync that succeeded before the
    // look would move the slot legitimately.
    faulty?.failNextSyncs(Number.POSITIVE_INFINITY);
    // The position inside the outage's first transaction: an idle mirror may let
    // the slot follow WAL of other databases up to there, never past it.
    const before = await client.query<{ lsn: string }>(
      `INSERT INTO outage VALUES (101, 101) RETURNING pg_current_wal_insert_lsn()::text AS lsn`,
    );
    for (let i = 102; i <= 400; i++) await client.query(`INSERT INTO outage VALUES ($1, $1)`, [i]);
    await client.query(`UPDATE outage SET v = v + 1 WHERE id % 3 = 0`);
    await waitFor(async () => (faulty?.failedSyncCount ?? 0) >= 5, 30_000, 'five failed syncs');
    const confirmedDuringOutage = await client.query<{ behind: boolean }>(
      `SELECT confirmed_flush_lsn <= $2::pg_lsn AS behind FROM pg_replication_slots WHERE slot_name = $1`,
      [slot, before.rows[0]?.lsn],
    );
    faulty?.failNextSyncs(0);
    expect(confirmedDuringOutage.rows[0]?.behind).toBe(true);
    await expectSameRows(harness, 'outage', { timeoutMs: 60_000 });
    // A fault that heals by itself is a WARN line while it lasts, and another when it clears.
    const warnings = await harness.catalog.listLogs({
      mirror: spec.name,
      levels: ['WARN'],
      offset: 0,
      limit: 10,
    });
    expect(warnings.entries.some((entry) => entry.message.includes('injected outage'))).toBe(true);
    await waitFor(
      async () =>
        (
          await harness.catalog.listLogs({ mirror: spec.name, levels: ['WARN'], offset: 0, limit: 10 })
        ).entries.some((entry) => entry.message.startsWith('recovered after')),
      30_000,
      'the recovery log line',
    );
    await mirror.stop();
    await dropMirror(harness, spec);
  });
});
