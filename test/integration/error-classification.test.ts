// Real failures of every driver (a refused connection, a refused login, a
// missing table) against the real test services, each mapped by the one
// classifier (engine/src/connectors/classify/) to its kind and retry policy. The
// raw driver errors also go through `classifyError`, which must tell their
// driver by their shape alone.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import pg from 'pg';
import snowflakeSdk from 'snowflake-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  classifyClickHouseError,
  classifyError,
  classifyPgError,
} from '../../engine/src/connectors/classify/index.ts';
import { ClickHouseTransport } from '../../engine/src/connectors/clickhouse/transport.ts';
import { createStreamAdmin, createStreamProducer } from '../../engine/src/connectors/kafka/client.ts';
import { checkPeer } from '../../engine/src/connectors/peer-check.ts';
import { connectPostgres } from '../../engine/src/connectors/postgres/driver/connect.ts';
import { EngineError, type ErrorKind, type RetryPolicy } from '../../engine/src/errors.ts';
import { SshTunnel } from '../../engine/src/net/ssh-tunnel.ts';
import {
  type AnalyticsConfig,
  type Peer,
  peerSchema,
  type RelationalConfig,
} from '../../engine/src/resources/peer.ts';
import { randomSuffix } from '../support/databases.ts';
import { clickhouse, kafka, postgres, snowflake, ssh } from '../support/testenv.ts';

/** A loopback port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a failure');
    },
    (caught: unknown) => caught,
  );
}

/** The classified error's kind and retry policy, as one comparable value. */
function shape(error: unknown): [string, ErrorKind | undefined, RetryPolicy | undefined] {
  expect(error).toBeInstanceOf(EngineError);
  const engineError = error as EngineError;
  return [engineError.message, engineError.kind, engineError.policy.retry];
}

function expectKind(error: unknown, kind: ErrorKind, retry: RetryPolicy): void {
  const [message, actualKind, actualRetry] = shape(error);
  expect({ message, kind: actualKind, retry: actualRetry }).toEqual({ message, kind, retry });
}

const relational = (config: Partial<RelationalConfig>): RelationalConfig => ({
  host: postgres.host,
  port: postgres.port,
  database: postgres.database,
  ...postgres.replicator,
  ...config,
});

describe('PostgreSQL errors', () => {
  const table = `missing_${randomSuffix()}`;

  it('maps a refused connection to connection, retried', async () => {
    const port = await closedPort();
    const error = await rejection(
      connectPostgres(relational({ port }), { applicationName: 'tributary:test' }),
    );
    expectKind(error, 'connection', 'timed');
    expect((error as EngineError).cause).toMatchObject({ code: 'ECONNREFUSED' });
    expectKind(classifyError((error as EngineError).cause, 'mirror run'), 'connection', 'timed');
  });

  it('maps a refused login to auth at the destination and source_auth at the source, both for a person', async () => {
    const config = relational({ password: 'wrong-password' });
    const destination = await rejection(
      connectPostgres(config, { applicationName: 'tributary:test', side: 'destination' }),
    );
    expectKind(destination, 'auth', 'manual');
    expect((destination as EngineError).message).toMatch(/^destination: connect to .* failed \(28P01\)$/);
    const source = await rejection(
      connectPostgres(config, { applicationName: 'tributary:test', replication: 'database' }),
    );
    expectKind(source, 'source_auth', 'manual');
    expect((source as EngineError).policy.remedy).toMatch(/pg_hba\.conf/);
    // A peer check has no side.
    const checked = await rejection(checkPeer(peerSchema.parse({ name: 'pg', kind: 'relational', config })));
    expectKind(checked, 'auth', 'manual');
    expect(JSON.stringify((checked as EngineError).message)).not.toContain('wrong-password');
  });

  it('maps a missing table to schema_mismatch at the destination and source_schema at the source', async () => {
    const connection = await connectPostgres(relational({}), { applicationName: 'tributary:test' });
    try {
      const raw = await rejection(connection.client.query(`SELECT * FROM ${pg.escapeIdentifier(table)}`));
      expect(raw).toMatchObject({ code: '42P01' });
      expectKind(
        classifyPgError(raw, `destination: sync batch 1`, 'destination_write'),
        'schema_mismatch',
        'manual',
      );
      expectKind(classifyPgError(raw, `source: copy ${table}`, 'internal'), 'source_schema', 'manual');
      expectKind(classifyError(raw, 'mirror run'), 'schema_mismatch', 'manual');
    } finally {
      await connection.close();
    }
  });
});

describe('ClickHouse errors', () => {
  const server: AnalyticsConfig = {
    host: '127.0.0.1',
    port: clickhouse.server.nativePort,
    httpPort: Number(new URL(clickhouse.server.url).port),
    user: clickhouse.server.user,
    password: clickhouse.server.password,
    database: 'default',
    disableTls: true,
  };

  it('maps a refused connection to connection, retried, in a destination and in a peer check', async () => {
    const transport = new ClickHouseTransport({ ...server, httpPort: await closedPort() });
    try {
      expectKind(await rejection(transport.server()), 'connection', 'timed');
    } finally {
      await transport.close();
    }
    const peer = peerSchema.parse({
      name: 'ch',
      kind: 'analytics',
      config: { ...server, httpPort: await closedPort() },
    });
    expectKind(await rejection(checkPeer(peer)), 'connection', 'timed');
  });

  it('maps a refused login to auth, for a person', async () => {
    const transport = new ClickHouseTransport({ ...server, password: 'wrong-password' });
    try {
      const error = await rejection(transport.server());
      expectKind(error, 'auth', 'manual');
      expectKind(classifyError((error as EngineError).cause, 'mirror run'), 'auth', 'manual');
    } finally {
      await transport.close();
    }
    const peer = peerSchema.parse({
      name: 'ch',
      kind: 'analytics',
      config: { ...server, password: 'wrong-password' },
    });
    expectKind(await rejection(checkPeer(peer)), 'auth', 'manual');
  });

  it('maps a missing table to schema_mismatch, for a person', async () => {
    const transport = new ClickHouseTransport(server);
    try {
      const error = await rejection(
        transport.rows(`SELECT * FROM default.missing_${randomSuffix()}`, 'read rows'),
      );
      expectKind(error, 'schema_mismatch', 'manual');
      expect((error as EngineError).message).toBe('destination: read rows failed (code 60)');
      expectKind(
        classifyClickHouseError((error as EngineError).cause, 'destination: x'),
        'schema_mismatch',
        'manual',
      );
      expectKind(classifyError((error as EngineError).cause, 'mirror run'), 'schema_mismatch', 'manual');
    } finally {
      await transport.close();
    }
  });
});

describe('Kafka errors (SASL broker)', () => {
  const stream = (config: Record<string, unknown>): Peer =>
    peerSchema.parse({
      name: 'kafka',
      kind: 'stream',
      config: { disableTls: true, servers: [kafka.saslBroker], sasl: 'PLAIN', ...kafka.plain, ...config },
    });

  it('maps a refused connection to connection, retried', async () => {
    const error = await rejection(checkPeer(stream({ servers: [`127.0.0.1:${await closedPort()}`] })));
    expectKind(error, 'connection', 'timed');
    expectKind(classifyError((error as EngineError).cause, 'mirror run'), 'connection', 'timed');
  });

  it('maps a refused login to auth, for a person', async () => {
    const error = await rejection(checkPeer(stream({ password: 'wrong-password' })));
    expectKind(error, 'auth', 'manual');
    expect((error as EngineError).message).toBe('peer check: connect failed (authentication failed)');
    expectKind(classifyError((error as EngineError).cause, 'mirror run'), 'auth', 'manual');
  });

  /** An admin client of the broker; the caller closes it. */
  async function brokerAdmin() {
    const peer = stream({});
    if (peer.kind !== 'stream') throw new Error('unreachable: a stream peer');
    return createStreamAdmin(peer.config, { clientId: 'tributary-test', timeoutMs: 5_000 });
  }

  /** What the destination's producer raises for one message to `topic` of the peer. */
  async function producerRejection(
    config: Record<string, unknown>,
    topic: string,
    value: Buffer,
  ): Promise<unknown> {
    const peer = stream(config);
    if (peer.kind !== 'stream') throw new Error('unreachable: a stream peer');
    const producer = await createStreamProducer(peer.config, {
      clientId: 'tributary-test',
      timeoutMs: 5_000,
      requestTimeoutMs: 10_000,
    });
    try {
      return await rejection(producer.send({ messages: [{ topic, value, partition: 0 }] }));
    } finally {
      await producer.close().catch(() => {});
    }
  }

  it("maps the producer's refused connection, refused login and too large message", async () => {
    const value = Buffer.from('v');
    const refused = await producerRejection({ servers: [`127.0.0.1:${await closedPort()}`] }, 'any', value);
    expectKind(
      classifyError(refused, 'destination: send batch 1', 'destination_write'),
      'connection',
      'timed',
    );
    const login = await producerRejection({ password: 'wrong-password' }, 'any', value);
    const auth = classifyError(login, 'destination: send batch 1', 'destination_write');
    expectKind(auth, 'auth', 'manual');
    expect((auth as EngineError).message).toBe('destination: send batch 1 failed (authentication failed)');

    const topic = `too-large-${randomSuffix()}`;
    const admin = await brokerAdmin();
    try {
      await admin.createTopics({ topics: [topic] });
      // Above the broker's default message.max.bytes (1 MiB).
      const large = await producerRejection({}, topic, Buffer.alloc(2 * 1024 * 1024, 'x'));
      const tooLarge = classifyError(large, 'destination: send batch 1', 'destination_write');
      expectKind(tooLarge, 'config', 'manual');
      expect((tooLarge as EngineError).message).toBe('destination: send batch 1 failed (MESSAGE_TOO_LARGE)');
    } finally {
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.close();
    }
  });

  it('maps a missing topic to destination_write, retried (the destination creates its topics on the next run)', async () => {
    const admin = await brokerAdmin();
    try {
      const raw = await rejection(admin.metadata({ topics: [`missing-${randomSuffix()}`] }));
      expectKind(
        classifyError(raw, 'destination: read partitions', 'destination_write'),
        'destination_write',
        'timed',
      );
    } finally {
      await admin.close();
    }
  });
});

describe('SSH tunnel errors', () => {
  const target = { host: postgres.host, port: postgres.port };

  it('maps a refused connection and a refused login to ssh_tunnel, retried', async () => {
    const refused = await rejection(
      SshTunnel.open(
        { host: ssh.host, port: await closedPort(), user: ssh.user, password: ssh.password },
        target,
      ),
    );
    expectKind(refused, 'ssh_tunnel', 'timed');
    expect((refused as EngineError).message).toMatch(/could not connect$/);
    const login = await rejection(
      SshTunnel.open({ host: ssh.host, port: ssh.port, user: ssh.user, password: 'wrong-password' }, target),
    );
    expectKind(login, 'ssh_tunnel', 'timed');
    expect((login as EngineError).message).toMatch(/authentication failed$/);
    expectKind(classifyError((login as EngineError).cause, 'ssh tunnel'), 'ssh_tunnel', 'timed');
  });

  it('maps a refused login to the database behind the tunnel to auth', async () => {
    const peer = peerSchema.parse({
      name: 'pg',
      kind: 'relational',
      config: {
        ...relational({ password: 'wrong-password' }),
        sshConfig: {
          host: ssh.host,
          port: ssh.port,
          user: ssh.user,
          privateKey: readFileSync(ssh.privateKeyPath, 'utf8'),
        },
      },
    });
    expectKind(await rejection(checkPeer(peer)), 'auth', 'manual');
  });
});

describe('Snowflake errors (emulator)', () => {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const warehouse = (accessUrl: string): Peer =>
    peerSchema.parse({
      name: 'sf',
      kind: 'datawarehouse',
      config: {
        accountId: 'tributary',
        username: 'tributary',
        privateKey,
        database: 'TRIBUTARY',
        warehouse: 'WH',
        role: 'SYSADMIN',
        accessUrl,
      },
    });

  it('maps a refused connection to connection, retried', async () => {
    const error = await rejection(checkPeer(warehouse(`http://127.0.0.1:${await closedPort()}`), 10_000));
    expectKind(error, 'connection', 'timed');
    expectKind(classifyError((error as EngineError).cause, 'mirror run'), 'connection', 'timed');
  });

  describe('on the emulator', () => {
    // Every session shares the emulator's one DuckDB: a database of our own.
    const database = `ERRORS_${randomSuffix().toUpperCase()}`;
    let connection: snowflakeSdk.Connection | undefined;

    const execute = (sqlText: string): Promise<void> =>
      new Promise((resolve, reject) => {
        if (!connection) throw new Error('not connected');
        connection.execute({ sqlText, complete: (error) => (error ? reject(error) : resolve()) });
      });

    beforeAll(async () => {
      // Without a logger of its own the driver writes snowflake.log into the working directory.
      const quiet = (): void => {};
      snowflakeSdk.configure({
        customLogger: { error: quiet, warn: quiet, info: quiet, debug: quiet, trace: quiet },
      });
      // The emulator checks no credential (docs/snowflake-emulator.md), so a
      // refused login cannot be provoked here; the unit test of classify/ covers it.
      const created = snowflakeSdk.createConnection({
        account: 'tributary',
        username: 'tributary',
        password: 'unchecked',
        accessUrl: snowflake.url,
        sfRetryMaxLoginRetries: 1,
      });
      await new Promise<void>((resolve, reject) => {
        created.connect((error) => (error ? reject(error) : resolve()));
      });
      connection = created;
      await execute(`CREATE DATABASE ${database}`);
      await execute(`CREATE SCHEMA ${database}.REPL`);
    });

    afterAll(async () => {
      if (!connection) return;
      await execute(`DROP SCHEMA ${database}.REPL CASCADE`).catch(() => {});
      await new Promise<void>((resolve) => connection?.destroy(() => resolve()));
    });

    it('maps a missing table to schema_mismatch, for a person', async () => {
      const raw = await rejection(execute(`INSERT INTO ${database}.REPL.MISSING (ID) VALUES (1)`));
      expect(raw).toMatchObject({ code: '002003' });
      expectKind(classifyError(raw, 'destination: insert', 'destination_write'), 'schema_mismatch', 'manual');
    });
  });
});
