import { readFileSync } from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../engine/src/errors.ts';
import { SshTunnel, type SshTunnelConfig } from '../../engine/src/net/ssh-tunnel.ts';
import { postgres, ssh } from '../support/testenv.ts';

const base = { host: ssh.host, port: ssh.port, user: ssh.user } satisfies SshTunnelConfig;

async function queryThroughTunnel(config: SshTunnelConfig): Promise<string> {
  const tunnel = await SshTunnel.open(config, { host: postgres.host, port: postgres.port });
  const db = new pg.Client({
    host: tunnel.localHost,
    port: tunnel.localPort,
    database: postgres.database,
    ...postgres.superuser,
  });
  try {
    await db.connect();
    const result = await db.query<{ answer: string }>(`SELECT 'through the tunnel' AS answer`);
    return result.rows[0]?.answer ?? '';
  } finally {
    await db.end();
    tunnel.close();
  }
}

describe('SSH test server', () => {
  it('tunnels a PostgreSQL session with key authentication', async () => {
    const privateKey = readFileSync(ssh.privateKeyPath, 'utf8');
    expect(await queryThroughTunnel({ ...base, privateKey })).toBe('through the tunnel');
  });

  it('tunnels a PostgreSQL session with password authentication', async () => {
    expect(await queryThroughTunnel({ ...base, password: ssh.password })).toBe('through the tunnel');
  });

  it('refuses a wrong password with a typed error that does not echo it', async () => {
    const attempt = SshTunnel.open({ ...base, password: 'not-the-password' }, { host: 'x', port: 1 });
    await expect(attempt).rejects.toBeInstanceOf(EngineError);
    await expect(attempt).rejects.toThrow(/authentication failed/);
    await expect(attempt).rejects.not.toThrow(/not-the-password/);
  });
});
