import { randomBytes } from 'node:crypto';
import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  VersionApi,
  Watch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kube } from '../support/testenv.ts';

// A group of its own per run, so leftovers of an interrupted run never collide.
const suffix = randomBytes(4).toString('hex');
const group = `smoke-${suffix}.tributary.dev`;
const version = 'v1';
const plural = 'widgets';
const namespace = 'default';
const crdName = `${plural}.${group}`;
const roleName = `smoke-widgets-${suffix}`;

interface Widget {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; generation?: number };
  spec: { size: number };
  status?: { phase?: string };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asWidget(value: unknown): Widget {
  if (!isRecord(value) || value.kind !== 'Widget' || !isRecord(value.metadata) || !isRecord(value.spec)) {
    throw new Error(`not a Widget: ${JSON.stringify(value)}`);
  }
  return value as unknown as Widget;
}

function loadConfig(file: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(file);
  return config;
}

/** Polls `probe` every 100 ms until it returns a value other than undefined, for at most `ms`. */
async function eventually<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} did not happen within ${ms} ms`, { cause: lastError });
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The HTTP status a call ends with: 200 on success, the API error's code otherwise. */
async function statusOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (error) {
    if (error instanceof ApiException) return error.code;
    throw error;
  }
}

/** The metav1.Status an API error carries (client-node leaves it as the raw JSON text). */
function statusBody(body: unknown): { reason?: string; message?: string } {
  const parsed: unknown = typeof body === 'string' ? JSON.parse(body) : body;
  if (!isRecord(parsed) || parsed.kind !== 'Status') throw new Error(`not a Status: ${String(body)}`);
  const { reason, message } = parsed;
  return {
    ...(typeof reason === 'string' ? { reason } : {}),
    ...(typeof message === 'string' ? { message } : {}),
  };
}

function widget(name: string, size: number): Widget {
  return { apiVersion: `${group}/${version}`, kind: 'Widget', metadata: { name, namespace }, spec: { size } };
}

const crd: V1CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: crdName },
  spec: {
    group,
    scope: 'Namespaced',
    names: { plural, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [
      {
        name: version,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                required: ['size'],
                properties: { size: { type: 'integer', minimum: 1 } },
              },
              status: { type: 'object', properties: { phase: { type: 'string' } } },
            },
          },
        },
      },
    ],
  },
};

describe('Kubernetes test control plane', () => {
  const admin = loadConfig(kube.adminKubeconfig);
  const restricted = loadConfig(kube.restrictedKubeconfig);
  const extensions = admin.makeApiClient(ApiextensionsV1Api);
  const objects = admin.makeApiClient(CustomObjectsApi);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const restrictedObjects = restricted.makeApiClient(CustomObjectsApi);
  const coordinates = { group, version, namespace, plural };

  beforeAll(async () => {
    await extensions.createCustomResourceDefinition({ body: crd });
    await eventually('CRD Established', 30_000, async () => {
      const current = await extensions.readCustomResourceDefinition({ name: crdName });
      const established = current.status?.conditions?.some(
        (c) => c.type === 'Established' && c.status === 'True',
      );
      return established ? true : undefined;
    });
  });

  afterAll(async () => {
    const ignoreMissing = (call: Promise<unknown>) =>
      statusOf(call).then((code) => {
        if (code !== 200 && code !== 404) throw new Error(`cleanup failed with HTTP ${code}`);
      });
    await ignoreMissing(rbac.deleteNamespacedRoleBinding({ name: roleName, namespace }));
    await ignoreMissing(rbac.deleteNamespacedRole({ name: roleName, namespace }));
    // Deleting the CRD deletes its objects too (apiextensions' own finalizer, no controller-manager needed).
    await ignoreMissing(extensions.deleteCustomResourceDefinition({ name: crdName }));
    await eventually('CRD deleted', 60_000, async () =>
      (await statusOf(extensions.readCustomResourceDefinition({ name: crdName }))) === 404 ? true : undefined,
    );
  });

  it('is a kube-apiserver of a 1.x release', async () => {
    const info = await admin.makeApiClient(VersionApi).getCode();
    expect(info.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
  });

  it('validates custom objects against the CRD schema', async () => {
    const code = await statusOf(
      objects.createNamespacedCustomObject({ ...coordinates, body: widget(`bad-${suffix}`, 0) }),
    );
    expect(code).toBe(422);
  });

  it('streams a status-subresource update to a watch', async () => {
    const name = `watched-${suffix}`;
    const created = asWidget(
      await objects.createNamespacedCustomObject({ ...coordinates, body: widget(name, 3) }),
    );
    expect(created.metadata.generation).toBe(1);

    let stop: AbortController | undefined;
    const seen = new Promise<Widget>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no MODIFIED event within 30 s')), 30_000);
      new Watch(admin)
        .watch(
          `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
          {
            fieldSelector: `metadata.name=${name}`,
            resourceVersion: created.metadata.resourceVersion,
            allowWatchBookmarks: false,
          },
          (phase: string, object: unknown) => {
            const event = asWidget(object);
            if (phase === 'MODIFIED' && event.status?.phase === 'Ready') {
              clearTimeout(timer);
              resolve(event);
            }
          },
          (error: unknown) => {
            if (error) {
              clearTimeout(timer);
              reject(error instanceof Error ? error : new Error(String(error)));
            }
          },
        )
        .then((controller) => {
          stop = controller;
        }, reject);
    });

    try {
      // The watch starts from the creation's resourceVersion, so the update cannot slip past it.
      await objects.patchNamespacedCustomObjectStatus(
        { ...coordinates, name, body: { status: { phase: 'Ready' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const event = await seen;
      expect(event.metadata.name).toBe(name);
      expect(event.spec.size).toBe(3);
      // A status write is not a spec change: the generation stays.
      expect(event.metadata.generation).toBe(1);
    } finally {
      stop?.abort();
    }

    // Through the main resource, status is ignored and spec changes bump the generation.
    const updated = asWidget(
      await objects.patchNamespacedCustomObject(
        { ...coordinates, name, body: { spec: { size: 4 }, status: { phase: 'Ignored' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
    expect(updated.status?.phase).toBe('Ready');
    expect(updated.metadata.generation).toBe(2);
  });

  it('forbids an unbound user until a Role and RoleBinding grant access', async () => {
    const list = () => restrictedObjects.listNamespacedCustomObject(coordinates);
    const create = (name: string) =>
      restrictedObjects.createNamespacedCustomObject({ ...coordinates, body: widget(name, 1) });

    const refused = await list().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ApiException);
    if (!(refused instanceof ApiException)) return;
    expect(refused.code).toBe(403);
    const status = statusBody(refused.body);
    expect(status.reason).toBe('Forbidden');
    expect(status.message).toContain(`User "${kube.restrictedUser}" cannot list resource "${plural}"`);
    expect(await statusOf(create(`denied-${suffix}`))).toBe(403);

    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: roleName, namespace },
        rules: [{ apiGroups: [group], resources: [plural], verbs: ['get', 'list', 'watch', 'create'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: roleName, namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: roleName },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: kube.restrictedUser }],
      },
    });

    // The RBAC authorizer reads roles from an informer cache: allow it to catch up.
    await eventually('restricted list allowed', 30_000, async () =>
      (await statusOf(list())) === 200 ? true : undefined,
    );
    const mine = asWidget(await create(`granted-${suffix}`));
    expect(mine.metadata.name).toBe(`granted-${suffix}`);
    // Only the granted verbs: deleting stays forbidden.
    expect(
      await statusOf(
        restrictedObjects.deleteNamespacedCustomObject({ ...coordinates, name: `granted-${suffix}` }),
      ),
    ).toBe(403);
  });
});
