// Reads of Tributary's custom resources (Mirror, Peer, Script) in the
// cluster's namespace or in every namespace. A resource is named by its object
// name or by its /api/v1 name (kube/object-names.ts maps one to the other; an
// object name maps to itself).
import { CustomObjectsApi } from '@kubernetes/client-node';
import { group, version } from '../crds/api-group.ts';
import { kubeObjectName } from '../kube/object-names.ts';
import { ask } from './api-call.ts';
import type { Cluster } from './cluster.ts';

export const kinds = { mirrors: 'mirror', peers: 'peer', scripts: 'script' } as const;
export type Plural = keyof typeof kinds;

/** What every custom object has, as far as the plugin reads it without its kind's fields. */
export interface ResourceObject {
  readonly metadata: { readonly name?: string; readonly namespace?: string };
}

function objects(cluster: Cluster): CustomObjectsApi {
  return cluster.kubeConfig.makeApiClient(CustomObjectsApi);
}

const byPlace = (a: ResourceObject, b: ResourceObject) =>
  `${a.metadata.namespace}/${a.metadata.name}` < `${b.metadata.namespace}/${b.metadata.name}` ? -1 : 1;

export async function readResource<T extends ResourceObject>(
  cluster: Cluster,
  plural: Plural,
  name: string,
): Promise<T> {
  const { namespace } = cluster;
  const objectName = kubeObjectName(name);
  const request = {
    verb: 'get',
    resource: `${plural}.${group}`,
    namespace,
    name: objectName,
    notFound: `no ${kinds[plural]} ${JSON.stringify(name)} in namespace ${namespace}`,
  };
  return (await ask(cluster, request, () =>
    objects(cluster).getNamespacedCustomObject({ group, version, namespace, plural, name: objectName }),
  )) as T;
}

/** The objects of the cluster's namespace, or of every namespace; by namespace and name. */
export async function listResources<T extends ResourceObject>(
  cluster: Cluster,
  plural: Plural,
  allNamespaces = false,
): Promise<T[]> {
  const namespace = allNamespaces ? undefined : cluster.namespace;
  const list = (await ask(cluster, { verb: 'list', resource: `${plural}.${group}`, namespace }, () =>
    namespace === undefined
      ? objects(cluster).listClusterCustomObject({ group, version, plural })
      : objects(cluster).listNamespacedCustomObject({ group, version, namespace, plural }),
  )) as { items?: T[] };
  return [...(list.items ?? [])].sort(byPlace);
}
