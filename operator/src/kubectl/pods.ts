// The pods the plugin reads, all through the API server (no port-forward): a
// mirror's engine pods, found by the label their StatefulSet gives them; the
// operator's, found from the Lease its leader holds; a container's log
// (pods/log) and a pod's Prometheus text (pods/proxy to its `metrics` port).
import { CoordinationV1Api, CoreV1Api, type V1Lease, type V1Pod } from '@kubernetes/client-node';
import { operatorLeaseName } from '../leader-election.ts';
import { mirrorLabel } from '../runtime/engine-objects.ts';
import { ask, askIfExists } from './api-call.ts';
import type { Cluster } from './cluster.ts';
import { PluginError } from './plugin-error.ts';

function core(cluster: Cluster): CoreV1Api {
  return cluster.kubeConfig.makeApiClient(CoreV1Api);
}

const byName = (a: V1Pod, b: V1Pod) => ((a.metadata?.name ?? '') < (b.metadata?.name ?? '') ? -1 : 1);

async function podsSelected(cluster: Cluster, labelSelector: string): Promise<V1Pod[]> {
  const { namespace } = cluster;
  const list = await ask(cluster, { verb: 'list', resource: 'pods', namespace }, () =>
    core(cluster).listNamespacedPod({ namespace, labelSelector }),
  );
  return [...list.items].sort(byName);
}

/** The pods of a mirror's engine StatefulSet (one, or two during a rollout); none while it is paused. */
export function enginePods(cluster: Cluster, mirrorObjectName: string): Promise<V1Pod[]> {
  return podsSelected(cluster, `${mirrorLabel}=${mirrorObjectName}`);
}

/** The operator's Lease in the namespace, or undefined when there is none (no operator has led here). */
export async function operatorLease(cluster: Cluster): Promise<V1Lease | undefined> {
  const { namespace } = cluster;
  const leases = cluster.kubeConfig.makeApiClient(CoordinationV1Api);
  return askIfExists(
    cluster,
    { verb: 'get', resource: 'leases.coordination.k8s.io', namespace, name: operatorLeaseName },
    () => leases.readNamespacedLease({ namespace, name: operatorLeaseName }),
  );
}

/**
 * The operator's pods: the Lease holder's pod and the pods of its Deployment,
 * by the chart's two selector labels (whatever the release named it).
 */
export async function operatorPods(cluster: Cluster, holder: string): Promise<V1Pod[]> {
  const { namespace } = cluster;
  const leader = await ask(cluster, { verb: 'get', resource: 'pods', namespace, name: holder }, () =>
    core(cluster).readNamespacedPod({ namespace, name: holder }),
  );
  const labels = leader.metadata?.labels ?? {};
  const selectorKeys = ['app.kubernetes.io/name', 'app.kubernetes.io/instance'];
  if (!selectorKeys.every((key) => labels[key] !== undefined)) return [leader];
  const selector = selectorKeys.map((key) => `${key}=${labels[key]}`).join(',');
  return podsSelected(cluster, selector);
}

export interface LogChoice {
  readonly tailLines: number;
  /** The log of the container's previous run: the one that crashed. */
  readonly previous: boolean;
}

/**
 * A container's log. A pod on no node has none: the API server answers 204
 * without a body (which client-node cannot parse), so that is said here instead.
 */
export async function containerLog(
  cluster: Cluster,
  pod: V1Pod,
  container: string,
  choice: LogChoice,
): Promise<string> {
  const { namespace } = cluster;
  const name = pod.metadata?.name ?? '';
  if (!pod.spec?.nodeName)
    throw new PluginError(
      `pod ${name} is on no node yet (phase ${pod.status?.phase ?? 'unknown'}): it has no log to read`,
    );
  return ask(cluster, { verb: 'get', resource: 'pods/log', namespace, name }, () =>
    core(cluster).readNamespacedPodLog({
      namespace,
      name,
      container,
      tailLines: choice.tailLines,
      previous: choice.previous,
    }),
  );
}

/** The port a pod's container serves /metrics on: the one named `metrics` (engine and operator pods alike). */
export function metricsPort(pod: V1Pod): number | undefined {
  for (const container of pod.spec?.containers ?? []) {
    const port = container.ports?.find((candidate) => candidate.name === 'metrics');
    if (port) return port.containerPort;
  }
  return undefined;
}

/** GET /metrics of the pod, proxied by the API server. */
export async function podMetrics(cluster: Cluster, pod: string, port: number): Promise<string> {
  const { namespace } = cluster;
  return ask(cluster, { verb: 'get', resource: 'pods/proxy', namespace, name: pod }, () =>
    core(cluster).connectGetNamespacedPodProxyWithPath({
      namespace,
      name: `${pod}:${port}`,
      path: 'metrics',
    }),
  );
}
