// What a mirror names must exist before it can run: its two peers (with their
// secrets) and its script. A missing one is not a failure of the mirror: with
// kubectl or GitOps, objects arrive in any order, so the mirror waits for it.
import type { MirrorResource, PeerResource, ScriptResource } from './resources.ts';
import { PeerSecretsUnavailableError, type ResourceStore } from './store.ts';

export interface MissingDependency {
  readonly reason: 'WaitingForPeer' | 'WaitingForScript';
  readonly message: string;
}

export type Dependencies =
  | {
      readonly ready: true;
      readonly source: PeerResource;
      readonly destination: PeerResource;
      readonly script?: ScriptResource;
    }
  | ({ readonly ready: false } & MissingDependency);

async function peer(
  store: ResourceStore,
  role: 'source' | 'destination',
  name: string,
): Promise<PeerResource | MissingDependency> {
  try {
    const found = await store.getPeer(name);
    return found ?? { reason: 'WaitingForPeer', message: `${role} peer ${name} does not exist yet` };
  } catch (error) {
    if (error instanceof PeerSecretsUnavailableError)
      return { reason: 'WaitingForPeer', message: error.message };
    throw error;
  }
}

const isMissing = (value: PeerResource | MissingDependency): value is MissingDependency => 'reason' in value;

export async function resolveDependencies(
  store: ResourceStore,
  mirror: MirrorResource,
): Promise<Dependencies> {
  const [source, destination] = await Promise.all([
    peer(store, 'source', mirror.spec.sourcePeer),
    peer(store, 'destination', mirror.spec.destinationPeer),
  ]);
  if (isMissing(source)) return { ready: false, ...source };
  if (isMissing(destination)) return { ready: false, ...destination };
  if (!mirror.spec.script) return { ready: true, source, destination };
  const script = await store.getScriptByName(mirror.spec.script);
  if (!script) {
    return {
      ready: false,
      reason: 'WaitingForScript',
      message: `script ${mirror.spec.script} does not exist yet`,
    };
  }
  return { ready: true, source, destination, script };
}
