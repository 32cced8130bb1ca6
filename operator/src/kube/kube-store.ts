// The resource store of cluster mode: Peer, Mirror and Script custom resources,
// peer secrets in Kubernetes Secrets. The facade writes through it; the
// operator reads through it. Mirrors carry a finalizer, so deleting one (kubectl
// or the API's drop) lets the operator tear it down before the object goes.
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
import type {
  MirrorResource,
  MirrorResourceSpec,
  PeerResource,
  ScriptResource,
} from '../../../engine/src/control/resources.ts';
import { mirrorResourceSpecSchema } from '../../../engine/src/control/resources.ts';
import {
  PeerSecretsUnavailableError,
  type ResourceEvent,
  ResourceExistsError,
  ResourceInvalidError,
  ResourceNotFoundError,
  type ResourceStore,
} from '../../../engine/src/control/store.ts';
import {
  joinPeerSecrets,
  type Peer,
  type PeerKind,
  splitPeerSecrets,
} from '../../../engine/src/resources/peer.ts';
import type { Condition } from '../conditions.ts';
import { group, version } from '../crds/schemas.ts';

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
}

export interface CustomObject<Spec, Status> {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}

type PeerObject = CustomObject<
  { kind: PeerKind; secretRef: { name: string } } & Record<string, unknown>,
  { version?: string; conditions?: Condition[] }
>;
type MirrorObject = CustomObject<Omit<MirrorResourceSpec, 'name'>, { failedGeneration?: number | null }>;
type ScriptObject = CustomObject<{ lang: 'lua'; source: string }, { id?: number }>;

function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

const objectNameRule = 'in cluster mode names are Kubernetes object names: lower-case letters, digits and -';

/** Kubernetes refuses names it cannot use (422): say so as a typed error. */
function invalidName(error: unknown, kind: string, name: string): Error {
  return isStatus(error, 422) ? new ResourceInvalidError(kind, name, objectNameRule) : (error as Error);
}

/** DNS-1123 label: what every name here must be before any call is made. */
function requireObjectName(kind: string, name: string): void {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name) || name.length > 63) {
    throw new ResourceInvalidError(kind, name, objectNameRule);
  }
}

/** A Peer names a Secret that does not exist (yet): it cannot be used until it does. */
export class PeerSecretMissingError extends PeerSecretsUnavailableError {
  readonly peer: string;
  readonly secret: string;

  constructor(peer: string, secret: string, namespace: string) {
    super(
      `peer ${peer}: Secret ${secret} not found in namespace ${namespace}; create it with the peer's secret fields as keys`,
    );
    this.name = 'PeerSecretMissingError';
    this.peer = peer;
    this.secret = secret;
  }
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

export function peerSecretName(peer: string): string {
  return `tributary-peer-${peer}`;
}

export class KubeStore implements ResourceStore {
  readonly #config: KubeConfig;
  readonly #namespace: string;
  readonly #objects: CustomObjectsApi;
  readonly #core: CoreV1Api;

  constructor(config: KubeConfig, namespace: string) {
    this.#config = config;
    this.#namespace = namespace;
    this.#objects = config.makeApiClient(CustomObjectsApi);
    this.#core = config.makeApiClient(CoreV1Api);
  }

  #at(plural: string) {
    return { group, version, namespace: this.#namespace, plural };
  }

  async #get<T>(plural: string, name: string): Promise<T | undefined> {
    try {
      return (await this.#objects.getNamespacedCustomObject({ ...this.#at(plural), name })) as T;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
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
    const secret = await this.#core
      .readNamespacedSecret({ name: secretRef.name, namespace: this.#namespace })
      .catch((error: unknown) => {
        throw isStatus(error, 404)
          ? new PeerSecretMissingError(object.metadata.name, secretRef.name, this.#namespace)
          : error;
      });
    const secrets = Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([key, value]) => [
        key,
        Buffer.from(value, 'base64').toString('utf8'),
      ]),
    );
    const config = (object.spec[kind] ?? {}) as Record<string, unknown>;
    return {
      peer: joinPeerSecrets({ name: object.metadata.name, kind, config, secrets }),
      version: object.status?.version ?? null,
      createdAt: new Date(object.metadata.creationTimestamp ?? 0),
    };
  }

  async putPeer(peer: Peer, peerVersion: string | null): Promise<void> {
    requireObjectName('peer', peer.name);
    const split = splitPeerSecrets(peer);
    const secretName = peerSecretName(peer.name);
    const secret: V1Secret = {
      metadata: { name: secretName, namespace: this.#namespace, labels: managedByLabel },
      type: 'Opaque',
      stringData: { ...split.secrets },
    };
    try {
      await this.#core.replaceNamespacedSecret({
        name: secretName,
        namespace: this.#namespace,
        body: secret,
      });
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
      await this.#core.createNamespacedSecret({ namespace: this.#namespace, body: secret });
    }
    const spec = { kind: peer.kind, [peer.kind]: split.config, secretRef: { name: secretName } };
    const existing = await this.#get<PeerObject>('peers', peer.name);
    if (existing) {
      await this.#objects.replaceNamespacedCustomObject({
        ...this.#at('peers'),
        name: peer.name,
        body: { ...existing, spec },
      });
    } else {
      await this.#objects.createNamespacedCustomObject({
        ...this.#at('peers'),
        body: { apiVersion: `${group}/${version}`, kind: 'Peer', metadata: { name: peer.name }, spec },
      });
    }
    if (peerVersion !== null) await this.setPeerStatus(peer.name, { version: peerVersion });
  }

  /** The Peer's uid, generation and stored status, for the status writer. */
  async peerObjectStatus(
    name: string,
  ): Promise<{ uid: string | undefined; generation: number; status: PeerObject['status'] } | undefined> {
    const object = await this.#get<PeerObject>('peers', name);
    return object
      ? { uid: object.metadata.uid, generation: object.metadata.generation ?? 1, status: object.status }
      : undefined;
  }

  async setPeerStatus(name: string, status: Record<string, unknown>): Promise<void> {
    await this.#objects
      .patchNamespacedCustomObjectStatus({
        ...this.#at('peers'),
        name,
        body: Object.entries(status).map(([key, value]) => ({ op: 'add', path: `/status/${key}`, value })),
      })
      .catch(async (error: unknown) => {
        // `add` under a missing /status fails: create it whole.
        if (!isStatus(error, 422)) throw error;
        await this.#objects.patchNamespacedCustomObjectStatus({
          ...this.#at('peers'),
          name,
          body: [{ op: 'add', path: '/status', value: status }],
        });
      });
  }

  // --- mirrors -----------------------------------------------------------------

  #toMirror(object: MirrorObject): MirrorResource {
    return {
      name: object.metadata.name,
      uid: (object.metadata.uid ?? '').slice(0, 8),
      ...(object.metadata.uid ? { objectUid: object.metadata.uid } : {}),
      spec: mirrorResourceSpecSchema.parse({ ...object.spec, name: object.metadata.name }),
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
    requireObjectName('mirror', name);
    try {
      const created = (await this.#objects.createNamespacedCustomObject({
        ...this.#at('mirrors'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Mirror',
          metadata: { name, finalizers: [teardownFinalizer] },
          spec: rest,
        },
      })) as MirrorObject;
      return this.#toMirror(created);
    } catch (error) {
      if (isStatus(error, 409)) throw new ResourceExistsError('mirror', name);
      throw invalidName(error, 'mirror', name);
    }
  }

  /** Read, change, replace; retried when another writer got there first. */
  async #modifyMirror(name: string, change: (object: MirrorObject) => MirrorObject): Promise<MirrorResource> {
    for (let attempt = 0; ; attempt++) {
      const current = await this.#get<MirrorObject>('mirrors', name);
      if (!current) throw new ResourceNotFoundError('mirror', name);
      try {
        const replaced = (await this.#objects.replaceNamespacedCustomObject({
          ...this.#at('mirrors'),
          name,
          body: change(current),
        })) as MirrorObject;
        return this.#toMirror(replaced);
      } catch (error) {
        if (!isStatus(error, 409) || attempt >= 5) throw error;
      }
    }
  }

  updateMirrorSpec(name: string, spec: MirrorResourceSpec): Promise<MirrorResource> {
    const { name: _name, ...rest } = spec;
    return this.#modifyMirror(name, (object) => ({ ...object, spec: rest }));
  }

  async requestMirrorRetry(name: string): Promise<MirrorResource> {
    await this.recordMirrorFailure(name, null);
    const mirror = await this.getMirror(name);
    if (!mirror) throw new ResourceNotFoundError('mirror', name);
    return mirror;
  }

  async recordMirrorFailure(name: string, generation: number | null): Promise<void> {
    await this.patchMirrorStatus(name, { failedGeneration: generation });
  }

  /** The Mirror's uid and stored status, for the status writer. */
  async mirrorObjectStatus(
    name: string,
  ): Promise<{ uid: string | undefined; status: Record<string, unknown> | undefined } | undefined> {
    const object = await this.#get<CustomObject<unknown, Record<string, unknown>>>('mirrors', name);
    return object ? { uid: object.metadata.uid, status: object.status } : undefined;
  }

  /** Mirrors applied with kubectl lack the teardown finalizer until the operator adds it. */
  async ensureMirrorFinalizer(name: string): Promise<void> {
    const current = await this.#get<MirrorObject>('mirrors', name);
    if (
      !current ||
      current.metadata.deletionTimestamp ||
      current.metadata.finalizers?.includes(teardownFinalizer)
    ) {
      return;
    }
    await this.#modifyMirror(name, (object) => ({
      ...object,
      metadata: {
        ...object.metadata,
        finalizers: [...(object.metadata.finalizers ?? []), teardownFinalizer],
      },
    }));
  }

  /** Merges `status` fields into the Mirror's status. */
  async patchMirrorStatus(name: string, status: Record<string, unknown>): Promise<void> {
    const current = await this.#get<MirrorObject>('mirrors', name);
    if (!current) return;
    await this.#objects.patchNamespacedCustomObjectStatus({
      ...this.#at('mirrors'),
      name,
      body: [
        { op: current.status ? 'replace' : 'add', path: '/status', value: { ...current.status, ...status } },
      ],
    });
  }

  async markMirrorDeleting(name: string): Promise<MirrorResource> {
    const mirror = await this.getMirror(name);
    if (!mirror) throw new ResourceNotFoundError('mirror', name);
    await this.#objects.deleteNamespacedCustomObject({ ...this.#at('mirrors'), name });
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
        .deleteNamespacedCustomObject({ ...this.#at('mirrors'), name })
        .catch((error: unknown) => {
          if (!isStatus(error, 404)) throw error;
        });
    }
  }

  // --- scripts -----------------------------------------------------------------

  #toScript(object: ScriptObject): ScriptResource | undefined {
    const id = object.status?.id;
    if (id === undefined) return undefined;
    return { id, name: object.metadata.name, lang: object.spec.lang, source: object.spec.source };
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

  /**
   * Gives a script its id unless it has one (a script applied with kubectl has
   * none until the operator or the facade sees it); returns the id it holds.
   * Both may race for the same script: the status write is guarded by the
   * object's resourceVersion, and the loser reads the winner's id.
   */
  async assignScriptId(name: string): Promise<number> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const object = await this.#get<ScriptObject>('scripts', name);
      if (!object) throw new ResourceNotFoundError('script', name);
      if (object.status?.id !== undefined) return object.status.id;
      const id = await this.#nextScriptId();
      try {
        await this.#objects.replaceNamespacedCustomObjectStatus({
          ...this.#at('scripts'),
          name,
          body: { ...object, status: { ...object.status, id } },
        });
        return id;
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
      }
    }
    throw new Error(`could not give script ${name} an id: its object kept changing`);
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
      name,
      body: [{ op: 'add', path: '/status', value: { id } }],
    });
  }

  /** Creates the Script object; its id is set apart, in the status. */
  async #createScriptObject(script: Omit<ScriptResource, 'id'>): Promise<void> {
    requireObjectName('script', script.name);
    try {
      await this.#objects.createNamespacedCustomObject({
        ...this.#at('scripts'),
        body: {
          apiVersion: `${group}/${version}`,
          kind: 'Script',
          metadata: { name: script.name },
          spec: { lang: script.lang, source: script.source },
        },
      });
    } catch (error) {
      if (isStatus(error, 409)) throw new ResourceExistsError('script', script.name);
      throw invalidName(error, 'script', script.name);
    }
  }

  async createScript(script: Omit<ScriptResource, 'id'>): Promise<ScriptResource> {
    await this.#createScriptObject(script);
    return { ...script, id: await this.assignScriptId(script.name) };
  }

  async updateScript(script: ScriptResource): Promise<ScriptResource> {
    const current = (await this.#list<ScriptObject>('scripts')).find(
      (object) => object.status?.id === script.id,
    );
    if (!current) throw new ResourceNotFoundError('script', String(script.id));
    if (current.metadata.name !== script.name) return this.#renameScript(current, script);
    await this.#objects.replaceNamespacedCustomObject({
      ...this.#at('scripts'),
      name: script.name,
      body: { ...current, spec: { lang: script.lang, source: script.source } },
    });
    return script;
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
      const emit = (object: KubernetesObject) => listener({ kind, name: object.metadata?.name ?? '' });
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
