// The Helm chart rendered with the real helm binary, for tests of its manifests.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { helmBinary, repoRoot } from './testenv.ts';

const run = promisify(execFile);
export const chart = join(repoRoot, 'charts', 'tributary');
/** The values without which the chart refuses to render. */
export const requiredValues = [
  '--set',
  'catalog.url=postgres://u:p@db:5432/catalog',
  '--set',
  'api.password=chart-test-password',
];

export type Manifest = { kind: string; metadata: { name: string }; spec?: Record<string, unknown> } & Record<
  string,
  unknown
>;

export async function renderChart(extra: string[] = []): Promise<Manifest[]> {
  const { stdout } = await run(helmBinary, [
    'template',
    'tributary',
    chart,
    '--namespace',
    'tributary',
    ...requiredValues,
    ...extra,
  ]);
  return parseAllDocuments(stdout)
    .map((document) => document.toJS() as Manifest | null)
    .filter((manifest): manifest is Manifest => manifest !== null);
}

export const byKind = (manifests: Manifest[], kind: string) =>
  manifests.filter((manifest) => manifest.kind === kind);
