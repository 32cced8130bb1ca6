// Cluster mode keeps a mirror's, peer's or script's API name as its identity
// and stores the resource on an object whose Kubernetes name is derived from
// it. Kubernetes object names are DNS labels here (lower-case letters, digits
// and `-`, alphanumeric at both ends), the API's names also take `_` and a
// leading `_` (resources/names.ts). The mapping:
//
// - a name that is already a DNS label is its own object name, so an object
//   created with kubectl has its object name as API name;
// - any other name: `_` becomes `-`, `-` at either end is dropped, and a `-`
//   and 8 hex digits of the name's SHA-256 are appended (`pg_to_ch` →
//   `pg-to-ch-<hash>`), so `pg_to_ch` and `pg-to-ch` stay two objects.
//
// The API name is kept on the object in an annotation and shown by
// `kubectl get`. The store checks it on every read and write, so even two API
// names whose object names coincide never overwrite each other: the second
// one is refused.
import { createHash } from 'node:crypto';

/** Where the object keeps its API name; absent on objects created with kubectl. */
export const apiNameAnnotation = 'tributary.dev/name';

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const maxObjectName = 63;
const hashLength = 8;

export function isDnsLabel(name: string): boolean {
  return name.length <= maxObjectName && dnsLabel.test(name);
}

/** The Kubernetes object name of the resource with API name `apiName`: deterministic, see above. */
export function kubeObjectName(apiName: string): string {
  if (isDnsLabel(apiName)) return apiName;
  const hash = createHash('sha256').update(apiName).digest('hex').slice(0, hashLength);
  const base = apiName
    .replace(/_/g, '-')
    .replace(/[^a-z0-9-]/g, '')
    .replace(/^-+/, '')
    .slice(0, maxObjectName - hashLength - 1)
    .replace(/-+$/, '');
  return base ? `${base}-${hash}` : `n-${hash}`;
}

/** The API name of an object: its annotation, or its object name when it has none. */
export function apiNameOf(metadata: {
  readonly name?: string | undefined;
  readonly annotations?: Readonly<Record<string, string>> | undefined;
}): string {
  return metadata.annotations?.[apiNameAnnotation] ?? metadata.name ?? '';
}
