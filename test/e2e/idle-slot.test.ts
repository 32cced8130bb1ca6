// A mirror over an idle database while another database of the same server
// writes 500 MiB, on a server of its own (nothing else's transactions hold the
// restart point): what the slot retains stays bounded with no write to the
// mapped table. The engine writes a heartbeat (a transaction of its own in the
// idle database, pipeline/heartbeats.ts) every 2 s here and acknowledges the
// server's keepalives while nothing of the mirror is buffered, so the confirmed
// position follows the server's WAL; restart_lsn follows at the
// running-transactions snapshots the server logs (every 15 s while WAL is
// written). The bound stated: the confirmed position is never more than 64 MiB
// behind the server's WAL (read between writes of ~18 MiB each), the restart
// point moves while the writes go on (the slot retains less than half of what
// was written), and the WAL retained and unconfirmed fall back under 16 MiB
// within 60 s of the last write. Measured on 13, 15 and 18: see docs/engine.md,
// "Heartbeats".
//
// The source peer is a role without superuser, as production grants it; then
// EXECUTE on pg_logical_emit_message is revoked from it: one warning in the
// mirror's log, the mirror streams on, and the heartbeats are back once it is
// granted again.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, randomSuffix, type TestDatabase, waitFor } from '../support/databases.ts';
import { type PrivatePostgres, startPrivatePostgres } from '../support/private-postgres.ts';
import {
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';
import { destinationPostgres, sourcePostgres } from '../support/testenv.ts';

const mib = 1024n * 1024n;

describe(`an idle mirror on a busy PostgreSQL ${sourcePostgres.major}`, () => {
  let server: PrivatePostgres;
  let idle: pg.Client;
  let busy: pg.Client;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-idle-slot-')), 'data');
  const suffix = randomSuffix();
  const mirror = `idle-${suffix}`;
  const reader = { user: 'idle_reader', password: 'idle-reader-secret' };

  const slot = async () => {
    const { body } = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    const health = (body as { slotHealth?: { retainedWalBytes?: string; unconfirmedBytes?: string } })
      .slotHealth;
    return {
      retained: BigInt(health?.retainedWalBytes ?? '-1'),
      unconfirmed: BigInt(health?.unconfirmedBytes ?? '-1'),
    };
  };
  const heartbeats = async (outcome: 'written' | 'failed') => {
    const text = await (await fetch(`${service.baseUrl}/metrics`)).text();
    const line = text
      .split('\n')
      .find((candidate) =>
        candidate.startsWith(`tributary_engine_heartbeats_total{mirror="${mirror}",outcome="${outcome}"}`),
      );
    return Number(line?.split(' ')[1] ?? '0');
  };
  const logLines = async () => {
    const { body } = await service.call('POST', '/api/v1/mirrors/logs', {
      flowJobName: mirror,
      numPerPage: 200,
    });
    return ((body as { errors?: { errorMessage: string; errorType: string }[] }).errors ?? []).map(
      (entry) => `${entry.errorType} ${entry.errorMessage}`,
    );
  };
  const walLsn = async () =>
    (await busy.query<{ lsn: string }>(`SELECT pg_current_wal_lsn()::text AS lsn`)).rows[0]?.lsn ?? '0/0';
  const walBytesSince = async (lsn: string) =>
    BigInt(
      (
        await busy.query<{ bytes: string }>(
          `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS bytes`,
          [lsn],
        )
      ).rows[0]?.bytes ?? '0',
    );

  /** REVOKE or GRANT of every form of pg_logical_emit_message (17 added a `flush` argument). */
  const emitMessagePrivilege = async (statement: 'REVOKE' | 'GRANT') => {
    const forms = await idle.query<{ signature: string }>(
      `SELECT oid::regprocedure::text AS signature FROM pg_proc WHERE proname = 'pg_logical_emit_message'`,
    );
    for (const { signature } of forms.rows) {
      await idle.query(
        `${statement} EXECUTE ON FUNCTION ${signature} ${statement === 'REVOKE' ? 'FROM' : 'TO'} PUBLIC`,
      );
    }
  };

  beforeAll(async () => {
    [server, destination] = await Promise.all([
      startPrivatePostgres(),
      createTestDatabase('idle_dst', destinationPostgres),
    ]);
    idle = await server.connect();
    await idle.query(`CREATE DATABASE busy`);
    await idle.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    // The source peer's role: replication and the table's ownership (for the publication), no superuser.
    await idle.query(`CREATE ROLE ${reader.user} LOGIN REPLICATION PASSWORD '${reader.password}'`);
    await idle.query(`ALTER TABLE orders OWNER TO ${reader.user}`);
    await idle.query(`GRANT CREATE ON DATABASE source TO ${reader.user}`);
    busy = new pg.Client({ ...server.config, database: 'busy' });
    await busy.connect();
    await busy.query(`CREATE TABLE filler (id int, pad text)`);
    service = await startStandalone(dataDir, 'idle-slot-password', {
      env: { TRIBUTARY_SLOT_HEALTH_SECONDS: '1' },
    });
    for (const [name, config] of [
      [`src-${suffix}`, { ...server.config, ...reader }],
      [`dst-${suffix}`, destination.config],
    ] as const) {
      const created = await service.call('POST', '/api/v1/peers/create', {
        peer: { name, type: 3, relational_config: { ...config } },
      });
      expect(created.status).toBe(200);
    }
  }, 180_000);

  afterAll(async () => {
    await service?.stop();
    await Promise.all([idle?.end(), busy?.end()].map((ending) => ending?.catch(() => {})));
    await Promise.all([server?.destroy(), destination?.drop()]);
  });

  it('writes heartbeats and keeps the retained WAL bounded while another database writes 500 MiB', async () => {
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.orders',
      options: { heartbeat_interval_seconds: 2 },
    });
    expect(created.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'running');
    await waitFor(async () => (await slot()).retained >= 0n, 30_000, 'a first slot read');

    const start = await walLsn();
    let mostUnconfirmed = 0n;
    let mostRetained = 0n;
    let leastRetainedLate = -1n;
    let written = 0n;
    for (let round = 0; round < 80 && written < 500n * mib; round++) {
      await busy.query(
        `INSERT INTO filler SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 60000) AS g`,
      );
      written = await walBytesSince(start);
      const now = await slot();
      mostUnconfirmed = now.unconfirmed > mostUnconfirmed ? now.unconfirmed : mostUnconfirmed;
      mostRetained = now.retained > mostRetained ? now.retained : mostRetained;
      if (written > 250n * mib && (leastRetainedLate < 0n || now.retained < leastRetainedLate)) {
        leastRetainedLate = now.retained;
      }
    }
    expect(written).toBeGreaterThanOrEqual(500n * mib);
    console.log(
      `idle slot on ${sourcePostgres.major}: ${written / mib} MiB of WAL written, at most ` +
        `${mostRetained / mib} MiB retained and ${mostUnconfirmed / mib} MiB unconfirmed`,
    );
    // Keepalives and heartbeats come between the reads of other databases' WAL:
    // the confirmed position trails by what one or two of them span.
    expect(mostUnconfirmed).toBeLessThan(64n * mib);
    // The slot did retain WAL meanwhile (the measurement means something), and
    // its restart point moved while the writes went on.
    expect(mostRetained).toBeGreaterThan(16n * mib);
    expect(leastRetainedLate).toBeGreaterThanOrEqual(0n);
    expect(leastRetainedLate).toBeLessThan(written / 2n);
    expect(await heartbeats('written')).toBeGreaterThan(0);
    await waitFor(
      async () => {
        const now = await slot();
        return now.retained < 16n * mib && now.unconfirmed < 16n * mib;
      },
      60_000,
      'retained WAL released',
    );
  });

  it('says once that heartbeats are refused, streams on, and says when they are written again', async () => {
    await emitMessagePrivilege('REVOKE');
    try {
      await waitFor(async () => (await heartbeats('failed')) >= 3, 60_000, 'heartbeats refused');
      const refusals = (await logLines()).filter((line) =>
        line.includes('cannot write a heartbeat to the source'),
      );
      expect(refusals).toHaveLength(1);
      expect(refusals[0]).toMatch(/^warn /);
      expect(refusals[0]).toContain('permission denied for function pg_logical_emit_message');
      expect(refusals[0]).toContain('grant EXECUTE on the function pg_logical_emit_message');
      // The mirror goes on: a change still arrives.
      await idle.query(`INSERT INTO orders VALUES (1, 'while heartbeats are refused')`);
      await waitFor(
        async () =>
          (await destination.client.query(`SELECT 1 FROM public.orders WHERE id = 1`)).rowCount === 1,
        60_000,
        'the change at the destination',
      );
      expect(await mirrorState(service, mirror)).toBe('STATUS_RUNNING');
    } finally {
      await emitMessagePrivilege('GRANT');
    }
    await waitFor(
      async () =>
        (await logLines()).some((line) => line.includes('heartbeats are written to the source again')),
      60_000,
      'heartbeats written again',
    );
  });
});
