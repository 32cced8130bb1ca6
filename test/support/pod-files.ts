// Who can read a file a kubelet writes into a Secret volume, from the pod spec
// alone: the kubelet's rules, so a test of a rendered pod catches a Secret its
// own container cannot open (the EACCES a real node shows).
//
// The kubelet writes Secret files owned by root (uid 0). With a pod
// `securityContext.fsGroup` it changes their group to fsGroup and adds group
// read (it ORs 0440 into a read-only volume's modes); without one the group
// stays root (gid 0). The mode is the item's `mode`, else the volume's
// `defaultMode`, else 0644. The container's process runs as runAsUser with
// runAsGroup as primary group and fsGroup plus supplementalGroups as extra
// groups.
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';

export interface SecretFile {
  readonly path: string;
  readonly ownerUid: number;
  readonly groupGid: number;
  readonly mode: number;
}

/** The files of every Secret volume mounted into `container`, keyed by the Secret key they hold. */
export function secretFiles(pod: V1PodSpec, container: V1Container, keys: readonly string[]): SecretFile[] {
  const fsGroup = pod.securityContext?.fsGroup;
  const files: SecretFile[] = [];
  for (const mount of container.volumeMounts ?? []) {
    const secret = pod.volumes?.find((volume) => volume.name === mount.name)?.secret;
    if (!secret) continue;
    const items = secret.items ?? keys.map((key) => ({ key, path: key, mode: undefined }));
    for (const item of items) {
      const declared = item.mode ?? secret.defaultMode ?? 0o644;
      files.push({
        path: `${mount.mountPath}/${item.path}`,
        ownerUid: 0,
        groupGid: fsGroup ?? 0,
        mode: fsGroup === undefined ? declared : declared | 0o440,
      });
    }
  }
  return files;
}

/** Whether the container's process (its user and groups from the pod spec) may read `file`. */
export function readableByContainer(pod: V1PodSpec, container: V1Container, file: SecretFile): boolean {
  const uid = container.securityContext?.runAsUser ?? pod.securityContext?.runAsUser ?? 0;
  if (uid === 0) return true;
  const groups = new Set<number>([
    container.securityContext?.runAsGroup ?? pod.securityContext?.runAsGroup ?? 0,
    ...(pod.securityContext?.fsGroup === undefined ? [] : [pod.securityContext.fsGroup]),
    ...(pod.securityContext?.supplementalGroups ?? []),
  ]);
  if (file.ownerUid === uid) return (file.mode & 0o400) !== 0;
  if (groups.has(file.groupGid)) return (file.mode & 0o040) !== 0;
  return (file.mode & 0o004) !== 0;
}
