// The interface's numeric script ids in cluster mode. Ids are drawn from a
// counter ConfigMap updated with optimistic concurrency and written to the
// Script's status guarded by the resourceVersion read, so facade replicas and
// the operator never hand out one id twice; when two draw for one new Script
// at once, the loser's id is skipped (ids are unique and increasing, not
// gap-free).
import type { V1ConfigMap } from '@kubernetes/client-node';
import { ResourceNotFoundError, type ScriptResource } from '../../../engine/src/index.ts';
import {
  type CustomObject,
  isStatus,
  managedByLabel,
  type NamespaceObjects,
  type ObjectSnapshot,
  type ScriptObject,
  type StoredStatus,
  scriptOf,
  snapshotOf,
} from './namespace-objects.ts';

/** The ConfigMap holding the last script id handed out in the namespace. */
export const scriptIdCounterName = 'tributary-script-ids';

export interface ScriptSnapshot extends ObjectSnapshot {
  /** The interface's id, once it has one. */
  readonly id: number | undefined;
  /** The Lua source, as the spec holds it. */
  readonly source: string;
}

export function scriptSnapshotOf(object: ScriptObject): ScriptSnapshot {
  return {
    ...snapshotOf(object as CustomObject<unknown, StoredStatus>),
    id: object.status?.id,
    source: object.spec?.source ?? '',
  };
}

/** The scripts that have their id, by id. */
export async function scriptsWithIds(kube: NamespaceObjects): Promise<ScriptResource[]> {
  return (await kube.list<ScriptObject>('scripts'))
    .map(scriptOf)
    .filter((script): script is ScriptResource => script !== undefined)
    .sort((a, b) => a.id - b.id);
}

export class ScriptIds {
  readonly #kube: NamespaceObjects;

  constructor(kube: NamespaceObjects) {
    this.#kube = kube;
  }

  /**
   * Gives the script read in `snapshot` its id unless it has one; returns the
   * id it holds. The operator and the facade may race for the same script: the
   * status write is guarded by the object's resourceVersion, and the loser
   * reads the winner's id.
   */
  async give(snapshot: ScriptSnapshot): Promise<number> {
    if (snapshot.id !== undefined) return snapshot.id;
    const id = await this.#next();
    let held: number | undefined;
    const written = await this.#kube.writeStatus('scripts', snapshot, (status) => {
      held = typeof status?.id === 'number' ? status.id : undefined;
      return held === undefined ? { id } : {};
    });
    if (!written) throw new ResourceNotFoundError('script', snapshot.name);
    return held ?? id;
  }

  /**
   * Draws the next script id from the counter ConfigMap, updated with
   * optimistic concurrency. Never below an id in use (the counter may be new
   * or deleted).
   */
  async #next(): Promise<number> {
    const { core, namespace } = this.#kube;
    const name = scriptIdCounterName;
    for (let attempt = 0; attempt < 20; attempt++) {
      const inUse = Math.max(0, ...(await scriptsWithIds(this.#kube)).map((script) => script.id));
      const counter = await core.readNamespacedConfigMap({ name, namespace }).catch((error: unknown) => {
        if (isStatus(error, 404)) return undefined;
        throw error;
      });
      const next = Math.max(inUse, Number(counter?.data?.last ?? 0)) + 1;
      const body: V1ConfigMap = {
        metadata: {
          name,
          namespace,
          labels: managedByLabel,
          ...(counter?.metadata?.resourceVersion
            ? { resourceVersion: counter.metadata.resourceVersion }
            : {}),
        },
        data: { last: String(next) },
      };
      try {
        if (counter) await core.replaceNamespacedConfigMap({ name, namespace, body });
        else await core.createNamespacedConfigMap({ namespace, body });
        return next;
      } catch (error) {
        // Another writer took this id (409 on replace, or created the counter first).
        if (!isStatus(error, 409)) throw error;
      }
    }
    throw new Error('could not draw a script id: too many concurrent writers');
  }
}
