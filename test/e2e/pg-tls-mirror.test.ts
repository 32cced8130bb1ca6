// A PostgreSQL to PostgreSQL mirror whose source admits the mirror's user only
// over TLS (scripts/testenv/postgres-tls.sh): snapshot, replication stream and
// type lookups all verify the server against the test CA, directly and through
// the SSH tunnel. The destination is the shared test server.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import {
  dropTestDatabase,
  randomSuffix,
  adminClient as sharedAdminClient,
  type TestDatabase,
  waitFor,
} from '../support/databases.ts';
import {
  createHarness,
  dropMirror,
  expectSameRows,
  type Harness,
  mapping,
  type SpecInput,
  startMirror,
} from '../support/mirror-harness.ts';
import { postgresTls, ssh } from '../support/testenv.ts';

const testCa = readFileSync(join(postgresTls.tlsDir, 'ca.crt'), 'utf8');

/** The superuser connects without TLS (its pg_hba.conf rule allows it) to prepare data. */
const adminClient = (database: string) => sharedAdminClient(postgresTls, database);

/** A database on the TLS server whose tables belong to the TLS-only role. */
async function createTlsDatabase(): Promise<TestDatabase> {
  const name = `tls_src_${randomSuffix()}`;
  const admin = adminClient('postgres');
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} OWNER tributary_tls`);
  } finally {
    await admin.end();
  }
  const client = adminClient(name);
  await client.connect();
  return {
    name,
    config: { host: postgresTls.host, port: postgresTls.port, database: name, ...postgresTls.tlsUser },
    client,
    async drop() {
      await client.end().catch(() => {});
      await dropTestDatabase(postgresTls, name);
    },
  };
}

describe('PostgreSQL to PostgreSQL over TLS', () => {
  let harness: Harness;
  let tlsSource: TestDatabase;

  beforeAll(async () => {
    const base = await createHarness('pgtls');
    tlsSource = await createTlsDatabase();
    harness = {
      ...base,
      source: tlsSource,
      async close() {
        await Promise.all([base.close(), tlsSource.drop()]);
      },
    };
  });

  afterAll(async () => {
    await harness?.close();
  });

  /** Whether every connection of the mirror's user is encrypted, and how many there are. */
  async function mirrorSessions(): Promise<{ count: number; allTls: boolean }> {
    const { rows } = await tlsSource.client.query<{ count: string; all_tls: boolean | null }>(
      `SELECT count(*) AS count, bool_and(s.ssl) AS all_tls
         FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
        WHERE a.usename = 'tributary_tls' AND a.datname = $1`,
      [tlsSource.name],
    );
    return { count: Number(rows[0]?.count ?? 0), allTls: rows[0]?.all_tls === true };
  }

  async function runAndCompare(table: string, source: RelationalConfig, supervised = false): Promise<void> {
    await tlsSource.client.query(
      `CREATE TABLE ${table} (id int PRIMARY KEY, body text, at timestamptz DEFAULT now());
       ALTER TABLE ${table} OWNER TO tributary_tls;
       INSERT INTO ${table} (id, body) SELECT g, 'row ' || g FROM generate_series(1, 500) g`,
    );
    const spec: SpecInput = {
      name: `tls-${table.replaceAll('_', '-')}-${randomSuffix()}`,
      tableMappings: [mapping(table)],
      doInitialSnapshot: true,
      idleTimeoutSeconds: 1,
    };
    const mirror = startMirror(harness, spec, { source, supervised });
    try {
      await expectSameRows(harness, table);
      await waitFor(
        async () => (await harness.catalog.getRuntime(spec.name))?.phase === 'running',
        30_000,
        'the mirror to stream',
      );
      await tlsSource.client.query(
        `INSERT INTO ${table} (id, body) VALUES (501, 'streamed');
         UPDATE ${table} SET body = 'changed' WHERE id = 7;
         DELETE FROM ${table} WHERE id = 9`,
      );
      await expectSameRows(harness, table);
      // The walsender and the other source connections are all encrypted.
      const sessions = await mirrorSessions();
      expect(sessions.count).toBeGreaterThan(0);
      expect(sessions.allTls).toBe(true);
      const { rows } = await tlsSource.client.query<{ ssl: boolean }>(
        `SELECT s.ssl FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) WHERE r.usename = 'tributary_tls'`,
      );
      expect(rows).toEqual([{ ssl: true }]);
    } finally {
      await mirror.stop();
    }
    await dropMirror(harness, spec);
  }

  it('snapshots and streams with the certificate verified against root_ca', async () => {
    await runAndCompare('direct_rows', { ...tlsSource.config, rootCa: testCa, requireTls: true });
  });

  it('does the same through an SSH tunnel, and warns that the tunnel accepts any host key', async () => {
    await runAndCompare(
      'tunnelled_rows',
      {
        ...tlsSource.config,
        host: 'localhost',
        rootCa: testCa,
        sshConfig: {
          host: ssh.host,
          port: ssh.port,
          user: ssh.user,
          privateKey: readFileSync(ssh.privateKeyPath, 'utf8'),
        },
      },
      true,
    );
    const { entries } = await harness.catalog.listLogs({ levels: ['WARN'], offset: 0, limit: 100 });
    const warnings = entries.filter((entry) =>
      entry.message.includes("does not verify the server's host key"),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toContain('set ssh_config.host_key');
  });
});
