// `kubectl tributary report`: collects the bundle and writes it as one
// .tar.gz, readable by its owner only (it describes the installation, even
// with the secrets taken out).
import { writeFileSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import type { Cluster } from '../cluster.ts';
import { PluginError } from '../plugin-error.ts';
import { collectReport } from './collect.ts';
import { tarGzip } from './tar-gzip.ts';

export interface ReportRequest {
  readonly mirror: string | undefined;
  readonly tailLines: number;
  /** Where to write; absent: a name from the namespace, the mirror and the time, in `cwd`. */
  readonly file: string | undefined;
  readonly cwd: string;
  readonly now: Date;
  /** The program's version line, for the README. */
  readonly version: string;
}

/** `20240501T101500Z`: sorts as it reads, and is a valid file name everywhere. */
function compactTime(time: Date): string {
  return time
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

function readme(
  cluster: Cluster,
  request: ReportRequest,
  mirrors: readonly string[],
  paths: readonly string[],
  problems: readonly string[],
): string {
  return [
    'Tributary support bundle (kubectl tributary report)',
    '',
    `Created:    ${request.now.toISOString()}`,
    `Program:    ${request.version}`,
    `Cluster:    ${cluster.server} (context ${cluster.context})`,
    `Namespace:  ${cluster.namespace}`,
    `Mirrors:    ${mirrors.length === 0 ? 'none' : mirrors.join(', ')}${request.mirror === undefined ? ' (every mirror of the namespace)' : ''}`,
    '',
    "No secret is in this bundle: each Secret's values are replaced by their sizes (its keys",
    'stay), fields named like secrets (password, token, privateKey, ...) and passwords in URLs',
    'read <redacted>, and the values of the Secrets read are removed from every file. Look',
    'through it before you send it all the same.',
    '',
    'Files:',
    ...paths.map((path) => `  ${path}`),
    '',
    'Not collected:',
    ...(problems.length === 0 ? ['  nothing'] : problems.map((problem) => `  ${problem}`)),
    '',
  ].join('\n');
}

export async function writeReport(cluster: Cluster, request: ReportRequest): Promise<string> {
  const { bundle, mirrors } = await collectReport(cluster, request);
  const defaultName = `tributary-report-${cluster.namespace}${request.mirror === undefined ? '' : `-${mirrors[0]}`}-${compactTime(request.now)}.tar.gz`;
  const path = resolve(request.cwd, request.file ?? defaultName);
  const folder = basename(path).replace(/\.(tar\.gz|tgz)$/, '') || 'tributary-report';
  const files = bundle.files((paths, problems) => readme(cluster, request, mirrors, paths, problems));
  const archive = tarGzip(
    files.map((file) => ({ path: `${folder}/${file.path}`, content: file.text })),
    request.now,
  );
  try {
    writeFileSync(path, archive, { mode: 0o600 });
  } catch (error) {
    throw new PluginError(`cannot write ${path}: ${(error as Error).message}`);
  }
  const missing = bundle.problems.length;
  return `wrote ${path}: ${files.length} files${missing === 0 ? '' : `; ${missing} not collected (see README.txt)`}`;
}
