// The commands other than `report` (report/report-file.ts): each reads what it
// needs from the cluster and returns the text to print.
import { engineContainerName } from '../runtime/engine-objects.ts';
import type { PluginArguments } from './arguments.ts';
import type { Cluster } from './cluster.ts';
import { retryFailedMirror, setMirrorState } from './mirror-objects.ts';
import { listText, statusText } from './mirror-text.ts';
import { type MirrorObject, mirrorStatusView, mirrorSummary } from './mirror-view.ts';
import { serialized } from './output.ts';
import { PluginError } from './plugin-error.ts';
import { containerLog, enginePods } from './pods.ts';
import { listResources, readResource } from './resources.ts';
import { plannedStateChange } from './state-change.ts';

export async function listCommand(cluster: Cluster, args: PluginArguments): Promise<string> {
  const mirrors = await listResources<MirrorObject>(cluster, 'mirrors', args.allNamespaces);
  const summaries = mirrors.map(mirrorSummary);
  return args.output === 'table'
    ? listText(summaries, args.allNamespaces)
    : serialized({ mirrors: summaries }, args.output);
}

export async function statusCommand(cluster: Cluster, args: PluginArguments, name: string): Promise<string> {
  const view = mirrorStatusView(await readResource<MirrorObject>(cluster, 'mirrors', name));
  return args.output === 'table' ? statusText(view) : serialized(view, args.output);
}

export async function stateCommand(
  cluster: Cluster,
  action: 'pause' | 'resume',
  name: string,
): Promise<string> {
  const mirror = await readResource<MirrorObject>(cluster, 'mirrors', name);
  const change = plannedStateChange(mirror, action);
  if (change.kind === 'spec') await setMirrorState(cluster, mirror, change.state);
  if (change.kind === 'retry') await retryFailedMirror(cluster, mirror);
  return change.said;
}

/**
 * The engine container's log, through the API server (pods/log). The catalog's
 * log entries of the mirror are not here: they are the /api/v1 interface's
 * (`tributary mirrors logs`), which needs its password, not a kubeconfig.
 */
export async function logsCommand(cluster: Cluster, args: PluginArguments, name: string): Promise<string> {
  const mirror = await readResource<MirrorObject>(cluster, 'mirrors', name);
  const objectName = mirror.metadata.name ?? name;
  const pods = (await enginePods(cluster, objectName)).filter((pod) => !pod.metadata?.deletionTimestamp);
  if (pods.length === 0) {
    const why =
      mirror.spec.state === 'Paused' ? 'it is paused' : `phase ${mirror.status?.phase ?? 'not reported yet'}`;
    throw new PluginError(`mirror ${objectName} has no engine pod (${why})`);
  }
  const logs: string[] = [];
  for (const pod of pods) {
    const podName = pod.metadata?.name ?? '';
    const log = await containerLog(cluster, pod, engineContainerName, {
      tailLines: args.tailLines,
      previous: args.previous,
    });
    // During a rollout two pods: say whose lines follow.
    logs.push(pods.length > 1 ? `==> pod/${podName} <==\n${log}` : log);
  }
  return logs.join('\n').replace(/\n$/, '');
}
