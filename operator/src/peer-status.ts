// Checks a Peer's connection and records the outcome in its status: the server
// version and a Ready condition. An Event is recorded when readiness changes,
// not on every periodic re-check, so a peer that stays down does not flood
// `kubectl describe`.
import { checkPeer, describeCheckFailure } from '../../engine/src/connectors/peer-check.ts';
import { splitPeerSecrets } from '../../engine/src/resources/peer.ts';
import { setCondition } from './conditions.ts';
import type { EventRecorder } from './events.ts';
import type { KubeStore } from './kube/kube-store.ts';
import { PeerSecretError, type PeerSecretProblem } from './kube/peer-secret.ts';

export interface PeerCheckOutcome {
  readonly ready: boolean;
}

type Check =
  | { ready: true; version: string }
  | { ready: false; reason: PeerSecretProblem | 'Unreachable'; message: string };

async function check(store: KubeStore, name: string): Promise<Check | undefined> {
  let found: Awaited<ReturnType<KubeStore['getPeer']>>;
  try {
    found = await store.getPeer(name);
  } catch (error) {
    if (error instanceof PeerSecretError) {
      return { ready: false, reason: error.reason, message: error.message };
    }
    throw error;
  }
  if (!found) return undefined;
  try {
    const { version } = await checkPeer(found.peer);
    return { ready: true, version: version ?? '' };
  } catch (error) {
    const secrets = Object.values(splitPeerSecrets(found.peer).secrets);
    return { ready: false, reason: 'Unreachable', message: describeCheckFailure(error, secrets) };
  }
}

/** Checks one peer; undefined when it no longer exists. */
export async function checkAndRecordPeer(
  name: string,
  deps: { store: KubeStore; events: EventRecorder },
): Promise<PeerCheckOutcome | undefined> {
  const { store, events } = deps;
  const outcome = await check(store, name);
  const object = await store.peerObjectStatus(name);
  if (!outcome || !object) return undefined;
  const previous = object.status?.conditions ?? [];
  const wasReady = previous.find((condition) => condition.type === 'Ready');
  const conditions = setCondition(previous, {
    type: 'Ready',
    status: outcome.ready ? 'True' : 'False',
    reason: outcome.ready ? 'Connected' : outcome.reason,
    message: outcome.ready ? 'connected' : outcome.message,
    observedGeneration: object.generation,
  });
  await store.setPeerStatus(name, {
    observedGeneration: object.generation,
    ...(outcome.ready ? { version: outcome.version } : {}),
    lastCheckTime: new Date().toISOString(),
    conditions,
  });
  const target = { kind: 'Peer', name, uid: object.uid } as const;
  if (!outcome.ready && (wasReady?.status !== 'False' || wasReady.message !== outcome.message)) {
    await events.record(
      target,
      'Warning',
      outcome.reason === 'Unreachable' ? 'PeerUnreachable' : outcome.reason,
      outcome.message,
    );
  } else if (outcome.ready && wasReady?.status !== 'True') {
    await events.record(target, 'Normal', 'PeerReady', `connected to ${outcome.version || 'the server'}`);
  }
  return { ready: outcome.ready };
}
