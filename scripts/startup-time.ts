// Measures how long standalone mode takes from the command to its first answer
// on /healthz, on a warm machine: one run creates the data directory (and warms
// the OS and Node compile caches) and is not counted; the next runs are.
//
//   node scripts/startup-time.ts [runs] [make|node]
//
// `make` measures `make start` (what the README tells a newcomer to type), `node`
// the program alone (`node bin/tributary.js standalone`). Prints each run and the
// median in milliseconds.
//
//   node scripts/startup-time.ts [runs] node --mirrors N [--kill]
//
// With `--mirrors N` (needs the test PostgreSQL of `make testenv-up`), the
// uncounted first run creates a source and a destination database, their peers
// and N mirrors of one table each; before every counted run one row is written
// to each source table while the service is stopped, and the run also reports
// when every one of those rows has reached its destination (all mirrors are
// streaming again).
//
//   node scripts/startup-time.ts [runs] node --node-flag --no-liftoff-only
//
// `--node-flag F` (repeatable) starts the measured Node with F, e.g. to compare
// standalone mode with V8's default WebAssembly compilers against the
// Liftoff-only mode bin/tributary.js starts it in (docs/startup.md, Memory).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import pg from 'pg';
import { postgres } from '../test/support/testenv.ts';

const runs = Number(process.argv[2] ?? 5);
const how = process.argv[3] === 'node' ? 'node' : 'make';
const mirrorsFlag = process.argv.indexOf('--mirrors');
const mirrorCount = mirrorsFlag > 0 ? Number(process.argv[mirrorsFlag + 1]) : 0;
// `--kill`: each run ends with kill -9 instead of SIGTERM, so the next start
// recovers from a crash (no batch flushed at shutdown, walsenders to replace).
const stopSignal = process.argv.includes('--kill') ? 'SIGKILL' : 'SIGTERM';
if (mirrorCount > 0 && how !== 'node') throw new Error('--mirrors measures `node` runs only');
const nodeFlags = process.argv.flatMap((argument, index) =>
  process.argv[index - 1] === '--node-flag' ? [argument] : [],
);
if (nodeFlags.length > 0 && how !== 'node') throw new Error('--node-flag applies to `node` runs only');
const root = join(import.meta.dirname, '..');
const dataDir = join(mkdtempSync(join(tmpdir(), 'tributary-startup-')), 'data');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Fleet {
  /** Writes one new row to every source table; resolves to a check that they all arrived. */
  writeRows(): Promise<() => Promise<boolean>>;
  close(): Promise<void>;
}

/** Two databases on the test server and, through the API of a running service, N mirrors between them. */
async function createFleet(port: number): Promise<Fleet> {
  const suffix = Math.random().toString(16).slice(2, 10);
  const names = { source: `startup_src_${suffix}`, destination: `startup_dst_${suffix}` };
  const connect = async (database: string) => {
    const client = new pg.Client({
      host: postgres.host,
      port: postgres.port,
      database,
      ...postgres.superuser,
    });
    await client.connect();
    return client;
  };
  const admin = await connect('postgres');
  for (const database of Object.values(names)) await admin.query(`CREATE DATABASE ${database}`);
  const source = await connect(names.source);
  const destination = await connect(names.destination);
  const tables = Array.from({ length: mirrorCount }, (_, index) => `t${index + 1}`);
  for (const table of tables)
    await source.query(`CREATE TABLE ${table} (id int PRIMARY KEY, at timestamptz)`);
  const call = async (path: string, body: unknown) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  };
  for (const [peer, database] of [
    ['startup_src', names.source],
    ['startup_dst', names.destination],
  ]) {
    const { host, port: pgPort, superuser } = postgres;
    await call('/api/v1/peers/create', {
      peer: { name: peer, type: 3, relational_config: { host, port: pgPort, ...superuser, database } },
    });
  }
  for (const table of tables) {
    await call('/api/v1/flows/cdc/create', {
      connection_configs: {
        flow_job_name: `startup_${table}`,
        source_name: 'startup_src',
        destination_name: 'startup_dst',
        table_mappings: [
          { source_table_identifier: `public.${table}`, destination_table_identifier: `public.${table}` },
        ],
        do_initial_snapshot: true,
        idle_timeout_seconds: 1,
      },
    });
  }
  let nextId = 0;
  const arrived = async (id: number) => {
    for (const table of tables) {
      const found = await destination
        .query(`SELECT 1 FROM ${table} WHERE id = $1`, [id])
        .catch(() => ({ rowCount: 0 }));
      if (found.rowCount !== 1) return false;
    }
    return true;
  };
  return {
    async writeRows() {
      const id = ++nextId;
      for (const table of tables) await source.query(`INSERT INTO ${table} VALUES ($1, now())`, [id]);
      return () => arrived(id);
    },
    async close() {
      await source.end();
      await destination.end();
      await admin.query(
        `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`,
        [names.source],
      );
      for (const database of Object.values(names))
        await admin.query(`DROP DATABASE ${database} WITH (FORCE)`);
      await admin.end();
    },
  };
}

interface Run {
  /** Until the first answer on /healthz. */
  readonly readyMs: number;
  /** Until every mirror delivered the row written before the start (with --mirrors). */
  readonly streamingMs?: number;
}

let fleet: Fleet | undefined;

async function once(setUp = false): Promise<Run> {
  const port = await freePort();
  const env = { ...process.env, TRIBUTARY_PORT: String(port), TRIBUTARY_LOG_LEVEL: 'warn' };
  const delivered = fleet && !setUp ? await fleet.writeRows() : undefined;
  const started = performance.now();
  const child =
    how === 'make'
      ? spawn('make', ['--no-print-directory', 'start', `DATA_DIR=${dataDir}`], {
          cwd: root,
          env,
          detached: true,
          stdio: 'ignore',
        })
      : spawn(
          process.execPath,
          [
            ...nodeFlags,
            join(root, 'bin', 'tributary.js'),
            'standalone',
            '--data-dir',
            dataDir,
            '--auth-disabled',
          ],
          {
            cwd: root,
            env,
            detached: true,
            stdio: 'ignore',
          },
        );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const until = async (what: string, check: () => Promise<boolean>): Promise<number> => {
    for (const deadline = started + 120_000; performance.now() < deadline; ) {
      if (await check()) return performance.now() - started;
      if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`${what} not within 120 s`);
  };
  try {
    const readyMs = await until('an answer on /healthz', () =>
      fetch(`http://127.0.0.1:${port}/healthz`).then(
        (response) => response.ok,
        () => false,
      ),
    );
    if (setUp && mirrorCount > 0) {
      fleet = await createFleet(port);
      const delivered = await fleet.writeRows();
      await until('the first rows of every mirror', delivered);
    }
    if (!delivered) return { readyMs };
    return { readyMs, streamingMs: await until('every mirror streaming', delivered) };
  } finally {
    if (child.exitCode === null && child.pid) process.kill(-child.pid, stopSignal);
    await exited;
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

try {
  await once(true);
  const results: Run[] = [];
  for (let run = 0; run < runs; run++) {
    const result = await once();
    results.push(result);
    console.log(
      `run ${run + 1}: ready ${result.readyMs.toFixed(0)} ms${result.streamingMs === undefined ? '' : `, all ${mirrorCount} mirrors streaming ${result.streamingMs.toFixed(0)} ms`}`,
    );
  }
  const ready = results.map((result) => result.readyMs);
  console.log(
    `${how === 'make' ? 'make start' : `node ${[...nodeFlags, ''].join(' ')}bin/tributary.js standalone`}${mirrorCount ? ` with ${mirrorCount} mirrors` : ''}: ready median ${median(ready).toFixed(0)} ms, best ${Math.min(...ready).toFixed(0)} ms over ${runs} warm runs`,
  );
  const streaming = results.flatMap((result) =>
    result.streamingMs === undefined ? [] : [result.streamingMs],
  );
  if (streaming.length > 0) {
    console.log(
      `every mirror streaming again: median ${median(streaming).toFixed(0)} ms, best ${Math.min(...streaming).toFixed(0)} ms (includes the 1 s idle timeout)`,
    );
  }
} finally {
  await fleet?.close();
  rmSync(dataDir, { recursive: true, force: true });
}
