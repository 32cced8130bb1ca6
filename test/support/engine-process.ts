// Runs the engine as its own process (`tributary engine run`), as the operator
// and standalone mode do, for tests that kill it or cap its memory.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MirrorSpecInput } from '../../engine/src/resources/mirror.ts';
import type { Peer, RelationalConfig } from '../../engine/src/resources/peer.ts';
import { repoRoot } from './testenv.ts';

/** Where an engine's source, destination and catalog live (a Harness has them all). */
export type EngineDatabases = {
  readonly [side in 'source' | 'destination' | 'catalogDatabase']: { readonly config: RelationalConfig };
};

/**
 * Writes an engine config for a mirror of the harness, into its PostgreSQL
 * destination unless `extra.destination` names another peer; returns its path.
 */
export function writeEngineConfig(
  harness: EngineDatabases,
  mirror: MirrorSpecInput,
  extra: { batchMemoryBudgetBytes?: number; destination?: Peer } = {},
): string {
  const path = join(mkdtempSync(join(tmpdir(), 'tributary-engine-')), 'engine.json');
  const catalog = harness.catalogDatabase.config;
  writeFileSync(
    path,
    JSON.stringify({
      mirror,
      source: harness.source.config,
      destination: { name: 'destination', kind: 'relational', config: harness.destination.config },
      catalog: {
        url: `postgres://${catalog.user}:${catalog.password}@${catalog.host}:${catalog.port}/${catalog.database}`,
      },
      ...extra,
    }),
    { mode: 0o600 },
  );
  return path;
}

export function startEngine(
  mirror: string,
  configPath: string,
  options: { nodeOptions?: readonly string[]; metricsPort?: number } = {},
): ChildProcess {
  return spawn(
    process.execPath,
    [
      ...(options.nodeOptions ?? []),
      join(repoRoot, 'bin', 'tributary.ts'),
      'engine',
      'run',
      '--mirror',
      mirror,
      '--config',
      configPath,
      ...(options.metricsPort !== undefined ? ['--metrics-port', String(options.metricsPort)] : []),
    ],
    {
      stdio: ['ignore', process.env.ENGINE_STDOUT ? 'inherit' : 'ignore', 'inherit'],
      env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn' },
    },
  );
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** A port no one listens on right now, for a child process to take. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
