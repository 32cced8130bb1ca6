// A PostgreSQL server of one test's own, for tests that crash and restart the
// source: the shared test server cannot be restarted under suites running in
// parallel. The binaries of the run's source server (testenv.ts
// `sourcePostgres`, or a given one); a fresh cluster in a temporary directory
// on a free loopback port.
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import { freePort } from './engine-process.ts';
import { type PostgresServer, sourcePostgres } from './testenv.ts';

const run = promisify(execFile);
const superuser = { user: 'tributary_admin', password: 'private-secret' } as const;

export interface PrivatePostgres {
  /** Superuser settings for database `source`. */
  readonly config: RelationalConfig;
  connect(): Promise<pg.Client>;
  /** Kills the server as a crash would (immediate shutdown: no checkpoint), then starts it again. */
  crashAndRestart(): Promise<void>;
  /** Stops the server (fast shutdown: clients are disconnected); `start` brings it back. */
  stop(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

/** Runs a server program as the `postgres` OS user when the tests run as root (initdb refuses root). */
function asServerUser(binaries: string, program: string, args: readonly string[]) {
  const path = join(binaries, program);
  return process.getuid?.() === 0
    ? run('runuser', ['-u', 'postgres', '--', path, ...args])
    : run(path, [...args]);
}

/**
 * `settings`: extra server settings, `name=value`, e.g. `max_slot_wal_keep_size=1MB`;
 * `server`: whose major (binaries) to run.
 */
export async function startPrivatePostgres(
  options: { settings?: readonly string[]; server?: PostgresServer } = {},
): Promise<PrivatePostgres> {
  const binaries = (options.server ?? sourcePostgres).binaries;
  const directory = mkdtempSync(join(tmpdir(), 'tributary-private-pg-'));
  const data = join(directory, 'data');
  const passwordFile = join(directory, 'password');
  writeFileSync(passwordFile, superuser.password);
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const uid = Number(stdout.trim());
    chownSync(directory, uid, uid);
    chownSync(passwordFile, uid, uid);
  }
  await asServerUser(binaries, 'initdb', [
    '-D',
    data,
    '-U',
    superuser.user,
    `--pwfile=${passwordFile}`,
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    '-E',
    'UTF8',
    '--locale=C.UTF-8',
  ]);
  const port = await freePort();
  const settings = [
    '-c listen_addresses=127.0.0.1',
    `-c port=${port}`,
    `-c unix_socket_directories=${directory}`,
    '-c wal_level=logical',
    '-c max_replication_slots=8',
    '-c max_wal_senders=8',
    '-c fsync=off',
    ...(options.settings ?? []).map((setting) => `-c ${setting}`),
  ].join(' ');
  const pgCtl = (...args: string[]) =>
    asServerUser(binaries, 'pg_ctl', [
      '-D',
      data,
      '-l',
      join(directory, 'server.log'),
      '-w',
      '-t',
      '60',
      ...args,
    ]);
  await pgCtl('-o', settings, 'start');
  const config: RelationalConfig = { host: '127.0.0.1', port, ...superuser, database: 'postgres' };
  const connect = async (database: string) => {
    const client = new pg.Client({ ...config, database });
    // A crash ends idle connections too: their next query fails, which is what callers handle.
    client.on('error', () => {});
    await client.connect();
    return client;
  };
  const admin = await connect('postgres');
  await admin.query('CREATE DATABASE source');
  await admin.end();
  return {
    config: { ...config, database: 'source' },
    connect: () => connect('source'),
    async crashAndRestart() {
      await pgCtl('-m', 'immediate', 'stop');
      await pgCtl('-o', settings, 'start');
    },
    async stop() {
      await pgCtl('-m', 'fast', 'stop');
    },
    async start() {
      await pgCtl('-o', settings, 'start');
    },
    async destroy() {
      await pgCtl('-m', 'immediate', 'stop').catch(() => {});
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
