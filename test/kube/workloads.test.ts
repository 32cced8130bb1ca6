// The real engine runtime's workload objects, created on the apiserver and read
// back field by field (no kubelet runs here, so no pod starts), and the
// examples validated by the CRDs.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, KubernetesObjectApi, loadAllYaml } from '@kubernetes/client-node';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Catalog } from '../../engine/src/catalog/catalog.ts';
import { mirrorSpecSchema } from '../../engine/src/resources/mirror.ts';
import { StatefulSetEngineRuntime } from '../../operator/src/runtime/statefulset-runtime.ts';
import { adminConfig, createNamespace, installCrds } from '../support/kube.ts';
import { readableByContainer, secretFiles } from '../support/pod-files.ts';
import { repoRoot } from '../support/testenv.ts';

describe('engine workloads on Kubernetes', () => {
  const config = adminConfig();
  let namespace = '';

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('work');
  });

  it('runs a mirror as a one-replica StatefulSet with its config in a read-only Secret', async () => {
    const runtime = new StatefulSetEngineRuntime({
      kubeConfig: config,
      namespace,
      image: 'registry.example/tributary:1.2.3',
      catalog: {} as Catalog,
      catalogUrl: 'postgres://catalog',
      logger: pino({ level: 'silent' }),
    });
    const spec = mirrorSpecSchema.parse({
      name: 'orders',
      sourcePeer: 's',
      destinationPeer: 'd',
      tableMappings: [
        { source: { schema: 'public', table: 'o' }, destination: { schema: 'public', table: 'o' } },
      ],
      doInitialSnapshot: true,
    });
    const peer = { host: 'db', port: 5432, user: 'u', password: 'top-secret', database: 'x' };
    await runtime.start('orders', 3, {
      spec,
      source: peer,
      destination: { name: 'd', kind: 'relational', config: peer },
    });
    const set = await config
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace });
    expect(set.spec?.replicas).toBe(1);
    expect(set.metadata?.annotations?.['tributary.dev/generation']).toBe('3');
    const pod = set.spec?.template.spec;
    expect(pod?.serviceAccountName).toBe('tributary-engine');
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.securityContext?.runAsNonRoot).toBe(true);
    const container = pod?.containers[0];
    expect(container?.image).toBe('registry.example/tributary:1.2.3');
    expect(container?.args).toEqual([
      'engine',
      'run',
      '--mirror',
      'orders',
      '--config',
      '/etc/tributary/engine.json',
      '--metrics-port',
      '9090',
    ]);
    expect(container?.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(container?.livenessProbe).toMatchObject({
      httpGet: { path: '/healthz', port: 'metrics' },
      periodSeconds: 30,
      failureThreshold: 5,
    });
    expect(set.spec?.template.metadata?.labels).toMatchObject({
      'app.kubernetes.io/name': 'tributary-engine',
    });
    expect(container?.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
    // No secret in arguments or environment: only in the mounted Secret.
    expect(JSON.stringify(set)).not.toContain('top-secret');
    expect(pod?.volumes?.[0]?.secret).toMatchObject({
      secretName: 'tributary-engine-orders',
      defaultMode: 0o440,
    });
    // As a kubelet writes it: root-owned, group fsGroup, readable by the engine's uid 1000.
    if (!pod || !container) throw new Error('no pod template');
    const files = secretFiles(pod, container, ['engine.json']);
    expect(files.map((file) => file.path)).toEqual(['/etc/tributary/engine.json']);
    expect(pod.securityContext).toMatchObject({ runAsUser: 1000, fsGroup: 1000 });
    for (const file of files) {
      expect(file.mode & 0o040).not.toBe(0);
      expect(file.mode & 0o004).toBe(0);
      expect(readableByContainer(pod, container, file)).toBe(true);
    }
    const secret = await config
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: 'tributary-engine-orders', namespace });
    const document = JSON.parse(Buffer.from(secret.data?.['engine.json'] ?? '', 'base64').toString());
    expect(document).toMatchObject({ mirror: { name: 'orders' }, catalog: { url: 'postgres://catalog' } });
    expect(await runtime.runningGeneration('orders')).toBe(3);

    await runtime.stop('orders');
    expect(await runtime.runningGeneration('orders')).toBeUndefined();
    const stopped = await config
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace });
    expect(stopped.spec?.replicas).toBe(0);
  });

  it('accepts every example resource', async () => {
    const objects = KubernetesObjectApi.makeApiClient(config);
    const directory = join(repoRoot, 'examples');
    for (const file of readdirSync(directory).filter(
      (name) => name.endsWith('.yaml') && name !== 'kustomization.yaml',
    )) {
      for (const manifest of loadAllYaml(readFileSync(join(directory, file), 'utf8'))) {
        manifest.metadata.namespace = namespace;
        await objects.create(manifest);
      }
    }
    const mirror = (await objects.read({
      apiVersion: 'tributary.dev/v1alpha1',
      kind: 'Mirror',
      metadata: { name: 'shop-to-analytics', namespace },
    })) as unknown as { spec: { state: string } };
    expect(mirror.spec.state).toBe('Running');
  });
});
