// What the operator's controllers read and write (controllers/controller.ts):
// each object as one read saw it, and the writes guarded by that read's
// resourceVersion: status fields, the teardown finalizer, a script's id. A
// write based on a stale read is refused by the API server (409) and redone
// from a fresh read rather than put over another writer's. The facade's store
// (kube-store.ts) is the other side: it never needs this one.
import type { KubeConfig } from '@kubernetes/client-node';
import type { MirrorResource, PeerResource } from '../../../engine/src/index.ts';
import {
  conflictBackoff,
  conflictRetries,
  isStatus,
  type MirrorObject,
  mirrorOf,
  NamespaceObjects,
  type ObjectSnapshot,
  type PeerObject,
  type ScriptObject,
  type StatusFields,
  snapshotOf,
  teardownFinalizer,
} from './namespace-objects.ts';
import { PeerSecretError } from './peer-secret.ts';
import { PeerSecretStore } from './peer-secret-store.ts';
import { ScriptIds, type ScriptSnapshot, scriptSnapshotOf } from './script-ids.ts';
import { mergePatch } from './status-patch.ts';

export type { ObjectSnapshot, StatusFields, StoredStatus } from './namespace-objects.ts';
export type { ScriptSnapshot } from './script-ids.ts';

export interface MirrorSnapshot extends ObjectSnapshot {
  readonly mirror: MirrorResource;
}

export interface PeerSnapshot extends ObjectSnapshot {
  /** The peer with its secrets, or why its Secret cannot give them. */
  readonly peer: PeerResource | PeerSecretError;
}

export class ReconcileStore {
  readonly #kube: NamespaceObjects;
  readonly #secrets: PeerSecretStore;
  readonly #scriptIds: ScriptIds;

  constructor(config: KubeConfig, namespace: string) {
    this.#kube = new NamespaceObjects(config, namespace);
    this.#secrets = new PeerSecretStore(this.#kube);
    this.#scriptIds = new ScriptIds(this.#kube);
  }

  /** The Mirror as one read sees it; undefined when it does not exist. */
  async readMirror(name: string): Promise<MirrorSnapshot | undefined> {
    const object = await this.#kube.get<MirrorObject>('mirrors', name);
    return object ? mirrorSnapshotOf(object) : undefined;
  }

  /**
   * The Peer as one read sees it, with its secrets from its Secret (or why
   * they cannot be had); undefined when it does not exist.
   */
  async readPeer(name: string): Promise<PeerSnapshot | undefined> {
    const object = await this.#kube.get<PeerObject>('peers', name);
    if (!object) return undefined;
    let peer: PeerResource | PeerSecretError;
    try {
      peer = await this.#secrets.peerOf(object);
    } catch (error) {
      if (!(error instanceof PeerSecretError)) throw error;
      peer = error;
    }
    return { ...snapshotOf(object), peer };
  }

  /** The Script as one read sees it; undefined when it does not exist. */
  async readScript(name: string): Promise<ScriptSnapshot | undefined> {
    const object = await this.#kube.get<ScriptObject>('scripts', name);
    return object ? scriptSnapshotOf(object) : undefined;
  }

  /**
   * Mirrors applied with kubectl lack the teardown finalizer until the
   * operator adds it: added to the snapshot's version (409: read again and
   * decide again); returns the object as it now stands.
   */
  async addMirrorFinalizer(snapshot: MirrorSnapshot): Promise<MirrorSnapshot | undefined> {
    let current: MirrorSnapshot | undefined = snapshot;
    for (let attempt = 1; current; attempt++) {
      if (current.deleting || current.finalizers.includes(teardownFinalizer)) return current;
      try {
        const patched = (await this.#kube.objects.patchNamespacedCustomObject(
          {
            ...this.#kube.at('mirrors'),
            name: current.objectName,
            body: {
              metadata: {
                resourceVersion: current.resourceVersion,
                finalizers: [...current.finalizers, teardownFinalizer],
              },
            },
          },
          mergePatch,
        )) as MirrorObject;
        return mirrorSnapshotOf(patched);
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        if (!isStatus(error, 409) || attempt >= conflictRetries) throw error;
      }
      await conflictBackoff(attempt);
      current = await this.readMirror(snapshot.name);
    }
    return undefined;
  }

  /** Writes the Mirror's status fields that `fields` changes, guarded by the snapshot's resourceVersion. */
  writeMirrorStatus(snapshot: ObjectSnapshot, fields: StatusFields): Promise<boolean> {
    return this.#kube.writeStatus('mirrors', snapshot, fields);
  }

  /** Writes the Peer's status fields that `fields` changes, guarded by the snapshot's resourceVersion. */
  writePeerStatus(snapshot: ObjectSnapshot, fields: StatusFields): Promise<boolean> {
    return this.#kube.writeStatus('peers', snapshot, fields);
  }

  /** Writes the Script's status fields that `fields` changes, guarded by the snapshot's resourceVersion. */
  writeScriptStatus(snapshot: ObjectSnapshot, fields: StatusFields): Promise<boolean> {
    return this.#kube.writeStatus('scripts', snapshot, fields);
  }

  /** Gives the script read in `snapshot` its id unless it has one (script-ids.ts); returns the id. */
  giveScriptId(snapshot: ScriptSnapshot): Promise<number> {
    return this.#scriptIds.give(snapshot);
  }
}

function mirrorSnapshotOf(object: MirrorObject): MirrorSnapshot {
  return { ...snapshotOf(object), mirror: mirrorOf(object) };
}
