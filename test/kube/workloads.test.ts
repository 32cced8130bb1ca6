// The real engine runtime's workload objects, created on the apiserver and read
// back field by field (no kubelet runs here, so no pod starts), and the
// examples validated by the CRDs.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  loadAllYaml,
} from '@kubernetes/client-node';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Catalog, mirrorSpecSchema } from '../../engine/src/index.ts';
import { group, version } from '../../operator/src/crds/schemas.ts';
import { StatefulSetEngineRuntime } from '../../operator/src/runtime/statefulset-runtime.ts';
import { adminConfig, createNamespace, installCrds, statusOf } from '../support/kube.ts';
import { readableByContainer, secretFiles } from '../support/pod-files.ts';
import { repoRoot } from '../support/testenv.ts';

describe('engine workloads on Kubernetes', () => {
  const config = adminConfig();
  let namespace = '';

  beforeAll(async () => {
    await installCrds(config);
    namespace = await createNamespace('work');
  });

  const mirrorSpec = mirrorSpecSchema.parse({
    name: 'orders',
    sourcePeer: 's',
    destinationPeer: 'd',
    tableMappings: [
      { source: { schema: 'public', table: 'o' }, destination: { schema: 'public', table: 'o' } },
    ],
    doInitialSnapshot: true,
  });
  const peer = { host: 'db', port: 5432, user: 'u', password: 'top-secret', database: 'x' };
  const runConfig = (password: string) => ({
    spec: mirrorSpec,
    source: { ...peer, password },
    destination: { name: 'd', kind: 'relational' as const, config: peer },
  });
  const runtimeIn = (ns: string) =>
    new StatefulSetEngineRuntime({
      kubeConfig: config,
      namespace: ns,
      image: 'registry.example/tributary:1.2.3',
      catalog: {} as Catalog,
      catalogUrl: 'postgres://catalog',
      logger: pino({ level: 'silent' }),
    });
  /** A Mirror object to own the engine's objects (nothing reconciles it here). */
  const createMirror = async (ns: string, name: string): Promise<string> => {
    const created = (await config.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: 'mirrors',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        metadata: { name },
        spec: {
          sourcePeer: 's',
          destinationPeer: 'd',
          tableMappings: mirrorSpec.tableMappings,
          doInitialSnapshot: true,
        },
      },
    })) as { metadata: { uid: string } };
    return created.metadata.uid;
  };

  it('runs a mirror as a one-replica StatefulSet with its config in a read-only Secret', async () => {
    const runtime = runtimeIn(namespace);
    const uid = await createMirror(namespace, 'orders');
    await runtime.start({ name: 'orders', uid, generation: 3 }, runConfig('top-secret'));
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
    expect(await runtime.running('orders')).toMatchObject({ generation: 3 });

    await runtime.stop('orders');
    expect(await runtime.running('orders')).toBeUndefined();
    const stopped = await config
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace });
    expect(stopped.spec?.replicas).toBe(0);
  });

  it('makes the Mirror the controlling owner of its StatefulSet and Secret', async () => {
    const ns = await createNamespace('owned');
    const runtime = runtimeIn(ns);
    const uid = await createMirror(ns, 'orders');
    await runtime.start({ name: 'orders', uid, generation: 1 }, runConfig('p1'));
    const expected = [
      {
        apiVersion: `${group}/${version}`,
        kind: 'Mirror',
        name: 'orders',
        uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    const set = await config
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace: ns });
    const secret = await config
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: 'tributary-engine-orders', namespace: ns });
    expect(set.metadata?.ownerReferences).toEqual(expected);
    expect(secret.metadata?.ownerReferences).toEqual(expected);
  });

  it('keeps the engine Secret through a deletion until the teardown is done with it', async () => {
    const ns = await createNamespace('keep');
    const runtime = runtimeIn(ns);
    const uid = await createMirror(ns, 'orders');
    await runtime.start({ name: 'orders', uid, generation: 1 }, runConfig('p1'));
    const core = config.makeApiClient(CoreV1Api);
    // What a foreground deletion of the Mirror (or a prune) does to its dependents.
    await core.deleteNamespacedSecret({ name: 'tributary-engine-orders', namespace: ns });
    const kept = await core.readNamespacedSecret({ name: 'tributary-engine-orders', namespace: ns });
    expect(kept.metadata?.deletionTimestamp).toBeDefined();
    const last = await runtime.lastConfig('orders');
    expect(last?.source.password).toBe('p1');
    expect(last?.spec.name).toBe('orders');
    await runtime.forget('orders');
    expect(
      (await statusOf(core.readNamespacedSecret({ name: 'tributary-engine-orders', namespace: ns }))).code,
    ).toBe(404);
    expect(
      (
        await statusOf(
          config
            .makeApiClient(AppsV1Api)
            .readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace: ns }),
        )
      ).code,
    ).toBe(404);
    expect(await runtime.lastConfig('orders')).toBeUndefined();
  });

  it('rolls the pod when the engine config changes: config-hash annotation and Secret content', async () => {
    const ns = await createNamespace('hash');
    const runtime = runtimeIn(ns);
    const uid = await createMirror(ns, 'orders');
    const target = { name: 'orders', uid, generation: 1 };
    await runtime.start(target, runConfig('p1'));
    const apps = config.makeApiClient(AppsV1Api);
    const read = () => apps.readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace: ns });
    const before = await read();
    const beforeHash = before.spec?.template.metadata?.annotations?.['tributary.dev/config-hash'];
    expect(beforeHash).toMatch(/^[0-9a-f]{16}$/);
    expect((await runtime.running('orders'))?.configHash).toBe(runtime.configHash(target, runConfig('p1')));
    expect(runtime.configHash(target, runConfig('p2'))).not.toBe(runtime.configHash(target, runConfig('p1')));

    await runtime.start(target, runConfig('p2'));
    const after = await read();
    expect(after.spec?.template.metadata?.annotations?.['tributary.dev/config-hash']).not.toBe(beforeHash);
    expect((await runtime.running('orders'))?.configHash).toBe(runtime.configHash(target, runConfig('p2')));
    const secret = await config
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: 'tributary-engine-orders', namespace: ns });
    const document = JSON.parse(Buffer.from(secret.data?.['engine.json'] ?? '', 'base64').toString());
    expect(document.source.password).toBe('p2');
  });

  it('applies its objects server-side: what other tools set on them stays, what the operator sets is its own', async () => {
    const ns = await createNamespace('apply');
    const runtime = runtimeIn(ns);
    const uid = await createMirror(ns, 'orders');
    const target = { name: 'orders', uid, generation: 1 };
    await runtime.start(target, runConfig('p1'));
    const apps = config.makeApiClient(AppsV1Api);
    const core = config.makeApiClient(CoreV1Api);
    const name = 'tributary-engine-orders';
    // Another tool's annotation on each object, and a change to a field the operator owns.
    for (const patch of [
      () =>
        apps.patchNamespacedStatefulSet({
          name,
          namespace: ns,
          body: [
            { op: 'add', path: '/metadata/annotations/other.example~1keep', value: 'yes' },
            { op: 'replace', path: '/spec/template/spec/terminationGracePeriodSeconds', value: 7 },
          ],
        }),
      () =>
        core.patchNamespacedSecret({
          name,
          namespace: ns,
          body: [{ op: 'add', path: '/metadata/annotations', value: { 'other.example/keep': 'yes' } }],
        }),
    ])
      await patch();
    const grace = (await apps.readNamespacedStatefulSet({ name, namespace: ns })).spec?.template.spec
      ?.terminationGracePeriodSeconds;
    expect(grace).toBe(7);

    await runtime.start(target, runConfig('p2'));
    const set = await apps.readNamespacedStatefulSet({ name, namespace: ns });
    expect(set.metadata?.annotations?.['other.example/keep']).toBe('yes');
    expect(set.spec?.template.spec?.terminationGracePeriodSeconds).not.toBe(7);
    expect(set.metadata?.managedFields?.map((entry) => entry.manager)).toContain('tributary-operator');
    const secret = await core.readNamespacedSecret({ name, namespace: ns });
    expect(secret.metadata?.annotations?.['other.example/keep']).toBe('yes');
    const document = JSON.parse(Buffer.from(secret.data?.['engine.json'] ?? '', 'base64').toString());
    expect(document.source.password).toBe('p2');
    expect(secret.metadata?.finalizers).toContain('tributary.dev/teardown');
  });

  it("builds the pod from the operator's pod settings with a Mirror's spec.engine over them", async () => {
    const ns = await createNamespace('podset');
    const runtime = new StatefulSetEngineRuntime({
      kubeConfig: config,
      namespace: ns,
      image: 'registry.example/tributary:1.2.3',
      catalog: {} as Catalog,
      catalogUrl: 'postgres://catalog',
      logger: pino({ level: 'silent' }),
      pod: {
        resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
        nodeSelector: { disk: 'ssd' },
        priorityClassName: 'low',
        imagePullSecrets: [{ name: 'regcred' }],
        labels: { team: 'data' },
      },
    });
    const uid = await createMirror(ns, 'orders');
    const spec = mirrorSpecSchema.parse({
      ...mirrorSpec,
      engine: {
        resources: { requests: { cpu: '1', memory: '2Gi' }, limits: { memory: '4Gi' } },
        priorityClassName: 'replication',
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'cdc', effect: 'NoSchedule' }],
        affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } },
        labels: { tier: 'gold', 'tributary.dev/mirror': 'not-this' },
        annotations: { 'example.com/owner': 'data' },
      },
    });
    await runtime.start({ name: 'orders', uid, generation: 1 }, { ...runConfig('p1'), spec });
    const set = await config
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: 'tributary-engine-orders', namespace: ns });
    const template = set.spec?.template;
    const pod = template?.spec;
    expect(pod?.containers[0]?.resources).toEqual({
      requests: { cpu: '1', memory: '2Gi' },
      limits: { memory: '4Gi' },
    });
    expect(pod?.containers[0]?.env).toContainEqual({
      name: 'NODE_OPTIONS',
      value: '--max-old-space-size=3072',
    });
    expect(pod?.nodeSelector).toEqual({ disk: 'ssd' });
    expect(pod?.priorityClassName).toBe('replication');
    expect(pod?.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(pod?.tolerations).toEqual([
      { key: 'dedicated', operator: 'Equal', value: 'cdc', effect: 'NoSchedule' },
    ]);
    expect(pod?.affinity?.nodeAffinity).toBeDefined();
    // The user's labels merge; the operator's own (the selector's) win.
    expect(template?.metadata?.labels).toMatchObject({
      team: 'data',
      tier: 'gold',
      'tributary.dev/mirror': 'orders',
    });
    expect(template?.metadata?.annotations).toMatchObject({ 'example.com/owner': 'data' });
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
