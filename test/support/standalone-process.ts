// Runs `tributary standalone` as a real process and talks to it over HTTP.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { type TestDatabase, waitFor } from './databases.ts';
import { repoRoot } from './testenv.ts';

export interface StandaloneProcess {
  readonly baseUrl: string;
  readonly child: ChildProcess;
  /** Every line the process wrote to stdout (its log), of this and earlier processes on the same options. */
  readonly logLines: string[];
  call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
  /** SIGTERM, then waits for the exit code. */
  stop(): Promise<number | null>;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface StandaloneOptions {
  /** pino level of the service log (default warn: quiet tests). */
  readonly logLevel?: string;
  /** Where to append the log lines (to keep them across a restart); a new array otherwise. */
  readonly logLines?: string[];
  /** More environment variables for the process. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Start through `bin/tributary.js`, as `make start` and the README do (it
   * starts Node again with the role's V8 flags), instead of `bin/tributary.ts`.
   */
  readonly throughLauncher?: boolean;
}

export async function startStandalone(
  dataDir: string,
  password: string,
  options: StandaloneOptions = {},
): Promise<StandaloneProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      join(repoRoot, 'bin', options.throughLauncher ? 'tributary.js' : 'tributary.ts'),
      'standalone',
      '--data-dir',
      dataDir,
      '--port',
      String(port),
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        TRIBUTARY_API_PASSWORD: password,
        TRIBUTARY_LOG_LEVEL: options.logLevel ?? 'warn',
        ...options.env,
      },
    },
  );
  const logLines = options.logLines ?? [];
  if (child.stdout)
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => logLines.push(line));
  const baseUrl = `http://127.0.0.1:${port}`;
  const authorization = `Basic ${Buffer.from(`:${password}`).toString('base64')}`;
  const call: StandaloneProcess['call'] = async (method, path, body) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: await response.json() };
  };
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`standalone exited with ${child.exitCode}`);
      return (await fetch(`${baseUrl}/healthz`).catch(() => undefined))?.ok === true;
    },
    // Ready in seconds on a calm machine; start-up is CPU-bound (PGlite, module
    // loading), so a machine busy with the whole suite can make it many times slower.
    120_000,
    'standalone to listen',
  );
  return {
    baseUrl,
    child,
    logLines,
    call,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** A mirror's state as /api/v1/mirrors/status names it (STATUS_RUNNING, …). */
export async function mirrorState(service: StandaloneProcess, mirror: string): Promise<string> {
  const { body } = await service.call('POST', '/api/v1/mirrors/status', { flowJobName: mirror });
  return (body as { currentFlowState: string }).currentFlowState;
}

/** Creates a relational peer for each [name, database] through /api/v1/peers/create. */
export async function createRelationalPeers(
  service: StandaloneProcess,
  peers: readonly (readonly [string, TestDatabase])[],
): Promise<void> {
  for (const [name, database] of peers) {
    const { host, port, user, password, database: db } = database.config;
    const created = await service.call('POST', '/api/v1/peers/create', {
      peer: { name, type: 3, relational_config: { host, port, user, password, database: db } },
    });
    if (created.status !== 200)
      throw new Error(`peers/create ${name}: ${created.status} ${JSON.stringify(created.body)}`);
  }
}

/** A mirror of one table or more between two peers, each the same name on both sides, with an initial load and a 1 s idle timeout. */
export function createTableMirror(
  service: StandaloneProcess,
  mirror: {
    readonly name: string;
    readonly sourcePeer: string;
    readonly destinationPeer: string;
    readonly table: string | readonly string[];
    /** More `connection_configs` fields, e.g. `heartbeat_interval_seconds`. */
    readonly options?: Readonly<Record<string, unknown>>;
  },
): Promise<{ status: number; body: unknown }> {
  const tables = typeof mirror.table === 'string' ? [mirror.table] : mirror.table;
  return service.call('POST', '/api/v1/flows/cdc/create', {
    connection_configs: {
      flow_job_name: mirror.name,
      source_name: mirror.sourcePeer,
      destination_name: mirror.destinationPeer,
      table_mappings: tables.map((table) => ({
        source_table_identifier: table,
        destination_table_identifier: table,
      })),
      do_initial_snapshot: true,
      idle_timeout_seconds: 1,
      ...mirror.options,
    },
  });
}
