// What the kubelet says about a mirror's engine pod, read as a person would
// from `kubectl describe pod`: a pod that cannot start (image, config), that
// crash-loops or that was OOM-killed is a problem the Mirror's status must show,
// since the engine in it cannot report anything to the catalog.
import { CoreV1Api, type KubeConfig, type V1ContainerStatus, type V1Pod } from '@kubernetes/client-node';
import { mirrorLabel } from './runtime/engine-objects.ts';

export interface EnginePodProblem {
  /** A kubelet reason: CrashLoopBackOff, OOMKilled, ImagePullBackOff, CreateContainerConfigError, ... */
  readonly reason: string;
  /** One line: the pod, the container, the kubelet's message and the container's last termination. */
  readonly message: string;
}

/** Waiting reasons of a container that is not going to run without a change or a restart. */
const stuckWaitingReasons = new Set([
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'PreStartHookError',
  'PostStartHookError',
]);

function lastTermination(status: V1ContainerStatus): string {
  const terminated = status.state?.terminated ?? status.lastState?.terminated;
  if (!terminated) return '';
  const what = `${terminated.reason ?? 'terminated'} (exit code ${terminated.exitCode})`;
  const message = terminated.message?.trim().replace(/\s+/g, ' ');
  return `; last termination: ${what}${message ? `: ${message}` : ''}`;
}

/** The first problem a pod's status shows, or undefined when it runs or is on its way. */
export function enginePodProblem(pod: V1Pod): EnginePodProblem | undefined {
  const name = pod.metadata?.name ?? 'engine pod';
  if (pod.status?.phase === 'Failed') {
    const reason = pod.status.reason ?? 'PodFailed';
    return { reason, message: `pod ${name} failed: ${pod.status.message ?? reason}` };
  }
  const unschedulable = pod.status?.conditions?.find(
    (condition) => condition.type === 'PodScheduled' && condition.reason === 'Unschedulable',
  );
  if (unschedulable) {
    return {
      reason: 'Unschedulable',
      message: `pod ${name} cannot be scheduled: ${unschedulable.message ?? 'no node fits'}`,
    };
  }
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const status of statuses) {
    const waiting = status.state?.waiting;
    const terminated = status.state?.terminated;
    const lastReason = status.lastState?.terminated?.reason;
    if (waiting?.reason && stuckWaitingReasons.has(waiting.reason)) {
      // A crash loop after OOM kills says more as OOMKilled.
      const reason =
        waiting.reason === 'CrashLoopBackOff' && lastReason === 'OOMKilled' ? 'OOMKilled' : waiting.reason;
      const detail = waiting.message ? `: ${waiting.message.trim().replace(/\s+/g, ' ')}` : '';
      return {
        reason,
        message: `pod ${name} container ${status.name} ${waiting.reason}${detail} (restarts: ${status.restartCount})${lastTermination(status)}`,
      };
    }
    if (terminated && terminated.exitCode !== 0) {
      return {
        reason: terminated.reason === 'OOMKilled' ? 'OOMKilled' : 'ContainerTerminated',
        message: `pod ${name} container ${status.name} terminated${lastTermination(status)}`,
      };
    }
  }
  return undefined;
}

/** Reads the engine pods of a mirror (by the label the StatefulSet gives them). */
export class EnginePods {
  readonly #core: CoreV1Api;
  readonly #namespace: string;

  constructor(kubeConfig: KubeConfig, namespace: string) {
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#namespace = namespace;
  }

  async problem(mirror: string): Promise<EnginePodProblem | undefined> {
    const pods = await this.#core.listNamespacedPod({
      namespace: this.#namespace,
      labelSelector: `${mirrorLabel}=${mirror}`,
    });
    for (const pod of pods.items) {
      // A pod on its way out is not the engine's problem any more.
      if (pod.metadata?.deletionTimestamp) continue;
      const problem = enginePodProblem(pod);
      if (problem) return problem;
    }
    return undefined;
  }
}
