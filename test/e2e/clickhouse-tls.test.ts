// ClickHouse over TLS: the peer check and a whole mirror through the server's
// HTTPS listener, with the peer's root CA and, for mutual TLS, its client
// certificate; and the refusals when either does not match.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPeer, describeCheckFailure } from '../../engine/src/connectors/peer-check.ts';
import type { AnalyticsConfig, Peer } from '../../engine/src/resources/peer.ts';
import { randomSuffix, waitFor } from '../support/databases.ts';
import { exited, startEngine, writeEngineConfig } from '../support/engine-process.ts';
import { createHarness, type Harness, mapping } from '../support/mirror-harness.ts';
import { clickhouse } from '../support/testenv.ts';

const pem = (file: string) => readFileSync(join(clickhouse.server.tlsDir, file), 'utf8');

describe('ClickHouse over TLS', () => {
  const database = `tls_${randomSuffix()}`;
  const tls = (overrides: Partial<AnalyticsConfig> = {}): Peer => ({
    name: 'warehouse',
    kind: 'analytics',
    config: {
      host: '127.0.0.1',
      port: clickhouse.server.nativePort,
      httpPort: clickhouse.server.httpsPort,
      user: clickhouse.server.user,
      password: clickhouse.server.password,
      database,
      disableTls: false,
      rootCa: pem('ca.crt'),
      ...overrides,
    },
  });
  const failureOf = async (peer: Peer) =>
    checkPeer(peer, 10_000).then(
      () => 'connected',
      (error: unknown) => describeCheckFailure(error, [clickhouse.server.password]),
    );
  const admin = createClient({
    url: clickhouse.server.url,
    username: clickhouse.server.user,
    password: clickhouse.server.password,
    // Polls read the table before the engine creates it: those errors are expected.
    log: { level: ClickHouseLogLevel.OFF },
  });
  let harness: Harness;
  let engine: ChildProcess | undefined;

  beforeAll(async () => {
    await admin.command({ query: `CREATE DATABASE ${database}` });
    harness = await createHarness('chtls');
  });

  afterAll(async () => {
    if (engine) {
      engine.kill('SIGTERM');
      await exited(engine);
    }
    await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await admin.close();
    await harness?.close();
  });

  it('connects with the peer root CA, and with a client certificate of the server CA', async () => {
    expect((await checkPeer(tls())).version).toBe('18.16.1');
    const mutual = tls({ certificate: pem('client.crt'), privateKey: pem('client.key') });
    expect((await checkPeer(mutual)).version).toBe('18.16.1');
  });

  it('refuses a server it cannot verify, and a client certificate the server does not trust', async () => {
    // No root CA: the system's CAs do not know the test CA.
    const unverified = await failureOf(tls({ rootCa: undefined }));
    expect(unverified).toMatch(/certificate/i);
    // The foreign CA as root: the server's certificate is not signed by it.
    expect(await failureOf(tls({ rootCa: pem('foreign-ca.crt') }))).toMatch(/certificate/i);
    const stranger = await failureOf(
      tls({ certificate: pem('foreign-client.crt'), privateKey: pem('foreign-client.key') }),
    );
    expect(stranger).not.toBe('connected');
    for (const message of [unverified, stranger]) expect(message).not.toContain(clickhouse.server.password);
  });

  it('runs a mirror whose destination is reached over mutual TLS', async () => {
    await harness.source.client.query(`CREATE TABLE readings (id int PRIMARY KEY, value text)`);
    await harness.source.client.query(
      `INSERT INTO readings SELECT g, 'v' || g FROM generate_series(1, 300) g`,
    );
    const mirror = `tls-${randomSuffix()}`;
    const configPath = writeEngineConfig(
      harness,
      {
        name: mirror,
        sourcePeer: 'source',
        destinationPeer: 'warehouse',
        tableMappings: [mapping('readings')],
        doInitialSnapshot: true,
        idleTimeoutSeconds: 1,
      },
      { destination: tls({ certificate: pem('client.crt'), privateKey: pem('client.key') }) },
    );
    engine = startEngine(mirror, configPath);
    const rows = async () => {
      const result = await admin
        .query({
          query: `SELECT count() AS n, sum(id) AS s FROM ${database}.readings FINAL WHERE _tributary_is_deleted = 0`,
          format: 'JSONEachRow',
        })
        .catch(() => undefined);
      const [row] = (await result?.json<{ n: string; s: string }>()) ?? [];
      return row ? `${row.n}:${row.s}` : '';
    };
    await waitFor(async () => (await rows()) === `300:${(300 * 301) / 2}`, 60_000, 'initial load over TLS');
    await harness.source.client.query(
      `INSERT INTO readings SELECT g, 'cdc' FROM generate_series(301, 350) g`,
    );
    await harness.source.client.query(`DELETE FROM readings WHERE id <= 10`);
    await waitFor(async () => (await rows()) === `340:${(350 * 351) / 2 - 55}`, 60_000, 'changes over TLS');
  });
});
