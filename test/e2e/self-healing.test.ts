// Faults that go away by themselves heal without anyone resuming the mirror,
// under the supervisor's default retry policy, and show while they last: the
// runtime's retrying error (what /api/v1/mirrors/status shows), one WARN log
// line when each fault starts and one when it clears.
//
// Time to recovery (fault removed → rows visible at the destination) is printed
// for docs/engine.md; nothing here asserts on elapsed time.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import { randomSuffix, tableCells, waitFor } from '../support/databases.ts';
import {
  createHarness,
  expectSameRows,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.ts';
import { mountSmallDisk, type SmallDisk } from '../support/small-disk.ts';

const recoveryRuns = Number(process.env.TRIBUTARY_RECOVERY_RUNS ?? 3);
/** How long each fault lasts once it shows: long enough for the backoff to reach its cap. */
const faultSeconds = Number(process.env.TRIBUTARY_FAULT_SECONDS ?? 8);

/** Waits until the mirror has been retrying its fault for `faultSeconds`. */
async function faultLasted(harness: Harness, mirror: string): Promise<void> {
  await waitFor(
    async () => {
      const since = (await harness.catalog.getRuntime(mirror))?.retryingSince;
      return since !== null && since !== undefined && Date.now() - since.getTime() >= faultSeconds * 1000;
    },
    faultSeconds * 1000 + 30_000,
    `the fault to last ${faultSeconds} s`,
  );
}

/**
 * The initial load's rows are at the destination before the mirror has moved to
 * `running` (it still reads its checkpoint and starts streaming): a fault made
 * in between would hit the snapshot phase, not the streaming one under test.
 */
async function mirrorRunning(harness: Harness, mirror: string): Promise<void> {
  await waitFor(
    async () => (await harness.catalog.getRuntime(mirror))?.phase === 'running',
    30_000,
    'mirror running',
  );
}

/** Milliseconds until `check` holds, polled every 50 ms, at most `timeoutMs`. */
async function timeUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const started = performance.now();
  await waitForFast(check, timeoutMs, what);
  return performance.now() - started;
}

async function waitForFast(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function summary(label: string, millis: readonly number[]): string {
  const sorted = [...millis].sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
  const max = sorted[sorted.length - 1] ?? 0;
  return `${label}: runs ${sorted.length}, median ${(median / 1000).toFixed(2)} s, max ${(max / 1000).toFixed(2)} s (${sorted.map((ms) => (ms / 1000).toFixed(2)).join(', ')})`;
}

async function logMessages(harness: Harness, mirror: string, level: 'WARN' | 'ERROR'): Promise<string[]> {
  const { entries } = await harness.catalog.listLogs({ mirror, levels: [level], offset: 0, limit: 1000 });
  return entries.map((entry) => entry.message);
}

/**
 * A source table of 100 rows and the spec of a mirror that loads it and then
 * streams it with a 1 s idle timeout: what every fault below starts from.
 */
async function tableToMirror(harness: Harness, table: string, prefix: string): Promise<SpecInput> {
  await harness.source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, body text)`);
  await harness.source.client.query(
    `INSERT INTO ${table} SELECT g, 'row ' || g FROM generate_series(1, 100) g`,
  );
  return {
    name: `${prefix}-${randomSuffix()}`,
    tableMappings: [mapping(table)],
    doInitialSnapshot: true,
    idleTimeoutSeconds: 1,
  };
}

describe('faults that heal by themselves', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('heal');
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('continues by itself after privileges revoked at the destination are granted again', async () => {
    const { source, destination } = harness;
    const role = `heal_${randomSuffix()}`;
    const password = `pw-${randomSuffix()}`;
    await destination.client.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    await destination.client.query(
      `GRANT CREATE ON DATABASE ${pg.escapeIdentifier(destination.name)} TO ${role}`,
    );
    await destination.client.query(`GRANT CREATE, USAGE ON SCHEMA public TO ${role}`);
    const asRole: RelationalConfig = { ...destination.config, user: role, password };

    const spec = await tableToMirror(harness, 'granted', 'grant');
    const mirror = startMirror(harness, spec, { supervised: true, destination: asRole });
    const recoveries: number[] = [];
    try {
      await expectSameRows(harness, 'granted');
      await mirrorRunning(harness, spec.name);
      for (let run = 0; run < recoveryRuns; run++) {
        await destination.client.query(`REVOKE INSERT, UPDATE, DELETE ON granted FROM ${role}`);
        const base = 1000 * (run + 1);
        await source.client.query(
          `INSERT INTO granted SELECT g, 'late ' || g FROM generate_series(${base}, ${base + 99}) g`,
        );
        await source.client.query(`UPDATE granted SET body = body || ' changed' WHERE id <= 10`);
        await waitFor(
          async () =>
            /permission denied for table granted/.test(
              (await harness.catalog.getRuntime(spec.name))?.retryingError ?? '',
            ),
          30_000,
          'the permission fault to show',
        );
        const runtime = await harness.catalog.getRuntime(spec.name);
        expect(runtime?.phase).toBe('running');
        expect(runtime?.retryingError).toMatch(
          /it needs INSERT, UPDATE and DELETE .* on "public"\."granted"/,
        );
        expect(runtime?.retryingError).toContain('grant the peer user the privilege');

        await faultLasted(harness, spec.name);
        await destination.client.query(`GRANT INSERT, UPDATE, DELETE ON granted TO ${role}`);
        recoveries.push(
          await timeUntil(
            async () =>
              (await destination.client.query(`SELECT 1 FROM granted WHERE id = $1`, [base + 99]))
                .rowCount === 1,
            60_000,
            'rows after the grant',
          ),
        );
        await expectSameRows(harness, 'granted');
        await waitFor(
          async () => (await harness.catalog.getRuntime(spec.name))?.retryingError === null,
          30_000,
          'the fault to clear',
        );
      }
      const warnings = await logMessages(harness, spec.name, 'WARN');
      expect(
        warnings.filter((message) => /^destination: sync batch .*permission denied/.test(message)),
      ).toHaveLength(recoveryRuns);
      expect(warnings.filter((message) => message.startsWith('recovered after'))).toHaveLength(recoveryRuns);
      expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
      console.log(summary('privileges granted again', recoveries));
    } finally {
      await mirror.stop();
      await destination.client.query(`REASSIGN OWNED BY ${role} TO CURRENT_USER`).catch(() => {});
      await destination.client.query(`DROP OWNED BY ${role}`).catch(() => {});
      await destination.client.query(`DROP ROLE ${role}`).catch(() => {});
    }
  }, 300_000);

  it('continues by itself once the destination accepts connections again (too many connections)', async () => {
    const { source, destination } = harness;
    const role = `busy_${randomSuffix()}`;
    const password = `pw-${randomSuffix()}`;
    await destination.client.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
    await destination.client.query(
      `GRANT CREATE ON DATABASE ${pg.escapeIdentifier(destination.name)} TO ${role}`,
    );
    await destination.client.query(`GRANT CREATE, USAGE ON SCHEMA public TO ${role}`);
    // The checkpoint schema may be left by an earlier test's role (now the superuser's).
    await destination.client.query(`CREATE SCHEMA IF NOT EXISTS _tributary`);
    await destination.client.query(`GRANT ALL ON SCHEMA _tributary TO ${role}`);
    await destination.client.query(`GRANT ALL ON ALL TABLES IN SCHEMA _tributary TO ${role}`);
    const spec = await tableToMirror(harness, 'crowded', 'busy');
    const mirror = startMirror(harness, spec, {
      supervised: true,
      destination: { ...destination.config, user: role, password },
    });
    try {
      await waitFor(
        async () =>
          (await harness.destination.client.query(`SELECT to_regclass('public.crowded') AS t`)).rows[0]?.t !==
          null,
        60_000,
        'the destination table',
      ).catch(async (error: unknown) => {
        const runtime = await harness.catalog.getRuntime(spec.name);
        throw new Error(`mirror did not set up: ${JSON.stringify(runtime)}`, { cause: error });
      });
      await expectSameRows(harness, 'crowded');
      await mirrorRunning(harness, spec.name);
      // No new session for the role, and its open ones ended: every write needs a new one.
      await destination.client.query(`ALTER ROLE ${role} CONNECTION LIMIT 0`);
      await destination.client.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`,
        [role],
      );
      await source.client.query(
        `INSERT INTO crowded SELECT g, 'late ' || g FROM generate_series(1000, 1099) g`,
      );
      await waitFor(
        async () => /\(53300\)/.test((await harness.catalog.getRuntime(spec.name))?.retryingError ?? ''),
        30_000,
        'the too-many-connections fault to show',
      );
      const runtime = await harness.catalog.getRuntime(spec.name);
      expect(runtime?.phase).toBe('running');
      expect(runtime?.retryingError).toContain('the server is short of a resource');
      await faultLasted(harness, spec.name);
      await destination.client.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
      await expectSameRows(harness, 'crowded');
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.retryingError === null,
        30_000,
        'the fault to clear',
      );
      expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
    } finally {
      await mirror.stop();
      await destination.client.query(`REASSIGN OWNED BY ${role} TO CURRENT_USER`).catch(() => {});
      await destination.client.query(`DROP OWNED BY ${role}`).catch(() => {});
      await destination.client.query(`DROP ROLE ${role}`).catch(() => {});
    }
  }, 300_000);

  it('continues by itself once another session releases its lock on the destination table', async () => {
    const { source, destination } = harness;
    const spec = await tableToMirror(harness, 'locked', 'locked');
    const mirror = startMirror(harness, spec, { supervised: true });
    // A session of someone else's holding the table, as an ALTER or LOCK TABLE would.
    const { host, port, user, password, database } = destination.config;
    const holder = new pg.Client({ host, port, user, password, database });
    await holder.connect();
    try {
      await expectSameRows(harness, 'locked');
      await mirrorRunning(harness, spec.name);
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE locked IN ACCESS EXCLUSIVE MODE');
      await source.client.query(
        `INSERT INTO locked SELECT g, 'late ' || g FROM generate_series(1000, 1099) g`,
      );
      await waitFor(
        async () => /\(55P03\)/.test((await harness.catalog.getRuntime(spec.name))?.retryingError ?? ''),
        60_000,
        'the lock timeout to show',
      );
      const runtime = await harness.catalog.getRuntime(spec.name);
      expect(runtime?.phase).toBe('running');
      expect(runtime?.retryingError).toContain('waited too long for a lock');
      await holder.query('COMMIT');
      const recovery = await timeUntil(
        async () => (await destination.client.query(`SELECT 1 FROM locked WHERE id = 1099`)).rowCount === 1,
        60_000,
        'rows after the lock is released',
      );
      await expectSameRows(harness, 'locked');
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.retryingError === null,
        30_000,
        'the fault to clear',
      );
      expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
      console.log(summary('destination lock released', [recovery]));
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end().catch(() => {});
      await mirror.stop();
    }
  }, 300_000);

  it('shows an unreachable source from the very first run, in setup, without failing', async () => {
    const spec: SpecInput = {
      name: `unreachable-${randomSuffix()}`,
      tableMappings: [mapping('nowhere')],
      doInitialSnapshot: true,
    };
    // Nothing listens on port 1.
    const mirror = startMirror(harness, spec, {
      supervised: true,
      source: { ...harness.source.config, host: '127.0.0.1', port: 1 },
    });
    try {
      await waitFor(
        async () => /ECONNREFUSED/.test((await harness.catalog.getRuntime(spec.name))?.retryingError ?? ''),
        30_000,
        'the connection fault to show',
      );
      expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('setup');
      expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
    } finally {
      expect(await mirror.stop()).toBe('stopped');
    }
    expect((await harness.catalog.getRuntime(spec.name))?.retryingError).toBeNull();
  });

  describe('destination server stopped, then started', () => {
    let server: PrivatePostgres;
    let privateDestination: pg.Client | undefined;

    beforeAll(async () => {
      server = await startPrivatePostgres();
    }, 120_000);

    afterAll(async () => {
      await privateDestination?.end().catch(() => {});
      await server?.destroy();
    });

    it('flows again by itself once the server is back', async () => {
      const { source } = harness;
      const spec = await tableToMirror(harness, 'outage', 'outage');
      const connectDestination = async () => {
        const client = await server.connect();
        privateDestination = client;
        return client;
      };
      const countAt = async (client: pg.Client, id: number) =>
        (await client.query(`SELECT 1 FROM outage WHERE id = $1`, [id])).rowCount === 1;
      const mirror = startMirror(harness, spec, { supervised: true, destination: server.config });
      const recoveries: number[] = [];
      try {
        let client = await connectDestination();
        await waitFor(() => countAt(client, 100), 60_000, 'initial load');
        await mirrorRunning(harness, spec.name);
        for (let run = 0; run < recoveryRuns; run++) {
          await client.end().catch(() => {});
          await server.stop();
          const base = 1000 * (run + 1);
          await source.client.query(
            `INSERT INTO outage SELECT g, 'late ' || g FROM generate_series(${base}, ${base + 99}) g`,
          );
          await waitFor(
            async () =>
              /ECONNREFUSED|connect/.test((await harness.catalog.getRuntime(spec.name))?.retryingError ?? ''),
            30_000,
            'the connection fault to show',
          );
          expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('running');
          await faultLasted(harness, spec.name);
          await server.start();
          client = await connectDestination();
          const probe = client;
          recoveries.push(await timeUntil(() => countAt(probe, base + 99), 60_000, 'rows after the restart'));
          await waitFor(
            async () => (await harness.catalog.getRuntime(spec.name))?.retryingError === null,
            30_000,
            'the fault to clear',
          );
        }
        expect(await tableCells(client, 'outage', 'id')).toEqual(
          await tableCells(source.client, 'outage', 'id'),
        );
        const warnings = await logMessages(harness, spec.name, 'WARN');
        expect(warnings.filter((message) => message.startsWith('recovered after'))).toHaveLength(
          recoveryRuns,
        );
        expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
        console.log(summary('destination server restarted', recoveries));
      } finally {
        await mirror.stop();
      }
    }, 300_000);
  });
  describe('destination disk full, then grown', () => {
    let server: PrivatePostgres;
    let disk: SmallDisk;

    beforeAll(async () => {
      server = await startPrivatePostgres();
      disk = await mountSmallDisk(16, 'postgres');
      const admin = await server.connect();
      try {
        // Every table of the destination database lands on the small disk; the
        // server's WAL stays on its own, so the server itself keeps running.
        await admin.query(`CREATE TABLESPACE small LOCATION '${disk.path}'`);
        await admin.query(`ALTER DATABASE source SET default_tablespace = small`);
      } finally {
        await admin.end();
      }
    }, 120_000);

    afterAll(async () => {
      await server?.destroy();
      await disk?.remove();
    });

    it('flows again by itself once the disk has room', async () => {
      const { source } = harness;
      const spec = await tableToMirror(harness, 'filling', 'full');
      const client = await server.connect();
      const mirror = startMirror(harness, spec, { supervised: true, destination: server.config });
      try {
        await waitFor(
          async () => (await client.query(`SELECT 1 FROM filling WHERE id = 100`)).rowCount === 1,
          60_000,
          'initial load',
        );
        await mirrorRunning(harness, spec.name);
        // About 40 MiB of rows (uncompressed: each value is below the TOAST threshold) for a 16 MiB disk.
        await source.client.query(
          `INSERT INTO filling SELECT g, repeat(md5(g::text), 32) FROM generate_series(1000, 40999) g`,
        );
        await waitFor(
          async () => /\(53100\)/.test((await harness.catalog.getRuntime(spec.name))?.retryingError ?? ''),
          120_000,
          'the disk-full fault to show',
        );
        const runtime = await harness.catalog.getRuntime(spec.name);
        expect(runtime?.phase).toBe('running');
        expect(runtime?.retryingError).toContain('out of disk space');
        await disk.grow(256);
        const recovery = await timeUntil(
          async () => (await client.query(`SELECT 1 FROM filling WHERE id = 40999`)).rowCount === 1,
          120_000,
          'rows after the disk grew',
        );
        await waitFor(
          async () => (await harness.catalog.getRuntime(spec.name))?.retryingError === null,
          30_000,
          'the fault to clear',
        );
        expect(await tableCells(client, 'filling', 'id')).toEqual(
          await tableCells(source.client, 'filling', 'id'),
        );
        expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
        console.log(summary('destination disk grown', [recovery]));
      } finally {
        await mirror.stop();
        await client.end().catch(() => {});
      }
    }, 300_000);
  });

  describe('source server stopped, then started', () => {
    let server: PrivatePostgres;

    beforeAll(async () => {
      server = await startPrivatePostgres();
    }, 120_000);

    afterAll(async () => {
      await server?.destroy();
    });

    it('streams again by itself once the source is back', async () => {
      let source = await server.connect();
      await source.query(`CREATE TABLE source_outage (id int PRIMARY KEY, body text)`);
      await source.query(`INSERT INTO source_outage SELECT g, 'row ' || g FROM generate_series(1, 100) g`);
      const spec: SpecInput = {
        name: `srcdown-${randomSuffix()}`,
        tableMappings: [mapping('source_outage')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      };
      const present = async (id: number) =>
        (await harness.destination.client.query(`SELECT 1 FROM source_outage WHERE id = $1`, [id]))
          .rowCount === 1;
      const mirror = startMirror(harness, spec, { supervised: true, source: server.config });
      const recoveries: number[] = [];
      try {
        await waitFor(() => present(100), 60_000, 'initial load');
        await waitFor(
          async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
          30_000,
          'mirror running',
        );
        for (let run = 0; run < recoveryRuns; run++) {
          await source.end().catch(() => {});
          await server.stop();
          await waitFor(
            async () =>
              ((await harness.catalog.getRuntime(spec.name))?.retryingError ?? '').startsWith('source'),
            30_000,
            'the source fault to show',
          );
          expect((await harness.catalog.getRuntime(spec.name))?.phase).toBe('running');
          await faultLasted(harness, spec.name);
          await server.start();
          const started = performance.now();
          source = await server.connect();
          const id = 1000 * (run + 1);
          await source.query(`INSERT INTO source_outage VALUES ($1, 'after restart')`, [id]);
          await waitForFast(() => present(id), 60_000, 'a row written after the restart');
          recoveries.push(performance.now() - started);
          await waitFor(
            async () => (await harness.catalog.getRuntime(spec.name))?.retryingError === null,
            30_000,
            'the fault to clear',
          );
        }
        expect(await tableCells(harness.destination.client, 'source_outage', 'id')).toEqual(
          await tableCells(source, 'source_outage', 'id'),
        );
        const warnings = await logMessages(harness, spec.name, 'WARN');
        expect(warnings.filter((message) => message.startsWith('recovered after'))).toHaveLength(
          recoveryRuns,
        );
        expect(await logMessages(harness, spec.name, 'ERROR')).toEqual([]);
        console.log(summary('source server restarted (row written after the restart)', recoveries));
      } finally {
        await mirror.stop();
        await source.end().catch(() => {});
      }
    }, 300_000);
  });
});
