// Runs `tributary standalone` as a real process and talks to it over HTTP.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { waitFor } from './databases.ts';
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
}

export async function startStandalone(
  dataDir: string,
  password: string,
  options: StandaloneOptions = {},
): Promise<StandaloneProcess> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [join(repoRoot, 'bin', 'tributary.ts'), 'standalone', '--data-dir', dataDir, '--port', String(port)],
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
    30_000,
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
