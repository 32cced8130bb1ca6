// Notifications of changes to Mirrors, Peers and Scripts, from one informer
// per kind. Only a change a reconcile acts on is forwarded (see
// `reconcileFingerprint`): status writes, the operator's own included, would
// otherwise start another reconcile each.
import { type KubernetesListObject, type KubernetesObject, makeInformer } from '@kubernetes/client-node';
import type { ResourceEvent } from '../../../engine/src/index.ts';
import { group, version } from '../crds/api-group.ts';
import type { NamespaceObjects } from './namespace-objects.ts';
import { apiNameOf } from './object-names.ts';

/**
 * What a reconcile acts on: the spec (by generation), deletion, finalizers, a
 * mirror's failure mark and whether a script has its id. Status writes, including the operator's own, change
 * none of it, so they do not wake the reconcilers up again.
 */
function reconcileFingerprint(object: KubernetesObject): string {
  const { generation, deletionTimestamp, finalizers } = object.metadata ?? {};
  const status = (object as { status?: { failedGeneration?: number | null; id?: number } }).status;
  return JSON.stringify([
    generation,
    deletionTimestamp,
    finalizers,
    status?.failedGeneration ?? null,
    status?.id,
  ]);
}

/** Calls `listener` after every change a reconcile acts on; returns a function that stops it. */
export function watchResources(kube: NamespaceObjects, listener: (event: ResourceEvent) => void): () => void {
  const kinds = { mirrors: 'mirror', peers: 'peer', scripts: 'script' } as const;
  const informers = (['mirrors', 'peers', 'scripts'] as const).map((plural) => {
    const path = `/apis/${group}/${version}/namespaces/${kube.namespace}/${plural}`;
    const informer = makeInformer<KubernetesObject>(
      kube.config,
      path,
      () =>
        kube.objects.listNamespacedCustomObject(kube.at(plural)) as Promise<
          KubernetesListObject<KubernetesObject>
        >,
    );
    const kind = kinds[plural];
    const seen = new Map<string, string>();
    const emit = (object: KubernetesObject) => listener({ kind, name: apiNameOf(object.metadata ?? {}) });
    const emitIfChanged = (object: KubernetesObject) => {
      const name = object.metadata?.name ?? '';
      const fingerprint = reconcileFingerprint(object);
      if (seen.get(name) === fingerprint) return;
      seen.set(name, fingerprint);
      emit(object);
    };
    informer.on('add', emitIfChanged);
    informer.on('update', emitIfChanged);
    informer.on('delete', (object) => {
      seen.delete(object.metadata?.name ?? '');
      emit(object);
    });
    // The informer reconnects by itself after an error.
    informer.on('error', () => setTimeout(() => void informer.start(), 1_000));
    void informer.start();
    return informer;
  });
  return () => {
    for (const informer of informers) void informer.stop();
  };
}
