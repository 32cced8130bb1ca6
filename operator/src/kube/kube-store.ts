// The resource store of cluster mode: Peer, Mirror and Script custom resources,
// peer secrets in Kubernetes Secrets. The facade writes through it; the
// operator reads through it. Mirrors carry a finalizer, so deleting one (kubectl
// or the API's drop) lets the operator tear it down before the object goes.
import { setTimeout as delay } from 'node:timers/promises';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type V1ConfigMap,
  type V1Secret,
} from '@kubernetes/client-node';
import { ZodError } from 'zod';
import {
  joinPeerSecrets,
  type MirrorResource,
  type MirrorResourceSpec,
  mirrorResourceSpecSchema,
  type Peer,
  type PeerKind,
  type PeerResource,
  ResourceConflictError,
  type ResourceEvent,
  ResourceExistsError,
  ResourceInvalidError,
  ResourceNotFoundError,
  type ResourceStore,
  type ScriptResource,
  splitPeerSecrets,
} from '../../../engine/src/index.ts';
import type { Condition } from '../conditions.ts';
import { group, version } from '../crds/schemas.ts';
import { apiNameAnnotation, apiNameOf, kubeObjectName } from './object-names.ts';
import {
  invalidPeerMessage,
  PeerSecretError,
  type PeerSecretRef,
  peerSecretLabel,
  peerSecretMissing,
  peerSecretsFromSecret,
} from './peer-secret.ts';
import { retryingThrottled } from './retry-throttled.ts';
import { mergePatch, statusMergePatch } from './status-patch.ts';

export const teardownFinalizer = 'tributary.dev/teardown';
const managedByLabel = { 'app.kubernetes.io/managed-by': 'tributary' };

interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface CustomObject<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}

type PeerObject = CustomObject<
  { kind: PeerKind; secretRef: PeerSecretRef } & Record<string, unknown>,
  { version?: string; conditions?: Condition[] }
>;
type MirrorObject = CustomObject<Omit<MirrorResourceSpec, 'name'>, { failedGeneration?: number | null }>;
type ScriptObject = CustomObject<{ lang: 'lua'; source: string }, { id?: number }>;

/** A status as stored: fields by name. */
export type StoredStatus = Readonly<Record<string, unknown>>;

/**
 * An object as one read saw it: what a controller acts on, and the
 * resourceVersion its status write is guarded by (see `#writeStatus`).
 */
export interface ObjectSnapshot {
  /** The API name. */
  readonly name: string;
  readonly objectName: string;
  readonly uid: string | undefined;
  readonly generation: number;
  readonly resourceVersion: string;
  readonly deleting: boolean;
  readonly finalizers: readonly string[];
  readonly status: StoredStatus | undefined;
}

export interface MirrorSnapshot extends ObjectSnapshot {
  readonly mirror: MirrorResource;
}

export interface PeerSnapshot extends ObjectSnapshot {
  /** The peer with its secrets, or why its Secret cannot give them. */
  readonly peer: PeerResource | PeerSecretError;
}

export interface ScriptSnapshot extends ObjectSnapshot {
  /** The interface's id, once it has one. */
  readonly id: number | undefined;
}

/** Builds the status fields a writer sets from the status it last read. */
export type StatusFields = (status: StoredStatus | undefined) => Record<string, unknown>;

function snapshotOf(object: CustomObject<unknown, StoredStatus>): ObjectSnapshot {
  const { metadata } = object;
  return {
    name: apiNameOf(metadata),
    objectName: metadata.name,
    uid: metadata.uid,
    generation: metadata.generation ?? 1,
    resourceVersion: metadata.resourceVersion ?? '',
    deleting: metadata.deletionTimestamp !== undefined,
    finalizers: metadata.finalizers ?? [],
    status: object.status,
  };
}

function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** Kubernetes refused the object (422): say so as a typed error. */
function invalidObject(error: unknown, kind: string, name: string): Error {
  return isStatus(error, 422)
    ? new ResourceInvalidError(kind, name, 'the Kubernetes API refused the object')
    : (error as Error);
}

/** How often a read-modify-write is retried when another writer changed the object in between (409). */
const conflictRetries = 8;

/** A short random pause before a retry, so that writers racing for one object spread out. */
function conflictBackoff(attempt: number): Promise<void> {
  return delay(Math.random() * 25 * attempt);
}

/**
 * Two API names whose object names coincide (see object-names.ts): the second
 * is refused rather than allowed to overwrite the first.
 */
export class ObjectNameTakenError extends ResourceExistsError {
  constructor(kind: string, name: string, objectName: string, holder: string) {
    super(kind, name);
    this.message = `${kind} ${name} cannot be stored: its object name ${objectName} holds ${kind} ${holder}`;
    this.name = 'ObjectNameTakenError';
  }
}

/** The metadata of a new object for API name `name`. */
function newObjectMeta(name: string): ObjectMeta {
  return { name: kubeObjectName(name), annotations: { [apiNameAnnotation]: name } };
}

/**
 * What a reconcile acts on: the spec (by generation), deletion, finalizers, a
 * mirror's failure mark and whether a script has its id. Status writes, including the operator's own, change
 * none of it, so they do not wake the reconcilers up again.
 */
function reconcileFingerprint(object: KubernetesObject): string {
  const { generation, deletionTimestamp, finalizers } = object.metadata ?? {};
  const status = (object as { status?: { failedGeneration?: number | null; id?: number } }).status;
  return JSON.stringify([
    generation,
    deletionTimestamp,
    finalizers,
    status?.failedGeneration ?? null,
    status?.id,
  ]);
}

/** The ConfigMap holding the last script id handed out in the namespace. */
export const scriptIdCounterName = 'tributary-script-ids';

/** The Secret the facade keeps a peer's secrets in. */
export function peerSecretName(peer: string): string {
  return `tributary-peer-${kubeObjectName(peer)}`;
}

export class KubeStore implements ResourceStore {
  readonly #config: KubeConfig;
  readonly #namespace: string;
  readonly #objects: CustomObjectsApi;
  readonly #core: CoreV1Api;

  constructor(config: KubeConfig, namespace: string) {
    this.#config = config;
    this.#namespace = namespace;
    this.#objects = retryingThrottled(config.makeApiClient(CustomObjectsApi));
    this.#core = retryingThrottled(config.makeApiClient(CoreV1Api));
  }

  #at(plural: string) {
    return { group, version, namespace: this.#namespace, plural };
  }

  /** The object stored under the object name of API name `name`, whichever API name it holds. */
  async #getObject<T extends { metadata: ObjectMeta }>(plural: string, name: string): Promise<T | undefined> {
    try {
      return (await this.#objects.getNamespacedCustomObject({
        ...this.#at(plural),
        name: kubeObjectName(name),
      })) as T;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** The object of API name `name`; an object that holds another API name is not it. */
  async #get<T extends { metadata: ObjectMeta }>(plural: string, name: string): Promise<T | undefined> {
    const object = await this.#getObject<T>(plural, name);
    return object && apiNameOf(object.metadata) === name ? object : undefined;
  }

  /** Refuses to write API name `name` over an object that holds another one. */
  #checkHolder(kind: string, name: string, object: { metadata: ObjectMeta } | undefined): void {
    if (object && apiNameOf(object.metadata) !== name) {
      throw new ObjectNameTakenError(kind, name, object.metadata.name, apiNameOf(object.metadata));
    }
  }

  async #list<T>(plural: string): Promise<T[]> {
    const list = (await this.#objects.listNamespacedCustomObject(this.#at(plural))) as { items: T[] };
    return list.items;
  }

  // --- peers -----------------------------------------------------------------

  async getPeer(name: string): Promise<PeerResource | undefined> {
    const object = await this.#get<PeerObject>('peers', name);
    return object ? this.#toPeer(object) : undefined;
  }

  async listPeers(): Promise<PeerResource[]> {
    return Promise.all((await this.#list<PeerObject>('peers')).map((object) => this.#toPeer(object)));
  }

  async #toPeer(object: PeerObject): Promise<PeerResource> {
    const { kind, secretRef } = object.spec;
    const name = apiNameOf(object.metadata);
    const secret = await this.#core
      .readNamespacedSecret({ name: secretRef.name, namespace: this.#namespace })
      .catch((error: unknown) => {
        throw isStatus(error, 404) ? peerSecretMissing(name, secretRef.name, this.#namespace) : error;
      });
    const secrets = peerSecretsFromSecret(name, kind, secretRef, secret);
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

  async putPeer(peer: Peer, peerVersion: string | null): Promise<void> {
    this.#checkHolder('peer', peer.name, await this.#getObject<PeerObject>('peers', peer.name));
    const split = splitPeerSecrets(peer);
    const secretName = peerSecretName(peer.name);
    const secret: V1Secret = {
      metadata: {
        name: secretName,
        namespace: this.#namespace,
        labels: { ...managedByLabel, [peerSecretLabel]: 'true' },
      },
      type: 'Opaque',
      stringData: { ...split.secrets },
    };
    // Replace, or create when missing; a concurrent first write of the same peer
    // may create it in between (409), and then the replace is tried again.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#core.replaceNamespacedSecret({
          name: secretName,
          namespace: this.#namespace,
          body: secret,
        });
        break;
      } catch (error) {
        if (!isStatus(error, 404)) throw error;
      }
      try {
        await this.#core.createNamespacedSecret({ namespace: this.#namespace, body: secret });
        break;
      } catch (error) {
        if (!isStatus(error, 409) || attempt >= conflictRetries) throw error;
      }
    }
    const spec = { kind: peer.kind, [peer.kind]: split.config, secretRef: { name: secretName } };
    // The spec is replaced whole by a JSON patch, which needs no resourceVersion:
    // concurrent updates of one peer (the original UI always sends allow_update)
    // each land instead of failing with 409, the last one wins, and the status the
    // operator writes meanwhile is untouched. Only a create can race (409: another
    // request created it first), and then the patch is tried on a fresh read.
    for (let attempt = 1; ; attempt++) {
      const existing = await this.#getObject<PeerObject>('peers', peer.name);
      this.#checkHolder('peer', peer.name, existing);
      try {
        if (existing) {
          await this.#objects.patchNamespacedCustomObject({
            ...this.#at('peers'),
            name: existing.metadata.name,
            body: [{ op: 'replace', path: '/spec', value: spec }],
          });
        } else {
          await this.#objects.createNamespacedCustomObject({
            ...this.#at('peers'),
            body: {
              apiVersion: `${group}/${version}`,
              kind: 'Peer',
              metadata: newObjectMeta(peer.name),
              spec,
            },
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
    if (peerVersion !== null) await this.setPeerStatus(peer.name, { version: peerVersion });
  }

  /**
   * The Peer as one read sees it, with its secrets from its Secret (or why
   * they cannot be had); undefined when it does not exist.
   */
  async readPeer(name: string): Promise<PeerSnapshot | undefined> {
    const object = await this.#get<PeerObject>('peers', name);
    if (!object) return undefined;
    let peer: PeerResource | PeerSecretError;
    try {
      peer = await this.#toPeer(object);
    } catch (error) {
      if (!(error instanceof PeerSecretError)) throw error;
      peer = error;
    }
    return { ...snapshotOf(object), peer };
  }

  /** Writes the Peer's status fields that `fields` changes, guarded by the snapshot's resourceVersion. */
  writePeerStatus(snapshot: ObjectSnapshot, fields: StatusFields): Promise<boolean> {
    return this.#writeStatus('peers', snapshot, fields);
  }

  async setPeerStatus(name: string, status: Record<string, unknown>): Promise<void> {
    await this.#objects
      .patchNamespacedCustomObjectStatus({
        ...this.#at('peers'),
        name: kubeObjectName(name),
        body: Object.entries(status).map(([key, value]) => ({ op: 'add', path: `/status/${key}`, value })),
      })
      .catch(async (error: unknown) => {
        // `add` under a missing /status fails: create it whole.
        if (!isStatus(error, 422)) throw error;
        await this.#objects.patchNamespacedCustomObjectStatus({
          ...this.#at('peers'),
          name: kubeObjectName(name),
          body: [{ op: 'add', path: '/status', value: status }],
        });
      });
  }

  // --- mirrors -----------------------------------------------------------------

  #toMirror(object: MirrorObject): MirrorResource {
    const name = apiNameOf(object.metadata);
    return {
      name,
      uid: (object.metadata.uid ?? '').slice(0, 8),
      ...(object.metadata.uid ? { objectUid: object.metadata.uid } : {}),
      spec: mirrorResourceSpecSchema.parse({ ...object.spec, name }),
      generation: object.metadata.generation ?? 1,
      deleting: object.metadata.deletionTimestamp !== undefined,
      failedGeneration: object.status?.failedGeneration ?? null,
      createdAt: new Date(object.metadata.creationTimestamp ?? 0),
    };
  }

  async getMirror(name: string): Promise<MirrorResource | undefined> {
    const object = await this.#get<MirrorObject>('mirrors', name);
    return object ? this.#toMirror(object) : undefined;
  }

  async listMirrors(): Promise<MirrorResource[]> {
    return (await this.#list<MirrorObject>('mirrors')).map((object) => this.#toMirror(object));
  }

  async createMirror(spec: MirrorResourceSpec): Promise<MirrorResource> {
    const { name, ...rest } = spec;
    try {
      const created = (await this.#objects.createNamespacedCustomObject({
        ...this.#at('mirrors'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Mirror',
          metadata: { ...newObjectMeta(name), finalizers: [teardownFinalizer] },
          spec: rest,
        },
      })) as MirrorObject;
      return this.#toMirror(created);
    } catch (error) {
      if (isStatus(error, 409)) {
        this.#checkHolder('mirror', name, await this.#getObject<MirrorObject>('mirrors', name));
        throw new ResourceExistsError('mirror', name);
      }
      throw invalidObject(error, 'mirror', name);
    }
  }

  /** Read, change, replace; retried when another writer got there first. */
  async #modifyMirror(name: string, change: (object: MirrorObject) => MirrorObject): Promise<MirrorResource> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.#get<MirrorObject>('mirrors', name);
      if (!current) throw new ResourceNotFoundError('mirror', name);
      try {
        const replaced = (await this.#objects.replaceNamespacedCustomObject({
          ...this.#at('mirrors'),
          name: current.metadata.name,
          body: change(current),
        })) as MirrorObject;
        return this.#toMirror(replaced);
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
    await this.#objects
      .patchNamespacedCustomObjectStatus(
        {
          ...this.#at('mirrors'),
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

  /** The Mirror as one read sees it; undefined when it does not exist. */
  async readMirror(name: string): Promise<MirrorSnapshot | undefined> {
    const object = await this.#get<MirrorObject>('mirrors', name);
    return object ? this.#mirrorSnapshot(object) : undefined;
  }

  #mirrorSnapshot(object: MirrorObject): MirrorSnapshot {
    return { ...snapshotOf(object), mirror: this.#toMirror(object) };
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
        const patched = (await this.#objects.patchNamespacedCustomObject(
          {
            ...this.#at('mirrors'),
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
        return this.#mirrorSnapshot(patched);
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
    return this.#writeStatus('mirrors', snapshot, fields);
  }

  /**
   * Patches the status fields that `fields` sets and that differ from the
   * status the snapshot read, at the snapshot's resourceVersion. On a 409
   * (another writer changed the object since) it reads the object again and
   * builds the fields again from that status: a concurrent write is never
   * lost, and nothing is written when nothing changed. False when the object
   * is gone.
   */
  async #writeStatus(plural: string, snapshot: ObjectSnapshot, fields: StatusFields): Promise<boolean> {
    let current: ObjectSnapshot = snapshot;
    for (let attempt = 1; ; attempt++) {
      const status = statusMergePatch(current.status, fields(current.status));
      if (!status) return true;
      try {
        await this.#objects.patchNamespacedCustomObjectStatus(
          {
            ...this.#at(plural),
            name: current.objectName,
            body: { metadata: { resourceVersion: current.resourceVersion }, status },
          },
          mergePatch,
        );
        return true;
      } catch (error) {
        if (isStatus(error, 404)) return false;
        if (!isStatus(error, 409) || attempt >= conflictRetries) throw error;
      }
      await conflictBackoff(attempt);
      const fresh = await this.#get<CustomObject<unknown, StoredStatus>>(plural, snapshot.name);
      if (!fresh) return false;
      current = snapshotOf(fresh);
    }
  }

  async markMirrorDeleting(name: string): Promise<MirrorResource> {
    const mirror = await this.getMirror(name);
    if (!mirror) throw new ResourceNotFoundError('mirror', name);
    await this.#objects.deleteNamespacedCustomObject({ ...this.#at('mirrors'), name: kubeObjectName(name) });
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
      await this.#objects
        .deleteNamespacedCustomObject({ ...this.#at('mirrors'), name: kubeObjectName(name) })
        .catch((error: unknown) => {
          if (!isStatus(error, 404)) throw error;
        });
    }
  }

  // --- scripts -----------------------------------------------------------------

  #toScript(object: ScriptObject): ScriptResource | undefined {
    const id = object.status?.id;
    if (id === undefined) return undefined;
    return { id, name: apiNameOf(object.metadata), lang: object.spec.lang, source: object.spec.source };
  }

  async listScripts(): Promise<ScriptResource[]> {
    return (await this.#list<ScriptObject>('scripts'))
      .map((object) => this.#toScript(object))
      .filter((script): script is ScriptResource => script !== undefined)
      .sort((a, b) => a.id - b.id);
  }

  async getScript(id: number): Promise<ScriptResource | undefined> {
    return (await this.listScripts()).find((script) => script.id === id);
  }

  async getScriptByName(name: string): Promise<ScriptResource | undefined> {
    const object = await this.#get<ScriptObject>('scripts', name);
    return object ? this.#toScript(object) : undefined;
  }

  /** The Script as one read sees it; undefined when it does not exist. */
  async readScript(name: string): Promise<ScriptSnapshot | undefined> {
    const object = await this.#get<ScriptObject>('scripts', name);
    return object ? { ...snapshotOf(object), id: object.status?.id } : undefined;
  }

  /**
   * Gives a script its id unless it has one (a script applied with kubectl has
   * none until the operator or the facade sees it); returns the id it holds.
   */
  async assignScriptId(name: string): Promise<number> {
    const snapshot = await this.readScript(name);
    if (!snapshot) throw new ResourceNotFoundError('script', name);
    return this.giveScriptId(snapshot);
  }

  /**
   * Gives the script read in `snapshot` its id unless it has one; returns the
   * id it holds. The operator and the facade may race for the same script: the
   * status write is guarded by the object's resourceVersion, and the loser
   * reads the winner's id.
   */
  async giveScriptId(snapshot: ScriptSnapshot): Promise<number> {
    if (snapshot.id !== undefined) return snapshot.id;
    const id = await this.#nextScriptId();
    let held: number | undefined;
    const written = await this.#writeStatus('scripts', snapshot, (status) => {
      held = typeof status?.id === 'number' ? status.id : undefined;
      return held === undefined ? { id } : {};
    });
    if (!written) throw new ResourceNotFoundError('script', snapshot.name);
    return held ?? id;
  }

  /**
   * Draws the next script id from a counter ConfigMap, updated with optimistic
   * concurrency, so facade replicas and the operator never hand out one id
   * twice. Never below an id in use (the counter may be new or deleted).
   */
  async #nextScriptId(): Promise<number> {
    const name = scriptIdCounterName;
    for (let attempt = 0; attempt < 20; attempt++) {
      const inUse = Math.max(0, ...(await this.listScripts()).map((script) => script.id));
      const counter = await this.#core
        .readNamespacedConfigMap({ name, namespace: this.#namespace })
        .catch((error: unknown) => {
          if (isStatus(error, 404)) return undefined;
          throw error;
        });
      const next = Math.max(inUse, Number(counter?.data?.last ?? 0)) + 1;
      const body: V1ConfigMap = {
        metadata: {
          name,
          namespace: this.#namespace,
          labels: managedByLabel,
          ...(counter?.metadata?.resourceVersion
            ? { resourceVersion: counter.metadata.resourceVersion }
            : {}),
        },
        data: { last: String(next) },
      };
      try {
        if (counter) await this.#core.replaceNamespacedConfigMap({ name, namespace: this.#namespace, body });
        else await this.#core.createNamespacedConfigMap({ namespace: this.#namespace, body });
        return next;
      } catch (error) {
        // Another writer took this id (409 on replace, or created the counter first).
        if (!isStatus(error, 409)) throw error;
      }
    }
    throw new Error('could not draw a script id: too many concurrent writers');
  }

  async #setScriptId(name: string, id: number): Promise<void> {
    await this.#objects.patchNamespacedCustomObjectStatus({
      ...this.#at('scripts'),
      name: kubeObjectName(name),
      body: [{ op: 'add', path: '/status', value: { id } }],
    });
  }

  /** Creates the Script object; its id is set apart, in the status. */
  async #createScriptObject(script: Omit<ScriptResource, 'id'>): Promise<void> {
    try {
      await this.#objects.createNamespacedCustomObject({
        ...this.#at('scripts'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Script',
          metadata: newObjectMeta(script.name),
          spec: { lang: script.lang, source: script.source },
        },
      });
    } catch (error) {
      if (isStatus(error, 409)) {
        this.#checkHolder('script', script.name, await this.#getObject<ScriptObject>('scripts', script.name));
        throw new ResourceExistsError('script', script.name);
      }
      throw invalidObject(error, 'script', script.name);
    }
  }

  async createScript(script: Omit<ScriptResource, 'id'>): Promise<ScriptResource> {
    await this.#createScriptObject(script);
    return { ...script, id: await this.assignScriptId(script.name) };
  }

  async updateScript(script: ScriptResource): Promise<ScriptResource> {
    // Read, change, replace; a 409 (the operator or another request wrote the
    // object in between) is retried on a fresh read.
    for (let attempt = 1; ; attempt++) {
      const current = (await this.#list<ScriptObject>('scripts')).find(
        (object) => object.status?.id === script.id,
      );
      if (!current) throw new ResourceNotFoundError('script', String(script.id));
      if (apiNameOf(current.metadata) !== script.name) return this.#renameScript(current, script);
      try {
        await this.#objects.replaceNamespacedCustomObject({
          ...this.#at('scripts'),
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
    await this.#createScriptObject(script);
    await this.#setScriptId(script.name, script.id);
    await this.#objects
      .deleteNamespacedCustomObject({ ...this.#at('scripts'), name: current.metadata.name })
      .catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
    return script;
  }

  // --- notifications -------------------------------------------------------------

  watch(listener: (event: ResourceEvent) => void): () => void {
    const kinds = { mirrors: 'mirror', peers: 'peer', scripts: 'script' } as const;
    const informers = (['mirrors', 'peers', 'scripts'] as const).map((plural) => {
      const path = `/apis/${group}/${version}/namespaces/${this.#namespace}/${plural}`;
      const informer = makeInformer<KubernetesObject>(
        this.#config,
        path,
        () =>
          this.#objects.listNamespacedCustomObject(this.#at(plural)) as Promise<
            KubernetesListObject<KubernetesObject>
          >,
      );
      const kind = kinds[plural];
      const seen = new Map<string, string>();
      const emit = (object: KubernetesObject) => listener({ kind, name: apiNameOf(object.metadata ?? {}) });
      const emitIfChanged = (object: KubernetesObject) => {
        const name = object.metadata?.name ?? '';
        const fingerprint = reconcileFingerprint(object);
        if (seen.get(name) === fingerprint) return;
        seen.set(name, fingerprint);
        emit(object);
      };
      informer.on('add', emitIfChanged);
      informer.on('update', emitIfChanged);
      informer.on('delete', (object) => {
        seen.delete(object.metadata?.name ?? '');
        emit(object);
      });
      // The informer reconnects by itself after an error.
      informer.on('error', () => setTimeout(() => void informer.start(), 1_000));
      void informer.start();
      return informer;
    });
    return () => {
      for (const informer of informers) void informer.stop();
    };
  }
}
