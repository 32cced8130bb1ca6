// Engines as pods: one StatefulSet of at most one replica per mirror, its
// config in a Secret mounted read-only (mode 0440, group fsGroup 1000).
//
// Why a StatefulSet: its controller creates pod <name>-0 only once the previous
// pod object is gone. On a rollout it deletes the old pod first; when a node is
// lost the old pod object stays until the node is confirmed dead (or the pod is
// force-deleted), so a partitioned engine and its replacement never run at the
// same time. A Deployment would start the replacement at once. The source adds a
// second guard: a logical replication slot accepts one reader at a time.
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Affinity,
  type V1OwnerReference,
  type V1Secret,
  type V1StatefulSet,
  type V1Toleration,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  type Catalog,
  configHash,
  defaultStallAfterMs,
  defaultTemporaryStorageLimit,
  type EnginePodSettings,
  type EngineRunConfig,
  type EngineRuntime,
  type EngineTarget,
  engineConfigSchema,
  engineHeapMegabytes,
  type LogRetention,
  logRetentionDefaults,
  logRetentionVariables,
  mergePodSettings,
  type RunningEngine,
  teardownWithConfig,
} from '../../../engine/src/index.ts';
import { group, version } from '../crds/api-group.ts';

/** The operator's name for the fields it owns (server-side apply). */
const fieldManager = 'tributary-operator';
const serverSideApply = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);

import { kubeObjectName } from '../kube/object-names.ts';
import { engineConfigDocument } from './engine-config-file.ts';
import { engineContainerName, engineMetricsPort, engineObjectName, mirrorLabel } from './engine-objects.ts';

export interface StatefulSetRuntimeOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly image: string;
  readonly catalog: Catalog;
  readonly catalogUrl: string;
  readonly logger: Logger;
  /** ServiceAccount of engine pods: it needs no API access at all. */
  readonly serviceAccountName?: string;
  /** The operator's defaults for every engine pod (chart values); a Mirror's `spec.engine` overrides them. */
  readonly pod?: EnginePodSettings;
  /** The operator's mirror log retention, passed on to engine pods, which write most of the log. */
  readonly logRetention?: LogRetention;
  /** The engine's stall bound (progress-watchdog.ts), passed on when it is not the default. */
  readonly stallAfterMs?: number;
}

export const generationAnnotation = 'tributary.dev/generation';
/** On the pod template: a hash of the engine config document, so any change of it rolls the pod. */
export const configHashAnnotation = 'tributary.dev/config-hash';
/** On the StatefulSet: a hash of everything the runtime rendered, compared on every reconcile. */
export const templateHashAnnotation = 'tributary.dev/template-hash';
/**
 * On the engine Secret: it outlives a foreground deletion of its Mirror (Argo CD
 * prunes that way) until the teardown that needs the source connection in it is done.
 */
export const engineSecretFinalizer = 'tributary.dev/teardown';
const configKey = 'engine.json';
/** Used when neither the operator (chart values) nor the Mirror sets resources. */
export const defaultEngineResources = {
  requests: { cpu: '250m', memory: '512Mi' },
  limits: { memory: '1Gi' },
};

/** The Mirror owns its engine's objects: garbage collection removes them if the Mirror is force-deleted. */
export function mirrorOwnerReference(target: Pick<EngineTarget, 'name' | 'uid'>): V1OwnerReference {
  return {
    apiVersion: `${group}/${version}`,
    kind: 'Mirror',
    name: kubeObjectName(target.name),
    uid: target.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/**
 * The retention as engine pod variables; none where it is the default, so
 * the pods of an installation that keeps the defaults do not roll for it.
 */
function logRetentionEnvironment(retention: LogRetention | undefined): { name: string; value: string }[] {
  if (!retention) return [];
  return (Object.keys(logRetentionVariables) as (keyof LogRetention)[])
    .filter((key) => retention[key] !== logRetentionDefaults[key])
    .map((key) => ({ name: logRetentionVariables[key], value: String(retention[key]) }));
}

/** Where an engine pod writes temporary files: its emptyDir. */
const temporaryDirectory = '/tmp';

export function engineStatefulSet(
  options: Pick<
    StatefulSetRuntimeOptions,
    'image' | 'serviceAccountName' | 'pod' | 'namespace' | 'logRetention' | 'stallAfterMs'
  >,
  target: EngineTarget,
  config: { readonly documentHash: string; readonly pod?: EnginePodSettings | undefined },
): V1StatefulSet {
  const mirror = target.name;
  const name = engineObjectName(mirror);
  const pod = mergePodSettings(options.pod, config.pod);
  const labels = {
    'app.kubernetes.io/name': 'tributary-engine',
    'app.kubernetes.io/managed-by': 'tributary',
    [mirrorLabel]: kubeObjectName(mirror),
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: {
      name,
      namespace: options.namespace,
      labels,
      annotations: { [generationAnnotation]: String(target.generation) },
      ownerReferences: [mirrorOwnerReference(target)],
    },
    spec: {
      replicas: 1,
      serviceName: name,
      podManagementPolicy: 'OrderedReady',
      updateStrategy: { type: 'RollingUpdate' },
      selector: { matchLabels: { [mirrorLabel]: kubeObjectName(mirror) } },
      template: {
        metadata: {
          // The user's labels and annotations first: ours (selector, hashes) win.
          labels: { ...pod.labels, ...labels },
          annotations: {
            ...pod.annotations,
            [generationAnnotation]: String(target.generation),
            [configHashAnnotation]: config.documentHash,
          },
        },
        spec: {
          serviceAccountName: options.serviceAccountName ?? 'tributary-engine',
          automountServiceAccountToken: false,
          // Long enough to finish and acknowledge the batch in flight.
          terminationGracePeriodSeconds: 300,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 1000,
            runAsGroup: 1000,
            // The kubelet makes Secret files group-owned by fsGroup: with mode
            // 0440 the engine (uid 1000, group 1000) can read its config. Without
            // it the file is root:root and the engine exits with EACCES.
            fsGroup: 1000,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          ...(pod.nodeSelector ? { nodeSelector: pod.nodeSelector } : {}),
          // Same shapes as the API's (the zod types only allow explicit undefined fields).
          ...(pod.tolerations ? { tolerations: pod.tolerations as V1Toleration[] } : {}),
          ...(pod.affinity ? { affinity: pod.affinity as V1Affinity } : {}),
          ...(pod.priorityClassName ? { priorityClassName: pod.priorityClassName } : {}),
          ...(pod.imagePullSecrets ? { imagePullSecrets: pod.imagePullSecrets } : {}),
          containers: [
            {
              name: engineContainerName,
              image: options.image,
              args: [
                'engine',
                'run',
                '--mirror',
                mirror,
                '--config',
                `/etc/tributary/${configKey}`,
                '--metrics-port',
                String(engineMetricsPort),
              ],
              ports: [{ name: 'metrics', containerPort: engineMetricsPort, protocol: 'TCP' }],
              // Answered by the event loop that runs the pipeline: an engine stuck
              // for minutes is restarted (safe: the slot holds what is not durable).
              livenessProbe: {
                httpGet: { path: '/healthz', port: 'metrics' },
                initialDelaySeconds: 10,
                periodSeconds: 30,
                timeoutSeconds: 10,
                failureThreshold: 5,
              },
              // The heap follows the memory limit, so the engine hits V8's limit (an
              // error it logs) rather than the kernel's OOM kill.
              env: [
                {
                  name: 'NODE_OPTIONS',
                  value: `--max-old-space-size=${engineHeapMegabytes((pod.resources ?? defaultEngineResources).limits?.memory)}`,
                },
                // Temporary files go to the pod's emptyDir (the root file system is read-only).
                { name: 'TMPDIR', value: temporaryDirectory },
                ...logRetentionEnvironment(options.logRetention),
                ...(options.stallAfterMs !== undefined && options.stallAfterMs !== defaultStallAfterMs
                  ? [{ name: 'TRIBUTARY_STALL_SECONDS', value: String(options.stallAfterMs / 1000) }]
                  : []),
              ],
              resources: pod.resources
                ? {
                    ...(pod.resources.requests ? { requests: pod.resources.requests } : {}),
                    ...(pod.resources.limits ? { limits: pod.resources.limits } : {}),
                  }
                : defaultEngineResources,
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [
                { name: 'config', mountPath: '/etc/tributary', readOnly: true },
                { name: 'tmp', mountPath: temporaryDirectory },
              ],
            },
          ],
          volumes: [
            { name: 'config', secret: { secretName: name, defaultMode: 0o440 } },
            {
              name: 'tmp',
              emptyDir: {
                sizeLimit: pod.temporaryStorage?.sizeLimit ?? defaultTemporaryStorageLimit,
                ...(pod.temporaryStorage?.medium ? { medium: pod.temporaryStorage.medium } : {}),
              },
            },
          ],
        },
      },
    },
  };
}

function notFound(error: unknown): boolean {
  return error instanceof ApiException && error.code === 404;
}

export class StatefulSetEngineRuntime implements EngineRuntime {
  readonly #options: StatefulSetRuntimeOptions;
  readonly #apps: AppsV1Api;
  readonly #core: CoreV1Api;

  constructor(options: StatefulSetRuntimeOptions) {
    this.#options = options;
    this.#apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
  }

  /** The StatefulSet for `config`, with the hash of itself in an annotation. */
  #render(target: EngineTarget, config: EngineRunConfig): V1StatefulSet {
    const document = engineConfigDocument(config, this.#options.catalogUrl);
    const set = engineStatefulSet(this.#options, target, {
      // Keyed with the catalog URL (it holds the catalog's password, which
      // readers of StatefulSets do not have): the annotation is a hash of peer
      // passwords, so it must not be a plain one anyone could test guesses against.
      documentHash: configHash(document, this.#options.catalogUrl),
      pod: config.spec.engine,
    });
    const annotations = { ...set.metadata?.annotations, [templateHashAnnotation]: configHash(set) };
    return { ...set, metadata: { ...set.metadata, annotations } };
  }

  configHash(target: EngineTarget, config: EngineRunConfig): string {
    return this.#render(target, config).metadata?.annotations?.[templateHashAnnotation] ?? '';
  }

  async running(mirror: string): Promise<RunningEngine | undefined> {
    try {
      const set = await this.#apps.readNamespacedStatefulSet({
        name: engineObjectName(mirror),
        namespace: this.#options.namespace,
      });
      if ((set.spec?.replicas ?? 0) === 0) return undefined;
      const annotations = set.metadata?.annotations ?? {};
      return {
        generation: Number(annotations[generationAnnotation] ?? 0),
        configHash: annotations[templateHashAnnotation] ?? '',
      };
    } catch (error) {
      if (notFound(error)) return undefined;
      throw error;
    }
  }

  async start(target: EngineTarget, config: EngineRunConfig): Promise<void> {
    const { namespace } = this.#options;
    const mirror = target.name;
    const name = engineObjectName(mirror);
    const document = JSON.stringify(engineConfigDocument(config, this.#options.catalogUrl));
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace,
        labels: { [mirrorLabel]: kubeObjectName(mirror) },
        ownerReferences: [mirrorOwnerReference(target)],
        finalizers: [engineSecretFinalizer],
      },
      type: 'Opaque',
      // `data`, not `stringData`: stringData is write-only, which server-side apply cannot own.
      data: { [configKey]: Buffer.from(document, 'utf8').toString('base64') },
    };
    // Server-side apply, under the operator's field manager: the fields the
    // operator sets are its own, and fields other tools set on these objects
    // (an annotation, a label of a policy controller) stay. `force` takes
    // back a field someone else changed: the operator's value is the spec's.
    const fields = { fieldManager, force: true };
    await this.#core.patchNamespacedSecret({ name, namespace, body: secret, ...fields }, serverSideApply);
    const body: V1StatefulSet = {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      ...this.#render(target, config),
    };
    await this.#apps.patchNamespacedStatefulSet({ name, namespace, body, ...fields }, serverSideApply);
    this.#options.logger.info({ mirror, generation: target.generation }, 'engine statefulset applied');
  }

  /** Scales to zero; the pod gets SIGTERM and finishes its batch within the grace period. */
  async stop(mirror: string): Promise<void> {
    try {
      await this.#apps.patchNamespacedStatefulSet({
        name: engineObjectName(mirror),
        namespace: this.#options.namespace,
        body: [{ op: 'replace', path: '/spec/replicas', value: 0 }],
      });
    } catch (error) {
      if (!notFound(error)) throw error;
    }
  }

  async lastConfig(mirror: string): Promise<EngineRunConfig | undefined> {
    let secret: V1Secret;
    try {
      secret = await this.#core.readNamespacedSecret({
        name: engineObjectName(mirror),
        namespace: this.#options.namespace,
      });
    } catch (error) {
      if (notFound(error)) return undefined;
      throw error;
    }
    const encoded = secret.data?.[configKey];
    if (!encoded) return undefined;
    const parsed = engineConfigSchema.safeParse(JSON.parse(Buffer.from(encoded, 'base64').toString('utf8')));
    if (!parsed.success) return undefined;
    const { mirror: spec, source, destination, script } = parsed.data;
    return { spec, source, destination, ...(script ? { script } : {}) };
  }

  async teardown(config: EngineRunConfig): Promise<void> {
    await teardownWithConfig(config, this.#options.catalog, this.#options.logger);
    await this.forget(config.spec.name);
  }

  /** Deletes the StatefulSet, then releases and deletes the Secret. */
  async forget(mirror: string): Promise<void> {
    const name = engineObjectName(mirror);
    const { namespace } = this.#options;
    await this.#apps.deleteNamespacedStatefulSet({ name, namespace }).catch((error: unknown) => {
      if (!notFound(error)) throw error;
    });
    try {
      const secret = await this.#core.readNamespacedSecret({ name, namespace });
      const finalizers = secret.metadata?.finalizers ?? [];
      if (finalizers.includes(engineSecretFinalizer)) {
        const index = finalizers.indexOf(engineSecretFinalizer);
        await this.#core.patchNamespacedSecret({
          name,
          namespace,
          body: [
            { op: 'test', path: `/metadata/finalizers/${index}`, value: engineSecretFinalizer },
            { op: 'remove', path: `/metadata/finalizers/${index}` },
          ],
        });
      }
      await this.#core.deleteNamespacedSecret({ name, namespace });
    } catch (error) {
      if (!notFound(error)) throw error;
    }
  }
}
