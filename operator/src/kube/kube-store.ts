// The facade's resource store in cluster mode (ResourceStore): Peer, Mirror
// and Script custom resources, peer secrets in Kubernetes Secrets. The
// api-server writes and reads through it; the operator uses it where it
// shares the facade's steps (the MirrorReconciler, the mirror list, the
// watch), and reads and writes what its controllers reconcile through
// reconcile-store.ts. Mirrors carry a finalizer, so deleting one (kubectl or
// the API's drop) lets the operator tear it down before the object goes.
import type { KubeConfig } from '@kubernetes/client-node';
import {
  type MirrorResource,
  type MirrorResourceSpec,
  type Peer,
  type PeerListEntry,
  type PeerResource,
  PeerSecretsUnavailableError,
  ResourceConflictError,
  type ResourceEvent,
  ResourceExistsError,
  ResourceNotFoundError,
  type ResourceStore,
  type ScriptResource,
  splitPeerSecrets,
} from '../../../engine/src/index.ts';
import {
  apiVersion,
  conflictBackoff,
  conflictRetries,
  invalidObject,
  isStatus,
  type MirrorObject,
  mirrorOf,
  NamespaceObjects,
  newObjectMeta,
  type PeerObject,
  type ScriptObject,
  scriptOf,
  teardownFinalizer,
} from './namespace-objects.ts';
import { apiNameOf, kubeObjectName } from './object-names.ts';
import { PeerSecretStore } from './peer-secret-store.ts';
import { watchResources } from './resource-watch.ts';
import { ScriptIds, scriptSnapshotOf, scriptsWithIds } from './script-ids.ts';
import { mergePatch } from './status-patch.ts';

export { ObjectNameTakenError, teardownFinalizer } from './namespace-objects.ts';
export { peerSecretName } from './peer-secret-store.ts';
export { scriptIdCounterName } from './script-ids.ts';

export class KubeStore implements ResourceStore {
  readonly #kube: NamespaceObjects;
  readonly #secrets: PeerSecretStore;
  readonly #scriptIds: ScriptIds;

  constructor(config: KubeConfig, namespace: string) {
    this.#kube = new NamespaceObjects(config, namespace);
    this.#secrets = new PeerSecretStore(this.#kube);
    this.#scriptIds = new ScriptIds(this.#kube);
  }

  // --- peers -----------------------------------------------------------------

  async getPeer(name: string): Promise<PeerResource | undefined> {
    const object = await this.#kube.get<PeerObject>('peers', name);
    return object ? this.#secrets.peerOf(object) : undefined;
  }

  async listPeers(): Promise<PeerResource[]> {
    const objects = await this.#kube.list<PeerObject>('peers');
    return Promise.all(objects.map((object) => this.#secrets.peerOf(object)));
  }

  async listPeerEntries(): Promise<PeerListEntry[]> {
    const objects = await this.#kube.list<PeerObject>('peers');
    return Promise.all(
      objects.map(async (object) => {
        const entry = { name: apiNameOf(object.metadata), kind: object.spec.kind };
        try {
          await this.#secrets.peerOf(object);
          return entry;
        } catch (error) {
          // One Peer whose Secret is missing or not bound to it is shown broken; the list still answers.
          if (!(error instanceof PeerSecretsUnavailableError)) throw error;
          return { ...entry, problem: error.message };
        }
      }),
    );
  }

  async putPeer(peer: Peer, peerVersion: string | null): Promise<void> {
    const kube = this.#kube;
    kube.checkHolder('peer', peer.name, await kube.getObject<PeerObject>('peers', peer.name));
    const split = splitPeerSecrets(peer);
    const secretName = await this.#secrets.write(peer.name, split.secrets);
    const spec = { kind: peer.kind, [peer.kind]: split.config, secretRef: { name: secretName } };
    // The spec is replaced whole by a JSON patch, which needs no resourceVersion:
    // concurrent updates of one peer (the original UI always sends allow_update)
    // each land instead of failing with 409, the last one wins, and the status the
    // operator writes meanwhile is untouched. Only a create can race (409: another
    // request created it first), and then the patch is tried on a fresh read.
    for (let attempt = 1; ; attempt++) {
      const existing = await kube.getObject<PeerObject>('peers', peer.name);
      kube.checkHolder('peer', peer.name, existing);
      try {
        if (existing) {
          await kube.objects.patchNamespacedCustomObject({
            ...kube.at('peers'),
            name: existing.metadata.name,
            body: [{ op: 'replace', path: '/spec', value: spec }],
          });
        } else {
          await kube.objects.createNamespacedCustomObject({
            ...kube.at('peers'),
            body: { apiVersion, kind: 'Peer', metadata: newObjectMeta(peer.name), spec },
          });
        }
        break;
      } catch (error) {
        // 404: deleted between the read and the patch; 409: created in between.
        if (!(isStatus(error, 409) || isStatus(error, 404)) || attempt >= conflictRetries)
          throw invalidObject(error, 'peer', peer.name);
        await conflictBackoff(attempt);
      }
    }
    if (peerVersion !== null) await this.#setPeerStatus(peer.name, { version: peerVersion });
  }

  async #setPeerStatus(name: string, status: Record<string, unknown>): Promise<void> {
    const kube = this.#kube;
    await kube.objects
      .patchNamespacedCustomObjectStatus({
        ...kube.at('peers'),
        name: kubeObjectName(name),
        body: Object.entries(status).map(([key, value]) => ({ op: 'add', path: `/status/${key}`, value })),
      })
      .catch(async (error: unknown) => {
        // `add` under a missing /status fails: create it whole.
        if (!isStatus(error, 422)) throw error;
        await kube.objects.patchNamespacedCustomObjectStatus({
          ...kube.at('peers'),
          name: kubeObjectName(name),
          body: [{ op: 'add', path: '/status', value: status }],
        });
      });
  }

  // --- mirrors -----------------------------------------------------------------

  async getMirror(name: string): Promise<MirrorResource | undefined> {
    const object = await this.#kube.get<MirrorObject>('mirrors', name);
    return object ? mirrorOf(object) : undefined;
  }

  async listMirrors(): Promise<MirrorResource[]> {
    return (await this.#kube.list<MirrorObject>('mirrors')).map(mirrorOf);
  }

  async createMirror(spec: MirrorResourceSpec): Promise<MirrorResource> {
    const kube = this.#kube;
    const { name, ...rest } = spec;
    try {
      const created = (await kube.objects.createNamespacedCustomObject({
        ...kube.at('mirrors'),
        body: {
          apiVersion,
          kind: 'Mirror',
          metadata: { ...newObjectMeta(name), finalizers: [teardownFinalizer] },
          spec: rest,
        },
      })) as MirrorObject;
      return mirrorOf(created);
    } catch (error) {
      if (isStatus(error, 409)) {
        kube.checkHolder('mirror', name, await kube.getObject<MirrorObject>('mirrors', name));
        throw new ResourceExistsError('mirror', name);
      }
      throw invalidObject(error, 'mirror', name);
    }
  }

  /** Read, change, replace; retried when another writer got there first. */
  async #modifyMirror(name: string, change: (object: MirrorObject) => MirrorObject): Promise<MirrorResource> {
    const kube = this.#kube;
    for (let attempt = 1; ; attempt++) {
      const current = await kube.get<MirrorObject>('mirrors', name);
      if (!current) throw new ResourceNotFoundError('mirror', name);
      try {
        const replaced = (await kube.objects.replaceNamespacedCustomObject({
          ...kube.at('mirrors'),
          name: current.metadata.name,
          body: change(current),
        })) as MirrorObject;
        return mirrorOf(replaced);
      } catch (error) {
        if (!isStatus(error, 409) || attempt >= conflictRetries) throw error;
        await conflictBackoff(attempt);
      }
    }
  }

  updateMirrorSpec(
    name: string,
    spec: MirrorResourceSpec,
    expectedGeneration?: number,
  ): Promise<MirrorResource> {
    const { name: _name, ...rest } = spec;
    return this.#modifyMirror(name, (object) => {
      // A Kubernetes generation moves with every spec change, as the embedded store's does.
      if (expectedGeneration !== undefined && (object.metadata.generation ?? 1) !== expectedGeneration) {
        throw new ResourceConflictError('mirror', name);
      }
      return { ...object, spec: rest };
    });
  }

  async requestMirrorRetry(name: string): Promise<MirrorResource> {
    await this.recordMirrorFailure(name, null);
    const mirror = await this.getMirror(name);
    if (!mirror) throw new ResourceNotFoundError('mirror', name);
    return mirror;
  }

  /** Sets the failure mark alone: a merge patch of that one field, which no other writer computes. */
  async recordMirrorFailure(name: string, generation: number | null): Promise<void> {
    const kube = this.#kube;
    await kube.objects
      .patchNamespacedCustomObjectStatus(
        {
          ...kube.at('mirrors'),
          name: kubeObjectName(name),
          // null removes the field (a merge patch's way); it reads as no mark.
          body: { status: { failedGeneration: generation } },
        },
        mergePatch,
      )
      .catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
  }

  async markMirrorDeleting(name: string): Promise<MirrorResource> {
    const mirror = await this.getMirror(name);
    if (!mirror) throw new ResourceNotFoundError('mirror', name);
    await this.#kube.objects.deleteNamespacedCustomObject({
      ...this.#kube.at('mirrors'),
      name: kubeObjectName(name),
    });
    return { ...mirror, deleting: true };
  }

  async removeMirror(name: string): Promise<void> {
    let deleting = false;
    try {
      await this.#modifyMirror(name, (object) => {
        deleting = object.metadata.deletionTimestamp !== undefined;
        return {
          ...object,
          metadata: {
            ...object.metadata,
            finalizers: (object.metadata.finalizers ?? []).filter(
              (finalizer) => finalizer !== teardownFinalizer,
            ),
          },
        };
      });
    } catch (error) {
      if (!(error instanceof ResourceNotFoundError)) throw error;
      return;
    }
    // Without a deletion under way, dropping the finalizer alone would leave the object.
    if (!deleting) {
      await this.#kube.objects
        .deleteNamespacedCustomObject({ ...this.#kube.at('mirrors'), name: kubeObjectName(name) })
        .catch((error: unknown) => {
          if (!isStatus(error, 404)) throw error;
        });
    }
  }

  // --- scripts -----------------------------------------------------------------

  listScripts(): Promise<ScriptResource[]> {
    return scriptsWithIds(this.#kube);
  }

  async getScript(id: number): Promise<ScriptResource | undefined> {
    return (await this.listScripts()).find((script) => script.id === id);
  }

  async getScriptByName(name: string): Promise<ScriptResource | undefined> {
    const object = await this.#kube.get<ScriptObject>('scripts', name);
    return object ? scriptOf(object) : undefined;
  }

  /** Creates the Script object; its id is set apart, in the status. */
  async #createScriptObject(script: Omit<ScriptResource, 'id'>): Promise<void> {
    const kube = this.#kube;
    try {
      await kube.objects.createNamespacedCustomObject({
        ...kube.at('scripts'),
        body: {
          apiVersion,
          kind: 'Script',
          metadata: newObjectMeta(script.name),
          spec: { lang: script.lang, source: script.source },
        },
      });
    } catch (error) {
      if (isStatus(error, 409)) {
        kube.checkHolder('script', script.name, await kube.getObject<ScriptObject>('scripts', script.name));
        throw new ResourceExistsError('script', script.name);
      }
      throw invalidObject(error, 'script', script.name);
    }
  }

  async createScript(script: Omit<ScriptResource, 'id'>): Promise<ScriptResource> {
    await this.#createScriptObject(script);
    // The operator may give the new object its id first (it watches Scripts): then that one is kept.
    const object = await this.#kube.get<ScriptObject>('scripts', script.name);
    if (!object) throw new ResourceNotFoundError('script', script.name);
    return { ...script, id: await this.#scriptIds.give(scriptSnapshotOf(object)) };
  }

  async updateScript(script: ScriptResource): Promise<ScriptResource> {
    const kube = this.#kube;
    // Read, change, replace; a 409 (the operator or another request wrote the
    // object in between) is retried on a fresh read.
    for (let attempt = 1; ; attempt++) {
      const current = (await kube.list<ScriptObject>('scripts')).find(
        (object) => object.status?.id === script.id,
      );
      if (!current) throw new ResourceNotFoundError('script', String(script.id));
      if (apiNameOf(current.metadata) !== script.name) return this.#renameScript(current, script);
      try {
        await kube.objects.replaceNamespacedCustomObject({
          ...kube.at('scripts'),
          name: current.metadata.name,
          body: { ...current, spec: { lang: script.lang, source: script.source } },
        });
        return script;
      } catch (error) {
        if (!isStatus(error, 409) || attempt >= conflictRetries) throw error;
        await conflictBackoff(attempt);
      }
    }
  }

  /**
   * An object's name cannot change: a renamed script is a new object holding
   * the same id, and the old one is deleted after it. Mirrors name their
   * script, as in standalone mode, so a rename does not follow into them.
   */
  async #renameScript(current: ScriptObject, script: ScriptResource): Promise<ScriptResource> {
    const kube = this.#kube;
    await this.#createScriptObject(script);
    await kube.objects.patchNamespacedCustomObjectStatus({
      ...kube.at('scripts'),
      name: kubeObjectName(script.name),
      body: [{ op: 'add', path: '/status', value: { id: script.id } }],
    });
    await kube.objects
      .deleteNamespacedCustomObject({ ...kube.at('scripts'), name: current.metadata.name })
      .catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
    return script;
  }

  // --- notifications -------------------------------------------------------------

  watch(listener: (event: ResourceEvent) => void): () => void {
    return watchResources(this.#kube, listener);
  }
}
