// The chart's RBAC on the real kube-apiserver: each ServiceAccount may do what
// its component needs and nothing else (SubjectAccessReview asks the RBAC
// authorizer itself).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AuthorizationV1Api, KubernetesObjectApi, loadYaml } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { scriptIdCounterName } from '../../operator/src/kube/kube-store.ts';
import { kubeVersion } from '../support/chart.ts';
import { adminConfig, createNamespace } from '../support/kube.ts';
import { helmBinary, repoRoot } from '../support/testenv.ts';

const run = promisify(execFile);

describe('chart RBAC', () => {
  const config = adminConfig();
  let namespace = '';

  beforeAll(async () => {
    namespace = await createNamespace('rbac');
    const { stdout } = await run(helmBinary, [
      'template',
      'tributary',
      join(repoRoot, 'charts', 'tributary'),
      '--namespace',
      namespace,
      ...kubeVersion,
      '--set',
      'catalog.url=postgres://db/c',
      '--set',
      'api.password=rbac-test-api-password',
    ]);
    const objects = KubernetesObjectApi.makeApiClient(config);
    for (const document of parseAllDocuments(stdout)) {
      const manifest = document.toJS() as { kind?: string } | null;
      if (!manifest || !['ServiceAccount', 'Role', 'RoleBinding'].includes(manifest.kind ?? '')) continue;
      const typed = loadYaml<{ metadata: { namespace?: string } }>(JSON.stringify(manifest));
      typed.metadata.namespace = namespace;
      await objects.create(typed as never);
    }
  });

  async function allowed(account: string, attributes: Record<string, string>): Promise<boolean> {
    const api = config.makeApiClient(AuthorizationV1Api);
    const review = await api.createSubjectAccessReview({
      body: {
        spec: {
          user: `system:serviceaccount:${namespace}:${account}`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
          resourceAttributes: { namespace, ...attributes },
        },
      },
    });
    return review.status?.allowed === true;
  }

  it('lets the operator reconcile, run engines, record events and hold its lease', async () => {
    const operator = (attributes: Record<string, string>) => allowed('tributary-operator', attributes);
    expect(await operator({ group: 'tributary.dev', resource: 'mirrors', verb: 'watch' })).toBe(true);
    expect(
      await operator({ group: 'tributary.dev', resource: 'mirrors', subresource: 'status', verb: 'patch' }),
    ).toBe(true);
    expect(await operator({ group: 'apps', resource: 'statefulsets', verb: 'create' })).toBe(true);
    // Engine pods are read (crash loops, OOM kills), never written.
    expect(await operator({ group: '', resource: 'pods', verb: 'list' })).toBe(true);
    expect(await operator({ group: '', resource: 'pods', verb: 'watch' })).toBe(true);
    expect(await operator({ group: '', resource: 'pods', verb: 'delete' })).toBe(false);
    // The engine Secret's teardown finalizer is removed with a patch.
    expect(await operator({ group: '', resource: 'secrets', verb: 'patch' })).toBe(true);
    expect(
      await operator({
        group: 'tributary.dev',
        resource: 'mirrors',
        subresource: 'finalizers',
        verb: 'update',
      }),
    ).toBe(true);
    expect(await operator({ group: '', resource: 'events', verb: 'create' })).toBe(true);
    expect(await operator({ group: 'coordination.k8s.io', resource: 'leases', verb: 'update' })).toBe(true);
    expect(
      await operator({ group: '', resource: 'configmaps', name: scriptIdCounterName, verb: 'update' }),
    ).toBe(true);
    // ...and nothing beyond.
    expect(
      await operator({ group: '', resource: 'configmaps', name: 'kube-root-ca.crt', verb: 'update' }),
    ).toBe(false);
    expect(await operator({ group: '', resource: 'configmaps', verb: 'list' })).toBe(false);
    expect(await operator({ group: 'tributary.dev', resource: 'mirrors', verb: 'create' })).toBe(false);
    expect(await operator({ group: '', resource: 'secrets', verb: 'list' })).toBe(false);
    expect(await operator({ group: '', resource: 'pods', verb: 'create' })).toBe(false);
    expect(await operator({ group: 'apps', resource: 'deployments', verb: 'create' })).toBe(false);
    expect(
      await allowed('tributary-operator', {
        group: 'tributary.dev',
        resource: 'mirrors',
        verb: 'get',
        namespace: 'default',
      }),
    ).toBe(false);
  });

  it('lets the API server write resources and peer secrets only', async () => {
    const api = (attributes: Record<string, string>) => allowed('tributary-api-server', attributes);
    expect(await api({ group: 'tributary.dev', resource: 'mirrors', verb: 'create' })).toBe(true);
    expect(await api({ group: 'tributary.dev', resource: 'mirrors', verb: 'delete' })).toBe(true);
    expect(await api({ group: '', resource: 'secrets', verb: 'create' })).toBe(true);
    expect(
      await api({ group: 'tributary.dev', resource: 'scripts', subresource: 'status', verb: 'update' }),
    ).toBe(true);
    expect(await api({ group: '', resource: 'configmaps', name: scriptIdCounterName, verb: 'get' })).toBe(
      true,
    );
    expect(await api({ group: '', resource: 'configmaps', name: 'other', verb: 'get' })).toBe(false);
    expect(await api({ group: 'apps', resource: 'statefulsets', verb: 'create' })).toBe(false);
    expect(await api({ group: 'coordination.k8s.io', resource: 'leases', verb: 'update' })).toBe(false);
    expect(await api({ group: '', resource: 'secrets', verb: 'delete' })).toBe(false);
  });

  it('gives engines no API access at all', async () => {
    for (const attributes of [
      { group: 'tributary.dev', resource: 'mirrors', verb: 'get' },
      { group: '', resource: 'secrets', verb: 'get' },
      { group: '', resource: 'configmaps', verb: 'get' },
    ]) {
      expect(await allowed('tributary-engine', attributes)).toBe(false);
    }
  });
});
