// The Peer controller: checks a peer's connection and records the outcome in
// its status (the server version and a Ready condition). An Event is recorded
// when readiness changes, not on every periodic re-check, so a peer that stays
// down does not flood `kubectl describe`.
import { checkPeer, describeCheckFailure, splitPeerSecrets } from '../../../engine/src/index.ts';
import { type Condition, setCondition } from '../conditions.ts';
import type { EventRecorder } from '../events.ts';
import { PeerSecretError, type PeerSecretProblem } from '../kube/peer-secret.ts';
import type { PeerSnapshot, ReconcileStore } from '../kube/reconcile-store.ts';
import type { Controller, Requeue } from './controller.ts';

export interface PeerControllerOptions {
  readonly objects: ReconcileStore;
  readonly events: EventRecorder;
}

/** How often a ready peer is checked again. */
const peerRecheckMs = 5 * 60_000;
// A peer that is down is looked at more often, so it turns Ready soon after it is fixed.
const unreadyPeerRecheckMs = 30_000;

export type PeerCheck =
  | { readonly ready: true; readonly version: string }
  | { readonly ready: false; readonly reason: PeerSecretProblem | 'Unreachable'; readonly message: string };

export class PeerController implements Controller<PeerSnapshot, PeerCheck> {
  readonly #options: PeerControllerOptions;

  constructor(options: PeerControllerOptions) {
    this.#options = options;
  }

  fetch(name: string): Promise<PeerSnapshot | undefined> {
    return this.#options.objects.readPeer(name);
  }

  // Nothing is kept for a peer; no finalizer. No short-circuit on the
  // generation either: a peer is checked again at an interval, and at once
  // when its spec changes.
  async notFound(): Promise<void> {}

  async act(object: PeerSnapshot): Promise<PeerCheck> {
    const { peer } = object;
    if (peer instanceof PeerSecretError) return { ready: false, reason: peer.reason, message: peer.message };
    try {
      const { version } = await checkPeer(peer.peer);
      return { ready: true, version: version ?? '' };
    } catch (error) {
      const secrets = Object.values(splitPeerSecrets(peer.peer).secrets);
      return { ready: false, reason: 'Unreachable', message: describeCheckFailure(error, secrets) };
    }
  }

  async conditions(object: PeerSnapshot, outcome: PeerCheck): Promise<void> {
    const { objects, events } = this.#options;
    const conditionsOf = (status: unknown): Condition[] =>
      (status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
    const written = await objects.writePeerStatus(object, (status) => ({
      observedGeneration: object.generation,
      ...(outcome.ready ? { version: outcome.version } : {}),
      lastCheckTime: new Date().toISOString(),
      conditions: setCondition(conditionsOf(status), {
        type: 'Ready',
        status: outcome.ready ? 'True' : 'False',
        reason: outcome.ready ? 'Connected' : outcome.reason,
        message: outcome.ready ? 'connected' : outcome.message,
        observedGeneration: object.generation,
      }),
    }));
    if (!written) return;
    const wasReady = conditionsOf(object.status).find((condition) => condition.type === 'Ready');
    const target = { kind: 'Peer', name: object.name, uid: object.uid } as const;
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
  }

  requeue(_object: PeerSnapshot, outcome: PeerCheck): Requeue {
    return { requeueAfterMs: outcome.ready ? peerRecheckMs : unreadyPeerRecheckMs };
  }
}
