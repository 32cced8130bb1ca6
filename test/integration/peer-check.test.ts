// Peer checks against the real servers of every kind.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPeer, describeCheckFailure } from '../../engine/src/connectors/peer-check.ts';
import { type Peer, peerSchema } from '../../engine/src/resources/peer.ts';
import { clickhouse, kafka, postgres, snowflake, ssh } from '../support/testenv.ts';

const relational = (config: Record<string, unknown> = {}): Peer =>
  peerSchema.parse({
    name: 'pg',
    kind: 'relational',
    config: {
      host: postgres.host,
      port: postgres.port,
      database: postgres.database,
      ...postgres.replicator,
      ...config,
    },
  });

const analytics = (config: Record<string, unknown>): Peer =>
  peerSchema.parse({
    name: 'ch',
    kind: 'analytics',
    config: { host: '127.0.0.1', database: 'default', ...config },
  });

const stream = (config: Record<string, unknown>): Peer =>
  peerSchema.parse({ name: 'kafka', kind: 'stream', config: { disableTls: true, ...config } });

async function failure(peer: Peer, timeoutMs?: number): Promise<string> {
  const error = await checkPeer(peer, timeoutMs).then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeDefined();
  return describeCheckFailure(error, []);
}

describe('peer checks', () => {
  let silent: Server;
  let silentPort = 0;

  beforeAll(async () => {
    // Accepts connections and never answers: a check must give up on its own.
    silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentPort = (silent.address() as { port: number }).port;
  });

  afterAll(() => {
    silent.close();
  });

  it('reads the PostgreSQL version, directly and through SSH', async () => {
    expect((await checkPeer(relational())).version).toMatch(/^1\d\./);
    const tunnelled = relational({
      sshConfig: {
        host: ssh.host,
        port: ssh.port,
        user: ssh.user,
        privateKey: readFileSync(ssh.privateKeyPath, 'utf8'),
      },
    });
    expect((await checkPeer(tunnelled)).version).toMatch(/^1\d\./);
  });

  it('explains a refused PostgreSQL login without echoing the password', async () => {
    const peer = relational({ password: 'wrong-password-123' });
    const error = await checkPeer(peer).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    const message = describeCheckFailure(error, ['wrong-password-123']);
    expect(message).toContain('password authentication failed');
    expect(message).not.toContain('wrong-password-123');
  });

  it('gives up on a server that never answers', async () => {
    // The check's own time-out ends it (its message says so), not the test's: no wall-clock bound here.
    expect(await failure(relational({ port: silentPort }), 1_500)).toMatch(/timeout|no answer/i);
  });

  it('reads the ClickHouse version of both engines over HTTP', async () => {
    const server = analytics({
      port: clickhouse.server.nativePort,
      httpPort: Number(new URL(clickhouse.server.url).port),
      user: clickhouse.server.user,
      password: clickhouse.server.password,
      disableTls: true,
    });
    expect((await checkPeer(server)).version).toMatch(/^18\./);
    const chdb = analytics({
      port: 9000,
      httpPort: Number(new URL(clickhouse.chdb.url).port),
      user: 'default',
      password: '',
      disableTls: true,
    });
    expect((await checkPeer(chdb)).version).toMatch(/^2\d\./);
  });

  it('asks for http_port when the native port is not a standard one', async () => {
    const peer = analytics({ port: 19000, user: 'u', password: 'p', disableTls: true });
    expect(await failure(peer)).toContain('set http_port');
  });

  it('authenticates to Kafka with PLAIN and both SCRAM mechanisms, and refuses a wrong password', async () => {
    expect(await checkPeer(stream({ servers: [kafka.saslBroker], sasl: 'PLAIN', ...kafka.plain }))).toEqual(
      {},
    );
    for (const sasl of ['SCRAM-SHA-256', 'SCRAM-SHA-512']) {
      expect(await checkPeer(stream({ servers: [kafka.saslBroker], sasl, ...kafka.scram }))).toEqual({});
    }
    const wrong = stream({
      servers: [kafka.saslBroker],
      sasl: 'PLAIN',
      username: kafka.plain.username,
      password: 'nope',
    });
    expect(await failure(wrong)).toMatch(/auth/i);
  });

  it('logs in to the Snowflake emulator with a key pair', async () => {
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const peer = peerSchema.parse({
      name: 'sf',
      kind: 'datawarehouse',
      config: {
        accountId: 'tributary',
        username: 'tributary',
        privateKey,
        database: 'TRIBUTARY',
        warehouse: 'WH',
        role: 'SYSADMIN',
        accessUrl: snowflake.url,
      },
    });
    expect(await checkPeer(peer)).toEqual({});
  });

  it('logs in to the Snowflake emulator with an encrypted key, and names a wrong passphrase', async () => {
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'right one' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const peer = (password?: string) =>
      peerSchema.parse({
        name: 'sf',
        kind: 'datawarehouse',
        config: {
          accountId: 'tributary',
          username: 'tributary',
          privateKey,
          ...(password === undefined ? {} : { password }),
          database: 'TRIBUTARY',
          warehouse: 'WH',
          role: 'SYSADMIN',
          queryTimeout: 10,
          accessUrl: snowflake.url,
        },
      });
    expect(await checkPeer(peer('right one'))).toEqual({});
    await expect(checkPeer(peer('wrong'))).rejects.toMatchObject({
      kind: 'auth',
      message: "the private key's passphrase (the peer's password) is wrong",
    });
    await expect(checkPeer(peer())).rejects.toMatchObject({
      kind: 'config',
      message: expect.stringContaining('the private key is encrypted and the peer has no password'),
    });
  });
});
