// POST /api/v1/peers/create and GET /api/v1/peers/info/:peer_name through
// app.inject(), with the real peer checks against the test servers.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { group, version } from '../../operator/src/index.ts';
import { createTestDatabase, randomSuffix, type TestDatabase } from '../support/databases.ts';
import { clusterMode, createFacade, type Facade } from '../support/facade.ts';
import { adminConfig } from '../support/kube.ts';
import { clickhouse, kafka, postgres, postgresTls, snowflake, ssh } from '../support/testenv.ts';

const mask = '********';

/** Everything a request could have changed. */
async function stateOf(facade: Facade): Promise<string> {
  const { store } = facade.controlPlane;
  return JSON.stringify({
    peers: await store.listPeers(),
    mirrors: await store.listMirrors(),
    scripts: await store.listScripts(),
  });
}

function expectPeerFailure(response: LightMyRequestResponse, status: number, message: RegExp | string): void {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.json()).toEqual({
    status: 'FAILED',
    message: typeof message === 'string' ? expect.stringContaining(message) : expect.stringMatching(message),
  });
}

function expectCreated(response: LightMyRequestResponse): void {
  expect(response.statusCode, response.body).toBe(200);
  expect(response.json()).toEqual({ status: 'CREATED', message: expect.any(String) });
}

describe('peers', () => {
  let facade: Facade;
  let database: TestDatabase;
  const suffix = randomSuffix();
  const peerName = (label: string) => `${label}-${suffix}`;

  const relationalConfig = (overrides: Record<string, unknown> = {}) => ({
    host: postgres.host,
    port: postgres.port,
    user: postgres.superuser.user,
    password: postgres.superuser.password,
    database: database.name,
    ...overrides,
  });
  const relationalPeer = (name: string, overrides: Record<string, unknown> = {}) => ({
    peer: { name, type: 3, relational_config: relationalConfig(overrides) },
  });

  const analyticsConfig = {
    host: '127.0.0.1',
    port: clickhouse.server.nativePort,
    http_port: Number(new URL(clickhouse.server.url).port),
    user: clickhouse.server.user,
    password: clickhouse.server.password,
    database: 'default',
    disable_tls: true,
  };
  const streamConfig = {
    servers: [kafka.saslBroker],
    username: kafka.plain.username,
    password: kafka.plain.password,
    sasl: 'PLAIN',
    disable_tls: true,
    partitioner: '',
  };

  beforeAll(async () => {
    database = await createTestDatabase('api_peers');
    facade = await createFacade();
  });

  afterAll(async () => {
    await facade?.close();
    await database?.drop();
  });

  describe('relational', () => {
    it('creates a peer, reads it back with the password masked and the server version', async () => {
      const name = peerName('pg');
      expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));

      const stored = await facade.controlPlane.store.getPeer(name);
      expect(stored?.peer).toEqual({
        name,
        kind: 'relational',
        config: {
          host: postgres.host,
          port: postgres.port,
          user: postgres.superuser.user,
          password: postgres.superuser.password,
          database: database.name,
        },
      });

      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.statusCode).toBe(200);
      expect(info.json()).toEqual({
        peer: {
          name,
          type: 'RELATIONAL',
          relationalConfig: {
            host: postgres.host,
            port: postgres.port,
            user: postgres.superuser.user,
            password: mask,
            database: database.name,
          },
        },
        version: expect.stringMatching(/^1\d\./),
      });
      expect(stored?.version).toBe(info.json().version);
      expect(info.body).not.toContain(postgres.superuser.password);

      const list = await facade.request({ method: 'GET', url: '/api/v1/peers/list' });
      expect(list.statusCode).toBe(200);
      const items: { name: string; type: string }[] = list.json().items;
      expect(items).toContainEqual({ name, type: 'RELATIONAL' });
      expect(items.map((item) => item.name)).toEqual(items.map((item) => item.name).sort());
      expect(Object.keys(items[0] ?? {}).sort()).toEqual(['name', 'type']);
      expect(list.body).not.toContain(postgres.superuser.password);
    });

    it('validates a peer as peers/create checks it, storing nothing', async () => {
      const name = peerName('pg-check');
      const valid = await facade.post('/api/v1/peers/validate', relationalPeer(name));
      expect(valid.statusCode, valid.body).toBe(200);
      expect(valid.json()).toEqual({
        status: 'VALID',
        message: expect.stringMatching(/can be reached \(version 1\d/),
      });
      const wrong = 'wrong-password-for-the-check';
      const invalid = await facade.post('/api/v1/peers/validate', relationalPeer(name, { password: wrong }));
      expect(invalid.statusCode).toBe(422);
      expect(invalid.json()).toEqual({
        status: 'INVALID',
        message: expect.stringContaining('failed to validate peer'),
      });
      expect(invalid.body).not.toContain(wrong);
      const refused = await facade.post('/api/v1/peers/validate', relationalPeer(name, { port: 0 }));
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toEqual({ status: 'INVALID', message: expect.stringContaining('port') });
      expect(await facade.controlPlane.store.getPeer(name)).toBeUndefined();
    });

    it('creates a peer through an SSH tunnel and masks the key and the tunnel password', async () => {
      const name = peerName('pg-ssh');
      const privateKey = readFileSync(ssh.privateKeyPath, 'utf8');
      const body = relationalPeer(name, {
        ssh_config: { host: ssh.host, port: ssh.port, user: ssh.user, private_key: privateKey },
      });
      expectCreated(await facade.post('/api/v1/peers/create', body));
      expect((await facade.controlPlane.store.getPeer(name))?.peer.config).toMatchObject({
        sshConfig: { host: ssh.host, port: ssh.port, user: ssh.user, privateKey },
      });

      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.statusCode).toBe(200);
      expect(info.json().peer.relationalConfig).toEqual({
        ...relationalConfig(),
        password: mask,
        sshConfig: { host: ssh.host, port: ssh.port, user: ssh.user, privateKey: mask },
      });
      expect(info.body).not.toContain('PRIVATE KEY');

      // A tunnel with a password only: the interface's required private_key may be empty.
      const withPassword = peerName('pg-ssh-pw');
      expectCreated(
        await facade.post(
          '/api/v1/peers/create',
          relationalPeer(withPassword, {
            ssh_config: {
              host: ssh.host,
              port: ssh.port,
              user: ssh.user,
              password: ssh.password,
              private_key: '',
            },
          }),
        ),
      );
      const passwordInfo = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${withPassword}` });
      expect(passwordInfo.json().peer.relationalConfig.sshConfig).toEqual({
        host: ssh.host,
        port: ssh.port,
        user: ssh.user,
        password: mask,
      });
      expect(passwordInfo.body).not.toContain(ssh.password);
    });

    it('creates TLS peers from either spelling of the TLS and host key fields, and reads them back', async () => {
      const rootCa = readFileSync(join(postgresTls.tlsDir, 'ca.crt'), 'utf8');
      const hostKey = readFileSync(ssh.hostKeyPath, 'utf8').trim();
      const tlsServer = {
        host: postgresTls.host,
        port: postgresTls.port,
        user: postgresTls.tlsUser.user,
        password: postgresTls.tlsUser.password,
        database: postgresTls.database,
      };
      const tunnel = { host: ssh.host, port: ssh.port, user: ssh.user, password: ssh.password };
      const snake = peerName('pg-tls-snake');
      expectCreated(
        await facade.post('/api/v1/peers/create', {
          peer: {
            name: snake,
            type: 3,
            relational_config: {
              ...tlsServer,
              require_tls: true,
              root_ca: rootCa,
              tls_host: 'localhost',
              ssh_config: { ...tunnel, host_key: hostKey },
            },
          },
        }),
      );
      const camel = peerName('pg-tls-camel');
      expectCreated(
        await facade.post('/api/v1/peers/create', {
          peer: {
            name: camel,
            type: 'RELATIONAL',
            relationalConfig: {
              ...tlsServer,
              requireTls: true,
              rootCa,
              tlsHost: 'localhost',
              sshConfig: { ...tunnel, hostKey },
            },
          },
        }),
      );
      for (const name of [snake, camel]) {
        const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
        expect(info.statusCode).toBe(200);
        // A CA certificate and a host key are public: shown as given.
        expect(info.json().peer.relationalConfig).toEqual({
          ...tlsServer,
          password: mask,
          requireTls: true,
          rootCa,
          tlsHost: 'localhost',
          sshConfig: { ...tunnel, password: mask, hostKey },
        });
      }
    });

    it('answers 422 FAILED with the TLS field to change when the server is refused or refuses', async () => {
      const tlsServer = {
        host: postgresTls.host,
        port: postgresTls.port,
        user: postgresTls.tlsUser.user,
        password: postgresTls.tlsUser.password,
        database: postgresTls.database,
      };
      const before = await stateOf(facade);
      const cases: [Record<string, unknown>, string][] = [
        [
          { disable_tls: true },
          'the server refuses connections without TLS for this user; remove disable_tls',
        ],
        [{ require_tls: true }, 'root_ca must hold the CA that signed it'],
        [
          { root_ca: readFileSync(join(postgresTls.tlsDir, 'foreign-ca.crt'), 'utf8') },
          'the server certificate could not be verified',
        ],
        [
          { root_ca: readFileSync(join(postgresTls.tlsDir, 'ca.crt'), 'utf8'), tls_host: 'db.example.com' },
          'set tls_host to a name it carries',
        ],
      ];
      for (const [fields, message] of cases) {
        const name = peerName('pg-tls-refused');
        const response = await facade.post('/api/v1/peers/create', {
          peer: { name, type: 3, relational_config: { ...tlsServer, ...fields } },
        });
        expectPeerFailure(response, 422, `failed to validate peer ${name}`);
        expect(response.json().message).toContain(message);
      }
      expect(await stateOf(facade)).toBe(before);
    });

    it('refuses a tunnel without any authentication method, naming the peer', async () => {
      const name = peerName('pg-ssh-none');
      const before = await stateOf(facade);
      const response = await facade.post(
        '/api/v1/peers/create',
        relationalPeer(name, {
          ssh_config: { host: ssh.host, port: ssh.port, user: ssh.user, private_key: '' },
        }),
      );
      expectPeerFailure(response, 400, /ssh_config.*password or a private key/);
      expect(await stateOf(facade)).toBe(before);
    });

    it('answers 422 FAILED naming the peer when the connection check fails, never the password', async () => {
      const name = peerName('pg-wrong');
      const password = 'wrong-password-4711';
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/peers/create', relationalPeer(name, { password }));
      expectPeerFailure(response, 422, `failed to validate peer ${name}: `);
      expect(response.json().message).toContain('password authentication failed');
      expect(response.body).not.toContain(password);
      expect(await stateOf(facade)).toBe(before);
    });

    it('masks a password that the server error would echo', async () => {
      // The database name is the password: the server's "database does not exist" names it.
      const secret = `secret_db_${suffix}`;
      const name = peerName('pg-echo');
      const response = await facade.post(
        '/api/v1/peers/create',
        relationalPeer(name, { password: secret, database: secret }),
      );
      expectPeerFailure(response, 422, `failed to validate peer ${name}: `);
      expect(response.body).not.toContain(secret);
    });

    it('is idempotent for an identical peer and refuses a different one without allow_update', async () => {
      const name = peerName('pg-idem');
      expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));
      const created = await stateOf(facade);
      expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));
      expect(await stateOf(facade)).toBe(created);

      const changed = relationalPeer(name, {
        user: postgres.replicator.user,
        password: postgres.replicator.password,
      });
      const refused = await facade.post('/api/v1/peers/create', changed);
      expectPeerFailure(refused, 409, `peer ${name} already exists`);
      expect(refused.json().message).toContain('allow_update');
      expect(refused.body).not.toContain(postgres.replicator.password);
      expect(await stateOf(facade)).toBe(created);

      const explicitFalse = await facade.post('/api/v1/peers/create', { ...changed, allow_update: false });
      expectPeerFailure(explicitFalse, 409, `peer ${name} already exists`);
      expect(await stateOf(facade)).toBe(created);
    });

    it('answers a re-create the same whatever its password: no oracle for the stored one', async () => {
      const name = peerName('pg-oracle');
      expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));
      const created = await stateOf(facade);
      const right = await facade.post('/api/v1/peers/create', relationalPeer(name));
      const wrong = await facade.post(
        '/api/v1/peers/create',
        relationalPeer(name, { password: 'a-guess-of-the-password' }),
      );
      expect({ status: wrong.statusCode, body: wrong.json() }).toEqual({
        status: right.statusCode,
        body: right.json(),
      });
      expect(right.json().message).toContain('secrets are not compared');
      // Nothing changed: the guess was not stored.
      expect(await stateOf(facade)).toBe(created);
      expect((await facade.controlPlane.store.getPeer(name))?.peer.config).toMatchObject({
        password: postgres.superuser.password,
      });
    });

    it('replaces a peer with allow_update, and keeps the old one when the new one fails its check', async () => {
      const name = peerName('pg-update');
      expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));

      const replacement = relationalPeer(name, {
        user: postgres.replicator.user,
        password: postgres.replicator.password,
      });
      expectCreated(await facade.post('/api/v1/peers/create', { ...replacement, allow_update: true }));
      expect((await facade.controlPlane.store.getPeer(name))?.peer.config).toMatchObject({
        user: postgres.replicator.user,
        password: postgres.replicator.password,
      });

      const before = await stateOf(facade);
      const broken = relationalPeer(name, { password: 'not-the-password-99' });
      const response = await facade.post('/api/v1/peers/create', { ...broken, allow_update: true });
      expectPeerFailure(response, 422, `failed to validate peer ${name}: `);
      expect(response.body).not.toContain('not-the-password-99');
      expect(await stateOf(facade)).toBe(before);

      // allow_update on a peer that does not exist yet creates it.
      const fresh = peerName('pg-upsert');
      expectCreated(
        await facade.post('/api/v1/peers/create', { ...relationalPeer(fresh), allow_update: true }),
      );
      expect(await facade.controlPlane.store.getPeer(fresh)).toBeDefined();
    });
  });

  describe('analytics', () => {
    it('creates a peer on the ClickHouse server and masks password, private key and secret access key', async () => {
      const name = peerName('ch');
      const config = {
        ...analyticsConfig,
        certificate: 'client-certificate-text',
        private_key: 'client-private-key-text',
        root_ca: 'root-ca-text',
        objstore_path: 's3://stage-bucket/tributary',
        access_key_id: 'AKIAEXAMPLE',
        secret_access_key: 'secret-access-key-text',
        region: 'eu-central-1',
        endpoint: 'http://127.0.0.1:9',
      };
      expectCreated(
        await facade.post('/api/v1/peers/create', { peer: { name, type: 8, analytics_config: config } }),
      );

      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.statusCode).toBe(200);
      expect(info.json()).toEqual({
        peer: {
          name,
          type: 'ANALYTICS',
          analyticsConfig: {
            host: '127.0.0.1',
            port: clickhouse.server.nativePort,
            httpPort: analyticsConfig.http_port,
            user: clickhouse.server.user,
            password: mask,
            database: 'default',
            disableTls: true,
            certificate: 'client-certificate-text',
            privateKey: mask,
            rootCa: 'root-ca-text',
            objstorePath: 's3://stage-bucket/tributary',
            accessKeyId: 'AKIAEXAMPLE',
            secretAccessKey: mask,
            region: 'eu-central-1',
            endpoint: 'http://127.0.0.1:9',
          },
        },
        version: expect.stringMatching(/^18\./),
      });
      for (const secret of [
        clickhouse.server.password,
        'client-private-key-text',
        'secret-access-key-text',
      ]) {
        expect(info.body).not.toContain(secret);
      }
      expect((await facade.controlPlane.store.getPeer(name))?.peer.config).toMatchObject({
        password: clickhouse.server.password,
        privateKey: 'client-private-key-text',
        secretAccessKey: 'secret-access-key-text',
      });
    });

    it('fails a peer whose native port has no known HTTP twin and no http_port', async () => {
      const name = peerName('ch-noport');
      const before = await stateOf(facade);
      const { http_port: _, ...withoutHttpPort } = analyticsConfig;
      const response = await facade.post('/api/v1/peers/create', {
        peer: { name, type: 8, analytics_config: withoutHttpPort },
      });
      expectPeerFailure(response, 422, `failed to validate peer ${name}: `);
      expect(response.json().message).toContain('http_port');
      expect(await stateOf(facade)).toBe(before);
    });

    it('fails a wrong password without echoing it', async () => {
      const name = peerName('ch-wrong');
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/peers/create', {
        peer: { name, type: 8, analytics_config: { ...analyticsConfig, password: 'ch-wrong-secret' } },
      });
      expectPeerFailure(response, 422, `failed to validate peer ${name}: `);
      expect(response.body).not.toContain('ch-wrong-secret');
      expect(await stateOf(facade)).toBe(before);
    });
  });

  describe('datawarehouse', () => {
    it('creates a peer on the emulator with an encrypted key and masks key and passphrase', async () => {
      const passphrase = `key-passphrase-${suffix}`;
      const { privateKey } = generateKeyPairSync('rsa', {
        modulusLength: 2048,
        privateKeyEncoding: { type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase },
        publicKeyEncoding: { type: 'spki', format: 'pem' },
      });
      const name = peerName('sf');
      const config = {
        account_id: 'tributary',
        username: 'tributary',
        private_key: privateKey,
        password: passphrase,
        database: 'TRIBUTARY',
        warehouse: 'WH',
        role: 'SYSADMIN',
        query_timeout: 45,
        access_url: snowflake.url,
      };
      expectCreated(
        await facade.post('/api/v1/peers/create', { peer: { name, type: 1, datawarehouse_config: config } }),
      );

      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.statusCode).toBe(200);
      // No version for a datawarehouse peer.
      expect(info.json()).toEqual({
        peer: {
          name,
          type: 'DATAWAREHOUSE',
          datawarehouseConfig: {
            accountId: 'tributary',
            username: 'tributary',
            privateKey: mask,
            password: mask,
            database: 'TRIBUTARY',
            warehouse: 'WH',
            role: 'SYSADMIN',
            queryTimeout: 45,
            accessUrl: snowflake.url,
          },
        },
      });
      expect(info.body).not.toContain('PRIVATE KEY');
      expect(info.body).not.toContain(passphrase);
    });

    it('refuses a boolean role: the role is a name', async () => {
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/peers/create', {
        peer: {
          name: peerName('sf-bool'),
          type: 1,
          datawarehouse_config: {
            account_id: 'tributary',
            username: 'tributary',
            private_key: 'key',
            database: 'TRIBUTARY',
            warehouse: 'WH',
            role: true,
          },
        },
      });
      expectPeerFailure(response, 400, 'peer.datawarehouse_config.role: ');
      expect(await stateOf(facade)).toBe(before);
    });
  });

  describe('stream', () => {
    it('creates a peer with a client certificate and no SASL, either spelling, masking the key', async () => {
      const pem = (file: string) => readFileSync(join(kafka.tls.tlsDir, file), 'utf8');
      const name = peerName('kafka-mtls');
      expectCreated(
        await facade.post('/api/v1/peers/create', {
          peer: {
            name,
            type: 'STREAM',
            streamConfig: {
              servers: kafka.tls.mutualBroker,
              rootCa: pem('ca.crt'),
              certificate: pem('client.crt'),
              private_key: pem('client.key'),
            },
          },
        }),
      );
      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.json().peer.streamConfig).toMatchObject({
        servers: [kafka.tls.mutualBroker],
        username: '',
        sasl: '',
        disableTls: false,
        rootCa: pem('ca.crt'),
        certificate: pem('client.crt'),
        privateKey: mask,
      });
      expect(info.body).not.toContain('PRIVATE KEY');
      // A key of another CA: the broker refuses it, and the message says so without the key.
      const refused = await facade.post('/api/v1/peers/create', {
        peer: {
          name: peerName('kafka-stranger'),
          type: 9,
          stream_config: {
            servers: [kafka.tls.mutualBroker],
            root_ca: pem('ca.crt'),
            certificate: pem('foreign-client.crt'),
            private_key: pem('foreign-client.key'),
          },
        },
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().message).toMatch(/refused the client certificate/);
      expect(refused.body).not.toContain('PRIVATE KEY');
    });

    it('creates a peer from a server array and from a comma-separated string, masking the password', async () => {
      const name = peerName('kafka');
      expectCreated(
        await facade.post('/api/v1/peers/create', { peer: { name, type: 9, stream_config: streamConfig } }),
      );
      const info = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
      expect(info.statusCode).toBe(200);
      expect(info.json()).toEqual({
        peer: {
          name,
          type: 'STREAM',
          streamConfig: {
            servers: [kafka.saslBroker],
            username: kafka.plain.username,
            password: mask,
            sasl: 'PLAIN',
            disableTls: true,
            partitioner: '',
            compression: 'none',
          },
        },
      });
      expect(info.body).not.toContain(kafka.plain.password);

      const listed = peerName('kafka-list');
      const { partitioner: _, ...withoutPartitioner } = streamConfig;
      expectCreated(
        await facade.post('/api/v1/peers/create', {
          peer: {
            name: listed,
            type: 9,
            stream_config: { ...withoutPartitioner, servers: ` ${kafka.saslBroker},${kafka.saslBroker} ` },
          },
        }),
      );
      expect((await facade.controlPlane.store.getPeer(listed))?.peer.config).toMatchObject({
        servers: [kafka.saslBroker, kafka.saslBroker],
        partitioner: '',
      });
      // The same peer again, servers as an array this time: identical, so idempotent.
      expectCreated(
        await facade.post('/api/v1/peers/create', {
          peer: {
            name: listed,
            type: 9,
            stream_config: { ...withoutPartitioner, servers: [kafka.saslBroker, kafka.saslBroker] },
          },
        }),
      );

      // The compression extension is stored as given.
      const compressed = peerName('kafka-lz4');
      expectCreated(
        await facade.post('/api/v1/peers/create', {
          peer: { name: compressed, type: 9, stream_config: { ...streamConfig, compression: 'lz4' } },
        }),
      );
      expect((await facade.controlPlane.store.getPeer(compressed))?.peer.config).toMatchObject({
        compression: 'lz4',
      });
    });

    it('fails a wrong password without echoing it', async () => {
      const name = peerName('kafka-wrong');
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/peers/create', {
        peer: { name, type: 9, stream_config: { ...streamConfig, password: 'kafka-wrong-secret' } },
      });
      expectPeerFailure(response, 422, `failed to validate peer ${name}: `);
      expect(response.body).not.toContain('kafka-wrong-secret');
      expect(await stateOf(facade)).toBe(before);
    });
  });

  describe('storage', () => {
    it.runIf(clusterMode)('keeps secrets out of the Peer object, in a Secret of its own', async () => {
      const name = peerName('pg-stored');
      expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));
      const { kube: cluster } = facade.controlPlane;
      if (!cluster) throw new Error('cluster mode without a namespace');
      const objects = adminConfig().makeApiClient(CustomObjectsApi);
      const peer = (await objects.getNamespacedCustomObject({
        group,
        version,
        namespace: cluster.namespace,
        plural: 'peers',
        name,
      })) as {
        metadata: { name: string };
        spec: { relational: Record<string, unknown>; secretRef: { name: string } };
      };
      expect(peer.spec.relational).not.toHaveProperty('password');
      expect(JSON.stringify(peer)).not.toContain(postgres.superuser.password);
      const secret = await adminConfig()
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ name: peer.spec.secretRef.name, namespace: cluster.namespace });
      expect(Buffer.from(secret.data?.password ?? '', 'base64').toString()).toBe(postgres.superuser.password);
      // The label that lets a Peer read a Secret (docs/security.md): the facade's own Secrets carry it.
      expect(secret.metadata?.labels?.['tributary.dev/peer-secret']).toBe('true');
      // Bound to its own Peer only, so no other Peer can borrow the password.
      expect(secret.metadata?.annotations?.['tributary.dev/peers']).toBe(peer.metadata.name);
    });

    it.runIf(clusterMode)(
      'lists a Peer whose Secret is missing as broken, and every other peer still',
      async () => {
        const name = peerName('pg-listed');
        expectCreated(await facade.post('/api/v1/peers/create', relationalPeer(name)));
        const { kube: cluster } = facade.controlPlane;
        if (!cluster) throw new Error('cluster mode without a namespace');
        // A Peer applied with kubectl whose Secret does not exist (yet).
        const broken = `broken-${randomSuffix()}`;
        const objects = adminConfig().makeApiClient(CustomObjectsApi);
        const at = { group, version, namespace: cluster.namespace, plural: 'peers' };
        await objects.createNamespacedCustomObject({
          ...at,
          body: {
            apiVersion: `${group}/${version}`,
            kind: 'Peer',
            metadata: { name: broken },
            spec: {
              kind: 'relational',
              relational: { host: postgres.host, port: postgres.port, user: 'nobody', database: 'postgres' },
              secretRef: { name: `${broken}-absent` },
            },
          },
        });
        try {
          const list = await facade.request({ method: 'GET', url: '/api/v1/peers/list' });
          expect(list.statusCode).toBe(200);
          const items: { name: string; type: string; problem?: string }[] = list.json().items;
          expect(items).toContainEqual({ name, type: 'RELATIONAL' });
          const shown = items.find((item) => item.name === broken);
          expect(shown).toMatchObject({ type: 'RELATIONAL' });
          expect(shown?.problem).toContain(`${broken}-absent`);
          const page = await facade.request({ method: 'GET', url: '/peers' });
          expect(page.statusCode).toBe(200);
          // Shown escaped, as every value on a page is.
          expect(page.body).toContain(`broken: peer ${broken}: Secret ${broken}-absent not found`);
        } finally {
          // The other tests read every peer of the namespace.
          await objects.deleteNamespacedCustomObject({ ...at, name: broken });
        }
      },
    );

    it.skipIf(clusterMode)('keeps secrets out of the peer row', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'tributary-api-peers-'));
      try {
        const onDisk = await createFacade({ dataDir });
        const name = peerName('pg-stored');
        try {
          expectCreated(await onDisk.post('/api/v1/peers/create', relationalPeer(name)));
        } finally {
          await onDisk.close();
        }
        const database = await PGlite.create(dataDir);
        try {
          const peers = await database.query<{ config: Record<string, unknown> }>(
            `SELECT config FROM resources.peers WHERE name = $1`,
            [name],
          );
          expect(peers.rows).toHaveLength(1);
          expect(peers.rows[0]?.config).not.toHaveProperty('password');
          expect(JSON.stringify(peers.rows)).not.toContain(postgres.superuser.password);
          const secrets = await database.query<{ secrets: Record<string, string> }>(
            `SELECT secrets FROM resources.peer_secrets WHERE name = $1`,
            [name],
          );
          expect(secrets.rows[0]?.secrets).toEqual({ password: postgres.superuser.password });
        } finally {
          await database.close();
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });

  describe('peer info', () => {
    it('answers 404 code 5 for an unknown peer', async () => {
      for (const name of ['no-such-peer', encodeURIComponent(`x'; DROP TABLE y; --`), '%22quoted%22']) {
        const response = await facade.request({ method: 'GET', url: `/api/v1/peers/info/${name}` });
        expect(response.statusCode).toBe(404);
        expect(response.json()).toEqual({
          code: 5,
          message: expect.stringContaining('does not exist'),
          details: [],
        });
      }
    });
  });

  describe('bad input', () => {
    const valid = () => relationalPeer(peerName('bad'));
    const cases: { name: string; body: () => unknown; status?: number; message: RegExp | string }[] = [
      { name: 'empty body', body: () => ({}), message: 'peer: ' },
      { name: 'peer not an object', body: () => ({ peer: 'pg' }), message: 'peer: ' },
      {
        name: 'missing name',
        body: () => ({ peer: { type: 3, relational_config: relationalConfig() } }),
        message: 'peer.name: ',
      },
      {
        name: 'missing type',
        body: () => ({ peer: { name: peerName('bad'), relational_config: relationalConfig() } }),
        message: 'peer.type: ',
      },
      {
        name: 'missing config',
        body: () => ({ peer: { name: peerName('bad'), type: 3 } }),
        message: 'peer.relational_config: ',
      },
      {
        name: 'config of another kind',
        body: () => ({ peer: { name: peerName('bad'), type: 8, relational_config: relationalConfig() } }),
        message: 'peer.analytics_config: ',
      },
      {
        name: 'two configs',
        body: () => ({
          peer: { ...valid().peer, stream_config: streamConfig },
        }),
        message: 'peer.relational_config: ',
      },
      {
        name: 'unknown type code 2',
        body: () => ({ peer: { ...valid().peer, type: 2 } }),
        message: 'peer.type: ',
      },
      {
        name: 'unknown type code 10',
        body: () => ({ peer: { ...valid().peer, type: 10 } }),
        message: 'peer.type: ',
      },
      {
        name: 'an unknown kind name',
        body: () => ({ peer: { ...valid().peer, type: 'MONGO' } }),
        message: 'peer.type: unknown peer kind',
      },
      {
        name: 'unknown type code 0 as a string',
        body: () => ({ peer: { ...valid().peer, type: '0' } }),
        message: 'peer.type: unknown peer kind',
      },
      {
        name: 'a config in both spellings',
        body: () => ({
          peer: { ...valid().peer, relationalConfig: relationalConfig() },
        }),
        message:
          'peer.relationalConfig: the same field is given twice, as relational_config and relationalConfig',
      },
      {
        name: 'a bad camelCase config field, named as sent',
        body: () => ({
          peer: { name: peerName('bad'), type: 3, relationalConfig: { ...relationalConfig(), port: 70_000 } },
        }),
        message: 'peer.relationalConfig.port: ',
      },
      {
        name: 'port as a string that is not a number',
        body: () => relationalPeer(peerName('bad'), { port: 'fifty' }),
        message: 'peer.relational_config.port: ',
      },
      {
        name: 'port out of range',
        body: () => relationalPeer(peerName('bad'), { port: 70_000 }),
        message: 'peer.relational_config.port: ',
      },
      {
        name: 'port not an integer',
        body: () => relationalPeer(peerName('bad'), { port: 54.32 }),
        message: 'peer.relational_config.port: ',
      },
      {
        name: 'empty host',
        body: () => relationalPeer(peerName('bad'), { host: '' }),
        message: 'peer.relational_config.host: ',
      },
      {
        name: 'password missing',
        body: () => relationalPeer(peerName('bad'), { password: undefined }),
        message: 'peer.relational_config.password: ',
      },
      {
        name: 'password null',
        body: () => relationalPeer(peerName('bad'), { password: null }),
        message: 'peer.relational_config.password: ',
      },
      {
        name: 'allow_update not a boolean',
        body: () => ({ ...valid(), allow_update: 'yes' }),
        message: 'allow_update: ',
      },
      { name: 'name with SQL', body: () => relationalPeer(`x'; DROP TABLE y; --`), message: 'peer.name: ' },
      { name: 'quoted name', body: () => relationalPeer('"quoted"'), message: 'peer.name: ' },
      { name: 'upper-case name', body: () => relationalPeer('Upper'), message: 'peer.name: ' },
      { name: 'empty name', body: () => relationalPeer(''), message: 'peer.name: ' },
      { name: 'name too long', body: () => relationalPeer('p'.repeat(64)), message: 'peer.name: ' },
      {
        name: 'stream without servers',
        body: () => ({
          peer: { name: peerName('bad'), type: 9, stream_config: { ...streamConfig, servers: [] } },
        }),
        message: 'peer.stream_config.servers: ',
      },
      {
        name: 'stream server without a port',
        body: () => ({
          peer: { name: peerName('bad'), type: 9, stream_config: { ...streamConfig, servers: 'broker' } },
        }),
        message: 'peer.stream_config.servers[0]: ',
      },
      {
        // The engine's rule for a host, now the wire's too (it took any non-empty string).
        name: 'relational host longer than a DNS name',
        body: () => ({
          peer: {
            name: peerName('bad'),
            type: 3,
            relational_config: { host: 'h'.repeat(254), port: 5432, user: 'u', password: 'p', database: 'd' },
          },
        }),
        message: 'peer.relational_config.host: ',
      },
      {
        name: 'stream unknown SASL mechanism',
        body: () => ({
          peer: { name: peerName('bad'), type: 9, stream_config: { ...streamConfig, sasl: 'GSSAPI' } },
        }),
        message: 'peer.stream_config.sasl: ',
      },
      {
        name: 'stream unknown partitioner',
        body: () => ({
          peer: { name: peerName('bad'), type: 9, stream_config: { ...streamConfig, partitioner: 'Random' } },
        }),
        message: 'peer.stream_config.partitioner: ',
      },
      {
        name: 'stream compression Kafka has no codec for',
        body: () => ({
          peer: { name: peerName('bad'), type: 9, stream_config: { ...streamConfig, compression: 'brotli' } },
        }),
        message: 'peer.stream_config.compression: ',
      },
      {
        name: 'analytics staging path without a scheme',
        body: () => ({
          peer: {
            name: peerName('bad'),
            type: 8,
            analytics_config: { ...analyticsConfig, objstore_path: 'bucket/path' },
          },
        }),
        message: 'peer.analytics_config.objstore_path: ',
      },
      {
        name: 'datawarehouse access_url not a URL',
        body: () => ({
          peer: {
            name: peerName('bad'),
            type: 1,
            datawarehouse_config: {
              account_id: 'a',
              username: 'u',
              private_key: 'k',
              database: 'd',
              warehouse: 'w',
              role: 'r',
              access_url: 'not a url',
            },
          },
        }),
        message: 'peer.datawarehouse_config.access_url: ',
      },
    ];

    it.each(cases)('refuses $name with 400 FAILED and changes nothing', async ({ body, status, message }) => {
      const before = await stateOf(facade);
      const response = await facade.post('/api/v1/peers/create', body());
      expectPeerFailure(response, status ?? 400, message);
      expect(await stateOf(facade)).toBe(before);
    });

    it('never echoes a submitted password in a validation message', async () => {
      const response = await facade.post(
        '/api/v1/peers/create',
        relationalPeer('"quoted"', { password: 'validation-secret-1' }),
      );
      expectPeerFailure(response, 400, 'peer.name: ');
      expect(response.body).not.toContain('validation-secret-1');
    });
  });
});
