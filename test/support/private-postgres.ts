// A PostgreSQL server of one test's own, for tests that crash and restart the
// source or need server settings the shared one must not get: the shared test
// server cannot be restarted under suites running in parallel. The binaries of
// the run's source server (testenv.ts `sourcePostgres`, or a given one); a fresh
// cluster in a temporary directory on a free loopback port. `startStandby` adds
// a physical standby of such a server.
import { execFile } from 'node:child_process';
import { appendFileSync, chownSync, cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  /** Ends recovery of a standby (`pg_ctl promote`): it then takes writes. */
  promote(): Promise<void>;
  destroy(): Promise<void>;
  /** For `startStandby`. */
  readonly internals: { readonly binaries: string; readonly data: string; readonly port: number };
}

/** Runs a server program as the `postgres` OS user when the tests run as root (initdb refuses root). */
function asServerUser(binaries: string, program: string, args: readonly string[]) {
  const path = join(binaries, program);
  return process.getuid?.() === 0
    ? run('runuser', ['-u', 'postgres', '--', path, ...args])
    : run(path, [...args]);
}

/** A fresh directory the server user owns. */
async function serverDirectory(): Promise<{ directory: string; uid: number | undefined }> {
  const directory = mkdtempSync(join(tmpdir(), 'tributary-private-pg-'));
  if (process.getuid?.() !== 0) return { directory, uid: undefined };
  const { stdout } = await run('id', ['-u', 'postgres']);
  const uid = Number(stdout.trim());
  chownSync(directory, uid, uid);
  return { directory, uid };
}

/**
 * `settings`: extra server settings, `name=value`, e.g. `max_slot_wal_keep_size=1MB`;
 * `server`: whose major (binaries) to run.
 */
export async function startPrivatePostgres(
  options: { settings?: readonly string[]; server?: Pick<PostgresServer, 'binaries'> } = {},
): Promise<PrivatePostgres> {
  const binaries = (options.server ?? sourcePostgres).binaries;
  const { directory, uid } = await serverDirectory();
  const data = join(directory, 'data');
  const passwordFile = join(directory, 'password');
  writeFileSync(passwordFile, superuser.password);
  if (uid !== undefined) chownSync(passwordFile, uid, uid);
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
  const server = await runServer(binaries, directory, data, options.settings ?? []);
  const admin = await server.connectTo('postgres');
  await admin.query('CREATE DATABASE source');
  await admin.end();
  return server.handle;
}

/**
 * A physical standby of `primary` (stopped for a moment to copy its data
 * directory), streaming through the physical slot `slotName` that this creates on
 * the primary, with hot_standby_feedback on and a `dbname` in primary_conninfo,
 * as slot synchronization needs (call `pg_sync_replication_slots()` on it).
 */
export async function startStandby(
  primary: PrivatePostgres,
  options: { slotName: string; settings?: readonly string[] },
): Promise<PrivatePostgres> {
  const admin = await primary.connect();
  try {
    await admin.query(`SELECT pg_create_physical_replication_slot($1, true)`, [options.slotName]);
  } finally {
    await admin.end();
  }
  const { binaries, data: primaryData, port: primaryPort } = primary.internals;
  const { directory, uid } = await serverDirectory();
  const data = join(directory, 'data');
  // A cleanly stopped cluster is a consistent copy; the slot keeps the WAL the
  // standby will ask for.
  await primary.stop();
  try {
    cpSync(primaryData, data, {
      recursive: true,
      preserveTimestamps: true,
      // A base backup leaves out the primary's slots and its pid file.
      filter: (source) => !/[/\\](pg_replslot[/\\].+|postmaster\.(pid|opts))$/.test(source),
    });
  } finally {
    await primary.start();
  }
  writeFileSync(join(data, 'standby.signal'), '');
  appendFileSync(
    join(data, 'postgresql.auto.conf'),
    [
      `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=${superuser.user} password=${superuser.password} dbname=postgres'`,
      `primary_slot_name = '${options.slotName}'`,
      'hot_standby_feedback = on',
      '',
    ].join('\n'),
  );
  if (uid !== undefined) await run('chown', ['-R', `${uid}:${uid}`, directory]);
  const server = await runServer(binaries, directory, data, options.settings ?? []);
  return server.handle;
}

async function runServer(
  binaries: string,
  directory: string,
  data: string,
  extraSettings: readonly string[],
): Promise<{ handle: PrivatePostgres; connectTo: (database: string) => Promise<pg.Client> }> {
  const port = await freePort();
  const settings = [
    '-c listen_addresses=127.0.0.1',
    `-c port=${port}`,
    `-c unix_socket_directories=${directory}`,
    '-c wal_level=logical',
    '-c max_replication_slots=8',
    '-c max_wal_senders=8',
    '-c fsync=off',
    ...extraSettings.map((setting) => `-c ${setting}`),
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
  const connectTo = async (database: string) => {
    const client = new pg.Client({ ...config, database });
    // A crash ends idle connections too: their next query fails, which is what callers handle.
    client.on('error', () => {});
    await client.connect();
    return client;
  };
  const handle: PrivatePostgres = {
    config: { ...config, database: 'source' },
    connect: () => connectTo('source'),
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
    async promote() {
      await pgCtl('promote');
    },
    async destroy() {
      await pgCtl('-m', 'immediate', 'stop').catch(() => {});
      rmSync(directory, { recursive: true, force: true });
    },
    internals: { binaries, data, port },
  };
  return { handle, connectTo };
}
