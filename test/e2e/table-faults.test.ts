// A fault of one table stays with that table, through a real standalone
// process and a PostgreSQL destination: a row the destination refuses (a
// CHECK constraint added there) stops its table alone (`errored`, with the
// kind, the constraint's name and the position it is behind from), while the
// other table streams on and the slot keeps advancing; once the cause is
// fixed, the resync request loads the table back under writes and it ends
// equal to the source row by row. A destination table dropped under the
// mirror (which owns it) is loaded again by itself into a new one, while the
// mirror streams or, dropped while the service was down, at its start.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestDatabase,
  randomSuffix,
  type TestDatabase,
  tableCells,
  waitFor,
  waitForSameRows,
} from '../support/databases.ts';
import {
  createRelationalPeers,
  createTableMirror,
  mirrorState,
  type StandaloneProcess,
  startStandalone,
} from '../support/standalone-process.ts';

const password = 'table-faults-password';

interface TableView {
  sourceTableIdentifier: string;
  state: string;
  behindLsn?: string;
  error?: { kind: string; message: string; remedy: string };
}

describe('a fault of one table', () => {
  let source: TestDatabase;
  let destination: TestDatabase;
  let service: StandaloneProcess;
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-table-faults-')), 'data');
  const suffix = randomSuffix();
  const mirror = `faults-${suffix}`;

  const tables = async () => {
    const answer = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
    expect(answer.status).toBe(200);
    return ((answer.body as { tables?: TableView[] }).tables ?? []) as TableView[];
  };
  const tableOf = async (table: string) => (await tables()).find((t) => t.sourceTableIdentifier === table);
  const mirrorLogs = async () => {
    const { body } = await service.call('POST', '/api/v1/mirrors/logs', {
      flowJobName: mirror,
      numPerPage: 200,
    });
    return ((body as { errors?: { errorMessage: string }[] }).errors ?? []).map(
      (entry) => entry.errorMessage,
    );
  };
  const sameRows = async (table: string) => {
    await waitForSameRows(source.client, destination.client, table, 90_000).catch(() => {});
    expect(await tableCells(destination.client, table, 'id')).toEqual(
      await tableCells(source.client, table, 'id'),
    );
  };
  const currentLsn = async () =>
    BigInt(
      (await source.client.query<{ lsn: string }>(`SELECT (pg_current_wal_lsn() - '0/0')::text AS lsn`))
        .rows[0]?.lsn ?? '0',
    );
  const confirmedLsn = async () =>
    BigInt(
      (
        await source.client.query<{ lsn: string | null }>(
          `SELECT (confirmed_flush_lsn - '0/0')::text AS lsn FROM pg_replication_slots WHERE database = current_database()`,
        )
      ).rows[0]?.lsn ?? '0',
    );
  /** Writes into both tables until stopped: inserts, updates and deletes, each in its own transaction. */
  const startWriter = (from = 10_000) => {
    let writing = true;
    let next = from;
    const done = (async () => {
      while (writing) {
        const id = next++;
        await source.client.query(`INSERT INTO good VALUES ($1, 'g'), (${id + 100_000}, 'g2')`, [id]);
        await source.client.query(`INSERT INTO picky VALUES ($1, 'p')`, [id]);
        await source.client.query(`UPDATE picky SET v = 'u' || id WHERE id = $1`, [1 + (id % 200)]);
        await source.client.query(`DELETE FROM good WHERE id = $1`, [1 + (id % 300)]);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    return async () => {
      writing = false;
      await done;
    };
  };

  beforeAll(async () => {
    [source, destination] = await Promise.all([createTestDatabase('tf_src'), createTestDatabase('tf_dst')]);
    for (const table of ['good', 'picky']) {
      await source.client.query(`CREATE TABLE ${table} (id int PRIMARY KEY, v text)`);
      await source.client.query(`INSERT INTO ${table} SELECT g, 'v' || g FROM generate_series(1, 500) g`);
    }
    service = await startStandalone(dataDir, password);
    await createRelationalPeers(service, [
      [`src-${suffix}`, source],
      [`dst-${suffix}`, destination],
    ]);
    const created = await createTableMirror(service, {
      name: mirror,
      sourcePeer: `src-${suffix}`,
      destinationPeer: `dst-${suffix}`,
      table: ['public.good', 'public.picky'],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await waitFor(async () => (await mirrorState(service, mirror)) === 'STATUS_RUNNING', 90_000, 'running');
  });

  afterAll(async () => {
    await service?.stop();
    await Promise.all([source?.drop(), destination?.drop()]);
  });

  it('stops the table whose row the destination refuses, streams the other on, and loads it back on request', async () => {
    await sameRows('picky');
    await destination.client.query(`ALTER TABLE picky ADD CONSTRAINT short_v CHECK (length(v) < 20)`);
    await source.client.query(`INSERT INTO picky VALUES (9000, repeat('x', 40))`);
    const afterRefused = await currentLsn();
    const stopWriter = startWriter();
    try {
      await waitFor(
        async () => (await tableOf('public.picky'))?.state === 'TABLE_STATE_ERRORED',
        60_000,
        'picky errored',
      );
      const picky = await tableOf('public.picky');
      expect(picky?.error?.kind).toBe('schema_mismatch');
      expect(picky?.error?.message).toContain('short_v');
      expect(picky?.error?.remedy).toContain('resync');
      expect(BigInt(picky?.behindLsn ?? '0')).toBeGreaterThan(0n);
      expect(await mirrorState(service, mirror)).toBe('STATUS_RUNNING');
      // The other table goes on, and the slot moves past the refused change.
      await waitFor(
        async () => (await confirmedLsn()) > afterRefused,
        60_000,
        'the slot past the refused row',
      );
      expect((await tableOf('public.good'))?.state).toBe('TABLE_STATE_STREAMING');

      const unknown = await service.call('POST', '/api/v1/mirrors/tables/resync', {
        flowJobName: mirror,
        sourceTableIdentifier: 'public.nowhere',
      });
      expect(unknown.status).toBe(400);

      // The cause fixed, one request loads it back while both tables take writes.
      await destination.client.query(`ALTER TABLE picky DROP CONSTRAINT short_v`);
      const resynced = await service.call('POST', '/api/v1/mirrors/tables/resync', {
        flowJobName: mirror,
        sourceTableIdentifier: 'public.picky',
      });
      expect(resynced.status, JSON.stringify(resynced.body)).toBe(200);
      await waitFor(
        async () => (await tableOf('public.picky'))?.state === 'TABLE_STATE_STREAMING',
        120_000,
        'picky streaming again',
      );
    } finally {
      await stopWriter();
    }
    await sameRows('picky');
    await sameRows('good');
  });

  it('loads a table whose destination table was dropped under the mirror again by itself, into a new one', async () => {
    await destination.client.query(`DROP TABLE good`);
    await source.client.query(`INSERT INTO good VALUES (50000, 'after the drop')`);
    await source.client.query(`INSERT INTO picky VALUES (50000, 'after the drop')`);
    const stopWriter = startWriter(60_000);
    try {
      await waitFor(
        async () =>
          (await mirrorLogs()).includes(
            'destination table public.good was dropped under the mirror, which owns it: it is created again; its destination table is emptied and loaded again',
          ),
        60_000,
        'good loaded again by itself',
      );
      await waitFor(
        async () => (await tableOf('public.good'))?.state === 'TABLE_STATE_STREAMING',
        120_000,
        'good streaming again',
      );
    } finally {
      await stopWriter();
    }
    await source.client.query(`UPDATE good SET v = 'later' WHERE id = 50000`);
    await sameRows('good');
    await sameRows('picky');

    // Dropped while the service was down: found at the start, loaded again
    // rather than streamed into an empty table made in its place.
    expect(await service.stop()).toBe(0);
    await destination.client.query(`DROP TABLE good`);
    await source.client.query(`UPDATE good SET v = 'while down' WHERE id <= 5`);
    service = await startStandalone(dataDir, password);
    await waitFor(
      async () => (await tableOf('public.good'))?.state === 'TABLE_STATE_STREAMING',
      120_000,
      'good streaming after the restart',
    );
    await sameRows('good');
    await sameRows('picky');
  });
});
