// The custom resources of one namespace, as every part of the cluster store
// reaches them: read by API name (an object that holds another API name is
// not it, object-names.ts), listed, and status written guarded by the
// resourceVersion a read saw. The parts built on it each have one job:
// kube-store.ts (the facade's ResourceStore), reconcile-store.ts (what the
// controllers read and write), peer-secret-store.ts (the peers' Secrets),
// script-ids.ts (the id counter) and resource-watch.ts (the informers).
import { setTimeout as delay } from 'node:timers/promises';
import { ApiException, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  type MirrorResource,
  type MirrorResourceSpec,
  mirrorResourceSpecSchema,
  type PeerKind,
  ResourceExistsError,
  ResourceInvalidError,
  type ScriptResource,
} from '../../../engine/src/index.ts';
import type { Condition } from '../conditions.ts';
import { group, version } from '../crds/api-group.ts';
import { apiNameAnnotation, apiNameOf, kubeObjectName } from './object-names.ts';
import type { PeerSecretRef } from './peer-secret.ts';
import { retryingThrottled } from './retry-throttled.ts';
import { mergePatch, statusMergePatch } from './status-patch.ts';

export const teardownFinalizer = 'tributary.dev/teardown';
export const managedByLabel = { 'app.kubernetes.io/managed-by': 'tributary' };

export interface ObjectMeta {
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

export type PeerObject = CustomObject<
  { kind: PeerKind; secretRef: PeerSecretRef } & Record<string, unknown>,
  { version?: string; conditions?: Condition[] }
>;
export type MirrorObject = CustomObject<
  Omit<MirrorResourceSpec, 'name'>,
  { failedGeneration?: number | null }
>;
export type ScriptObject = CustomObject<{ lang: 'lua'; source: string }, { id?: number } & StoredStatus>;

/** The plural of each kind in the API's paths. */
export type Plural = 'peers' | 'mirrors' | 'scripts';

/** A status as stored: fields by name. */
export type StoredStatus = Readonly<Record<string, unknown>>;

/**
 * An object as one read saw it: what a controller acts on, and the
 * resourceVersion its status write is guarded by (see `writeStatus`).
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

/** Builds the status fields a writer sets from the status it last read. */
export type StatusFields = (status: StoredStatus | undefined) => Record<string, unknown>;

export function snapshotOf(object: CustomObject<unknown, StoredStatus>): ObjectSnapshot {
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

/** The mirror a Mirror object holds, its spec validated. */
export function mirrorOf(object: MirrorObject): MirrorResource {
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

/** The script a Script object holds; undefined until it has its id. */
export function scriptOf(object: ScriptObject): ScriptResource | undefined {
  const id = object.status?.id;
  if (id === undefined) return undefined;
  return { id, name: apiNameOf(object.metadata), lang: object.spec.lang, source: object.spec.source };
}

export function isStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** Kubernetes refused the object (422): say so as a typed error. */
export function invalidObject(error: unknown, kind: string, name: string): Error {
  return isStatus(error, 422)
    ? new ResourceInvalidError(kind, name, 'the Kubernetes API refused the object')
    : (error as Error);
}

/** How often a read-modify-write is retried when another writer changed the object in between (409). */
export const conflictRetries = 8;

/** A short random pause before a retry, so that writers racing for one object spread out. */
export function conflictBackoff(attempt: number): Promise<void> {
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
export function newObjectMeta(name: string): ObjectMeta {
  return { name: kubeObjectName(name), annotations: { [apiNameAnnotation]: name } };
}

/** The apiVersion every object of ours carries. */
export const apiVersion = `${group}/${version}`;

export class NamespaceObjects {
  readonly config: KubeConfig;
  readonly namespace: string;
  readonly objects: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(config: KubeConfig, namespace: string) {
    this.config = config;
    this.namespace = namespace;
    this.objects = retryingThrottled(config.makeApiClient(CustomObjectsApi));
    this.core = retryingThrottled(config.makeApiClient(CoreV1Api));
  }

  at(plural: Plural) {
    return { group, version, namespace: this.namespace, plural };
  }

  /** The object stored under the object name of API name `name`, whichever API name it holds. */
  async getObject<T extends { metadata: ObjectMeta }>(plural: Plural, name: string): Promise<T | undefined> {
    try {
      return (await this.objects.getNamespacedCustomObject({
        ...this.at(plural),
        name: kubeObjectName(name),
      })) as T;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** The object of API name `name`; an object that holds another API name is not it. */
  async get<T extends { metadata: ObjectMeta }>(plural: Plural, name: string): Promise<T | undefined> {
    const object = await this.getObject<T>(plural, name);
    return object && apiNameOf(object.metadata) === name ? object : undefined;
  }

  /** Refuses to write API name `name` over an object that holds another one. */
  checkHolder(kind: string, name: string, object: { metadata: ObjectMeta } | undefined): void {
    if (object && apiNameOf(object.metadata) !== name) {
      throw new ObjectNameTakenError(kind, name, object.metadata.name, apiNameOf(object.metadata));
    }
  }

  async list<T>(plural: Plural): Promise<T[]> {
    const list = (await this.objects.listNamespacedCustomObject(this.at(plural))) as { items: T[] };
    return list.items;
  }

  /**
   * Patches the status fields that `fields` sets and that differ from the
   * status the snapshot read, at the snapshot's resourceVersion. On a 409
   * (another writer changed the object since) it reads the object again and
   * builds the fields again from that status: a concurrent write is never
   * lost, and nothing is written when nothing changed. False when the object
   * is gone.
   */
  async writeStatus(plural: Plural, snapshot: ObjectSnapshot, fields: StatusFields): Promise<boolean> {
    let current: ObjectSnapshot = snapshot;
    for (let attempt = 1; ; attempt++) {
      const status = statusMergePatch(current.status, fields(current.status));
      if (!status) return true;
      try {
        await this.objects.patchNamespacedCustomObjectStatus(
          {
            ...this.at(plural),
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
      const fresh = await this.get<CustomObject<unknown, StoredStatus>>(plural, snapshot.name);
      if (!fresh) return false;
      current = snapshotOf(fresh);
    }
  }
}
