// Engines as pods: one StatefulSet of at most one replica per mirror, its
// config in a Secret mounted read-only.
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
  type V1StatefulSet,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Catalog } from '../../../engine/src/catalog/catalog.ts';
import type { EngineRunConfig, EngineRuntime } from '../../../engine/src/control/engine-runtime.ts';
import { teardownWithConfig } from '../../../engine/src/control/in-process-runtime.ts';
import { group, version } from '../crds/schemas.ts';
import { kubeObjectName } from '../kube/object-names.ts';
import { engineConfigDocument } from './engine-config-file.ts';

export interface StatefulSetRuntimeOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly image: string;
  readonly catalog: Catalog;
  readonly catalogUrl: string;
  readonly logger: Logger;
  /** ServiceAccount of engine pods: it needs no API access at all. */
  readonly serviceAccountName?: string;
  readonly resources?: { requests: Record<string, string>; limits: Record<string, string> };
}

export const generationAnnotation = 'tributary.dev/generation';
export const mirrorLabel = 'tributary.dev/mirror';
/** Where an engine pod serves Prometheus metrics (the chart's PodMonitor scrapes it by name). */
export const engineMetricsPort = 9090;

/** Named after the Mirror's object name: a mirror's API name may hold `_` (kube/object-names.ts). */
export function engineObjectName(mirror: string): string {
  return `tributary-engine-${kubeObjectName(mirror)}`;
}

export function engineStatefulSet(
  options: Pick<StatefulSetRuntimeOptions, 'image' | 'serviceAccountName' | 'resources' | 'namespace'>,
  mirror: string,
  generation: number,
  owner: { uid: string } | undefined,
): V1StatefulSet {
  const name = engineObjectName(mirror);
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
      annotations: { [generationAnnotation]: String(generation) },
      ...(owner
        ? {
            ownerReferences: [
              {
                apiVersion: `${group}/${version}`,
                kind: 'Mirror',
                name: kubeObjectName(mirror),
                uid: owner.uid,
                controller: true,
                blockOwnerDeletion: true,
              },
            ],
          }
        : {}),
    },
    spec: {
      replicas: 1,
      serviceName: name,
      podManagementPolicy: 'OrderedReady',
      updateStrategy: { type: 'RollingUpdate' },
      selector: { matchLabels: { [mirrorLabel]: kubeObjectName(mirror) } },
      template: {
        metadata: { labels, annotations: { [generationAnnotation]: String(generation) } },
        spec: {
          serviceAccountName: options.serviceAccountName ?? 'tributary-engine',
          automountServiceAccountToken: false,
          // Long enough to finish and acknowledge the batch in flight.
          terminationGracePeriodSeconds: 300,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 1000,
            runAsGroup: 1000,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'engine',
              image: options.image,
              args: [
                'engine',
                'run',
                '--mirror',
                mirror,
                '--config',
                '/etc/tributary/engine.json',
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
              env: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=768' }],
              resources: options.resources ?? {
                requests: { cpu: '250m', memory: '512Mi' },
                limits: { memory: '1Gi' },
              },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [{ name: 'config', mountPath: '/etc/tributary', readOnly: true }],
            },
          ],
          volumes: [{ name: 'config', secret: { secretName: name, defaultMode: 0o400 } }],
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

  async runningGeneration(mirror: string): Promise<number | undefined> {
    try {
      const set = await this.#apps.readNamespacedStatefulSet({
        name: engineObjectName(mirror),
        namespace: this.#options.namespace,
      });
      if ((set.spec?.replicas ?? 0) === 0) return undefined;
      return Number(set.metadata?.annotations?.[generationAnnotation] ?? 0);
    } catch (error) {
      if (notFound(error)) return undefined;
      throw error;
    }
  }

  async start(mirror: string, generation: number, config: EngineRunConfig): Promise<void> {
    const { namespace } = this.#options;
    const name = engineObjectName(mirror);
    const secret = {
      metadata: { name, namespace, labels: { [mirrorLabel]: kubeObjectName(mirror) } },
      type: 'Opaque',
      stringData: { 'engine.json': JSON.stringify(engineConfigDocument(config, this.#options.catalogUrl)) },
    };
    try {
      await this.#core.replaceNamespacedSecret({ name, namespace, body: secret });
    } catch (error) {
      if (!notFound(error)) throw error;
      await this.#core.createNamespacedSecret({ namespace, body: secret });
    }
    const body = engineStatefulSet(this.#options, mirror, generation, undefined);
    try {
      const current = await this.#apps.readNamespacedStatefulSet({ name, namespace });
      body.metadata = { ...body.metadata, resourceVersion: current.metadata?.resourceVersion ?? '' };
      await this.#apps.replaceNamespacedStatefulSet({ name, namespace, body });
    } catch (error) {
      if (!notFound(error)) throw error;
      await this.#apps.createNamespacedStatefulSet({ namespace, body });
    }
    this.#options.logger.info({ mirror, generation }, 'engine statefulset applied');
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

  async teardown(config: EngineRunConfig): Promise<void> {
    await teardownWithConfig(config, this.#options.catalog, this.#options.logger);
    const name = engineObjectName(config.spec.name);
    const { namespace } = this.#options;
    await this.#apps.deleteNamespacedStatefulSet({ name, namespace }).catch((error: unknown) => {
      if (!notFound(error)) throw error;
    });
    await this.#core.deleteNamespacedSecret({ name, namespace }).catch((error: unknown) => {
      if (!notFound(error)) throw error;
    });
  }
}
