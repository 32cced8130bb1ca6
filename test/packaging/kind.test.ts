// `make kind-e2e` needs Docker and cannot run here; this keeps what it relies on
// true: its script parses, the chart has the objects it waits for, and its
// manifests are accepted by a real API server with the product's CRDs.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { engineObjectName } from '../../operator/src/index.ts';
import { byKind, renderChart } from '../support/chart.ts';
import { createNamespace, installCrds, kubectl } from '../support/kube.ts';
import { repoRoot } from '../support/testenv.ts';

const run = promisify(execFile);
const script = join(repoRoot, 'scripts', 'kind', 'e2e.sh');

describe('make kind-e2e', () => {
  it('has a script bash can parse', async () => {
    await expect(run('bash', ['-n', script])).resolves.toBeDefined();
  });

  it('waits only for objects the chart and the operator create', async () => {
    const text = readFileSync(script, 'utf8');
    const deployments = [...text.matchAll(/deployment\/([a-z0-9-]+)/g)].map((match) => match[1]);
    expect(deployments.length).toBeGreaterThan(0);
    const rendered = byKind(
      await renderChart(['--set', 'image.repository=tributary', '--set', 'image.tag=e2e']),
      'Deployment',
    ).map((deployment) => deployment.metadata.name);
    for (const name of deployments) expect(rendered).toContain(name);
    expect(text).toContain(`statefulset/${engineObjectName('e2e')}`);
  });

  it('applies manifests the API server accepts', async () => {
    await installCrds();
    const namespace = await createNamespace('kind');
    const applied = await kubectl([
      'apply',
      '--dry-run=server',
      '--namespace',
      namespace,
      '-f',
      join(repoRoot, 'scripts', 'kind', 'postgres.yaml'),
      '-f',
      join(repoRoot, 'scripts', 'kind', 'mirror.yaml'),
    ]);
    for (const object of [
      'statefulset.apps/postgres',
      'peer.tributary.dev/source',
      'mirror.tributary.dev/e2e',
    ]) {
      expect(applied).toContain(`${object} created (server dry run)`);
    }
  });
});
