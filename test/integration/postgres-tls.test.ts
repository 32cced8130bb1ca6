// PostgreSQL peers over TLS, and SSH tunnels that check the server's host key,
// against the TLS test server (scripts/testenv/postgres-tls.sh: its role
// tributary_tls is admitted only over TLS) and the shared SSH server.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { checkPeer, describeCheckFailure } from '../../engine/src/connectors/peer-check.ts';
import { connectPostgres } from '../../engine/src/connectors/postgres/driver/connect.ts';
import { validateSource } from '../../engine/src/connectors/postgres/source/validate-source.ts';
import type { EngineError } from '../../engine/src/errors.ts';
import { type Peer, peerSchema, type RelationalConfig } from '../../engine/src/resources/peer.ts';
import { postgres, postgresTls, ssh } from '../support/testenv.ts';

const testCa = readFileSync(join(postgresTls.tlsDir, 'ca.crt'), 'utf8');
const foreignCa = readFileSync(join(postgresTls.tlsDir, 'foreign-ca.crt'), 'utf8');
const hostKey = readFileSync(ssh.hostKeyPath, 'utf8').trim();

const tlsPeer = (config: Record<string, unknown> = {}): Peer =>
  peerSchema.parse({
    name: 'pg-tls',
    kind: 'relational',
    config: {
      host: postgresTls.host,
      port: postgresTls.port,
      database: postgresTls.database,
      ...postgresTls.tlsUser,
      ...config,
    },
  });

const tunnel = (extra: Record<string, unknown> = {}) => ({
  sshConfig: {
    host: ssh.host,
    port: ssh.port,
    user: ssh.user,
    privateKey: readFileSync(ssh.privateKeyPath, 'utf8'),
    ...extra,
  },
});

async function refusal(peer: Peer): Promise<{ kind: string; message: string }> {
  const error = await checkPeer(peer).then(
    () => undefined,
    (caught: unknown) => caught as EngineError,
  );
  expect(error, 'the check should have been refused').toBeDefined();
  return { kind: (error as EngineError).kind, message: describeCheckFailure(error, []) };
}

/** Whether the server sees this connection as TLS (pg_stat_ssl). */
async function sessionUsesTls(config: RelationalConfig): Promise<boolean> {
  const connection = await connectPostgres(config, { applicationName: 'tributary-tls-test' });
  try {
    const { rows } = await connection.client.query<{ ssl: boolean }>(
      'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
    );
    return rows[0]?.ssl === true;
  } finally {
    await connection.close();
  }
}

describe('PostgreSQL over TLS', () => {
  it('negotiates TLS by default with a server that requires it, and falls back to plain without TLS', async () => {
    expect((await checkPeer(tlsPeer())).version).toMatch(/^15\./);
    expect(await sessionUsesTls(tlsPeer().config as RelationalConfig)).toBe(true);
    const plainServer = peerSchema.parse({
      name: 'pg-plain',
      kind: 'relational',
      config: {
        host: postgres.host,
        port: postgres.port,
        database: postgres.database,
        ...postgres.replicator,
      },
    });
    expect(await sessionUsesTls(plainServer.config as RelationalConfig)).toBe(false);
  });

  it('verifies the certificate against root_ca and the host, by address or by name', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const peer = tlsPeer({ host, rootCa: testCa, requireTls: true });
      expect((await checkPeer(peer)).version).toMatch(/^15\./);
      expect(await sessionUsesTls(peer.config as RelationalConfig)).toBe(true);
    }
    // root_ca alone asks for verification too.
    expect((await checkPeer(tlsPeer({ rootCa: testCa }))).version).toMatch(/^15\./);
  });

  it('refuses disable_tls where the server requires TLS, saying so', async () => {
    const { kind, message } = await refusal(tlsPeer({ disableTls: true }));
    expect(kind).toBe('tls');
    expect(message).toContain('the server refuses connections without TLS for this user; remove disable_tls');
  });

  it('refuses require_tls without root_ca: a private CA is not trusted', async () => {
    const { kind, message } = await refusal(tlsPeer({ requireTls: true }));
    expect(kind).toBe('tls');
    expect(message).toContain('root_ca must hold the CA that signed it');
  });

  it('refuses a certificate of another CA', async () => {
    const { kind, message } = await refusal(tlsPeer({ rootCa: foreignCa }));
    expect(kind).toBe('tls');
    expect(message).toContain('the server certificate could not be verified');
  });

  it('refuses a certificate that does not name tls_host', async () => {
    const { kind, message } = await refusal(tlsPeer({ rootCa: testCa, tlsHost: 'db.example.com' }));
    expect(kind).toBe('tls');
    expect(message).toContain('set tls_host');
    expect(message).toContain('db.example.com');
  });

  it('encrypts without verifying with skip_cert_verification', async () => {
    const peer = tlsPeer({ skipCertVerification: true });
    expect(await sessionUsesTls(peer.config as RelationalConfig)).toBe(true);
  });

  it('refuses require_tls on a server without TLS', async () => {
    const peer = peerSchema.parse({
      name: 'pg-plain',
      kind: 'relational',
      config: {
        host: postgres.host,
        port: postgres.port,
        database: postgres.database,
        ...postgres.replicator,
        requireTls: true,
      },
    });
    const { kind, message } = await refusal(peer);
    expect(kind).toBe('tls');
    expect(message).toContain('the server does not offer TLS');
  });

  it('refuses contradicting fields before connecting', async () => {
    const { kind, message } = await refusal(tlsPeer({ disableTls: true, rootCa: testCa }));
    expect(kind).toBe('config');
    expect(message).toContain('disable_tls with root_ca');
  });

  it('runs TLS through an SSH tunnel, verified against the peer host, not the tunnel end', async () => {
    const peer = tlsPeer({ host: 'localhost', rootCa: testCa, ...tunnel({ hostKey }) });
    expect((await checkPeer(peer)).version).toMatch(/^15\./);
    expect(await sessionUsesTls(peer.config as RelationalConfig)).toBe(true);
    const wrongName = await refusal(
      tlsPeer({ host: 'localhost', rootCa: testCa, tlsHost: 'db.example.com', ...tunnel() }),
    );
    expect(wrongName.kind).toBe('tls');
    expect(wrongName.message).toContain('set tls_host');
  });
});

describe('SSH host keys', () => {
  it('connects when the server has the given host key', async () => {
    const peer = tlsPeer(tunnel({ hostKey }));
    expect((await checkPeer(peer)).version).toMatch(/^15\./);
  });

  it('refuses a server with another host key, naming the key it offered', async () => {
    // A valid key line of another server: the test user's own key.
    const otherKey = readFileSync(`${ssh.privateKeyPath}.pub`, 'utf8').trim();
    const { kind, message } = await refusal(tlsPeer(tunnel({ hostKey: otherKey })));
    expect(kind).toBe('config');
    expect(message).toContain("the server's host key is not ssh_config.host_key");
    expect(message).toMatch(/it offered ssh-ed25519 SHA256:[A-Za-z0-9+/]{43}/);
  });

  it('refuses a host key that is not a public key line', async () => {
    const { kind, message } = await refusal(tlsPeer(tunnel({ hostKey: 'SHA256:not-a-key' })));
    expect(kind).toBe('config');
    expect(message).toContain('ssh_config.host_key: expected a public key line');
  });
});

describe('managed services', () => {
  it('counts membership in rds_replication (Amazon RDS) as the right to replicate', async () => {
    // The role RDS grants instead of the REPLICATION attribute, made here on the
    // private TLS server (never on the shared one): roles are cluster-wide.
    const admin = new pg.Client({
      host: postgresTls.host,
      port: postgresTls.port,
      database: postgresTls.database,
      ...postgresTls.superuser,
    });
    await admin.connect();
    const role = `rds_user_${randomBytes(4).toString('hex')}`;
    const table = `rds_table_${randomBytes(4).toString('hex')}`;
    try {
      await admin.query(`DO $$ BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_replication') THEN
            CREATE ROLE rds_replication NOLOGIN;
          END IF;
        END $$`);
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'rds-user-secret' NOREPLICATION`);
      await admin.query(`CREATE TABLE ${table} (id int PRIMARY KEY)`);
      await admin.query(`GRANT SELECT ON ${table} TO ${role}`);
      const config = {
        host: postgresTls.host,
        port: postgresTls.port,
        database: postgresTls.database,
        user: role,
        password: 'rds-user-secret',
      } satisfies RelationalConfig;
      const tables = [{ schema: 'public', table }];
      const validate = async () => {
        const connection = await connectPostgres(config, { applicationName: 'tributary-tls-test' });
        try {
          return await validateSource(connection.client, { tables });
        } finally {
          await connection.close();
        }
      };
      await expect(validate()).rejects.toThrow(/GRANT rds_replication TO <user>/);
      await admin.query(`GRANT rds_replication TO ${role}`);
      expect((await validate()).tables).toHaveLength(1);
    } finally {
      await admin.query(`DROP TABLE IF EXISTS ${table}`);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    }
  });
});
