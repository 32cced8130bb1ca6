// Runs `tributary operator` as a process against the test kube-apiserver, with
// engines as local processes (no kubelet runs there).
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { RelationalConfig } from '../../engine/src/resources/peer.ts';
import { kube, repoRoot } from './testenv.ts';

export function catalogUrl(config: RelationalConfig): string {
  return `postgres://${config.user}:${encodeURIComponent(config.password)}@${config.host}:${config.port}/${config.database}`;
}

export function startOperator(
  namespace: string,
  catalog: RelationalConfig,
  identity: string,
  leaseSeconds = 4,
  metricsPort?: number,
  options: {
    /** `statefulset`: engines as StatefulSets on the apiserver (no pod runs there). */
    readonly engineRuntime?: 'local-process' | 'statefulset';
    readonly env?: Readonly<Record<string, string>>;
  } = {},
): ChildProcess {
  return spawn(
    process.execPath,
    [
      join(repoRoot, 'bin', 'tributary.ts'),
      'operator',
      '--kubeconfig',
      kube.adminKubeconfig,
      '--namespace',
      namespace,
      '--catalog-url',
      catalogUrl(catalog),
      '--engine-runtime',
      options.engineRuntime ?? 'local-process',
      '--identity',
      identity,
      '--lease-seconds',
      String(leaseSeconds),
      ...(metricsPort !== undefined ? ['--metrics-port', String(metricsPort)] : []),
    ],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn', ...options.env },
    },
  );
}

export function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}
