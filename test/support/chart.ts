// The Helm chart rendered with the real helm binary, for tests of its manifests.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { helmBinary, repoRoot } from './testenv.ts';

const run = promisify(execFile);
export const chart = join(repoRoot, 'charts', 'tributary');
/**
 * The Kubernetes version `helm template` and `helm lint` check Chart.yaml's
 * kubeVersion against: the test environment's helm is built without the release
 * build's version stamp (scripts/testenv/helm.sh), so it would assume v1.20.
 */
export const kubeVersion = ['--kube-version', '1.31.0'];
/** The values without which the chart refuses to render (and the Kubernetes version it needs). */
export const requiredValues = [
  ...kubeVersion,
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
