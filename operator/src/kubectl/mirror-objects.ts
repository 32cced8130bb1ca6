// The writes `pause` and `resume` make to a Mirror: the desired state in its
// spec, and the removal of its failure mark in its status. Each patch carries
// the resourceVersion that was read, so a change made meanwhile is refused
// (409) rather than overwritten.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { group, version } from '../crds/api-group.ts';
import { ask } from './api-call.ts';
import type { Cluster } from './cluster.ts';
import type { MirrorObject } from './mirror-view.ts';

const resource = `mirrors.${group}`;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Sets spec.state, as the /api/v1 interface does for a pause or a resume. */
export async function setMirrorState(
  cluster: Cluster,
  mirror: MirrorObject,
  state: 'Running' | 'Paused',
): Promise<void> {
  const name = mirror.metadata.name ?? '';
  const { namespace } = cluster;
  await ask(cluster, { verb: 'patch', resource, namespace, name }, () =>
    cluster.kubeConfig.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        group,
        version,
        namespace,
        plural: 'mirrors',
        name,
        body: { metadata: { resourceVersion: mirror.metadata.resourceVersion }, spec: { state } },
      },
      mergePatch,
    ),
  );
}

/**
 * Removes status.failedGeneration, the mark that keeps a failed mirror
 * stopped until a person acts: the operator starts its engine again, as after
 * the interface's resume of a failed mirror (KubeStore.requestMirrorRetry).
 */
export async function retryFailedMirror(cluster: Cluster, mirror: MirrorObject): Promise<void> {
  const name = mirror.metadata.name ?? '';
  const { namespace } = cluster;
  await ask(cluster, { verb: 'patch', resource: `${resource}/status`, namespace, name }, () =>
    cluster.kubeConfig.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
      {
        group,
        version,
        namespace,
        plural: 'mirrors',
        name,
        // null removes the field (a merge patch's way).
        body: {
          metadata: { resourceVersion: mirror.metadata.resourceVersion },
          status: { failedGeneration: null },
        },
      },
      mergePatch,
    ),
  );
}
