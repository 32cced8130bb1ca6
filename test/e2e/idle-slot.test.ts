// A mirror over an idle database while another database of the same server
// writes ~180 MiB, on a server of its own (nothing else's transactions hold
// the restart point): what the slot retains stays bounded without any write
// to the idle database. The engine acknowledges the server's keepalives while
// nothing of the mirror is buffered, so the confirmed position follows the
// server's WAL; restart_lsn follows at the running-transactions snapshots the
// server logs (every 15 s while WAL is written), so the slot retains about that
// long of the server's WAL, and none once the writes stop. The bound stated
// here: the confirmed position is never more than 64 MiB behind (read between
// writes of ~18 MiB each), and the WAL retained and unconfirmed fall back under
// 16 MiB within 60 s of the last write. Measured on 13, 15 and 18: up to
// ~150 MiB retained while ~9 MiB/s were written, back to 0 about 15 s after the
// writes ended.
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

  const slot = async () => {
    const { body } = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    const health = (body as { slotHealth?: { retainedWalBytes?: string; unconfirmedBytes?: string } })
      .slotHealth;
    return {
      retained: BigInt(health?.retainedWalBytes ?? '-1'),
      unconfirmed: BigInt(health?.unconfirmedBytes ?? '-1'),
    };
  };

  beforeAll(async () => {
    [server, destination] = await Promise.all([
      startPrivatePostgres(),
      createTestDatabase('idle_dst', destinationPostgres),
    ]);
    idle = await server.connect();
    await idle.query(`CREATE DATABASE busy`);
    await idle.query(`CREATE TABLE orders (id int PRIMARY KEY, item text)`);
    busy = new pg.Client({ ...server.config, database: 'busy' });
    await busy.connect();
    await busy.query(`CREATE TABLE filler (id int, pad text)`);
    service = await startStandalone(dataDir, 'idle-slot-password', {
      env: { TRIBUTARY_SLOT_HEALTH_SECONDS: '1' },
    });
    for (const [name, config] of [
      [`src-${suffix}`, server.config],
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

  it('keeps the retained WAL bounded while another database writes, and releases it after', async () => {
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: 'public.orders',
    });
    expect(created.status).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 60_000, 'running');
    await waitFor(async () => (await slot()).retained >= 0n, 30_000, 'a first slot read');

    let mostUnconfirmed = 0n;
    let mostRetained = 0n;
    for (let round = 0; round < 10; round++) {
      await busy.query(
        `INSERT INTO filler SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 60000) AS g`,
      );
      const now = await slot();
      mostUnconfirmed = now.unconfirmed > mostUnconfirmed ? now.unconfirmed : mostUnconfirmed;
      mostRetained = now.retained > mostRetained ? now.retained : mostRetained;
    }
    const written = (
      await busy.query<{ bytes: string }>(`SELECT pg_total_relation_size('filler')::text AS bytes`)
    ).rows[0]?.bytes;
    expect(BigInt(written ?? '0')).toBeGreaterThanOrEqual(150n * mib);
    // Keepalives come between the reads of other databases' WAL: the confirmed
    // position trails by what one or two of them span, far less than was written.
    expect(mostUnconfirmed).toBeLessThan(64n * mib);
    // The slot did retain WAL meanwhile (the measurement means something).
    expect(mostRetained).toBeGreaterThan(16n * mib);
    await waitFor(
      async () => {
        const now = await slot();
        return now.retained < 16n * mib && now.unconfirmed < 16n * mib;
      },
      60_000,
      'retained WAL released',
    );
  });
});
