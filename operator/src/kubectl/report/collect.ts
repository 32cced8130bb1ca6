// What a support bundle holds, gathered with the reader's own permissions:
// each piece the cluster refuses or cannot give (a forbidden Secret, the log
// of a pod that never started, metrics of an unreachable pod) is noted in the
// bundle's README and the rest is collected all the same. Only a named mirror
// that does not exist stops the report: there would be nothing to report on.
import { AppsV1Api, CoreV1Api, type CoreV1Event, type V1Pod } from '@kubernetes/client-node';
import { group } from '../../crds/api-group.ts';
import { kubeObjectName } from '../../kube/object-names.ts';
import { engineObjectName } from '../../runtime/engine-objects.ts';
import { ask, askIfExists } from '../api-call.ts';
import type { Cluster } from '../cluster.ts';
import { statusText } from '../mirror-text.ts';
import { type MirrorObject, mirrorStatusView } from '../mirror-view.ts';
import { textTable } from '../output.ts';
import { PluginError } from '../plugin-error.ts';
import { containerLog, enginePods, metricsPort, operatorLease, operatorPods, podMetrics } from '../pods.ts';
import { listResources, type Plural, type ResourceObject, readResource } from '../resources.ts';
import { ReportBundle } from './bundle.ts';

interface PeerObject extends ResourceObject {
  readonly spec?: { readonly secretRef?: { readonly name?: string } };
}

export interface ReportChoice {
  /** One mirror and what it uses; absent: everything in the namespace. */
  readonly mirror: string | undefined;
  readonly tailLines: number;
}

export interface CollectedReport {
  readonly bundle: ReportBundle;
  readonly mirrors: readonly string[];
}

const nameOf = (object: { readonly metadata?: { readonly name?: string } }) => object.metadata?.name ?? '';

class Collector {
  readonly bundle = new ReportBundle();
  /** `Kind/name` of every object collected: their Events go into the bundle. */
  readonly involved = new Set<string>();
  readonly #cluster: Cluster;
  readonly #tailLines: number;

  constructor(cluster: Cluster, tailLines: number) {
    this.#cluster = cluster;
    this.#tailLines = tailLines;
  }

  /** Runs one step; a refusal or an absence becomes a line of the README. */
  async attempt<T>(what: string, step: () => Promise<T>): Promise<T | undefined> {
    try {
      return await step();
    } catch (error) {
      if (!(error instanceof PluginError)) throw error;
      this.bundle.problem(what, error.message);
      return undefined;
    }
  }

  resources<T extends ResourceObject>(
    plural: Plural,
    names: readonly string[] | undefined,
  ): Promise<(T | undefined)[]> {
    const cluster = this.#cluster;
    if (names === undefined)
      return this.attempt(plural, () => listResources<T>(cluster, plural)).then((all) => all ?? []);
    return Promise.all(
      [...new Set(names)].map((name) =>
        this.attempt(`${plural}/${name}`, () => readResource<T>(cluster, plural, name)),
      ),
    );
  }

  addResource(plural: Plural, kind: string, object: ResourceObject): void {
    this.bundle.addObject(`${plural}/${nameOf(object)}.yaml`, object);
    this.involved.add(`${kind}/${nameOf(object)}`);
  }

  async secret(name: string, usedBy: string): Promise<void> {
    const cluster = this.#cluster;
    const { namespace } = cluster;
    await this.attempt(`secrets/${name}`, async () => {
      const secret = await askIfExists(cluster, { verb: 'get', resource: 'secrets', namespace, name }, () =>
        cluster.kubeConfig.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace, name }),
      );
      if (!secret) throw new PluginError(`does not exist (${usedBy} names it)`);
      this.bundle.addSecret(`secrets/${name}.yaml`, secret);
    });
  }

  /** A pod's object, the log of each of its containers (and of their previous run after a restart), its metrics. */
  async pod(folder: string, pod: V1Pod): Promise<void> {
    const cluster = this.#cluster;
    const name = nameOf(pod);
    this.bundle.addObject(`${folder}/${name}.yaml`, pod);
    this.involved.add(`Pod/${name}`);
    const restarts = new Map(
      (pod.status?.containerStatuses ?? []).map((status) => [status.name, status.restartCount]),
    );
    for (const container of pod.spec?.containers ?? []) {
      const log = await this.attempt(`${folder}/${name}.${container.name}.log`, () =>
        containerLog(cluster, pod, container.name, { tailLines: this.#tailLines, previous: false }),
      );
      if (log !== undefined) this.bundle.addText(`${folder}/${name}.${container.name}.log`, log);
      if ((restarts.get(container.name) ?? 0) > 0) {
        const previous = await this.attempt(`${folder}/${name}.${container.name}.previous.log`, () =>
          containerLog(cluster, pod, container.name, { tailLines: this.#tailLines, previous: true }),
        );
        if (previous !== undefined)
          this.bundle.addText(`${folder}/${name}.${container.name}.previous.log`, previous);
      }
    }
    const port = metricsPort(pod);
    if (port === undefined) return;
    const metrics = await this.attempt(`${folder}/${name}.metrics.txt`, () =>
      podMetrics(cluster, name, port),
    );
    if (metrics !== undefined) this.bundle.addText(`${folder}/${name}.metrics.txt`, metrics);
  }

  async engine(mirror: string): Promise<void> {
    const cluster = this.#cluster;
    const { namespace } = cluster;
    const name = engineObjectName(mirror);
    await this.attempt(`engine/${name}.statefulset.yaml`, async () => {
      const set = await askIfExists(
        cluster,
        { verb: 'get', resource: 'statefulsets.apps', namespace, name },
        () => cluster.kubeConfig.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ namespace, name }),
      );
      if (!set) throw new PluginError('does not exist (the operator has not started this engine)');
      this.bundle.addObject(`engine/${name}.statefulset.yaml`, set);
      this.involved.add(`StatefulSet/${name}`);
    });
    await this.secret(name, `the engine of mirror ${mirror}`);
    const pods = await this.attempt(`engine pods of mirror ${mirror}`, () => enginePods(cluster, mirror));
    if (pods?.length === 0)
      this.bundle.problem(`engine pods of mirror ${mirror}`, 'none (paused, finished, or not started yet)');
    for (const pod of pods ?? []) await this.pod('engine', pod);
  }

  async operator(): Promise<void> {
    const cluster = this.#cluster;
    const lease = await this.attempt('operator', async () => {
      const found = await operatorLease(cluster);
      if (!found)
        throw new PluginError(`no Lease in namespace ${cluster.namespace}: no operator has led here`);
      return found;
    });
    if (lease === undefined) return;
    this.bundle.addObject('operator/lease.yaml', lease);
    const holder = lease.spec?.holderIdentity;
    if (!holder) {
      this.bundle.problem('operator', 'its Lease has no holder: no operator leads now');
      return;
    }
    const pods = await this.attempt(`operator pod ${holder}`, () => operatorPods(cluster, holder));
    for (const pod of pods ?? []) await this.pod('operator', pod);
  }

  async events(everythingTributary: boolean): Promise<void> {
    const cluster = this.#cluster;
    const { namespace } = cluster;
    const list = await this.attempt('events', () =>
      ask(cluster, { verb: 'list', resource: 'events', namespace }, () =>
        cluster.kubeConfig.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace }),
      ),
    );
    if (!list) return;
    const when = (event: CoreV1Event) =>
      new Date(event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp ?? 0).toISOString();
    const events = list.items
      .filter(
        (event) =>
          this.involved.has(`${event.involvedObject.kind}/${event.involvedObject.name}`) ||
          (everythingTributary && (event.involvedObject.apiVersion ?? '').startsWith(`${group}/`)),
      )
      .sort((a, b) => (when(a) < when(b) ? -1 : 1));
    this.bundle.addObject('events.yaml', { items: events });
    this.bundle.addText(
      'events.txt',
      events.length === 0
        ? 'No events.\n'
        : `${textTable([
            ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'COUNT', 'MESSAGE'],
            ...events.map((event) => [
              when(event),
              event.type ?? '',
              event.reason ?? '',
              `${event.involvedObject.kind}/${event.involvedObject.name}`,
              String(event.count ?? 1),
              (event.message ?? '').replace(/\s+/g, ' '),
            ]),
          ])}\n`,
    );
  }
}

export async function collectReport(cluster: Cluster, choice: ReportChoice): Promise<CollectedReport> {
  const collector = new Collector(cluster, choice.tailLines);
  const mirrors: MirrorObject[] =
    choice.mirror === undefined
      ? ((await collector.attempt('mirrors', () => listResources<MirrorObject>(cluster, 'mirrors'))) ?? [])
      : // A mirror that is not there: nothing to report on (and a clear error).
        [await readResource<MirrorObject>(cluster, 'mirrors', choice.mirror)];
  for (const mirror of mirrors) {
    collector.addResource('mirrors', 'Mirror', mirror);
    collector.bundle.addText(
      `mirrors/${nameOf(mirror)}.status.txt`,
      `${statusText(mirrorStatusView(mirror))}\n`,
    );
  }
  const one = choice.mirror === undefined ? undefined : mirrors[0];
  const peers = await collector.resources<PeerObject>(
    'peers',
    one && [kubeObjectName(one.spec.sourcePeer), kubeObjectName(one.spec.destinationPeer)],
  );
  const scripts = await collector.resources<ResourceObject>(
    'scripts',
    one && (one.spec.script ? [kubeObjectName(one.spec.script)] : []),
  );
  for (const peer of peers) if (peer) collector.addResource('peers', 'Peer', peer);
  for (const script of scripts) if (script) collector.addResource('scripts', 'Script', script);
  const peerSecrets = new Map<string, string>();
  for (const peer of peers) {
    const secret = peer?.spec?.secretRef?.name;
    if (peer && secret && !peerSecrets.has(secret)) peerSecrets.set(secret, `peer ${nameOf(peer)}`);
  }
  for (const [secret, usedBy] of peerSecrets) await collector.secret(secret, usedBy);
  for (const mirror of mirrors) await collector.engine(nameOf(mirror));
  await collector.operator();
  await collector.events(choice.mirror === undefined);
  return { bundle: collector.bundle, mirrors: mirrors.map(nameOf) };
}
