// A peer's secrets in cluster mode: the facade writes them to a Secret of its
// own (`tributary-peer-<object name>`), and every reader joins a Peer object
// with the Secret it names (its own, or one a user labelled for it:
// peer-secret.ts says which keys are taken and when a Secret may be read).
import type { V1Secret } from '@kubernetes/client-node';
import { ZodError } from 'zod';
import { joinPeerSecrets, type Peer, type PeerResource } from '../../../engine/src/index.ts';
import {
  conflictRetries,
  isStatus,
  managedByLabel,
  type NamespaceObjects,
  type PeerObject,
} from './namespace-objects.ts';
import { apiNameOf, kubeObjectName } from './object-names.ts';
import {
  invalidPeerMessage,
  ownPeerSecretName,
  PeerSecretError,
  peerSecretLabel,
  peerSecretMissing,
  peerSecretPeersAnnotation,
  peerSecretsFromSecret,
} from './peer-secret.ts';

/** The Secret the facade keeps a peer's secrets in. */
export function peerSecretName(peer: string): string {
  return ownPeerSecretName(kubeObjectName(peer));
}

export class PeerSecretStore {
  readonly #kube: NamespaceObjects;

  constructor(kube: NamespaceObjects) {
    this.#kube = kube;
  }

  /** Writes the peer's secrets (by dotted path) to its Secret; returns the Secret's name. */
  async write(peer: string, secrets: Readonly<Record<string, string>>): Promise<string> {
    const { core, namespace } = this.#kube;
    const name = peerSecretName(peer);
    const secret: V1Secret = {
      metadata: {
        name,
        namespace,
        labels: { ...managedByLabel, [peerSecretLabel]: 'true' },
        // Bound to its own Peer only (peer-secret.ts).
        annotations: { [peerSecretPeersAnnotation]: kubeObjectName(peer) },
      },
      type: 'Opaque',
      stringData: { ...secrets },
    };
    // Replace, or create when missing; a concurrent first write of the same peer
    // may create it in between (409), and then the replace is tried again.
    for (let attempt = 1; ; attempt++) {
      try {
        await core.replaceNamespacedSecret({ name, namespace, body: secret });
        return name;
      } catch (error) {
        if (!isStatus(error, 404)) throw error;
      }
      try {
        await core.createNamespacedSecret({ namespace, body: secret });
        return name;
      } catch (error) {
        if (!isStatus(error, 409) || attempt >= conflictRetries) throw error;
      }
    }
  }

  /**
   * The peer a Peer object describes, with the secrets of the Secret it
   * names; throws PeerSecretError when that Secret is missing, not labelled
   * for peers, not bound to this Peer, or lacks what the peer's kind requires.
   */
  async peerOf(object: PeerObject): Promise<PeerResource> {
    const { kind, secretRef } = object.spec;
    const name = apiNameOf(object.metadata);
    const { core, namespace } = this.#kube;
    const secret = await core
      .readNamespacedSecret({ name: secretRef.name, namespace })
      .catch((error: unknown) => {
        throw isStatus(error, 404) ? peerSecretMissing(name, secretRef.name, namespace) : error;
      });
    const secrets = peerSecretsFromSecret(
      { name, objectName: object.metadata.name },
      kind,
      secretRef,
      secret,
    );
    const config = (object.spec[kind] ?? {}) as Record<string, unknown>;
    let peer: Peer;
    try {
      peer = joinPeerSecrets({ name, kind, config, secrets });
    } catch (error) {
      if (!(error instanceof ZodError)) throw error;
      throw new PeerSecretError(
        'SecretInvalid',
        name,
        secretRef.name,
        invalidPeerMessage(kind, secretRef.name, error),
      );
    }
    return {
      peer,
      version: object.status?.version ?? null,
      createdAt: new Date(object.metadata.creationTimestamp ?? 0),
    };
  }
}
