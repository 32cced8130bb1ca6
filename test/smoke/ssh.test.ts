import { readFileSync } from 'node:fs';
import { readdir, readFile, readlink } from 'node:fs/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EngineError } from '../../engine/src/errors.ts';
import { SshTunnel, type SshTunnelConfig } from '../../engine/src/net/ssh-tunnel.ts';
import { postgres, ssh } from '../support/testenv.ts';

/** How many listening TCP sockets this process holds (its fds' socket inodes in /proc/net/tcp*). */
async function ownListeningSockets(): Promise<number> {
  const inodes = new Set<string>();
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target.startsWith('socket:[')) inodes.add(target.slice('socket:['.length, -1));
  }
  let count = 0;
  for (const table of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    const lines = (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const line of lines) {
      const fields = line.trim().split(/\s+/);
      // st 0A is LISTEN; the inode is the tenth field.
      if (fields[3] === '0A' && inodes.has(fields[9] ?? '')) count++;
    }
  }
  return count;
}

const base = { host: ssh.host, port: ssh.port, user: ssh.user } satisfies SshTunnelConfig;

async function queryThroughTunnel(config: SshTunnelConfig): Promise<string> {
  const tunnel = await SshTunnel.open(config, { host: postgres.host, port: postgres.port });
  // The channel is the driver's socket: no local port is opened.
  const db = new pg.Client({
    host: postgres.host,
    port: postgres.port,
    stream: () => tunnel.connection(),
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
  it('opens no listening socket of its own for a tunnel', async () => {
    const before = await ownListeningSockets();
    const tunnel = await SshTunnel.open(
      { ...base, password: ssh.password },
      { host: postgres.host, port: postgres.port },
    );
    try {
      expect(await ownListeningSockets()).toBe(before);
    } finally {
      tunnel.close();
    }
  });

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
